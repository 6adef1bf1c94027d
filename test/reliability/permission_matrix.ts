// The permission matrix's machinery (the test is permission_matrix.test.ts): a fixture world,
// the param values of every route in it, and a walk of the route table calling each route as
// each column of src/api/permissions.ts.
import { ASSETS } from '../../src/web/layout.js';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import yazl from 'yazl';
import { assignBuild } from '../../src/ci/jobs/state.js';
import { ensureResourceGroup } from '../../src/ci/jobs/resource_groups.js';
import { columnsOf, expectedCell, specOf, tokenColumn, USER_COLUMNS, type Expect, type TokenColumn, type WorldName } from '../../src/api/permissions.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import type { RouteRecord } from '../../src/plugins/responses.js';
import { issueAccessToken } from '../../src/oauth/tokens.js';
import { insertPersonalAccessToken } from '../../src/services/tokens.js';
import { artifactStore } from '../../src/storage/index.js';
import { loadProjectForUser } from '../../src/finders/authorize.js';
import { lfsObjectKey } from '../../src/lfs/objects.js';
import type { TestContext, TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob, testRunner } from '../helpers/ci.js';
import { makeNodeSshKey } from '../helpers/ssh-keys.js';

const VIS = { private: 0, internal: 10, public: 20 } as const;
type Columns = Record<string, { token: string | null; user: TestUser | null; basic: string | null }>;

export interface World {
  name: WorldName;
  group: Namespace;
  project: Project;
  users: Record<string, TestUser>;
  columns: Columns;
  /** Param name -> value, or a function of the URL and column (most specific first). */
  values: Record<string, string | number>;
  ids: Record<string, string | number>;
  /** The git paths of each depth (segments count -> path segments). */
  gitPaths: Map<number, string[]>;
}

const CI = `stages: [build, test]
build:
  stage: build
  script: [echo build]
test:
  stage: test
  script: [echo test]
manual:
  stage: test
  when: manual
  script: [echo manual]
`;

