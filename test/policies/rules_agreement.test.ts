import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql, type RawBuilder } from 'kysely';
import type { Namespace, Project, User } from '../../src/db/schema/core.js';
import type { Issue } from '../../src/db/schema/work_items.js';
import { readableIssues } from '../../src/finders/issues.js';
import { can, effectiveLevel } from '../../src/policies/abilities.js';
import { AccessLevel, canSeeVisibility, groupVisibleTo, projectVisibleTo } from '../../src/policies/access.js';
import { groupAccessLevel, hasAccessBelowGroup, projectAccessLevel } from '../../src/finders/access_levels.js';
import { canSeeIssue } from '../../src/policies/issues.js';
import { ANY_ACCESS, atLeast, confidentialIssue, MEMBER, OWNER, readsConfidentialIssues, type LevelRule } from '../../src/policies/rules.js';
import { insertUser } from '../../src/services/users.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

/**
 * Every permission rule that has a JS form and a SQL form (src/policies/rules.ts, and the
 * visibility rules of src/policies/access.ts) answers the same on a generated population: users
 * at every access level (minimal access to owner, reached directly, through the group tree and
 * through shares, expired), an administrator, an external user, a blocked member, an outsider,
 * anonymous; groups and projects of each visibility; issues confidential or not, by and for
 * different users, under each setting of the issues feature.
 */
