import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { EnvironmentDetailSchema, EnvironmentSchema, DeploymentSchema } from '../../src/presenters/schemas/environments.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';
import { assertMatches } from '../helpers/contract.js';

describe('Environments and Deployments APIs', () => {
  let t: TestContext;
  let project: Project;
  let publicProject: Project;
  let sha: string;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, outsider: TestUser;
  const envs = (rest = '', p: Project = project) => `/api/v4/projects/${p.id}/environments${rest}`;
  const deps = (rest = '', p: Project = project) => `/api/v4/projects/${p.id}/deployments${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    publicProject = await t.createProject({ visibility: 20 });
    [guest, reporter, developer, maintainer, outsider] = await Promise.all(Array.from({ length: 5 }, () => t.createUser()));
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(publicProject, developer.user, 30);
    sha = await commitFiles(t, project, { 'README.md': 'hi\n' });
  });
  after(async () => {
    await t?.close();
  });

  it('creates, reads, updates, stops and deletes environments', async () => {
    const created = await t.post(envs(), { name: 'review/fix-1', external_url: 'https://fix-1.example.com' }, { token: developer.token });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assertMatches(EnvironmentSchema, created.body, 'EnvironmentSchema');
    assert.equal(created.body.name, 'review/fix-1');
    assert.match(created.body.slug, /^review-fix-1-[a-z0-9]{6}$/);
    assert.equal(created.body.state, 'available');
    assert.equal(created.body.tier, 'development');
    assert.equal(created.body.external_url, 'https://fix-1.example.com');
    assert.equal(created.body.project.id, project.id);
    const id = created.body.id;

    const one = await t.get(envs(`/${id}`), { token: reporter.token });
    assert.equal(one.status, 200);
    assertMatches(EnvironmentDetailSchema, one.body, 'EnvironmentDetailSchema');
    assert.equal(one.body.last_deployment, null);

    const updated = await t.put(envs(`/${id}`), { external_url: 'https://new.example.com', tier: 'staging', description: 'the fix' }, { token: developer.token });
    assert.equal(updated.status, 200, JSON.stringify(updated.body));
    assert.equal(updated.body.external_url, 'https://new.example.com');
    assert.equal(updated.body.tier, 'staging');
    assert.equal(updated.body.description, 'the fix');

    // Only stopped environments may be deleted.
    assert.equal((await t.delete(envs(`/${id}`), { token: developer.token })).status, 403);
    const stopped = await t.post(envs(`/${id}/stop`), {}, { token: developer.token });
    assert.equal(stopped.status, 200);
    assert.equal(stopped.body.state, 'stopped');
    assert.equal((await t.delete(envs(`/${id}`), { token: developer.token })).status, 204);
    assert.equal((await t.get(envs(`/${id}`), { token: developer.token })).status, 404);
  });

  it('answers bad input with 400 and GitLab bodies', async () => {
    assert.deepEqual((await t.post(envs(), {}, { token: developer.token })).body, { error: 'name is missing' });
    const bad = await t.post(envs(), { name: '/bad name!' }, { token: developer.token });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message.name[0], /can contain only letters/);
    assert.equal((await t.post(envs(), { name: 'dup' }, { token: developer.token })).status, 201);
    const dup = await t.post(envs(), { name: 'dup' }, { token: developer.token });
    assert.equal(dup.status, 400);
    assert.deepEqual(dup.body.message, { name: ['has already been taken'] });
    assert.equal((await t.post(envs(), { name: 'x1', tier: 'moon' }, { token: developer.token })).body.error, 'tier does not have a valid value');
    const js = await t.post(envs(), { name: 'x2', external_url: 'javascript:alert(1)' }, { token: developer.token });
    assert.equal(js.status, 400);
    assert.ok(js.body.message.external_url);
    assert.equal((await t.get(envs('/abc'), { token: developer.token })).status, 400);
    assert.equal((await t.get(envs('/99999999'), { token: developer.token })).status, 404);
    assert.equal((await t.get(envs(), { token: developer.token, query: { states: 'gone' } })).status, 400);
    assert.equal((await t.get(envs(), { token: developer.token, query: { search: 'ab' } })).status, 400);
    assert.equal((await t.get(envs(), { token: developer.token, query: { search: 'abc', name: 'abc' } })).status, 400);
    assert.equal((await t.post(envs('/stop_stale'), {}, { token: developer.token })).body.error, 'before is missing');
    assert.equal((await t.post(envs('/stop_stale'), { before: 'yesterday' }, { token: developer.token })).status, 400);
    assert.equal((await t.post(envs('/stop_stale'), { before: new Date().toISOString() }, { token: developer.token })).status, 400, 'at least a week ago');
    assert.equal((await t.post(envs('/stop_stale'), { before: new Date(Date.now() - 8 * 86400_000).toISOString(), limit: 0 }, { token: developer.token })).status, 400);
    assert.equal((await t.post(deps(), { environment: 'production' }, { token: developer.token })).body.error, 'sha is missing, ref is missing, tag is missing, status is missing');
    assert.equal((await t.post(deps(), { environment: 'production', sha, ref: 'main', tag: false, status: 'blocked' }, { token: developer.token })).body.error, 'status does not have a valid value');
    assert.equal((await t.get(deps(), { token: developer.token, query: { order_by: 'name' } })).body.error, 'order_by does not have a valid value');
    assert.equal((await t.get(deps(), { token: developer.token, query: { finished_after: '2020-01-01T00:00:00Z' } })).status, 400);
    assert.equal((await t.get(deps(), { token: developer.token, query: { updated_after: 'soon' } })).status, 400);
  });

  it('never answers hostile input with a 5xx', async () => {
    const env = (await t.post(envs(), { name: 'hostile-target' }, { token: developer.token })).body;
    const dep = (await t.post(deps(), { environment: 'hostile-target', sha, ref: 'main', tag: false, status: 'failed' }, { token: developer.token })).body;
    const hostile: unknown[] = ['', ' ', '\u0000', 'a\u0000b', '../../etc/passwd', '-rf', 'x'.repeat(5000), -1, 0, 2 ** 53, 1e308, true, null, [], ['a', 'b'], {}, { a: { b: 1 } }, '%', '_', '\\', "'; drop table environments; --", '2019-13-45T99:99:99Z'];
    const targets: [string, string, string[]][] = [
      ['GET', envs(), ['name', 'search', 'states', 'page', 'per_page']],
      ['POST', envs(), ['name', 'external_url', 'tier', 'description']],
      ['PUT', envs(`/${env.id}`), ['name', 'external_url', 'tier', 'description']],
      ['POST', envs(`/${env.id}/stop`), ['force']],
      ['POST', envs('/stop_stale'), ['before', 'limit']],
      ['GET', deps(), ['order_by', 'sort', 'updated_after', 'updated_before', 'finished_after', 'finished_before', 'environment', 'status']],
      ['POST', deps(), ['environment', 'sha', 'ref', 'tag', 'status']],
      ['PUT', deps(`/${dep.id}`), ['status']],
    ];
    for (const [method, url, params] of targets) {
      for (const param of params) {
        for (const value of hostile) {
          const opts = method === 'GET' ? { token: developer.token, query: { [param]: typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value) } } : { token: developer.token, body: { [param]: value } };
          const res = await t.call(method, url, opts);
          assert.ok(res.status < 500, `${method} ${url} ${param}=${JSON.stringify(value)?.slice(0, 40)}: ${res.status} ${res.text.slice(0, 200)}`);
        }
      }
    }
    for (const id of ['abc', '-1', '99999999999', '1.5', '%00']) {
      for (const url of [envs(`/${id}`), deps(`/${id}`), envs(`/${id}/stop`)]) {
        const res = await t.call(url.endsWith('/stop') ? 'POST' : 'GET', url, { token: developer.token });
        assert.ok(res.status >= 400 && res.status < 500, `${url}: ${res.status}`);
      }
    }
  });

  it('lists environments with name, search and states filters, paginated', async () => {
    const p = await t.createProject();
    await t.addMember(p, developer.user, 30);
    for (const name of ['alpha', 'alphabet', 'beta', 'gamma']) assert.equal((await t.post(envs('', p), { name }, { token: developer.token })).status, 201);
    const beta = (await t.get(envs('', p), { token: developer.token, query: { name: 'beta' } })).body;
    assert.deepEqual(beta.map((e: any) => e.name), ['beta']);
    await t.post(envs(`/${beta[0].id}/stop`, p), {}, { token: developer.token });
    const list = await t.get(envs('', p), { token: developer.token });
    assert.deepEqual(list.body.map((e: any) => e.name), ['alpha', 'alphabet', 'beta', 'gamma']);
    for (const e of list.body) assertMatches(EnvironmentSchema, e, 'EnvironmentSchema');
    assert.equal(list.headers['x-total'], '4');
    assert.deepEqual((await t.get(envs('', p), { token: developer.token, query: { search: 'ALP' } })).body.map((e: any) => e.name), ['alpha', 'alphabet']);
    assert.deepEqual((await t.get(envs('', p), { token: developer.token, query: { states: 'stopped' } })).body.map((e: any) => e.name), ['beta']);
    assert.deepEqual((await t.get(envs('', p), { token: developer.token, query: { states: 'available' } })).body.map((e: any) => e.name), ['alpha', 'alphabet', 'gamma']);
    const page = await t.get(envs('', p), { token: developer.token, query: { per_page: 2, page: 2 } });
    assert.deepEqual(page.body.map((e: any) => e.name), ['beta', 'gamma']);
    assert.equal(page.headers['x-total-pages'], '2');
    assert.equal(page.headers['x-page'], '2');
  });

  it('reports, lists, updates and deletes deployments', async () => {
    const p = await t.createProject();
    await t.addMember(p, developer.user, 30);
    await t.addMember(p, maintainer.user, 40);
    await t.addMember(p, reporter.user, 20);
    const psha = await commitFiles(t, p, { 'a.txt': 'a\n' });
    const report = (environment: string, status: string, ref = 'main') => t.post(deps('', p), { environment, sha: psha, ref, tag: false, status }, { token: developer.token });
    const first = await report('production', 'success');
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assertMatches(DeploymentSchema, first.body, 'DeploymentSchema');
    assert.equal(first.body.iid, 1);
    assert.equal(first.body.status, 'success');
    assert.equal(first.body.environment.name, 'production');
    assert.equal(first.body.user.username, developer.user.username);
    assert.equal(first.body.deployable, null);
    assert.ok(first.body.finished_at);
    const second = await report('production', 'running', 'release');
    const third = await report('staging', 'failed');
    assert.equal(third.body.iid, 3);

    // The environment was made, and shows its last successful deployment.
    const production = (await t.get(envs('', p), { token: reporter.token, query: { name: 'production' } })).body[0];
    assert.equal(production.tier, 'production');
    assert.equal((await t.get(envs(`/${production.id}`, p), { token: reporter.token })).body.last_deployment.id, first.body.id);

    const all = await t.get(deps('', p), { token: reporter.token });
    assert.equal(all.status, 200);
    assert.deepEqual(all.body.map((d: any) => d.iid), [1, 2, 3]);
    for (const d of all.body) assertMatches(DeploymentSchema, d, 'DeploymentSchema');
    assert.deepEqual((await t.get(deps('', p), { token: reporter.token, query: { sort: 'desc' } })).body.map((d: any) => d.iid), [3, 2, 1]);
    assert.deepEqual((await t.get(deps('', p), { token: reporter.token, query: { order_by: 'ref', sort: 'asc' } })).body.map((d: any) => d.ref), ['main', 'main', 'release']);
    assert.deepEqual((await t.get(deps('', p), { token: reporter.token, query: { environment: 'production' } })).body.map((d: any) => d.iid), [1, 2]);
    assert.deepEqual((await t.get(deps('', p), { token: reporter.token, query: { status: 'failed' } })).body.map((d: any) => d.iid), [3]);
    const hourAgo = new Date(Date.now() - 3600_000).toISOString();
    assert.equal((await t.get(deps('', p), { token: reporter.token, query: { updated_after: hourAgo, order_by: 'updated_at' } })).body.length, 3);
    assert.equal((await t.get(deps('', p), { token: reporter.token, query: { updated_before: hourAgo } })).body.length, 0);
    const finished = await t.get(deps('', p), { token: reporter.token, query: { finished_after: hourAgo, order_by: 'finished_at', status: 'success' } });
    assert.deepEqual(finished.body.map((d: any) => d.iid), [1]);
    const paged = await t.get(deps('', p), { token: reporter.token, query: { per_page: 1, page: 3 } });
    assert.deepEqual(paged.body.map((d: any) => d.iid), [3]);
    assert.equal(paged.headers['x-total'], '3');
    assert.equal((await t.get(deps(`/${second.body.id}`, p), { token: reporter.token })).body.ref, 'release');
    assert.equal((await t.get(deps('/99999999', p), { token: reporter.token })).status, 404);

    const done = await t.put(deps(`/${second.body.id}`, p), { status: 'success' }, { token: developer.token });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.equal(done.body.status, 'success');
    assert.equal((await t.get(envs(`/${production.id}`, p), { token: reporter.token })).body.last_deployment.id, second.body.id);
    assert.equal((await t.put(deps(`/${second.body.id}`, p), { status: 'success' }, { token: reporter.token })).status, 403);

    // Deleting: maintainers, not a running one nor the environment's current one.
    const running = await report('staging', 'running');
    assert.equal((await t.delete(deps(`/${first.body.id}`, p), { token: developer.token })).status, 403);
    assert.deepEqual((await t.delete(deps(`/${running.body.id}`, p), { token: maintainer.token })).body, { message: 'Cannot destroy running deployment' });
    assert.equal((await t.delete(deps(`/${second.body.id}`, p), { token: maintainer.token })).status, 400);
    assert.equal((await t.delete(deps(`/${first.body.id}`, p), { token: maintainer.token })).status, 204);
    assert.equal((await t.get(deps(`/${first.body.id}`, p), { token: reporter.token })).status, 404);
  });

  it('stops stale environments (not protected ones)', async () => {
    const p = await t.createProject();
    await t.addMember(p, developer.user, 30);
    await t.addMember(p, maintainer.user, 40);
    for (const name of ['old-1', 'old-2', 'old-protected', 'fresh']) await t.post(envs('', p), { name }, { token: developer.token });
    await t.post(`/api/v4/projects/${p.id}/protected_environments`, { name: 'old-protected', deploy_access_levels: [{ access_level: 40 }] }, { token: maintainer.token });
    const longAgo = new Date(Date.now() - 30 * 86400_000);
    await t.db.updateTable('environments').set({ updated_at: longAgo }).where('project_id', '=', p.id).where('name', 'like', 'old-%').execute();
    const res = await t.post(envs('/stop_stale', p), { before: new Date(Date.now() - 14 * 86400_000).toISOString() }, { token: developer.token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(typeof res.body.message, 'string');
    const states = Object.fromEntries((await t.get(envs('', p), { token: developer.token })).body.map((e: any) => [e.name, e.state]));
    assert.deepEqual(states, { 'old-1': 'stopped', 'old-2': 'stopped', 'old-protected': 'available', fresh: 'available' });
  });

  it('deletes stopped review apps: a dry run by default, then scheduled a week ahead and removed by the sweep; protected ones unprocessable', async () => {
    const { deleteScheduledEnvironments } = await import('../../src/services/environments.js');
    const p = await t.createProject();
    await t.addMember(p, developer.user, 30);
    await t.addMember(p, maintainer.user, 40);
    const names = ['review/old-1', 'review/old-2', 'review/guarded', 'review/running', 'review/recent', 'production'];
    for (const name of names) assert.equal((await t.post(envs('', p), { name }, { token: developer.token })).status, 201, name);
    await t.post(`/api/v4/projects/${p.id}/protected_environments`, { name: 'review/guarded', deploy_access_levels: [{ access_level: 40 }] }, { token: maintainer.token });
    const longAgo = new Date(Date.now() - 60 * 86400_000);
    await t.db.updateTable('environments').set({ created_at: longAgo }).where('project_id', '=', p.id).where('name', '!=', 'review/recent').execute();
    await t.db.updateTable('environments').set({ state: 'stopped' }).where('project_id', '=', p.id).where('name', '!=', 'review/running').execute();
    const names_ = (list: { name: string }[]) => list.map((e) => e.name).sort();

    const dry = await t.delete(envs('/review_apps', p), { token: developer.token });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.deepEqual(names_(dry.body.scheduled_entries), ['review/old-1', 'review/old-2']);
    assert.deepEqual(names_(dry.body.unprocessable_entries), ['review/guarded']);
    assert.deepEqual(Object.keys(dry.body.scheduled_entries[0]).sort(), ['created_at', 'external_url', 'id', 'name', 'slug', 'updated_at']);
    assert.equal((await t.db.selectFrom('environments').select('id').where('project_id', '=', p.id).where('auto_delete_at', 'is not', null).execute()).length, 0, 'a dry run changes nothing');

    const limited = await t.delete(envs('/review_apps', p), { token: developer.token, query: { dry_run: 'false', limit: 1 } });
    assert.equal(limited.status, 200, JSON.stringify(limited.body));
    assert.equal(limited.body.scheduled_entries.length, 1);
    const rest = await t.delete(envs('/review_apps', p), { token: developer.token, query: { dry_run: false } });
    assert.equal(rest.body.scheduled_entries.length, 1, 'the one already scheduled is not listed again');
    // A week from now they go; not before.
    assert.equal(await deleteScheduledEnvironments(t.db), 0);
    assert.equal(await deleteScheduledEnvironments(t.db, new Date(Date.now() + 8 * 86400_000)), 2);
    assert.deepEqual(names_((await t.get(envs('', p), { token: developer.token })).body), ['production', 'review/guarded', 'review/recent', 'review/running']);

    // `before` moves the cut; bad values are 400; reporters may not.
    const all = await t.delete(envs('/review_apps', p), { token: maintainer.token, query: { before: new Date(Date.now() + 86400_000).toISOString() } });
    assert.deepEqual(names_(all.body.scheduled_entries), ['review/guarded', 'review/recent']);
    const badQueries: Record<string, string | number>[] = [{ limit: 0 }, { limit: 1001 }, { limit: 'many' }, { dry_run: 'maybe' }, { before: 'yesterday' }];
    for (const query of badQueries) {
      const bad = await t.delete(envs('/review_apps', p), { token: developer.token, query });
      assert.equal(bad.status, 400, `${JSON.stringify(query)}: ${JSON.stringify(bad.body)}`);
    }
    await t.addMember(p, reporter.user, 20);
    assert.equal((await t.delete(envs('/review_apps', p), { token: reporter.token })).status, 403);
    assert.equal((await t.delete(envs('/review_apps', p), { token: outsider.token })).status, 404);
  });

  it('permissions: outsiders 404, guests may not read a private project, reporters may not write', async () => {
    const env = (await t.post(envs(), { name: 'perm-env' }, { token: developer.token })).body;
    for (const url of [envs(), envs(`/${env.id}`), deps()]) {
      assert.equal((await t.get(url, { token: outsider.token })).status, 404);
      assert.equal((await t.get(url, { token: null })).status, 404);
      assert.equal((await t.get(url, { token: guest.token })).status, 403);
      assert.equal((await t.get(url, { token: reporter.token })).status, 200);
    }
    assert.equal((await t.post(envs(), { name: 'by-outsider' }, { token: outsider.token })).status, 404);
    assert.equal((await t.post(envs(), { name: 'by-anon' }, { token: null })).status, 401);
    assert.equal((await t.post(envs(), { name: 'by-reporter' }, { token: reporter.token })).status, 403);
    assert.equal((await t.put(envs(`/${env.id}`), { tier: 'other' }, { token: reporter.token })).status, 403);
    assert.equal((await t.post(envs(`/${env.id}/stop`), {}, { token: reporter.token })).status, 403);
    assert.equal((await t.post(deps(), { environment: 'perm-env', sha, ref: 'main', tag: false, status: 'success' }, { token: reporter.token })).status, 403);
    assert.equal((await t.delete(envs(`/${env.id}`), { token: reporter.token })).status, 403);

    // A public project's environments are public (its jobs are); writing still needs a developer.
    const pub = await t.post(envs('', publicProject), { name: 'pub-env' }, { token: developer.token });
    assert.equal(pub.status, 201);
    assert.equal((await t.get(envs('', publicProject), { token: null })).status, 200);
    assert.equal((await t.get(envs(`/${pub.body.id}`, publicProject), { token: outsider.token })).status, 200);
    assert.equal((await t.get(deps('', publicProject), { token: null })).status, 200);
    assert.equal((await t.post(envs(`/${pub.body.id}/stop`, publicProject), {}, { token: outsider.token })).status, 403);
  });

  it('a CI job token works on both APIs, with the rights of the job\'s user, in its own project', async () => {
    // A job a developer's push started: its token acts as that developer.
    const own = await t.createProject();
    await t.addMember(own, developer.user, 30);
    await commitFiles(t, own, { 'README.md': 'hi\n' });
    const jobSha = await commitFiles(t, own, { '.gitlab-ci.yml': 'job: { script: [x] }\n' }, { branch: 'dev', startBranch: 'main', token: developer.token });
    const runner = await ProtocolRunner.register(t);
    const job = await runner.takeJob();
    assert.ok(job);
    const as = { token: null, headers: { 'job-token': job.token } };
    const env = await t.post(envs('', own), { name: 'from-ci' }, as);
    assert.equal(env.status, 201, JSON.stringify(env.body));
    assert.equal((await t.get(envs('', own), as)).body.length, 1);
    const dep = await t.post(deps('', own), { environment: 'from-ci', sha: jobSha, ref: 'dev', tag: false, status: 'running' }, as);
    assert.equal(dep.status, 201, JSON.stringify(dep.body));
    assert.equal(dep.body.user.id, developer.user.id);
    assert.equal((await t.put(deps(`/${dep.body.id}`, own), { status: 'success' }, as)).body.status, 'success');
    assert.equal((await t.get(deps(`/${dep.body.id}`, own), as)).status, 200);
    // Deleting a deployment is for maintainers; the developer's token may not.
    assert.equal((await t.delete(deps(`/${dep.body.id}`, own), as)).status, 403);
    assert.equal((await t.post(envs(`/${env.body.id}/stop`, own), {}, as)).status, 200);
    const dry = await t.delete(envs('/review_apps', own), as);
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    // Another project is out of the token's reach (no allowlist entry), even one its user may read.
    assert.equal((await t.get(envs('', project), as)).status, 404);
    // Elsewhere in the API a job token is still refused.
    assert.equal((await t.get(`/api/v4/projects/${own.id}/issues`, as)).status, 401);
  });
});