async function ok(res: { status: number; body: any }, what: string, statuses = [200, 201, 204]) {
  assert.ok(statuses.includes(res.status), `${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A world: a group and a project of the given visibility with a member of each role, and one of everything the routes' params name. */
export async function buildWorld(t: TestContext, name: WorldName): Promise<World> {
  const vis = VIS[name];
  const u = (n: string, extra: Record<string, unknown> = {}) => t.createUser({ username: t.unique(n), ...extra });
  const users: Record<string, TestUser> = {
    blocked: await u('blocked'),
    external: await u('external', { external: true }),
    nonmember: await u('nonmember'),
    guest: await u('guest'),
    reporter: await u('reporter'),
    developer: await u('developer'),
    maintainer: await u('maintainer'),
    owner: await u('owner'),
    admin: await u('admin', { admin: true }),
    victim: await u('victim'),
    member: await u('member'),
    requester: await u('requester'),
  };
  const group = await t.createGroup({ visibility: vis });
  // main stays unprotected (the presets' developers run and retry its pipelines); 'prot-*' below is the protected branch.
  await t.db.updateTable('namespaces').set({ settings: { default_branch_protection: 0 } }).where('id', '=', group.id).execute();
  for (const [role, level] of [['guest', 10], ['reporter', 20], ['developer', 30], ['maintainer', 40], ['owner', 50], ['member', 30]] as const) await t.addMember(group, users[role].user, level);
  const project = await t.createProject({ group, visibility: vis });
  await t.addMember(project, users.member.user, 30);
  const P = `/api/v4/projects/${project.id}`;
  const G = `/api/v4/groups/${group.id}`;

  // Repository: main with a CI file (a pipeline), a feature branch, a tag, a protected branch.
  const sha = await commitFiles(t, project, { 'README.md': '# hello\n', '.gitlab-ci.yml': CI });
  await ok(await t.post(`${P}/repository/branches`, { branch: 'feature', ref: 'main' }), 'branch');
  await commitFiles(t, project, { 'feature.txt': 'feature\n' }, { branch: 'feature' });
  await ok(await t.post(`${P}/repository/tags`, { tag_name: 'v1', ref: 'main' }), 'tag');
  // The tag's release, with a link whose permanent path is the one wildcard routes are given.
  const release = await ok(await t.post(`${P}/releases`, { tag_name: 'v1', assets: { links: [{ name: 'matrix', url: 'https://example.com/a', direct_asset_path: '/a.txt' }] } }), 'release');
  await ok(await t.post(`${P}/protected_branches`, { name: 'prot-*' }), 'protected branch');
  await ok(await t.post(`${P}/protected_environments`, { name: 'production', deploy_access_levels: [{ access_level: 40 }] }), 'protected environment');

  // CI: the pipeline of main; "build" runs (its token is the job column's), "test" is a job param.
  const pipeline = await latestPipeline(t, project.id);
  const jobs = await jobsByName(t, pipeline.id);
  const runner = await testRunner(t);
  await t.db.updateTable('ci_builds').set({ user_id: users.developer.user.id }).where('id', '=', jobs.build.id).execute();
  const taken = await t.db.transaction().execute((trx) => assignBuild(trx, jobs.build.id, runner));
  assert.ok(taken);
  const jobToken = taken.token;

  // Planning: labels, milestones, an issue with a note, an emoji and a label event; an MR likewise.
  const label = await ok(await t.post(`${P}/labels`, { name: 'bug', color: '#ff0000' }), 'label');
  const glabel = await ok(await t.post(`${G}/labels`, { name: 'gbug', color: '#00ff00' }), 'group label');
  const milestone = await ok(await t.post(`${P}/milestones`, { title: 'm1' }), 'milestone');
  const gmilestone = await ok(await t.post(`${G}/milestones`, { title: 'gm1' }), 'group milestone');
  const issue = await ok(await t.post(`${P}/issues`, { title: 'an issue', labels: 'bug', milestone_id: milestone.id }), 'issue');
  const issueNote = await ok(await t.post(`${P}/issues/${issue.iid}/notes`, { body: 'a note' }), 'issue note');
  const issueDisc = await ok(await t.post(`${P}/issues/${issue.iid}/discussions`, { body: 'a thread' }), 'issue thread');
  const issueAward = await ok(await t.post(`${P}/issues/${issue.iid}/award_emoji`, { name: 'thumbsup' }), 'issue award');
  const issueNoteAward = await ok(await t.post(`${P}/issues/${issue.iid}/notes/${issueNote.id}/award_emoji`, { name: 'thumbsup' }), 'issue note award');
  const issueEvents = await ok(await t.get(`${P}/issues/${issue.iid}/resource_label_events`), 'issue label events');
  const mr = await ok(await t.post(`${P}/merge_requests`, { source_branch: 'feature', target_branch: 'main', title: 'an MR', labels: 'bug' }), 'MR');
  const mrNote = await ok(await t.post(`${P}/merge_requests/${mr.iid}/notes`, { body: 'a note' }), 'MR note');
  const mrDisc = await ok(await t.post(`${P}/merge_requests/${mr.iid}/discussions`, { body: 'a thread' }), 'MR thread');
  const mrAward = await ok(await t.post(`${P}/merge_requests/${mr.iid}/award_emoji`, { name: 'thumbsup' }), 'MR award');
  const mrNoteAward = await ok(await t.post(`${P}/merge_requests/${mr.iid}/notes/${mrNote.id}/award_emoji`, { name: 'thumbsup' }), 'MR note award');
  const mrEvents = await ok(await t.get(`${P}/merge_requests/${mr.iid}/resource_label_events`), 'MR label events');
  const commitNote = await ok(await t.post(`${P}/repository/commits/${sha}/notes`, { body: 'a note' }), 'commit note', [200, 201]);
  const commitDisc = await ok(await t.post(`${P}/repository/commits/${sha}/discussions`, { body: 'a thread' }), 'commit thread');
  // Project snippets as visible as their project (a private snippet is its members' only, everywhere).
  const snippet = await ok(await t.post(`${P}/snippets`, { title: 's', visibility: name, files: [{ file_path: 'a.txt', content: 'a' }] }), 'snippet');
  const snippetNote = await ok(await t.post(`${P}/snippets/${snippet.id}/notes`, { body: 'a note' }), 'snippet note');
  const snippetDisc = await ok(await t.post(`${P}/snippets/${snippet.id}/discussions`, { body: 'a thread' }), 'snippet thread');
  const snippetAward = await ok(await t.post(`${P}/snippets/${snippet.id}/award_emoji`, { name: 'thumbsup' }), 'snippet award');
  const snippetNoteAward = await ok(await t.post(`${P}/snippets/${snippet.id}/notes/${snippetNote.id}/award_emoji`, { name: 'thumbsup' }), 'snippet note award');
  const personalSnippet = await ok(await t.post('/api/v4/snippets', { title: 'p', visibility: 'private', files: [{ file_path: 'p.txt', content: 'p' }] }, { token: users.maintainer.token }), 'personal snippet');
  const epic = await ok(await t.post(`${G}/epics`, { title: 'an epic', labels: 'gbug' }), 'epic');
  const epicNote = await ok(await t.post(`${G}/epics/${epic.id}/notes`, { body: 'a note' }), 'epic note');
  const epicDisc = await ok(await t.post(`${G}/epics/${epic.id}/discussions`, { body: 'a thread' }), 'epic thread');
  const epicEvents = await ok(await t.get(`${G}/epics/${epic.id}/resource_label_events`), 'epic label events');

  const blob = (await ok(await t.get(`${P}/repository/tree`, { query: { ref: 'main' } }), 'tree')).find((e: any) => e.path === 'README.md').id;
  await t.db.insertInto('ci_build_trace_chunks').values({ build_id: jobs.test.id, chunk_index: 0, data: Buffer.from('a log\n') }).execute();
  await ok(await t.put(`/api/v4/users/${users.victim.user.id}/custom_attributes/VAR1`, { value: 'v' }), 'custom attribute');
  await t.db.insertInto('identities').values({ user_id: users.victim.user.id, provider: 'github', extern_uid: t.unique('victim'), saml_provider_id: null } as any).execute();

  // A pending access request of its own on the group and the project (the :user_id of access_requests).
  for (const [type, id] of [['Namespace', group.id], ['Project', project.id]] as const) {
    await t.db.insertInto('members').values({ source_type: type, source_id: id, user_id: users.requester.user.id, access_level: 30, requested_at: new Date() } as any).execute();
  }
  // The "test" job's artifacts: an archive with a.txt (GitLab's default artifacts:access, all).
  await storeArtifacts(t, jobs.test.id, project.id, { 'a.txt': 'an artifact\n' });

  const awaiting = (await t.db.insertInto('members').values({ source_type: 'Namespace', source_id: group.id, user_id: users.victim.user.id, access_level: 30, state: 1 } as any).returning('id').executeTakeFirstOrThrow()).id;

  // Settings and keys.
  await ok(await t.post(`${P}/variables`, { key: 'VAR1', value: 'v' }), 'variable');
  await ok(await t.post(`${G}/variables`, { key: 'VAR1', value: 'v' }), 'group variable');
  // The instance's VAR1 is one for every world.
  if ((await t.get('/api/v4/admin/ci/variables/VAR1')).status === 404) await ok(await t.post('/api/v4/admin/ci/variables', { key: 'VAR1', value: 'v' }), 'instance variable');
  // A pipeline schedule (root's: no column owns it) with a variable, and a trigger token.
  const schedule = await ok(await t.post(`${P}/pipeline_schedules`, { description: 'nightly', ref: 'main', cron: '0 1 * * *' }), 'pipeline schedule');
  await ok(await t.post(`${P}/pipeline_schedules/${schedule.id}/variables`, { key: 'VAR1', value: 'v' }), 'schedule variable');
  const trigger = await ok(await t.post(`${P}/triggers`, { description: 'ci' }), 'trigger token');
  // A project and a group access token (their bots are members: no column is one).
  const projectToken = await ok(await t.post(`${P}/access_tokens`, { name: 'matrix', scopes: ['api'] }), 'project access token');
  const groupToken = await ok(await t.post(`${G}/access_tokens`, { name: 'matrix', scopes: ['api'] }), 'group access token');
  // A hook to an address the SSRF guard refuses: a test delivery fails at once, without a network (422).
  const hook = await t.db.insertInto('web_hooks').values({ type: 'ProjectHook', project_id: project.id, url: 'http://10.255.255.1/hook' }).returning('id').executeTakeFirstOrThrow();
  // An environment with a deployment reported through the API (not the protected one).
  const environment = await ok(await t.post(`${P}/environments`, { name: 'matrix-env' }), 'environment');
  const deployment = await ok(await t.post(`${P}/deployments`, { environment: 'matrix-env', sha, ref: 'main', tag: false, status: 'success' }), 'deployment');
  // A resource group, as a job's `resource_group:` makes it.
  await ensureResourceGroup(t.db, project.id, 'matrix-rg');
  const deployKey = await ok(await t.post(`${P}/deploy_keys`, { title: 'd', key: makeNodeSshKey('ed25519', 0, 'deploy').text }), 'deploy key');
  const deployToken = await ok(await t.post(`${P}/deploy_tokens`, { name: 'd', scopes: ['read_repository'] }), 'deploy token');
  const groupDeployToken = await ok(await t.post(`${G}/deploy_tokens`, { name: 'd', scopes: ['read_repository'] }), 'group deploy token');
  const victimKey = await ok(await t.post(`/api/v4/users/${users.victim.user.id}/keys`, { title: 'k', key: makeNodeSshKey('ed25519', 0, 'victim').text }), 'victim key');
  const ownKeys: Record<string, number> = {};
  const ownTokens: Record<string, number> = {};
  for (const c of USER_COLUMNS) {
    const who = users[c];
    if (!who || c === 'blocked') continue;
    ownKeys[c] = (await ok(await t.post('/api/v4/user/keys', { title: 'k', key: makeNodeSshKey('ed25519', 0, c).text }, { token: who.token }), 'own key')).id;
  }
  for (const [c, who] of Object.entries(users)) {
    ownTokens[c] = (await t.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', who.user.id).executeTakeFirstOrThrow()).id;
  }
  const impersonation = await ok(await t.post(`/api/v4/users/${users.victim.user.id}/impersonation_tokens`, { name: 'i', scopes: ['api'] }), 'impersonation token');
  const application = await ok(await t.post('/api/v4/applications', { name: 'app', redirect_uri: 'https://example.com/cb', scopes: 'api' }), 'application');
  const clientKey = await ok(await t.post(`${P}/error_tracking/client_keys`), 'client key', [200, 201]);
  const shareGroup = await t.createGroup({ visibility: vis });
  await t.addMember(shareGroup, users.owner.user, 10);
  await ok(await t.post(`${P}/share`, { group_id: shareGroup.id, group_access: 30 }), 'share project');
  await ok(await t.post(`${G}/share`, { group_id: shareGroup.id, group_access: 30 }), 'share group');
  const other = await t.createProject({ group, visibility: vis });
  const runnerId = (await t.db.insertInto('ci_runners').values({ token_digest: `matrix-${t.unique()}`, runner_type: 'project_type', tag_list: [], description: 'matrix' }).returning('id').executeTakeFirstOrThrow()).id;
  await t.db.insertInto('ci_runner_projects').values({ runner_id: runnerId, project_id: project.id }).execute();

  // Token columns: a credential of each kind and scope.
  const columns: Columns = { anonymous: { token: null, user: null, basic: null } };
  for (const c of USER_COLUMNS) {
    if (c === 'anonymous') continue;
    columns[c] = { token: users[c].token, user: users[c], basic: `${users[c].user.username}:${users[c].token}` };
  }
  await t.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', users.blocked.user.id).execute();
  const tokenOf = async (c: TokenColumn) => {
    const who = users[c.user];
    if (c.kind === 'job') return jobToken;
    if (c.kind === 'oauth') return (await issueAccessToken(t.db, { userId: who.user.id, applicationId: null, scopes: c.scopes, ttl: 7200, withRefreshToken: false })).accessToken;
    return (await insertPersonalAccessToken(t.db, { userId: who.user.id, name: c.name, scopes: c.scopes, expiresAt: null })).token;
  };
  for (const name of columnsOf(true)) {
    const c = tokenColumn(name);
    if (!c) continue;
    const token = await tokenOf(c);
    const username = c.kind === 'job' ? 'gitlab-ci-token' : c.kind === 'oauth' ? 'oauth2' : users[c.user].user.username;
    columns[name] = { token, user: users[c.user], basic: `${username}:${token}` };
  }

  // Git paths of each depth: the group, then subgroups down to 20 levels, a project at each.
  const gitPaths = new Map<number, string[]>();
  gitPaths.set(2, [group.path, `${project.path}.git`]);

  const ids = {
    sha, label: label.id, glabel: glabel.id, milestone: milestone.id, gmilestone: gmilestone.id, issue: issue.iid, issueId: issue.id,
    issueNote: issueNote.id, issueDisc: issueDisc.id, issueAward: issueAward.id, issueNoteAward: issueNoteAward.id, issueEvent: issueEvents[0]?.id ?? 0,
    mr: mr.iid, mrNote: mrNote.id, mrDisc: mrDisc.id, mrAward: mrAward.id, mrNoteAward: mrNoteAward.id, mrEvent: mrEvents[0]?.id ?? 0,
    awaiting, commitNote: commitNote.id, commitDisc: commitDisc.id, blob,
    issueDiscNote: issueDisc.notes[0].id, mrDiscNote: mrDisc.notes[0].id, snippetDiscNote: snippetDisc.notes[0].id, commitDiscNote: commitDisc.notes[0].id, epicDiscNote: epicDisc.notes[0].id,
    snippet: snippet.id, snippetNote: snippetNote.id, snippetDisc: snippetDisc.id, snippetAward: snippetAward.id, snippetNoteAward: snippetNoteAward.id,
    personalSnippet: personalSnippet.id, epic: epic.iid, epicId: epic.id, epicNote: epicNote.id, epicDisc: epicDisc.id, epicEvent: epicEvents[0]?.id ?? 0,
    deployKey: deployKey.id, deployToken: deployToken.id, groupDeployToken: groupDeployToken.id, victimKey: victimKey.id, impersonation: impersonation.id, application: application.id, clientKey: clientKey.id,
    shareGroup: shareGroup.id, other: other.id, runner: runnerId, pipeline: pipeline.id, job: jobs.test.id, runningJob: jobs.build.id,
    schedule: schedule.id, trigger: trigger.id, projectToken: projectToken.id, groupToken: groupToken.id, hook: hook.id, environment: environment.id, deployment: deployment.id,
    releaseLink: release.assets.links[0].id,
  } as Record<string, string | number>;
  for (const [c, id] of Object.entries(ownKeys)) ids[`key:${c}`] = id;
  for (const [c, id] of Object.entries(ownTokens)) ids[`token:${c}`] = id;
  return { name, group, project, users, columns, values: {}, ids, gitPaths };
}

/** Git routes: a path of `depth` segments to a project of the world (subgroups made as needed). */
async function gitPath(t: TestContext, w: World, depth: number): Promise<string[]> {
  const have = w.gitPaths.get(depth);
  if (have) return have;
  const parent = await gitPath(t, w, depth - 1);
  // The group path of depth-1 segments is the parent's groups plus one subgroup.
  const groups = parent.slice(0, -1);
  let group = await t.db.selectFrom('namespaces').selectAll().where('path', '=', groups[groups.length - 1]).where('type', '=', 'Group').executeTakeFirstOrThrow();
  const sub = await t.createGroup({ parent: group as Namespace, visibility: VIS[w.name] });
  const project = await t.createProject({ group: sub, visibility: VIS[w.name] });
  // The job column's token belongs to a job of the world's project: these projects admit it.
  await ok(await t.post(`/api/v4/projects/${project.id}/job_token_scope/allowlist`, { target_project_id: w.project.id }), 'job token allowlist');
  group = sub as any;
  const path = [...groups, sub.path, `${project.path}.git`];
  w.gitPaths.set(depth, path);
  return path;
}

/** The LFS object every git path's project links (its bytes in the store once). */
const MATRIX_LFS = Buffer.from('permission matrix LFS object\n');
const MATRIX_LFS_OID = crypto.createHash('sha256').update(MATRIX_LFS).digest('hex');
/** An upload the matrix may repeat: the empty object. */
const EMPTY_OID = crypto.createHash('sha256').update('').digest('hex');

/** Fills the LFS params of a git path (oid, size, lock_id) for the project at `segments`. */
async function lfsParams(t: TestContext, w: World, url: string, segments: string[], column: string, expected: Expect): Promise<string> {
  const fullPath = segments.join('/').replace(/\.git$/, '');
  const project = await loadProjectForUser(t.app.cairn, undefined, fullPath);
  if (!project) throw new Error(`no project at ${fullPath}`);
  if (url.includes(':oid/:size')) return url.replace(':oid', EMPTY_OID).replace(':size', '0');
  if (url.includes(':oid')) {
    const store = artifactStore(t.app.cairn.config);
    if ((await store.size(lfsObjectKey(MATRIX_LFS_OID))) === null) await store.put(lfsObjectKey(MATRIX_LFS_OID), Readable.from([MATRIX_LFS]));
    await t.db.insertInto('lfs_objects').values({ oid: MATRIX_LFS_OID, size: MATRIX_LFS.length }).onConflict((oc) => oc.column('oid').doNothing()).execute();
    const obj = await t.db.selectFrom('lfs_objects').select('id').where('oid', '=', MATRIX_LFS_OID).executeTakeFirstOrThrow();
    await t.db.insertInto('lfs_objects_projects').values({ lfs_object_id: obj.id, project_id: project.id }).onConflict((oc) => oc.columns(['project_id', 'lfs_object_id']).doNothing()).execute();
    return url.replace(':oid', MATRIX_LFS_OID);
  }
  if (url.includes(':lock_id')) {
    // The caller's own lock where they may unlock it; the admin's otherwise (refused before it is looked at).
    const owner = expected === 'ok' ? w.columns[column]?.user?.user ?? w.users.admin.user : w.users.admin.user;
    const lock = await t.db
      .insertInto('lfs_file_locks')
      .values({ project_id: project.id, user_id: owner.id, path: `matrix/${crypto.randomUUID()}` })
      .returning('id')
      .executeTakeFirstOrThrow();
    return url.replace(':lock_id', String(lock.id));
  }
  return url;
}

/** The column whose resources a "self" param names (token columns: their user's). */
function ownerOf(w: World, column: string): string {
  const tc = tokenColumn(column);
  return tc ? tc.user : column === 'anonymous' ? 'admin' : column;
}

/** The value of a path param of a route, for a column. */
function paramValue(t: TestContext, w: World, url: string, name: string, column: string): string | number {
  const i = w.ids;
  const under = (s: string) => url.includes(s);
  const P = (s: string) => url.startsWith('/api/v4/projects/:id') && under(s);
  switch (name) {
    case 'id':
      if (url.startsWith('/api/v4/projects/')) return w.project.id;
      if (url.startsWith('/api/v4/groups/') || url.startsWith('/api/v4/namespaces/')) return w.group.id;
      if (url.startsWith('/api/v4/users/')) return w.users.victim.user.id;
      if (url.startsWith('/api/v4/personal_access_tokens/')) return i[`token:${ownerOf(w, column)}`];
      if (url.startsWith('/api/v4/keys/')) return i.victimKey;
      if (url.startsWith('/api/v4/applications/')) return i.application;
      if (url.startsWith('/api/v4/snippets/')) return i.personalSnippet;
      if (url.startsWith('/api/v4/runners/')) return i.runner;
      if (url.startsWith('/api/v4/issues/')) return i.issueId;
      if (url.startsWith('/api/v4/jobs/')) return i.runningJob;
      if (url.startsWith('/api/v4/error_tracking/')) return w.project.id;
      return 1;
    case 'user_id':
      if (under('/members/') || under('/billable_members/')) return w.users.member.user.id;
      if (under('/access_requests/')) return w.users.requester.user.id;
      return w.users.victim.user.id;
    case 'issue_iid': return i.issue;
    case 'merge_request_iid': return i.mr;
    case 'snippet_id': return i.snippet;
    case 'epic_iid': return i.epic;
    case 'epic_id': return i.epicId;
    case 'sha': return under('/blobs/') ? i.blob : i.sha;
    case 'note_id':
      if (under('/discussions/:discussion_id/')) {
        if (P('/issues/')) return i.issueDiscNote;
        if (P('/merge_requests/')) return i.mrDiscNote;
        if (P('/snippets/')) return i.snippetDiscNote;
        if (P('/repository/commits/')) return i.commitDiscNote;
        return i.epicDiscNote;
      }
      if (P('/issues/')) return i.issueNote;
      if (P('/merge_requests/')) return i.mrNote;
      if (P('/snippets/')) return i.snippetNote;
      if (P('/repository/commits/')) return i.commitNote;
      return i.epicNote;
    case 'discussion_id':
      if (P('/issues/')) return i.issueDisc;
      if (P('/merge_requests/')) return i.mrDisc;
      if (P('/snippets/')) return i.snippetDisc;
      if (P('/repository/commits/')) return i.commitDisc;
      return i.epicDisc;
    case 'award_id': {
      const onNote = under('/notes/:note_id/');
      if (P('/issues/')) return onNote ? i.issueNoteAward : i.issueAward;
      if (P('/merge_requests/')) return onNote ? i.mrNoteAward : i.mrAward;
      return onNote ? i.snippetNoteAward : i.snippetAward;
    }
    case 'resource_label_event_id':
      if (P('/issues/')) return i.issueEvent;
      if (P('/merge_requests/')) return i.mrEvent;
      return i.epicEvent;
    case 'label_id': return url.startsWith('/api/v4/groups/') ? i.glabel : i.label;
    case 'milestone_id': return url.startsWith('/api/v4/groups/') ? i.gmilestone : i.milestone;
    case 'key_id':
      if (url.startsWith('/api/v4/user/keys')) return i[`key:${ownerOf(w, column)}`] ?? i.victimKey;
      if (url.startsWith('/api/v4/users/')) return i.victimKey;
      if (under('/deploy_keys/')) return i.deployKey;
      if (under('/client_keys/')) return i.clientKey;
      return 1;
    case 'key': return under('/resource_groups/') ? 'matrix-rg' : 'VAR1';
    case 'file_path': return url.includes('/snippets/') ? (url.startsWith('/api/v4/projects') ? 'a.txt' : 'p.txt') : 'README.md';
    case 'ref': return 'main';
    case 'branch': return 'feature';
    case 'tag_name': return 'v1';
    case 'name': return under('/protected_environments/') ? 'production' : 'prot-*';
    case 'format': return 'tar.gz';
    case 'pipeline_id': return i.pipeline;
    case 'job_id': return i.job;
    case 'group_id': return i.shareGroup;
    case 'project_id': return i.other;
    case 'forked_from_id': return i.other;
    case 'runner_id': return i.runner;
    case 'namespace': return w.group.path;
    case 'member_id': return i.awaiting;
    case 'provider': return 'github';
    case 'file': return ASSETS.style.path.split('/').pop()!;
    case 'impersonation_token_id': return i.impersonation;
    case 'error_id': return 1;
    case 'repository_storage_move_id': return 1;
    case 'target_project_id': return i.other;
    case 'target_group_id': return i.shareGroup;
    case 'pipeline_schedule_id': return i.schedule;
    case 'trigger_id': return i.trigger;
    case 'token_id':
      // Deploy tokens and access tokens share the parameter's name.
      if (under('/access_tokens/')) return url.startsWith('/api/v4/groups/') ? i.groupToken : i.projectToken;
      return url.startsWith('/api/v4/groups/') ? i.groupDeployToken : i.deployToken;
    case 'hook_id': return i.hook;
    case 'trigger': return 'push_events';
    case 'environment_id': return i.environment;
    case 'deployment_id': return i.deployment;
    case 'link_id': return i.releaseLink;
  }
  throw new Error(`no value for :${name} of ${url}`);
}

/** Fresh resources for a call that consumes its params (see MatrixSpec.fresh). */
async function freshValue(t: TestContext, w: World, url: string, name: string, column: string): Promise<string | number | undefined> {
  const P = `/api/v4/projects/${w.project.id}`;
  const G = `/api/v4/groups/${w.group.id}`;
  const body = async (res: Promise<{ status: number; body: any }>, what: string) => ok(await res, `fresh ${what}`);
  switch (name) {
    case 'id':
      if (url.startsWith('/api/v4/projects/')) return (await t.createProject({ group: w.group, visibility: VIS[w.name] })).id;
      if (url.startsWith('/api/v4/groups/')) return (await t.createGroup({ parent: w.group, visibility: VIS[w.name] })).id;
      if (url.startsWith('/api/v4/users/')) return (await t.createUser({ username: t.unique('fresh') })).user.id;
      if (url.startsWith('/api/v4/personal_access_tokens/')) {
        const owner = w.users[ownerOf(w, column)];
        return (await insertPersonalAccessToken(t.db, { userId: owner.user.id, name: 'fresh', scopes: ['api'], expiresAt: null })).row?.id ?? undefined;
      }
      if (url.startsWith('/api/v4/runners/')) return freshRunner(t, w, false);
      if (url.startsWith('/api/v4/applications/')) return (await body(t.post('/api/v4/applications', { name: 'app', redirect_uri: 'https://example.com/cb', scopes: 'api' }), 'application')).id;
      if (url.startsWith('/api/v4/snippets/')) return (await body(t.post('/api/v4/snippets', { title: 'p', visibility: 'private', files: [{ file_path: 'p.txt', content: 'p' }] }, { token: w.users.maintainer.token }), 'snippet')).id;
      return undefined;
    case 'issue_iid': return (await body(t.post(`${P}/issues`, { title: 'fresh' }), 'issue')).iid;
    case 'merge_request_iid': {
      const branch = t.unique('b');
      await body(t.post(`${P}/repository/branches`, { branch, ref: 'main' }), 'branch');
      await commitFiles(t, w.project, { [`${branch}.txt`]: 'x\n' }, { branch });
      return (await body(t.post(`${P}/merge_requests`, { source_branch: branch, target_branch: 'main', title: 'fresh' }), 'MR')).iid;
    }
    case 'snippet_id': return (await body(t.post(`${P}/snippets`, { title: 's', visibility: w.name, files: [{ file_path: 'a.txt', content: 'a' }] }), 'snippet')).id;
    case 'epic_iid': return (await body(t.post(`${G}/epics`, { title: 'fresh' }), 'epic')).iid;
    case 'label_id': return (await body(t.post(url.startsWith('/api/v4/groups/') ? `${G}/labels` : `${P}/labels`, { name: t.unique('l'), color: '#123456' }), 'label')).id;
    case 'milestone_id': return (await body(t.post(url.startsWith('/api/v4/groups/') ? `${G}/milestones` : `${P}/milestones`, { title: t.unique('m') }), 'milestone')).id;
    case 'branch': {
      const branch = t.unique('b');
      await body(t.post(`${P}/repository/branches`, { branch, ref: 'main' }), 'branch');
      return branch;
    }
    case 'tag_name': {
      const tag = t.unique('t');
      await body(t.post(`${P}/repository/tags`, { tag_name: tag, ref: 'main' }), 'tag');
      if (url.includes('/releases/')) await body(t.post(`${P}/releases`, { tag_name: tag }), 'release');
      return tag;
    }
    case 'token_id':
      if (url.includes('/access_tokens/')) return (await body(t.post(`${url.startsWith('/api/v4/groups/') ? G : P}/access_tokens`, { name: 'fresh', scopes: ['api'] }), 'access token')).id;
      return (await body(t.post(`${url.startsWith('/api/v4/groups/') ? G : P}/deploy_tokens`, { name: 'fresh', scopes: ['read_repository'] }), 'deploy token')).id;
    case 'link_id': {
      const name = t.unique('link');
      return (await body(t.post(`${P}/releases/v1/assets/links`, { name, url: `https://example.com/${name}` }), 'release link')).id;
    }
    case 'key': {
      if (url.includes('/custom_attributes/')) {
        await body(t.put(`/api/v4/users/${w.users.victim.user.id}/custom_attributes/VAR1`, { value: 'v' }), 'custom attribute');
        return 'VAR1';
      }
      const key = t.unique('K').toUpperCase().replace(/[^A-Z0-9]/g, '_');
      const target = url.startsWith('/api/v4/groups/') ? `${G}/variables`
        : url.startsWith('/api/v4/admin/') ? '/api/v4/admin/ci/variables'
        : url.includes('/pipeline_schedules/') ? `${P}/pipeline_schedules/${w.ids.schedule}/variables`
        : `${P}/variables`;
      await body(t.post(target, { key, value: 'v' }), 'variable');
      return key;
    }
    case 'pipeline_schedule_id': return (await body(t.post(`${P}/pipeline_schedules`, { description: 'fresh', ref: 'main', cron: '0 2 * * *' }), 'pipeline schedule')).id;
    case 'trigger_id': return (await body(t.post(`${P}/triggers`, { description: 'fresh' }), 'trigger token')).id;
    case 'hook_id': return (await t.db.insertInto('web_hooks').values({ type: 'ProjectHook', project_id: w.project.id, url: 'http://10.255.255.1/fresh' }).returning('id').executeTakeFirstOrThrow()).id;
    case 'environment_id': {
      // Only a stopped environment may be deleted.
      const env = await body(t.post(`${P}/environments`, { name: t.unique('fresh-env') }), 'environment');
      await body(t.post(`${P}/environments/${env.id}/stop`, {}), 'stopped environment');
      return env.id;
    }
    case 'deployment_id':
      // Neither running nor its environment's current deployment: deletable.
      return (await body(t.post(`${P}/deployments`, { environment: 'matrix-env', sha: w.ids.sha, ref: 'main', tag: false, status: 'failed' }), 'deployment')).id;
    case 'pipeline_id': return (await body(t.post(`${P}/pipeline`, { ref: 'main' }), 'pipeline')).id;
    case 'job_id': {
      const p = await body(t.post(`${P}/pipeline`, { ref: 'main' }), 'pipeline');
      const jobs = await jobsByName(t, p.id);
      if (url.endsWith('/retry') || url.endsWith('/erase')) await runJob(t, jobs.build, 'success', { trace: 'a log\n' });
      return url.endsWith('/play') ? jobs.manual.id : jobs.build.id;
    }
    case 'user_id':
      if (url.includes('/access_requests/')) {
        const m = await t.createUser({ username: t.unique('rq') });
        const group = url.startsWith('/api/v4/groups/');
        await t.db.insertInto('members').values({ source_type: group ? 'Namespace' : 'Project', source_id: group ? w.group.id : w.project.id, user_id: m.user.id, access_level: 30, requested_at: new Date() } as any).execute();
        return m.user.id;
      }
      if (url.includes('/members/') || url.includes('/billable_members/')) {
        const m = await t.createUser({ username: t.unique('m') });
        if (url.startsWith('/api/v4/groups/')) await t.addMember(w.group, m.user, 30);
        else await t.addMember(w.project, m.user, 30);
        return m.user.id;
      }
      return (await t.createUser({ username: t.unique('fresh') })).user.id;
    case 'group_id': {
      const g = await t.createGroup({ visibility: VIS[w.name] });
      const target = url.startsWith('/api/v4/groups/') ? G : P;
      await body(t.post(`${target}/share`, { group_id: g.id, group_access: 30 }), 'share');
      return g.id;
    }
    case 'runner_id': return freshRunner(t, w, true);
    case 'target_project_id': {
      const target = await t.createProject({ group: w.group, visibility: VIS[w.name] });
      await body(t.post(`${P}/job_token_scope/allowlist`, { target_project_id: target.id }), 'job token allowlist entry');
      return target.id;
    }
    case 'target_group_id': {
      const g = await t.createGroup({ visibility: VIS[w.name] });
      await body(t.post(`${P}/job_token_scope/groups_allowlist`, { target_group_id: g.id }), 'job token groups allowlist entry');
      return g.id;
    }
    case 'provider': {
      const provider = t.unique('prov');
      await t.db.insertInto('identities').values({ user_id: w.users.victim.user.id, provider, extern_uid: provider, saml_provider_id: null } as any).execute();
      return provider;
    }
    case 'award_id': {
      const base = url.slice(0, url.indexOf('/award_emoji/:award_id'));
      const real = base.replace(/:([a-z_]+)/g, (_m, n) => String(paramValue(t, w, url, n, column)));
      // An emoji root has not awarded there yet (an award refused to a column stays).
      for (const emoji of AWARD_NAMES) {
        const res = await t.post(`${real}/award_emoji`, { name: emoji });
        if (res.status === 201) return res.body.id;
        if (!/has already been taken/.test(JSON.stringify(res.body))) return body(Promise.resolve(res), 'award');
      }
      throw new Error(`fresh award: every emoji of ${real} is taken`);
    }
    case 'name':
      if (url.includes('/protected_environments/')) {
        const name = t.unique('env');
        await body(t.post(`${P}/protected_environments`, { name, deploy_access_levels: [{ access_level: 40 }] }), 'protected environment');
        return name;
      }
      if (url.includes('/protected_branches/')) {
        const name = t.unique('pb');
        await body(t.post(`${P}/protected_branches`, { name }), 'protected branch');
        return name;
      }
      return undefined;
    case 'member_id': {
      const m = await t.createUser({ username: t.unique('aw') });
      return (await t.db.insertInto('members').values({ source_type: 'Namespace', source_id: w.group.id, user_id: m.user.id, access_level: 30, state: 1 } as any).returning('id').executeTakeFirstOrThrow()).id;
    }
    case 'project_id': return (await t.createProject({ group: w.group, visibility: VIS[w.name] })).id;
    case 'note_id': {
      const base = url.slice(0, url.indexOf('/notes/:note_id'));
      const real = base.replace(/:([a-z_]+)/g, (_m, n) => String(paramValue(t, w, url, n, column)));
      return (await body(t.post(`${real}/notes`, { body: 'fresh' }), 'note')).id;
    }
    case 'key_id':
      if (url.startsWith('/api/v4/user/keys')) {
        const owner = w.users[ownerOf(w, column)];
        return (await body(t.post('/api/v4/user/keys', { title: 'k', key: makeNodeSshKey('ed25519', 0, 'fresh').text }, { token: owner.token }), 'key')).id;
      }
      if (url.startsWith('/api/v4/users/')) return (await body(t.post(`/api/v4/users/${w.users.victim.user.id}/keys`, { title: 'k', key: makeNodeSshKey('ed25519', 0, 'fresh').text }), 'key')).id;
      if (url.includes('/deploy_keys/')) return (await body(t.post(`${P}/deploy_keys`, { title: 'd', key: makeNodeSshKey('ed25519', 0, 'fresh').text }), 'deploy key')).id;
      if (url.includes('/client_keys/')) return (await body(t.post(`${P}/error_tracking/client_keys`), 'client key')).id;
      return undefined;
  }
  return undefined;
}

