import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { tokenDigest } from '../../src/lib/secrets.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';

const CI = `triggered:
  script: [echo "$TRIG_VAR"]
  rules:
    - if: $CI_PIPELINE_SOURCE == "trigger" || $CI_PIPELINE_SOURCE == "pipeline"
pushed:
  script: [echo push]
  rules:
    - if: $CI_PIPELINE_SOURCE == "push"
`;

describe('pipeline trigger tokens API', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project;
  let other: Project;
  let base: string;
  let developer: TestUser, maintainer: TestUser, maintainer2: TestUser, outsider: TestUser;
  let runner: ProtocolRunner;

  before(async () => {
    t = await createTestContext({ defaultBranchProtection: 0 });
    group = await t.createGroup();
    project = await t.createProject({ group });
    other = await t.createProject({ group });
    base = `/api/v4/projects/${project.id}/triggers`;
    [developer, maintainer, maintainer2, outsider] = await Promise.all(Array.from({ length: 4 }, () => t.createUser()));
    for (const p of [project, other]) {
      await t.addMember(p, developer.user, 30);
      await t.addMember(p, maintainer.user, 40);
      await t.addMember(p, maintainer2.user, 40);
      await commitFiles(t, p, { '.gitlab-ci.yml': CI });
    }
    runner = await ProtocolRunner.register(t);
  });
  after(async () => {
    await t?.close();
  });

  /** Takes jobs until the one of `pipelineId` comes (finishing the others). */
  async function takeJobOf(pipelineId: number) {
    for (let i = 0; i < 20; i++) {
      const job = await runner.takeJob();
      if (!job) break;
      if (job.payload.variables.some((v: any) => v.key === 'CI_PIPELINE_ID' && v.value === String(pipelineId))) return job;
      await runner.finish(job);
    }
    throw new Error(`no job of pipeline ${pipelineId}`);
  }

  const variablesOf = (job: { payload: any }) => Object.fromEntries(job.payload.variables.map((v: any) => [v.key, v]));

  it('creates trigger tokens: shown in full to their owner only, stored as a digest', async () => {
    const made = await t.post(base, { description: 'deploy' }, { token: maintainer.token });
    assert.equal(made.status, 201);
    const token: string = made.body.token;
    assert.match(token, /^glptt-[0-9a-f]{40}$/);
    assert.equal(made.body.description, 'deploy');
    assert.equal(made.body.last_used, null);
    assert.equal(made.body.owner.username, maintainer.user.username);
    const row = await t.db.selectFrom('ci_triggers').selectAll().where('id', '=', made.body.id).executeTakeFirstOrThrow();
    assert.equal(row.token_digest, tokenDigest(token));
    assert.ok(!row.token_encrypted.includes(token) && !row.token_encrypted.includes(token.slice(6)), 'the token is not stored as it is');

    assert.equal((await t.get(`${base}/${made.body.id}`, { token: maintainer.token })).body.token, token);
    // Others see the first four characters after the prefix (GitLab's short_token).
    assert.equal((await t.get(`${base}/${made.body.id}`, { token: maintainer2.token })).body.token, token.slice(6, 10));
    const list = await t.get(base, { token: maintainer2.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((x: any) => x.token), [token.slice(6, 10)]);
    assert.equal((await t.get(base, { token: developer.token })).status, 403);
    assert.equal((await t.post(base, { description: 'x' }, { token: developer.token })).status, 403);
    assert.equal((await t.get(base, { token: outsider.token })).status, 404);
    assert.equal((await t.get(base, { token: null })).status, 401);
    assert.equal((await t.post(base, {}, { token: maintainer.token })).status, 400);
    assert.equal((await t.get(`${base}/999999`, { token: maintainer.token })).status, 404);
  });

  it('lets its owner (and administrators) edit a token, maintainers delete it', async () => {
    const made = (await t.post(base, { description: 'edit me' }, { token: maintainer.token })).body;
    const refused = await t.put(`${base}/${made.id}`, { description: 'mine now' }, { token: maintainer2.token });
    assert.equal(refused.status, 403);
    assert.deepEqual(refused.body, { message: '403 Forbidden - The current user is not authorized to manage the pipeline trigger token' });
    const edited = await t.put(`${base}/${made.id}`, { description: 'edited' }, { token: maintainer.token });
    assert.equal(edited.status, 200);
    assert.equal(edited.body.description, 'edited');
    assert.equal((await t.put(`${base}/${made.id}`, { description: 'by root' })).status, 200);
    assert.equal((await t.delete(`${base}/${made.id}`, { token: developer.token })).status, 403);
    assert.equal((await t.delete(`${base}/${made.id}`, { token: maintainer2.token })).status, 204);
    assert.equal((await t.get(`${base}/${made.id}`, { token: maintainer.token })).status, 404);
  });

  it('starts a pipeline with a trigger token: source trigger, as its owner, with the variables given', async () => {
    const { token, id } = (await t.post(base, { description: 'ci' }, { token: maintainer.token })).body;
    const res = await t.post(`/api/v4/projects/${project.id}/trigger/pipeline`, { token, ref: 'main', variables: { TRIG_VAR: 'triggered!' } }, { token: null });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.source, 'trigger');
    assert.equal(res.body.ref, 'main');
    assert.equal(res.body.user.username, maintainer.user.username);
    const p = await t.db.selectFrom('ci_pipelines').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
    assert.equal(p.trigger_id, id);
    const vars = await t.get(`/api/v4/projects/${project.id}/pipelines/${p.id}/variables`, { token: maintainer.token });
    const byKey = Object.fromEntries(vars.body.map((v: any) => [v.key, v]));
    assert.equal(byKey.TRIG_VAR.value, 'triggered!');
    assert.equal(byKey.TRIGGER_PAYLOAD.variable_type, 'file');
    assert.deepEqual(JSON.parse(byKey.TRIGGER_PAYLOAD.value), { ref: 'main', id: String(project.id), variables: { TRIG_VAR: 'triggered!' } });
    assert.ok((await t.get(`${base}/${id}`, { token: maintainer.token })).body.last_used);

    const job = await takeJobOf(p.id);
    assert.equal(job.payload.job_info.name, 'triggered');
    const jv = variablesOf(job);
    assert.equal(jv.CI_PIPELINE_SOURCE.value, 'trigger');
    assert.equal(jv.TRIG_VAR.value, 'triggered!');
    assert.equal(jv.TRIGGER_PAYLOAD.file, true);
    assert.equal(jv.GITLAB_USER_LOGIN.value, maintainer.user.username);
    await runner.finish(job);
  });

  it('takes the forms GitLab documents: form fields, multipart, the ref in the path and the token in the query', async () => {
    const { token } = (await t.post(base, { description: 'forms' }, { token: maintainer.token })).body;
    const url = `/api/v4/projects/${project.id}/trigger/pipeline`;
    const form = await t.call('POST', url, { token: null, form: `token=${token}&ref=main&variables%5BTRIG_VAR%5D=from+a+form` });
    assert.equal(form.status, 201, JSON.stringify(form.body));
    const boundary = 'b0undary';
    const fields = { token, ref: 'main', 'variables[TRIG_VAR]': 'multipart' };
    const payload = Object.entries(fields).map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('') + `--${boundary}--\r\n`;
    const multipart = await t.app.inject({ method: 'POST', url, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, payload });
    assert.equal(multipart.statusCode, 201, multipart.body);
    const byPath = await t.call('POST', `/api/v4/projects/${encodeURIComponent(`${group.path}/${project.path}`)}/ref/main/trigger/pipeline`, { token: null, query: { token } });
    assert.equal(byPath.status, 201, JSON.stringify(byPath.body));
    assert.equal(byPath.body.ref, 'main');
    for (const [res, expected] of [[form.body.id, 'from a form'], [JSON.parse(multipart.body).id, 'multipart']] as const) {
      const vars = await t.get(`/api/v4/projects/${project.id}/pipelines/${res}/variables`, { token: maintainer.token });
      assert.equal(vars.body.find((v: any) => v.key === 'TRIG_VAR').value, expected);
    }
  });

  it('refuses bad tokens, refs and variables as GitLab does', async () => {
    const { token } = (await t.post(base, { description: 'refusals' }, { token: maintainer.token })).body;
    const url = `/api/v4/projects/${project.id}/trigger/pipeline`;
    const call = (body: Record<string, unknown>, headers: Record<string, string> = {}) => t.post(url, body, { token: null, headers });
    assert.deepEqual((await call({ token: 'glptt-0000000000000000000000000000000000000000', ref: 'main' })).body, { message: '404 Not found' });
    assert.equal((await call({ token: '', ref: 'main' })).status, 404);
    // Another project's token does not start this one's pipelines, nor tell that it exists.
    const otherToken = (await t.post(`/api/v4/projects/${other.id}/triggers`, { description: 'other' }, { token: maintainer.token })).body.token;
    assert.equal((await call({ token: otherToken, ref: 'main' })).status, 404);
    assert.equal((await t.post('/api/v4/projects/999999/trigger/pipeline', { token, ref: 'main' }, { token: null })).status, 404);
    assert.deepEqual((await call({ token, ref: 'nope' })).body, { message: { base: ['Reference not found'] } });
    assert.equal((await call({ token })).status, 400);
    assert.deepEqual((await call({ token, ref: 'main', variables: { N: 1 } })).body, { message: 'variables needs to be a map of key-valued strings' });
    assert.deepEqual((await call({ token, ref: 'main', variables: ['x'] })).body, { message: 'variables needs to be a map of key-valued strings' });
    assert.equal((await call({ token, ref: 'main', variables: { 'bad-key': 'x' } })).status, 400);
    assert.equal((await call({ token, ref: 'main' }, { 'x-gitlab-event': 'Pipeline Hook' })).status, 403);
    // An owner who may no longer run pipelines: the pipeline is refused.
    const leaver = await t.createUser();
    await t.addMember(project, leaver.user, 40);
    const leaverToken = (await t.post(base, { description: 'leaver' }, { token: leaver.token })).body.token;
    await t.db.deleteFrom('members').where('user_id', '=', leaver.user.id).execute();
    assert.deepEqual((await call({ token: leaverToken, ref: 'main' })).body, { message: { base: ['Insufficient permissions to create a new pipeline'] } });
  });

  it('takes a running job\'s CI_JOB_TOKEN: a pipeline of source pipeline, as the job\'s user', async () => {
    const { token } = (await t.post(base, { description: 'upstream' }, { token: developer.token })).body ?? {};
    assert.equal(token, undefined, 'developers may not create trigger tokens');
    const maintainerToken = (await t.post(base, { description: 'upstream' }, { token: maintainer.token })).body.token;
    const upstream = (await t.post(`/api/v4/projects/${project.id}/trigger/pipeline`, { token: maintainerToken, ref: 'main' }, { token: null })).body;
    const job = await takeJobOf(upstream.id);
    const url = `/api/v4/projects/${other.id}/trigger/pipeline`;
    // The other project admits this project's job tokens only from its allowlist.
    await t.db.updateTable('projects').set({ ci_inbound_job_token_scope_enabled: true }).where('id', '=', other.id).execute();
    assert.equal((await t.post(url, { token: job.token, ref: 'main' }, { token: null })).status, 404);
    assert.equal((await t.post(`/api/v4/projects/${other.id}/job_token_scope/allowlist`, { target_project_id: project.id })).status, 201);
    const res = await t.post(url, { token: job.token, ref: 'main', variables: { TRIG_VAR: 'downstream' } }, { token: null });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.source, 'pipeline');
    assert.equal(res.body.user.username, maintainer.user.username);
    const p = await t.db.selectFrom('ci_pipelines').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
    assert.equal(p.source_job_id, job.id);
    await runner.finish(job);
    // A finished job's token is no credential.
    assert.equal((await t.post(url, { token: job.token, ref: 'main' }, { token: null })).status, 404);
  });
});
