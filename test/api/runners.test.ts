import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { assignBuild, finishBuild } from '../../src/ci/jobs/state.js';
import { registrationToken } from '../../src/ci/runners.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { tokenDigest } from '../../src/lib/secrets.js';
import { RunnerDetailSchema, RunnerJobSchema, RunnerSchema } from '../../src/presenters/schemas/runners.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';

const YAML = 'build: { script: [make] }\n';
const DETAIL_KEYS = [
  'access_level', 'active', 'architecture', 'contacted_at', 'description', 'groups', 'id', 'ip_address', 'is_shared', 'locked', 'maintainer_note',
  'maintenance_note', 'maximum_timeout', 'name', 'online', 'paused', 'platform', 'projects', 'revision', 'run_untagged', 'runner_type', 'status',
  'tag_list', 'version',
];
const LIST_KEYS = ['active', 'description', 'id', 'ip_address', 'is_shared', 'name', 'online', 'paused', 'runner_type', 'status'];

describe('Runners API', () => {
  let t: TestContext;
  let group: Namespace, subgroup: Namespace, privateGroup: Namespace;
  let projectA: Project, projectB: Project, privateProject: Project;
  let outsider: TestUser, guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, maintainerB: TestUser;
  let groupMaintainer: TestUser, groupOwner: TestUser, groupDeveloper: TestUser;
  /** Runner ids and authentication tokens. */
  const r: Record<'instance' | 'group' | 'projectA' | 'projectB' | 'lockedB', { id: number; token: string }> = {} as any;

  const ids = (body: { id: number }[]) => body.map((x) => x.id);
  const mine = (body: { id: number }[]) => ids(body).filter((id) => Object.values(r).some((x) => x.id === id));

  async function register(registration: string, extra: Record<string, unknown> = {}) {
    const res = await t.post('/api/v4/runners', { token: registration, description: 'runner', info: { name: 'gitlab-runner', version: '16.11.0', revision: 'abc', platform: 'linux', architecture: 'amd64' }, ...extra }, { token: null });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return { id: res.body.id as number, token: res.body.token as string };
  }

  before(async () => {
    t = await createTestContext({ runnerPollTimeout: 1 });
    [outsider, guest, reporter, developer, maintainer, maintainerB, groupMaintainer, groupOwner, groupDeveloper] = await Promise.all(
      Array.from({ length: 9 }, () => t.createUser()),
    );
    group = await t.createGroup({ visibility: 0 });
    subgroup = await t.createGroup({ visibility: 0, parent: group });
    privateGroup = await t.createGroup({ visibility: 0 });
    await t.addMember(group, groupMaintainer.user, 40);
    await t.addMember(group, groupOwner.user, 50);
    await t.addMember(group, groupDeveloper.user, 30);
    projectA = await t.createProject({ group: subgroup, visibility: 0 });
    projectB = await t.createProject({ visibility: 0 });
    privateProject = await t.createProject({ visibility: 0 });
    for (const [user, level] of [[guest, 10], [reporter, 20], [developer, 30], [maintainer, 40]] as const) await t.addMember(projectA, user.user, level);
    await t.addMember(projectB, maintainer.user, 40);
    await t.addMember(projectB, maintainerB.user, 40);

    // Registration tokens as their owners read them (runners_token), and the instance's.
    const tokenA = (await t.get(`/api/v4/projects/${projectA.id}`, { token: maintainer.token })).body.runners_token;
    const tokenB = (await t.get(`/api/v4/projects/${projectB.id}`, { token: maintainerB.token })).body.runners_token;
    const tokenG = (await t.get(`/api/v4/groups/${group.id}`, { token: groupOwner.token })).body.runners_token;
    r.instance = await register(await registrationToken(t.app.cairn, { type: 'instance_type' }), { tag_list: 'docker,linux', description: 'shared' });
    r.group = await register(tokenG, { tag_list: ['docker'], description: 'group runner' });
    r.projectA = await register(tokenA, { description: 'project A runner', maintenance_note: 'ask ops' });
    r.projectB = await register(tokenB, { description: 'project B runner' });
    r.lockedB = await register(tokenB, { description: 'locked', locked: true, paused: true });
    // Statuses come from contacted_at: online (now), offline (3 hours ago), never for the others.
    await t.db.updateTable('ci_runners').set({ contacted_at: new Date() }).where('id', '=', r.instance.id).execute();
    await t.db.updateTable('ci_runners').set({ contacted_at: new Date(Date.now() - 3 * 3600 * 1000) }).where('id', '=', r.group.id).execute();
  });
  after(async () => {
    await t?.close();
  });

  it('GET /runners: the runners the caller manages, with the filters', async () => {
    assert.equal((await t.get('/api/v4/runners', { token: null })).status, 401);
    const asMaintainer = await t.get('/api/v4/runners', { token: maintainer.token });
    assertEach(RunnerSchema, asMaintainer, 'GET /runners');
    assert.deepEqual(ids(asMaintainer.body), [r.projectA.id, r.projectB.id, r.lockedB.id], 'project runners of projects they maintain, by id');
    assert.equal(asMaintainer.headers['x-total'], '3');
    assert.deepEqual(Object.keys(asMaintainer.body[0]).sort(), LIST_KEYS);
    // Group maintainers and owners: the group's runners, and those of the projects in it (they maintain them).
    assert.deepEqual(ids((await t.get('/api/v4/runners', { token: groupMaintainer.token })).body), [r.group.id, r.projectA.id]);
    assert.deepEqual(ids((await t.get('/api/v4/runners', { token: groupOwner.token })).body), [r.group.id, r.projectA.id]);
    for (const u of [developer, reporter, guest, outsider, groupDeveloper]) assert.deepEqual((await t.get('/api/v4/runners', { token: u.token })).body, []);

    const q = (query: Record<string, unknown>) => t.get('/api/v4/runners', { token: maintainer.token, query }).then((x) => { assert.equal(x.status, 200, JSON.stringify(x.body)); return ids(x.body); });
    assert.deepEqual(await q({ paused: true }), [r.lockedB.id]);
    assert.deepEqual(await q({ paused: false }), [r.projectA.id, r.projectB.id]);
    assert.deepEqual(await q({ scope: 'paused' }), [r.lockedB.id]);
    assert.deepEqual(await q({ scope: 'active' }), [r.projectA.id, r.projectB.id]);
    assert.deepEqual(await q({ status: 'not_connected' }), [r.projectA.id, r.projectB.id, r.lockedB.id]);
    assert.deepEqual(await q({ status: 'online' }), []);
    assert.deepEqual(await q({ type: 'group_type' }), []);
    assert.deepEqual(await q({ type: 'project_type', per_page: 1, page: 2 }), [r.projectB.id]);
    const bad = await t.get('/api/v4/runners', { token: maintainer.token, query: { scope: 'specific' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error, 'scope does not have a valid value');
    assert.equal((await t.get('/api/v4/runners', { token: maintainer.token, query: { type: 'nope' } })).status, 400);
    assert.equal((await t.get('/api/v4/runners', { token: maintainer.token, query: { status: 'stale' } })).status, 400);
  });

  it('GET /runners/all: administrators, every filter', async () => {
    assert.equal((await t.get('/api/v4/runners/all', { token: null })).status, 401);
    assert.equal((await t.get('/api/v4/runners/all', { token: maintainer.token })).status, 403);
    const all = await t.get('/api/v4/runners/all', { query: { per_page: 100 } });
    assertEach(RunnerSchema, all, 'GET /runners/all');
    assert.deepEqual(mine(all.body), [r.instance.id, r.group.id, r.projectA.id, r.projectB.id, r.lockedB.id]);
    const byId = new Map(all.body.map((x: any) => [x.id, x]));
    const instance = byId.get(r.instance.id) as any;
    assert.equal(instance.is_shared, true);
    assert.equal(instance.runner_type, 'instance_type');
    assert.equal(instance.status, 'online');
    assert.equal(instance.online, true);
    assert.equal(instance.name, 'gitlab-runner');
    assert.equal(typeof instance.ip_address, 'string');
    assert.equal((byId.get(r.group.id) as any).status, 'offline');
    assert.equal((byId.get(r.group.id) as any).online, false);
    assert.equal((byId.get(r.projectA.id) as any).status, 'not_connected');
    assert.equal((byId.get(r.projectA.id) as any).online, null);
    assert.equal((byId.get(r.lockedB.id) as any).paused, true);
    assert.equal((byId.get(r.lockedB.id) as any).active, false);

    const q = async (query: Record<string, unknown>) => {
      const res = await t.get('/api/v4/runners/all', { query: { per_page: 100, ...query } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return mine(res.body);
    };
    assert.deepEqual(await q({ scope: 'shared' }), [r.instance.id]);
    assert.deepEqual(await q({ scope: 'specific' }), [r.group.id, r.projectA.id, r.projectB.id, r.lockedB.id]);
    assert.deepEqual(await q({ scope: 'group_type' }), [r.group.id]);
    assert.deepEqual(await q({ scope: 'online' }), [r.instance.id]);
    assert.deepEqual(await q({ scope: 'offline' }), [r.group.id]);
    assert.deepEqual(await q({ type: 'project_type' }), [r.projectA.id, r.projectB.id, r.lockedB.id]);
    assert.deepEqual(await q({ type: 'instance_type', status: 'online' }), [r.instance.id]);
    assert.deepEqual(await q({ status: 'offline' }), [r.group.id]);
    assert.deepEqual(await q({ status: 'never_contacted', paused: true }), [r.lockedB.id]);
    assert.deepEqual(await q({ status: 'paused' }), [r.lockedB.id]);
    assert.deepEqual(await q({ status: 'active', type: 'group_type' }), [r.group.id]);
    assert.deepEqual(await q({ tag_list: 'docker' }), [r.instance.id, r.group.id]);
    assert.deepEqual(await q({ tag_list: 'docker,linux' }), [r.instance.id]);
    assert.deepEqual(await q({ 'tag_list[]': ['linux', 'docker'] }), [r.instance.id]);
    assert.deepEqual(await q({ tag_list: 'none-such' }), []);
    assert.equal((await t.get('/api/v4/runners/all', { query: { scope: 'everything' } })).status, 400);
  });

  it('GET /runners/:id: instance runners for anyone signed in, others for who manages them', async () => {
    const path = (id: number) => `/api/v4/runners/${id}`;
    assert.equal((await t.get(path(r.instance.id), { token: null })).status, 401);
    const shared = await t.get(path(r.instance.id), { token: outsider.token });
    assertOne(RunnerDetailSchema, shared, 'GET /runners/:id');
    assert.deepEqual(Object.keys(shared.body).sort(), DETAIL_KEYS);
    assert.deepEqual(shared.body.tag_list, ['docker', 'linux']);
    assert.equal(shared.body.version, '16.11.0');
    assert.equal(shared.body.platform, 'linux');
    assert.equal(shared.body.architecture, 'amd64');
    assert.equal(shared.body.revision, 'abc');
    assert.equal(shared.body.access_level, 'not_protected');
    assert.equal(shared.body.run_untagged, true);
    assert.deepEqual(shared.body.projects, []);
    assert.ok(shared.body.contacted_at);

    for (const u of [outsider, guest, reporter, developer, groupDeveloper, maintainerB]) {
      const res = await t.get(path(r.projectA.id), { token: u.token });
      assert.equal(res.status, 403, u.user.username);
      assert.equal(res.body.message, '403 Forbidden - No access granted');
    }
    const detail = await t.get(path(r.projectA.id), { token: maintainer.token });
    assertOne(RunnerDetailSchema, detail, 'project runner detail');
    assert.equal(detail.body.maintenance_note, 'ask ops');
    assert.equal(detail.body.maintainer_note, 'ask ops');
    assert.equal(detail.body.contacted_at, null);
    assert.deepEqual(detail.body.projects, [{
      id: projectA.id, name: projectA.name, name_with_namespace: `${group.name} / ${subgroup.name} / ${projectA.name}`,
      path: projectA.path, path_with_namespace: `${group.path}/${subgroup.path}/${projectA.path}`,
    }]);
    assert.equal((await t.get(path(r.projectA.id))).status, 200, 'administrators');
    assert.equal((await t.get(path(r.projectA.id), { token: groupMaintainer.token })).status, 200, 'a maintainer of the project\'s group');

    assert.equal((await t.get(path(r.group.id), { token: groupDeveloper.token })).status, 403);
    assert.equal((await t.get(path(r.group.id), { token: maintainer.token })).status, 403, 'a maintainer of a project in the group is not a group maintainer');
    const g = await t.get(path(r.group.id), { token: groupMaintainer.token });
    assert.equal(g.status, 200);
    assert.deepEqual(g.body.groups.map((x: any) => x.id), [group.id]);
    assert.match(g.body.groups[0].web_url, new RegExp(`/groups/${group.path}$`));

    const missing = await t.get(path(2147483000), { token: maintainer.token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.message, '404 Runner Not Found');
    assert.equal((await t.get('/api/v4/runners/99999999999', { token: maintainer.token })).status, 400);
  });

  it('PUT /runners/:id: the runner\'s fields, validation, who may', async () => {
    const path = `/api/v4/runners/${r.projectA.id}`;
    assert.equal((await t.put(path, { description: 'x' }, { token: null })).status, 401);
    assert.equal((await t.put(path, { description: 'x' }, { token: developer.token })).status, 403);
    assert.equal((await t.put(path, { description: 'x' }, { token: maintainerB.token })).status, 403);
    const updated = await t.put(path, {
      description: 'renamed', tag_list: ['b', 'a'], run_untagged: false, locked: true, access_level: 'ref_protected', maximum_timeout: 3600, maintenance_note: 'new note',
    }, { token: maintainer.token });
    assertOne(RunnerDetailSchema, updated, 'PUT /runners/:id');
    assert.equal(updated.body.description, 'renamed');
    assert.deepEqual(updated.body.tag_list, ['a', 'b']);
    assert.equal(updated.body.run_untagged, false);
    assert.equal(updated.body.locked, true);
    assert.equal(updated.body.access_level, 'ref_protected');
    assert.equal(updated.body.maximum_timeout, 3600);
    assert.equal(updated.body.maintenance_note, 'new note');
    // tag_list is the final set; the deprecated maintainer_note writes the same note.
    const again = await t.put(path, { tag_list: 'c', maintainer_note: 'old name' }, { token: maintainer.token });
    assert.deepEqual(again.body.tag_list, ['c']);
    assert.equal(again.body.maintenance_note, 'old name');
    assert.equal(again.body.run_untagged, false, 'untouched fields stay');

    const paused = await t.put(path, { paused: true }, { token: maintainer.token });
    assert.equal(paused.body.paused, true);
    assert.equal(paused.body.active, false);
    assert.equal((await t.put(path, { active: true }, { token: maintainer.token })).body.paused, false, 'the deprecated active');

    const none = await t.put(path, {}, { token: maintainer.token });
    assert.equal(none.status, 400);
    assert.match(none.body.error, /at least one parameter must be provided/);
    assert.equal((await t.put(path, { active: true, paused: true }, { token: maintainer.token })).body.error, 'active, paused are mutually exclusive');
    assert.equal((await t.put(path, { access_level: 'everyone' }, { token: maintainer.token })).body.error, 'access_level does not have a valid value');
    const short = await t.put(path, { maximum_timeout: 100 }, { token: maintainer.token });
    assert.equal(short.status, 400);
    assert.deepEqual(short.body.message, { maximum_timeout: ['needs to be at least 10 minutes'] });
    const untagged = await t.put(path, { tag_list: [] }, { token: maintainer.token });
    assert.equal(untagged.status, 400);
    assert.deepEqual(Object.keys(untagged.body.message), ['tags_list']);
    const long = await t.put(path, { maintenance_note: 'x'.repeat(256) }, { token: maintainer.token });
    assert.equal(long.status, 400);
    assert.deepEqual(long.body.message, { maintenance_note: ['is too long (maximum is 255 characters)'] });
    assert.equal((await t.put(path, { maintenance_note: 'x'.repeat(255) }, { token: maintainer.token })).status, 200);
    // Registration takes the same limit.
    const tokenA = (await t.get(`/api/v4/projects/${projectA.id}`, { token: maintainer.token })).body.runners_token;
    assert.equal((await t.post('/api/v4/runners', { token: tokenA, maintainer_note: 'y'.repeat(256) }, { token: null })).status, 400);
    const reset = await t.put(path, { run_untagged: true, locked: false, access_level: 'not_protected', maximum_timeout: null, tag_list: [] }, { token: maintainer.token });
    assert.equal(reset.status, 200, JSON.stringify(reset.body));
    assert.equal(reset.body.maximum_timeout, null);

    // Instance runners: administrators only; group runners: the group's maintainers and owners.
    assert.equal((await t.put(`/api/v4/runners/${r.instance.id}`, { description: 'x' }, { token: maintainer.token })).status, 403);
    assert.equal((await t.put(`/api/v4/runners/${r.instance.id}`, { description: 'shared runner' })).body.description, 'shared runner');
    assert.equal((await t.put(`/api/v4/runners/${r.group.id}`, { description: 'x' }, { token: groupDeveloper.token })).status, 403);
    assert.equal((await t.put(`/api/v4/runners/${r.group.id}`, { description: 'g' }, { token: groupMaintainer.token })).body.description, 'g');
    assert.equal((await t.put('/api/v4/runners/2147483000', { description: 'x' }, { token: maintainer.token })).status, 404);
  });

  it('a paused runner takes no job; resumed, it does; GET /runners/:id/jobs shows them', async () => {
    await commitFiles(t, projectA, { '.gitlab-ci.yml': YAML });
    const pipeline = await latestPipeline(t, projectA.id);
    const job = (await jobsByName(t, pipeline.id)).build;
    assert.equal(job.status, 'pending');
    const request = () => t.post('/api/v4/jobs/request', { token: r.projectA.token }, { token: null });
    assert.equal((await t.put(`/api/v4/runners/${r.projectA.id}`, { paused: true }, { token: maintainer.token })).status, 200);
    assert.equal((await request()).status, 204, 'paused: no job');
    assert.equal((await t.db.selectFrom('ci_builds').select('status').where('id', '=', job.id).executeTakeFirstOrThrow()).status, 'pending');
    assert.equal((await t.put(`/api/v4/runners/${r.projectA.id}`, { paused: false }, { token: maintainer.token })).status, 200);
    const taken = await request();
    assert.equal(taken.status, 201, JSON.stringify(taken.body));
    assert.equal(taken.body.id, job.id);
    assert.equal((await t.put(`/api/v4/jobs/${job.id}`, { token: taken.body.token, state: 'success' }, { token: null })).status, 200);

    // A second job, in project B, also run by this runner once it is enabled there.
    const enable = await t.post(`/api/v4/projects/${projectB.id}/runners`, { runner_id: r.projectA.id }, { token: maintainer.token });
    assert.equal(enable.status, 201, JSON.stringify(enable.body));
    await commitFiles(t, projectB, { '.gitlab-ci.yml': YAML });
    const jobB = (await jobsByName(t, (await latestPipeline(t, projectB.id)).id)).build;
    const takenB = await t.db.transaction().execute((trx) => assignBuild(trx, jobB.id, r.projectA.id));
    assert.ok(takenB);
    assert.equal(await finishBuild(t.app.cairn, jobB.id, { status: 'failed' }), true);

    const path = `/api/v4/runners/${r.projectA.id}/jobs`;
    assert.equal((await t.get(path, { token: null })).status, 401);
    for (const u of [developer, reporter, outsider]) assert.equal((await t.get(path, { token: u.token })).status, 403);
    const list = await t.get(path, { token: maintainer.token });
    assertEach(RunnerJobSchema, list, 'GET /runners/:id/jobs');
    assert.deepEqual(ids(list.body), [jobB.id, job.id], 'newest first');
    const first = list.body.find((x: any) => x.id === job.id);
    assert.equal(first.project.id, projectA.id);
    assert.equal(first.project.path_with_namespace, `${group.path}/${subgroup.path}/${projectA.path}`);
    assert.equal(first.commit.id, pipeline.sha);
    assert.equal(typeof first.commit.message, 'string');
    assert.equal(typeof first.ip_address, 'string');
    assert.equal(first.status, 'success');
    assert.equal(list.body.find((x: any) => x.id === jobB.id).failure_reason, 'script_failure');
    assert.deepEqual(ids((await t.get(path, { token: maintainer.token, query: { sort: 'asc', order_by: 'id' } })).body), [job.id, jobB.id]);
    assert.deepEqual(ids((await t.get(path, { token: maintainer.token, query: { status: 'success' } })).body), [job.id]);
    assert.deepEqual(ids((await t.get(path, { token: maintainer.token, query: { status: 'running' } })).body), []);
    assert.equal((await t.get(path, { token: maintainer.token, query: { status: 'bogus' } })).status, 400);
    assert.equal((await t.get(path, { token: maintainer.token, query: { order_by: 'name' } })).status, 400);
    assert.equal((await t.get(path, { token: maintainer.token, query: { sort: 'up' } })).status, 400);
    // A maintainer of project B only (the runner is enabled there) sees B's jobs only.
    assert.deepEqual(ids((await t.get(path, { token: maintainerB.token })).body), [jobB.id]);
    assert.deepEqual(ids((await t.get(path)).body), [jobB.id, job.id], 'administrators see all');
    assert.equal((await t.get(`/api/v4/runners/${r.instance.id}/jobs`, { token: maintainer.token })).status, 403, 'instance runners: administrators');
    assert.equal((await t.get('/api/v4/runners/2147483000/jobs', { token: maintainer.token })).status, 404);
  });

  it('GET /projects/:id/runners: its own, its ancestor groups\' and allowed instance runners', async () => {
    const path = `/api/v4/projects/${projectA.id}/runners`;
    assert.equal((await t.get(path, { token: null })).status, 401);
    assert.equal((await t.get(path, { token: outsider.token })).status, 404);
    assert.equal((await t.get(path, { token: developer.token })).status, 403);
    const list = await t.get(path, { token: maintainer.token, query: { per_page: 100 } });
    assertEach(RunnerSchema, list, 'GET /projects/:id/runners');
    assert.deepEqual(mine(list.body), [r.instance.id, r.group.id, r.projectA.id]);
    const q = async (query: Record<string, unknown>) => mine((await t.get(path, { token: maintainer.token, query: { per_page: 100, ...query } })).body);
    assert.deepEqual(await q({ type: 'group_type' }), [r.group.id]);
    // Runner A called for a job in the test before: online now.
    assert.deepEqual(await q({ status: 'online' }), [r.instance.id, r.projectA.id]);
    assert.deepEqual(await q({ scope: 'offline' }), [r.group.id]);
    assert.deepEqual(await q({ status: 'not_connected' }), []);
    assert.deepEqual(await q({ tag_list: 'docker' }), [r.instance.id, r.group.id]);
    assert.deepEqual(await q({ paused: false, type: 'project_type' }), [r.projectA.id]);
    assert.equal((await t.get(path, { token: maintainer.token, query: { scope: 'shared' } })).status, 400);
    // Instance runners off for the project: not listed.
    const off = await t.put(`/api/v4/projects/${projectA.id}`, { shared_runners_enabled: false }, { token: maintainer.token });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    assert.deepEqual(await q({}), [r.group.id, r.projectA.id]);
    await t.put(`/api/v4/projects/${projectA.id}`, { shared_runners_enabled: true }, { token: maintainer.token });
  });

  it('POST /projects/:id/runners enables a project runner; DELETE disables it', async () => {
    const enable = (projectId: number, runnerId: number, token?: string) => t.post(`/api/v4/projects/${projectId}/runners`, { runner_id: runnerId }, { token });
    const project = await t.createProject({ visibility: 0 });
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, maintainerB.user, 40);
    await t.addMember(project, developer.user, 30);
    assert.equal((await enable(project.id, r.projectB.id, developer.token)).status, 403);
    assert.equal((await enable(project.id, r.projectB.id, outsider.token)).status, 404);
    const groupRunner = await enable(project.id, r.group.id, maintainer.token);
    assert.equal(groupRunner.status, 403);
    assert.equal(groupRunner.body.message, '403 Forbidden - Runner is a group runner');
    assert.equal((await enable(project.id, r.instance.id, maintainer.token)).status, 403);
    const locked = await enable(project.id, r.lockedB.id, maintainerB.token);
    assert.equal(locked.status, 403);
    assert.equal(locked.body.message, '403 Forbidden - Runner is locked');
    // maintainerB maintains the target but none of this runner's projects.
    const onlyA = await register((await t.get(`/api/v4/projects/${projectA.id}`, { token: maintainer.token })).body.runners_token);
    const notTheirs = await enable(project.id, onlyA.id, maintainerB.token);
    assert.equal(notTheirs.status, 403);
    assert.equal(notTheirs.body.message, '403 Forbidden - No access granted');
    assert.equal((await enable(project.id, 2147483000, maintainer.token)).status, 404);
    const ok = await enable(project.id, r.projectB.id, maintainerB.token);
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assertOne(RunnerSchema, ok, 'POST /projects/:id/runners');
    assert.equal(ok.body.id, r.projectB.id);
    const twice = await enable(project.id, r.projectB.id, maintainerB.token);
    assert.equal(twice.status, 400);
    assert.ok(twice.body.message.assign_to);
    assert.equal((await enable(project.id, r.lockedB.id)).status, 403, 'locked: even administrators');
    const detail = await t.get(`/api/v4/runners/${r.projectB.id}`, { token: maintainerB.token });
    assert.deepEqual(ids(detail.body.projects), [projectB.id, project.id]);
    // Deleting a runner with more than one project is refused to non-administrators.
    const many = await t.delete(`/api/v4/runners/${r.projectB.id}`, { token: maintainerB.token });
    assert.equal(many.status, 403);
    assert.equal(many.body.message, '403 Forbidden - Runner associated with more than one project');

    const disable = (projectId: number, runnerId: number, token: string) => t.delete(`/api/v4/projects/${projectId}/runners/${runnerId}`, { token });
    assert.equal((await disable(project.id, r.projectB.id, developer.token)).status, 403);
    const owner = await disable(projectB.id, r.projectB.id, maintainerB.token);
    assert.equal(owner.status, 403, 'its owner project');
    assert.equal((await disable(project.id, r.projectB.id, maintainerB.token)).status, 204);
    assert.equal((await disable(project.id, r.projectB.id, maintainerB.token)).status, 404);
    const only = await disable(projectB.id, r.lockedB.id, maintainerB.token);
    assert.equal(only.status, 403);
    assert.equal(only.body.message, '403 Forbidden - Only one project associated with the runner. Please remove the runner instead');
    assert.equal((await disable(project.id, r.instance.id, maintainer.token)).status, 404, 'not a runner of the project');
  });

  it('GET /groups/:id/runners: the group\'s, its ancestors\' and instance runners', async () => {
    const path = (g: Namespace) => `/api/v4/groups/${g.id}/runners`;
    assert.equal((await t.get(path(group), { token: null })).status, 401);
    assert.equal((await t.get(path(group), { token: outsider.token })).status, 404);
    assert.equal((await t.get(path(group), { token: groupDeveloper.token })).status, 403);
    const list = await t.get(path(group), { token: groupMaintainer.token, query: { per_page: 100 } });
    assertEach(RunnerSchema, list, 'GET /groups/:id/runners');
    assert.deepEqual(mine(list.body), [r.instance.id, r.group.id]);
    assert.deepEqual(mine((await t.get(path(subgroup), { token: groupOwner.token, query: { per_page: 100 } })).body), [r.instance.id, r.group.id], 'the parent group\'s runner');
    assert.deepEqual(mine((await t.get(path(group), { token: groupMaintainer.token, query: { type: 'group_type' } })).body), [r.group.id]);
    assert.deepEqual(mine((await t.get(path(group), { token: groupMaintainer.token, query: { type: 'project_type' } })).body), []);
    assert.deepEqual(mine((await t.get(path(group), { token: groupMaintainer.token, query: { status: 'offline' } })).body), [r.group.id]);
    assert.deepEqual(mine((await t.get(path(group), { token: groupMaintainer.token, query: { tag_list: 'linux', per_page: 100 } })).body), [r.instance.id]);
    assert.deepEqual(mine((await t.get(path(group), { token: groupMaintainer.token, query: { paused: true } })).body), []);
    assert.deepEqual(mine((await t.get(path(privateGroup), { query: { per_page: 100 } })).body), [r.instance.id], 'administrators');
  });

  it('DELETE /runners/:id: who may', async () => {
    const tokenB = (await t.get(`/api/v4/projects/${projectB.id}`, { token: maintainerB.token })).body.runners_token;
    const victim = await register(tokenB);
    assert.equal((await t.delete(`/api/v4/runners/${victim.id}`, { token: null })).status, 401);
    assert.equal((await t.delete(`/api/v4/runners/${victim.id}`, { token: developer.token })).status, 403);
    assert.equal((await t.delete(`/api/v4/runners/${r.instance.id}`, { token: maintainer.token })).status, 403);
    assert.equal((await t.delete(`/api/v4/runners/${r.group.id}`, { token: groupDeveloper.token })).status, 403);
    assert.equal((await t.delete(`/api/v4/runners/${victim.id}`, { token: maintainerB.token })).status, 204);
    assert.equal((await t.get(`/api/v4/runners/${victim.id}`)).status, 404);
    assert.equal((await t.post('/api/v4/runners/verify', { token: victim.token }, { token: null })).status, 403, 'its token is gone');
    assert.equal((await t.delete(`/api/v4/runners/${victim.id}`, { token: maintainerB.token })).status, 404);
    const gRunner = await register((await t.get(`/api/v4/groups/${group.id}`, { token: groupOwner.token })).body.runners_token);
    assert.equal((await t.delete(`/api/v4/runners/${gRunner.id}`, { token: groupMaintainer.token })).status, 204);
    const shared = await register(await registrationToken(t.app.cairn, { type: 'instance_type' }));
    assert.equal((await t.delete(`/api/v4/runners/${shared.id}`)).status, 204, 'administrators');
  });

  it('registration tokens: stored as digest and encrypted only; reset for projects and groups', async () => {
    const columns = await sql<{ table_name: string }>`select table_name from information_schema.columns where column_name = 'runners_token'`.execute(t.db);
    assert.deepEqual(columns.rows, [], 'no clear copy left');
    const shown = (await t.get(`/api/v4/projects/${projectA.id}`, { token: maintainer.token })).body.runners_token;
    const row = await t.db.selectFrom('ci_registration_tokens').selectAll().where('project_id', '=', projectA.id).executeTakeFirstOrThrow();
    assert.equal(row.token_digest, tokenDigest(shown));
    assert.match(row.token_encrypted, /^v1:/);
    assert.ok(!row.token_encrypted.includes(shown));
    // Lists show it to maintainers too, the same value.
    const list = await t.get('/api/v4/projects', { token: maintainer.token, query: { membership: true, per_page: 100 } });
    assert.equal(list.body.find((p: any) => p.id === projectA.id).runners_token, shown);
    assert.ok(!('runners_token' in (await t.get('/api/v4/projects', { token: developer.token, query: { membership: true } })).body[0]));

    const reset = (path: string, token: string | null) => t.post(path, {}, { token });
    const ppath = `/api/v4/projects/${projectA.id}/runners/reset_registration_token`;
    assert.equal((await reset(ppath, null)).status, 401);
    assert.equal((await reset(ppath, developer.token)).status, 403);
    assert.equal((await reset(ppath, outsider.token)).status, 404);
    const fresh = await reset(ppath, maintainer.token);
    assert.equal(fresh.status, 201);
    assert.notEqual(fresh.body.token, shown);
    assert.equal((await t.get(`/api/v4/projects/${projectA.id}`, { token: maintainer.token })).body.runners_token, fresh.body.token);
    assert.equal((await t.post('/api/v4/runners', { token: shown }, { token: null })).status, 403);
    const gpath = `/api/v4/groups/${group.id}/runners/reset_registration_token`;
    assert.equal((await reset(gpath, groupMaintainer.token)).status, 403, 'owners only');
    assert.equal((await reset(gpath, outsider.token)).status, 404);
    const gfresh = await reset(gpath, groupOwner.token);
    assert.equal(gfresh.status, 201);
    assert.equal((await t.get(`/api/v4/groups/${group.id}`, { token: groupOwner.token })).body.runners_token, gfresh.body.token);

    // A token carried over by migration 0850 (digest only): it registers until the project shows a new one.
    const legacy = 'GR1348941legacylegacylegacy1';
    const p = await t.createProject({ visibility: 0 });
    await t.addMember(p, maintainer.user, 40);
    // (A new project gets its token when it is created; replace it with the migrated form.)
    await t.db.updateTable('ci_registration_tokens').set({ token_digest: tokenDigest(legacy), token_encrypted: '' }).where('project_id', '=', p.id).execute();
    assert.equal((await t.post('/api/v4/runners', { token: legacy }, { token: null })).status, 201);
    const replaced = (await t.get(`/api/v4/projects/${p.id}`, { token: maintainer.token })).body.runners_token;
    assert.match(replaced, /^GR1348941/);
    assert.notEqual(replaced, legacy);
    assert.equal((await t.post('/api/v4/runners', { token: legacy }, { token: null })).status, 403);
    assert.equal((await t.post('/api/v4/runners', { token: replaced }, { token: null })).status, 201);
  });
});