const AWARD_NAMES = ['thumbsdown', 'smile', 'tada', 'heart', 'rocket', 'eyes', 'star', 'fire', 'clap', 'wave', 'sunny', 'coffee', 'cake', 'cat', 'dog', 'apple', 'bell', 'gift', 'key', 'moon'];

/** Artifacts of a job (the archive), stored as the runner protocol stores an upload. */
async function storeArtifacts(t: TestContext, jobId: number, projectId: number, files: Record<string, string>) {
  const zip = new yazl.ZipFile();
  for (const [name, content] of Object.entries(files)) zip.addBuffer(Buffer.from(content), name);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  const key = `${projectId}/${jobId}/file-matrix${t.unique()}`;
  const stored = await artifactStore(t.app.cairn.config).put(key, Readable.from([Buffer.concat(chunks)]));
  await t.db.insertInto('ci_job_artifacts').values({
    job_id: jobId, project_id: projectId, file_type: 'archive', file_format: 'zip', file_name: 'artifacts.zip',
    size: stored.size, file_sha256: stored.sha256, store_key: key, expire_at: null, created_at: new Date(),
  } as any).execute();
}

async function freshRunner(t: TestContext, w: World, shared: boolean): Promise<number> {
  const id = (await t.db.insertInto('ci_runners').values({ token_digest: `matrix-${t.unique()}`, runner_type: 'project_type', tag_list: [], description: 'matrix' }).returning('id').executeTakeFirstOrThrow()).id;
  // Registered to another project and enabled in this one, so that it may be disabled here.
  if (shared) await t.db.insertInto('ci_runner_projects').values({ runner_id: id, project_id: Number(w.ids.other) }).execute();
  await t.db.insertInto('ci_runner_projects').values({ runner_id: id, project_id: w.project.id }).execute();
  return id;
}

