import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import yazl from 'yazl';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { artifactStore } from '../../src/storage/index.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, ProtocolRunner, runJob } from '../helpers/ci.js';

// GitLab 16's CI job token inbound scope: a job token of another project reaches a project (git
// over HTTP, API reads, artifact downloads) only when that project, or a group above it, is on
// the project's allowlist, unless the project has turned the scope off. The job's own project is
// always reachable.
describe('CI job token scope', () => {
  let t: TestContext;
  let base: string;
  let work: string;
  let groupA: Namespace, groupB: Namespace;
  let a: Project, b: Project;
  let developer: TestUser, maintainer: TestUser;
  let jobToken: string;
  let bJobId: number;

  const ls = (p: Project, token: string): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => {
      t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow().then((ns) => {
        execFile('git', ['ls-remote', `http://gitlab-ci-token:${token}@${base}/${ns.full_path}/${p.path}.git`], {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' },
        }, (err, _out, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stderr: String(stderr) }));
      });
    });
  const artifacts = (p: Project, jobId: number) => t.get(`/api/v4/projects/${p.id}/jobs/${jobId}/artifacts`, { token: null, headers: { 'job-token': jobToken } });
  const scope = (p: Project, rest = '') => `/api/v4/projects/${p.id}/job_token_scope${rest}`;

  /** Whether the job token of project a reaches project b, by git and by the API (both must agree). */
  async function reachesB(): Promise<boolean> {
    const git = await ls(b, jobToken);
    const api = await artifacts(b, bJobId);
    if (git.code === 0) {
      assert.equal(api.status, 200, 'git and the API agree');
      return true;
    }
    assert.match(git.stderr, /could not be found or you don't have permission to view it/);
    assert.equal(api.status, 404);
    assert.deepEqual(api.body, { message: '404 Project Not Found' });
    return false;
  }

  before(async () => {
    t = await createTestContext();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-jts-'));
    [developer, maintainer] = await Promise.all([t.createUser(), t.createUser()]);
    groupA = await t.createGroup();
    groupB = await t.createGroup();
    a = await t.createProject({ group: groupA });
    b = await t.createProject({ group: groupB });
    await t.addMember(b, developer.user, 30);
    await t.addMember(b, maintainer.user, 40);
    // A job of project a runs (started by root, who may read everything: only the scope stands in its way).
    await commitFiles(t, a, { '.gitlab-ci.yml': 'job: { script: [x] }\n' });
    const runner = await ProtocolRunner.register(t);
    const taken = await runner.takeJob();
    assert.ok(taken);
    jobToken = taken.token;
    // Project b has a finished job with artifacts.
    await commitFiles(t, b, { '.gitlab-ci.yml': 'build: { script: [x] }\n' });
    const build = (await jobsByName(t, (await latestPipeline(t, b.id)).id)).build;
    await runJob(t, build, 'success');
    bJobId = build.id;
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from('artifact\n'), 'a.txt');
    zip.end();
    const chunks: Buffer[] = [];
    for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
    const key = `${b.id}/${bJobId}/scope-test`;
    const stored = await artifactStore(t.app.cairn.config).put(key, Readable.from([Buffer.concat(chunks)]));
    await t.db.insertInto('ci_job_artifacts').values({
      job_id: bJobId, project_id: b.id, file_type: 'archive', file_format: 'zip', file_name: 'artifacts.zip',
      size: stored.size, file_sha256: stored.sha256, store_key: key, expire_at: null, created_at: new Date(),
    } as any).execute();
  });
  after(async () => {
    await t?.close();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('is on for new projects; the allowlist holds the project itself; maintainers only', async () => {
    assert.deepEqual((await t.get(scope(b), { token: maintainer.token })).body, { inbound_enabled: true, outbound_enabled: false });
    const list = await t.get(scope(b, '/allowlist'), { token: maintainer.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((p: any) => p.id), [b.id]);
    assert.equal(list.headers['x-total'], '1');
    assert.deepEqual((await t.get(scope(b, '/groups_allowlist'), { token: maintainer.token })).body, []);
    for (const [method, url, body] of [
      ['GET', scope(b), undefined],
      ['PATCH', scope(b), { enabled: false }],
      ['GET', scope(b, '/allowlist'), undefined],
      ['POST', scope(b, '/allowlist'), { target_project_id: a.id }],
      ['DELETE', scope(b, `/allowlist/${a.id}`), undefined],
      ['POST', scope(b, '/groups_allowlist'), { target_group_id: groupA.id }],
    ] as const) {
      const res = await t.call(method, url, { token: developer.token, body });
      assert.equal(res.status, 403, `${method} ${url}`);
    }
  });

  it("refuses another project's job token (git and API) until that project is allowlisted", async () => {
    // Its own project: always.
    assert.equal((await ls(a, jobToken)).code, 0);
    assert.equal(await reachesB(), false);

    const added = await t.post(scope(b, '/allowlist'), { target_project_id: a.id }, { token: maintainer.token });
    // The maintainer of b cannot see a: an allowlist entry takes seeing the project.
    assert.equal(added.status, 404);
    const byRoot = await t.post(scope(b, '/allowlist'), { target_project_id: a.id });
    assert.equal(byRoot.status, 201);
    assert.deepEqual(byRoot.body, { source_project_id: b.id, target_project_id: a.id });
    assert.deepEqual((await t.post(scope(b, '/allowlist'), { target_project_id: a.id })).body, { message: '400 Bad request - Target project is already in the job token scope' });
    assert.deepEqual((await t.get(scope(b, '/allowlist'))).body.map((p: any) => p.id), [b.id, a.id]);
    assert.equal(await reachesB(), true);

    assert.equal((await t.delete(scope(b, `/allowlist/${a.id}`))).status, 204);
    assert.equal((await t.delete(scope(b, `/allowlist/${a.id}`))).status, 400);
    assert.equal(await reachesB(), false);
  });

  it('admits the projects of an allowlisted group, and everyone when the scope is off', async () => {
    const added = await t.post(scope(b, '/groups_allowlist'), { target_group_id: groupA.id });
    assert.equal(added.status, 201);
    assert.deepEqual(added.body, { source_project_id: b.id, target_group_id: groupA.id });
    const groups = await t.get(scope(b, '/groups_allowlist'));
    assert.deepEqual(groups.body, [{ id: groupA.id, name: groupA.name, web_url: `${t.config.externalUrl}/groups/${groupA.full_path}` }]);
    assert.equal(await reachesB(), true);
    assert.equal((await t.delete(scope(b, `/groups_allowlist/${groupA.id}`))).status, 204);
    assert.equal(await reachesB(), false);

    assert.equal((await t.call('PATCH', scope(b), { token: maintainer.token, body: { enabled: false } })).status, 204);
    assert.deepEqual((await t.get(scope(b))).body, { inbound_enabled: false, outbound_enabled: false });
    assert.equal(await reachesB(), true);
    assert.equal((await t.call('PATCH', scope(b), { token: maintainer.token, body: { enabled: true } })).status, 204);
    assert.equal(await reachesB(), false);
    assert.equal((await t.call('PATCH', scope(b), { token: maintainer.token, body: {} })).status, 400);
  });
});
