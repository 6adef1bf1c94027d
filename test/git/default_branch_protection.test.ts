import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

// GitLab's default branch protection: the default branch a project gets on its first push (or its
// initial README commit) is protected as the group's default_branch_protection says, else the
// instance's (CAIRN_DEFAULT_BRANCH_PROTECTION, 2 by default), and while the repository is empty a
// fully protected default keeps developers from making the first push.
describe('default branch protection', () => {
  let t: TestContext;
  let base: string;
  let work: string;
  let developer: TestUser, maintainer: TestUser;
  let seq = 0;

  const git = (args: string[], cwd = work): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => {
      execFile(
        'git',
        ['-c', 'user.name=Pusher', '-c', 'user.email=pusher@example.com', '-c', 'init.defaultBranch=main', ...args],
        { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' } },
        (err, _stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stderr: String(stderr) }),
      );
    });
  const ok = async (args: string[], cwd?: string) => {
    const res = await git(args, cwd);
    assert.equal(res.code, 0, `git ${args.join(' ')}: ${res.stderr}`);
  };
  const remote = async (p: Project, who: TestUser) => {
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
    return `http://oauth2:${who.token}@${base}/${ns.full_path}/${p.path}.git`;
  };
  /** A fresh local repository with one commit on main, its remote the project as `who`. */
  const localRepo = async (p: Project, who: TestUser) => {
    const dir = path.join(work, `repo-${++seq}`);
    await ok(['init', '-q', dir]);
    fs.writeFileSync(path.join(dir, 'a.txt'), `${seq}\n`);
    await ok(['add', 'a.txt'], dir);
    await ok(['commit', '-q', '-m', 'first'], dir);
    await ok(['remote', 'add', 'origin', await remote(p, who)], dir);
    return dir;
  };
  const protection = async (p: Project) => (await t.get(`/api/v4/projects/${p.id}/protected_branches`)).body as any[];
  const groupWith = async (level?: number) => {
    const group = await t.createGroup();
    await t.addMember(group, developer.user, 30);
    await t.addMember(group, maintainer.user, 40);
    if (level !== undefined) assert.equal((await t.put(`/api/v4/groups/${group.id}`, { default_branch_protection: level })).status, 200);
    return group;
  };

  before(async () => {
    t = await createTestContext();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-dbp-'));
    [developer, maintainer] = await Promise.all([t.createUser(), t.createUser()]);
  });
  after(async () => {
    await t?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('instance default (2): a developer cannot push first or to main; the maintainer\'s first push protects main', async () => {
    const group: Namespace = await groupWith();
    const p = await t.createProject({ group });

    const devRepo = await localRepo(p, developer);
    const refused = await git(['push', 'origin', 'main'], devRepo);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /You are not allowed to push code to protected branches on this project/);
    assert.deepEqual(await protection(p), []);

    const mRepo = await localRepo(p, maintainer);
    await ok(['push', '-q', 'origin', 'main'], mRepo);
    const rules = await protection(p);
    assert.equal(rules.length, 1);
    assert.equal(rules[0].name, 'main');
    assert.deepEqual(rules[0].push_access_levels.map((l: any) => l.access_level), [40]);
    assert.deepEqual(rules[0].merge_access_levels.map((l: any) => l.access_level), [40]);
    assert.equal(rules[0].allow_force_push, false);

    // Now the developer pushes to other branches, never to main.
    await ok(['fetch', '-q', 'origin'], devRepo);
    await ok(['reset', '-q', '--hard', 'origin/main'], devRepo);
    fs.writeFileSync(path.join(devRepo, 'b.txt'), 'b\n');
    await ok(['add', 'b.txt'], devRepo);
    await ok(['commit', '-q', '-m', 'second'], devRepo);
    const toMain = await git(['push', 'origin', 'main'], devRepo);
    assert.notEqual(toMain.code, 0);
    assert.match(toMain.stderr, /You are not allowed to push code to protected branches on this project/);
    await ok(['push', '-q', 'origin', 'main:feature'], devRepo);
  });

  it('group level 4: a developer makes the initial push, then main is protected', async () => {
    const p = await t.createProject({ group: await groupWith(4) });
    const devRepo = await localRepo(p, developer);
    await ok(['push', '-q', 'origin', 'main'], devRepo);
    const rules = await protection(p);
    assert.deepEqual(rules.map((r) => [r.name, r.push_access_levels[0].access_level, r.merge_access_levels[0].access_level]), [['main', 40, 40]]);
    fs.writeFileSync(path.join(devRepo, 'c.txt'), 'c\n');
    await ok(['add', 'c.txt'], devRepo);
    await ok(['commit', '-q', '-m', 'again'], devRepo);
    assert.notEqual((await git(['push', 'origin', 'main'], devRepo)).code, 0);
  });

  it('group levels 1 and 3 set who pushes and merges; 0 leaves main unprotected', async () => {
    const one = await t.createProject({ group: await groupWith(1) });
    await ok(['push', '-q', 'origin', 'main'], await localRepo(one, developer));
    assert.deepEqual((await protection(one)).map((r) => [r.name, r.push_access_levels[0].access_level, r.merge_access_levels[0].access_level]), [['main', 30, 40]]);

    const three = await t.createProject({ group: await groupWith(3) });
    assert.notEqual((await git(['push', 'origin', 'main'], await localRepo(three, developer))).code, 0);
    await ok(['push', '-q', 'origin', 'main'], await localRepo(three, maintainer));
    assert.deepEqual((await protection(three)).map((r) => [r.name, r.push_access_levels[0].access_level, r.merge_access_levels[0].access_level]), [['main', 40, 30]]);

    const none = await t.createProject({ group: await groupWith(0) });
    await ok(['push', '-q', 'origin', 'main'], await localRepo(none, developer));
    assert.deepEqual(await protection(none), []);
  });

  it('a project created with a README, and a first commit through the API, protect the default branch', async () => {
    const group = await groupWith();
    const created = await t.post('/api/v4/projects', { name: t.unique('readme'), namespace_id: group.id, initialize_with_readme: true });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual((await protection(created.body)).map((r) => r.name), ['main']);
    // The developer may not commit to it through the API either.
    const commit = await t.post(`/api/v4/projects/${created.body.id}/repository/commits`, {
      branch: 'main', commit_message: 'x', actions: [{ action: 'create', file_path: 'x.txt', content: 'x' }],
    }, { token: developer.token });
    assert.equal(commit.status, 403);

    const p = await t.createProject({ group });
    const firstCommit = { branch: 'main', commit_message: 'first', actions: [{ action: 'create', file_path: 'a.txt', content: 'a' }] };
    // As a first push: a developer may not make the first commit of a fully protected default branch.
    const byDeveloper = await t.post(`/api/v4/projects/${p.id}/repository/commits`, firstCommit, { token: developer.token });
    assert.equal(byDeveloper.status, 403);
    assert.deepEqual(byDeveloper.body, { message: '403 Forbidden - You are not allowed to push into this branch' });
    const first = await t.post(`/api/v4/projects/${p.id}/repository/commits`, firstCommit, { token: maintainer.token });
    assert.equal(first.status, 201);
    assert.deepEqual((await protection(p)).map((r) => r.name), ['main']);
  });
});