export interface MatrixResult {
  routes: number;
  columns: number;
  cells: number;
  failures: string[];
}

/**
 * Bodies for the routes whose permission check needs a valid one (most get `{}`: their guard runs
 * before validation, an allowed caller then gets 400). Editing a note is checked once the body is
 * read, as GitLab does (Grape validates first).
 */
const BODIES: [RegExp, string, (w: World) => unknown][] = [
  [/\/notes\/:note_id$/, 'PUT', () => ({ body: 'edited' })],
  // Sharing a group is checked once both groups are found (GitLab: group_id is required first).
  [/^\/api\/v4\/groups\/:id\/share$/, 'POST', (w) => ({ group_id: w.ids.shareGroup, group_access: 30 })],
  // A schedule's owner check comes once the variable's fields are read (GitLab: its params are required first).
  [/\/pipeline_schedules\/:pipeline_schedule_id\/variables$/, 'POST', () => ({ key: 'MATRIX_VAR', value: 'v' })],
];

const ALLOWED_REFUSALS = new Set([401, 403, 404]);

/** Calls every route of the table as every column of the world; returns the cells that differ from their declaration. */
export async function walkMatrix(t: TestContext, w: World, opts: { long: boolean; routes?: RouteRecord[] }): Promise<MatrixResult> {
  const columns = columnsOf(opts.long);
  const routes = (opts.routes ?? t.app.routeTable).filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/test/'));
  const failures: string[] = [];
  const timing = new Map<string, number>();
  let cells = 0;
  for (const route of routes) {
    if (!route.matrix) {
      failures.push(`${route.method} ${route.url}: no matrix declared`);
      continue;
    }
    const spec = specOf(route.matrix);
    const names = [...route.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
    const git = /^\/:p0\//.test(route.url);
    for (const column of columns) {
      try {
        cells++;
        const t0 = Date.now();
        await callCell(t, w, route, spec, names, git, column, failures);
        timing.set(`${route.method} ${route.url}`, (timing.get(`${route.method} ${route.url}`) ?? 0) + Date.now() - t0);
      } catch (err) {
        failures.push(`${route.method} ${route.url} [${w.name}] ${column}: the fixture failed: ${(err as Error).message.slice(0, 200)}`);
      }
    }
  }
  if (process.env.MATRIX_TIMING) console.log([...timing].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([k, v]) => `${v} ms ${k}`).join('\n'));
  return { routes: routes.length, columns: columns.length, cells, failures };
}