describe('permission rules: the JS predicate and the SQL fragment agree', () => {
  let t: TestContext;
  const actors: (User | null)[] = [null];
  const users: User[] = [];
  const groups: Namespace[] = [];
  const projects: Project[] = [];
  const issues: Issue[] = [];
  const assignees = new Map<number, number[]>();
  const projectLevels = new Map<string, number>();
  const groupLevels = new Map<string, number>();
  const levelOf = (user: User | null, project: { id: number }) => (user ? projectLevels.get(`${user.id}:${project.id}`)! : 0);

  before(async () => {
    t = await createTestContext();
    // No password, no token: the rules read users' rows only (and hashing is slow).
    const user = async (attrs: Partial<User> = {}) => {
      const username = t.unique('rule');
      const user = await insertUser(t.db, { name: username, username, email: `${username}@example.com`, ...attrs });
      users.push(user);
      actors.push(user);
      return user;
    };
    const admin = await user({ admin: true });
    const external = await user({ external: true });
    const outsider = await user();
    const blocked = await user({ state: 'blocked' });
    const expired = await user();
    const personal = await user();
    const sharedIn = await user();
    const byLevel = new Map<number, User>();
    for (const level of [5, 10, 20, 30, 40, 50]) byLevel.set(level, await user());
    const direct = new Map<number, User>();
    for (const level of [10, 20, 30, 40]) direct.set(level, await user());

    const group = async (visibility: number, parent?: Namespace) => {
      const g = await t.createGroup({ visibility, parent });
      groups.push(g);
      return g;
    };
    const project = async (visibility: number, where: { group?: Namespace; owner?: User }, settings?: Record<string, unknown>) => {
      const p = await t.createProject({ visibility, ...where });
      if (settings) await t.db.updateTable('projects').set({ settings }).where('id', '=', p.id).execute();
      projects.push(p);
      return p;
    };

    const teamPrivate = await group(0);
    const teamSub = await group(0, teamPrivate);
    const internalGroup = await group(10);
    const publicGroup = await group(20);
    const invited = await group(0);
    for (const [level, u] of byLevel) await t.addMember(teamPrivate, u, level);
    await t.addMember(teamPrivate, external, 20);
    await t.addMember(teamPrivate, blocked, 30);
    await t.addMember(teamPrivate, expired, 40, { expires_at: '2000-01-01' });
    await t.addMember(invited, sharedIn, 40);
    await t.addMember(publicGroup, byLevel.get(5)!, 5);
    await t.db.insertInto('group_group_links').values({ shared_group_id: internalGroup.id, shared_with_group_id: invited.id, group_access: 20 }).execute();

    await project(0, { group: teamPrivate });
    await project(10, { group: teamPrivate }, { issues_access_level: 'private' });
    await project(0, { group: teamSub });
    const internalPrivate = await project(0, { group: internalGroup });
    await project(10, { group: internalGroup });
    await project(20, { group: internalGroup }, { issues_access_level: 'private' });
    const publicProject = await project(20, { group: publicGroup });
    await project(20, { group: publicGroup }, { issues_access_level: 'disabled' });
    await project(10, { group: publicGroup });
    await project(0, { owner: personal });
    for (const [level, u] of direct) {
      await t.addMember(internalPrivate, u, level);
      await t.addMember(publicProject, u, level);
    }
    await t.db.insertInto('project_group_links').values({ project_id: publicProject.id, group_id: invited.id, group_access: 30 }).execute();

    let iid = 0;
    for (const p of projects) {
      const issue = async (confidential: boolean, author: User, assignee?: User) => {
        const row = await t.db
          .insertInto('issues')
          .values({ iid: ++iid, project_id: p.id, title: `issue ${iid}`, author_id: author.id, confidential, state_id: 1 })
          .returningAll()
          .executeTakeFirstOrThrow();
        if (assignee) await t.db.insertInto('issue_assignees').values({ issue_id: row.id, user_id: assignee.id }).execute();
        issues.push(row);
        assignees.set(row.id, assignee ? [assignee.id] : []);
      };
      await issue(false, outsider);
      await issue(true, byLevel.get(10)!);
      await issue(true, admin, outsider);
      await issue(true, external, direct.get(10));
      await issue(true, sharedIn);
    }

    // The levels as projectAccessLevel / groupAccessLevel read them (the same SQL functions), all pairs at once.
    const userIds = users.map((u) => u.id);
    const pl = await sql<{ u: number; s: number; level: number }>`
      select u.id as u, s.id as s, project_access_level(u.id, s.id) as level
        from unnest(${userIds}::int[]) u(id) cross join unnest(${projects.map((p) => p.id)}::int[]) s(id)`.execute(t.db);
    for (const r of pl.rows) projectLevels.set(`${r.u}:${r.s}`, r.level);
    const gl = await sql<{ u: number; s: number; level: number }>`
      select u.id as u, s.id as s, group_access_level(u.id, s.id) as level
        from unnest(${userIds}::int[]) u(id) cross join unnest(${groups.map((g) => g.id)}::int[]) s(id)`.execute(t.db);
    for (const r of gl.rows) groupLevels.set(`${r.u}:${r.s}`, r.level);
    // Spot checks that these are the functions' answers.
    assert.equal(await projectAccessLevel(t.db, users[8].id, projects[0]), projectLevels.get(`${users[8].id}:${projects[0].id}`));
    assert.equal(await groupAccessLevel(t.db, users[8].id, groups[0]), groupLevels.get(`${users[8].id}:${groups[0].id}`));
  });
  after(async () => {
    await t?.close();
  });

  const ids = (rows: { id: number }[]) => rows.map((r) => r.id).sort((a, b) => a - b);
  const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const who = (u: User | null) => (u ? `user ${u.username}${u.admin ? ' (admin)' : ''}${u.external ? ' (external)' : ''}` : 'anonymous');

  const projectsWhere = async (cond: RawBuilder<boolean>) =>
    sortNum((await sql<{ id: number }>`select p.id from projects p where p.id = any(${projects.map((p) => p.id)}::int[]) and ${cond}`.execute(t.db)).rows.map((r) => r.id));
  const groupsWhere = async (cond: RawBuilder<boolean>) =>
    sortNum((await sql<{ id: number }>`select g.id from namespaces g where g.id = any(${groups.map((g) => g.id)}::int[]) and ${cond}`.execute(t.db)).rows.map((r) => r.id));
  const issuesWhere = async (cond: RawBuilder<boolean>) =>
    sortNum(
      (await sql<{ id: number }>`select i.id from issues i join projects p on p.id = i.project_id
        where i.id = any(${issues.map((i) => i.id)}::int[]) and ${cond}`.execute(t.db)).rows.map((r) => r.id),
    );

  const levelRules: [string, LevelRule][] = [
    ['ANY_ACCESS', ANY_ACCESS],
    ['MEMBER', MEMBER],
    ...[AccessLevel.REPORTER, AccessLevel.DEVELOPER, AccessLevel.MAINTAINER].map(
      (l): [string, LevelRule] => [`atLeast(${l})`, atLeast(l)],
    ),
    ['OWNER', OWNER],
  ];

  it('the population covers every level on projects and groups', () => {
    const seen = new Set([...projectLevels.values(), ...groupLevels.values()]);
    for (const level of [0, 5, 10, 20, 30, 40, 50]) assert.ok(seen.has(level), `level ${level} reached`);
    assert.ok(issues.some((i) => i.confidential) && issues.some((i) => !i.confidential));
  });

  for (const [name, rule] of levelRules) {
    it(`${name}: projects, groups and membership rows`, async () => {
      for (const u of users) {
        const jsProjects = projects.filter((p) => rule.allows(levelOf(u, p))).map((p) => p.id);
        assert.deepEqual(await projectsWhere(sql`p.id in ${rule.projectIds(u.id)}`), sortNum(jsProjects), `${name} projects of ${who(u)}`);
        const jsGroups = groups.filter((g) => rule.allows(groupLevels.get(`${u.id}:${g.id}`)!)).map((g) => g.id);
        assert.deepEqual(await groupsWhere(sql`g.id in ${rule.groupIds(u.id)}`), sortNum(jsGroups), `${name} groups of ${who(u)}`);
      }
      const members = await t.db.selectFrom('members').select(['id', 'access_level']).execute();
      const viaSql = await sql<{ id: number }>`select m.id from members m where ${rule.level(sql`m.access_level`)}`.execute(t.db);
      assert.deepEqual(ids(viaSql.rows), ids(members.filter((m) => rule.allows(m.access_level))), `${name} membership rows`);
    });
  }

  it('readsConfidentialIssues: per project', async () => {
    for (const a of actors) {
      const js = projects.filter((p) => readsConfidentialIssues.allows(a, levelOf(a, p))).map((p) => p.id);
      assert.deepEqual(await projectsWhere(readsConfidentialIssues.where(a, sql`p.id`)), sortNum(js), who(a));
    }
  });

  it('confidentialIssue: per issue', async () => {
    for (const a of actors) {
      const js = issues.filter((i) => {
        const p = projects.find((p) => p.id === i.project_id)!;
        return confidentialIssue.allows(a, i, assignees.get(i.id)!, readsConfidentialIssues.allows(a, levelOf(a, p)));
      });
      assert.deepEqual(await issuesWhere(confidentialIssue.where(a)), ids(js), who(a));
    }
  });

  it('read_issue with the confidential rule (canSeeIssue) and readableIssues', async () => {
    for (const a of actors) {
      const fresh = await t.db.selectFrom('projects').selectAll().where('id', 'in', projects.map((p) => p.id)).execute();
      const js = issues.filter((i) => {
        const project = fresh.find((p) => p.id === i.project_id)!;
        return canSeeIssue(a, { project, accessLevel: effectiveLevel(a, levelOf(a, project)) }, i, assignees.get(i.id)!);
      });
      assert.deepEqual(await issuesWhere(readableIssues(a)), ids(js), who(a));
    }
  });

  it('project visibility: canSeeVisibility (read_project) and projectVisibleTo', async () => {
    for (const a of actors) {
      const js = projects.filter((p) => canSeeVisibility(a, p.visibility_level, effectiveLevel(a, levelOf(a, p)))).map((p) => p.id);
      assert.deepEqual(await projectsWhere(projectVisibleTo(a)), sortNum(js), who(a));
    }
  });

  // Known difference, kept as it is (behaviour is not changed here): groupVisibleTo lists a private
  // group to its minimal-access members, read_group (canSeeVisibility: guest and up) does not let
  // them open it. This test pins the difference down to exactly those members.
  it('group visibility: read_group and groupVisibleTo (minimal-access members apart)', async () => {
    for (const a of actors) {
      const minimalOnly = (g: Namespace) => !!a && !a.admin && groupLevels.get(`${a.id}:${g.id}`) === AccessLevel.MINIMAL_ACCESS;
      const js: number[] = [];
      for (const g of groups) {
        const subject = { group: g, accessLevel: effectiveLevel(a, a ? groupLevels.get(`${a.id}:${g.id}`)! : 0), accessBelow: false };
        if (!can(a, 'read_group', subject) && a) subject.accessBelow = await hasAccessBelowGroup(t.db, a.id, g.id);
        if (can(a, 'read_group', subject)) js.push(g.id);
      }
      const viaSql = await groupsWhere(groupVisibleTo(a));
      const jsOrMinimal = groups.filter((g) => js.includes(g.id) || (minimalOnly(g) && viaSql.includes(g.id))).map((g) => g.id);
      assert.deepEqual(viaSql, sortNum(jsOrMinimal), who(a));
    }
  });
});