async function callCell(t: TestContext, w: World, route: RouteRecord, spec: ReturnType<typeof specOf>, names: string[], git: boolean, column: string, failures: string[]) {
  {
    {
      const expected = expectedCell({ method: route.method, access: route.access, matrix: route.matrix, config: route.config }, column, w.name);
      let url = route.url;
      if (git) {
        const depthNames = names.filter((n) => /^p\d+$/.test(n));
        const segments = await gitPath(t, w, depthNames.length);
        depthNames.forEach((n, k) => (url = url.replace(`:${n}`, segments[k])));
        // Git LFS routes: an object the project links, an empty upload, a lock of the caller's.
        if (names.length > depthNames.length) url = await lfsParams(t, w, url, segments, column, expected);
      } else {
        const consumes = expected === 'ok' && (route.method === 'DELETE' || spec.fresh?.length);
        const freshNames = new Set(spec.fresh ?? (route.method === 'DELETE' && names.length ? [names[names.length - 1]] : []));
        // The web pages' catch-all routes: the world's project page.
        if (url === '/*') url = `/${w.group.full_path}/${w.project.path}`;
        // A trailing wildcard of an API route: a file of the job's artifacts (the only ones with one).
        else if (url.endsWith('/*')) url = `${url.slice(0, -1)}a.txt`;
        for (const n of names) {
          let v: string | number | undefined;
          if (consumes && freshNames.has(n)) v = await freshValue(t, w, route.url, n, column);
          v ??= paramValue(t, w, route.url, n, column);
          url = url.replace(`:${n}`, encodeURIComponent(String(v)));
        }
      }
      const col = w.columns[column];
      const headers: Record<string, string> = {};
      let token: string | null = null;
      if (git) {
        if (col.basic) headers.authorization = `Basic ${Buffer.from(col.basic).toString('base64')}`;
      } else if (tokenColumn(column)?.kind === 'job') {
        headers['job-token'] = col.token!;
      } else if (tokenColumn(column)?.kind === 'oauth') {
        headers.authorization = `Bearer ${col.token}`;
      } else {
        token = col.token;
      }
      if (spec.fresh?.includes('token') && token && expected === 'ok') {
        token = (await insertPersonalAccessToken(t.db, { userId: col.user!.user.id, name: 'fresh', scopes: tokenColumn(column)?.scopes ?? ['api'], expiresAt: null })).token;
      }
      const query: Record<string, string> = {};
      if (git && route.url.endsWith('/info/refs')) query.service = spec.is === 'git:write' ? 'git-receive-pack' : 'git-upload-pack';
      const lfs = git && /\/(info\/lfs|gitlab-lfs)\//.test(route.url);
      if (lfs && route.method !== 'GET') headers['content-type'] = route.method === 'PUT' ? 'application/octet-stream' : 'application/vnd.git-lfs+json';
      else if (git && route.method === 'POST') headers['content-type'] = `application/x-${route.url.endsWith('git-upload-pack') ? 'git-upload-pack' : 'git-receive-pack'}-request`;
      const withBody = route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH';
      const payload = BODIES.find(([re, m]) => m === route.method && re.test(route.url))?.[2](w);
      const res = await t.app.inject({
        method: route.method as any,
        url,
        query,
        headers: { ...headers, ...(token ? { 'private-token': token } : {}), ...(withBody && !git ? { 'content-type': 'application/json' } : {}) },
        payload: withBody ? (git ? '' : JSON.stringify(payload ?? {})) : undefined,
      });
      const status = res.statusCode;
      const good = status < 500 && (expected === 'ok' ? !ALLOWED_REFUSALS.has(status) : status === expected);
      if (!good) failures.push(`${route.method} ${route.url} [${w.name}] ${column}: expected ${expected}, got ${status} ${res.body.slice(0, 160)}`);
    }
  }
}

export type { Expect };
