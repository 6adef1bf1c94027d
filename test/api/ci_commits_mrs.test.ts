import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { Readable } from 'node:stream';
import { drainJobs } from '../../src/jobs/queue.js';
import { artifactStore } from '../../src/storage/index.js';
import { CommitDetailSchema } from '../../src/presenters/schemas/commits.js';
import { MergeRequestSingleSchema } from '../../src/presenters/schemas/merge_requests.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertOne } from '../helpers/contract.js';
import { commitFiles, jobsByName, latestPipeline, pipeline, pipelinesOf, runJob, testRunner } from '../helpers/ci.js';
import { assignBuild } from '../../src/ci/jobs/state.js';
import { buildJobPayload } from '../../src/ci/protocol/payload.js';

const YAML = `
stages: [build, test]
build: { stage: build, script: [make] }
test: { stage: test, script: [t] }
`;

describe('CI in the commits and merge requests APIs', () => {
  let t: TestContext;
  let project: Project;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, outsider: TestUser;
  const api = (p: Project, rest: string) => `/api/v4/projects/${p.id}${rest}`;

  before(async () => {
    // Developers run pipelines on main here: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    project = await t.createProject({ visibility: 20 });
    [guest, reporter, developer, maintainer, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await commitFiles(t, project, { 'README.md': 'hi\n' });
    await commitFiles(t, project, { '.gitlab-ci.yml': YAML });
  });
  after(async () => {
    await t?.close();
  });

  it('single commit: status and last_pipeline from the latest pipeline of the sha', async () => {
    const p = await latestPipeline(t, project.id);
    const res = await t.get(api(project, `/repository/commits/${p.sha}`), { token: reporter.token });
    assertOne(CommitDetailSchema, res, 'GET commit');
    assert.equal(res.body.status, p.status);
    assert.deepEqual(Object.keys(res.body.last_pipeline).sort(), ['created_at', 'id', 'iid', 'project_id', 'ref', 'sha', 'source', 'status', 'updated_at', 'web_url']);
    assert.equal(res.body.last_pipeline.id, p.id);
    assert.equal(res.body.last_pipeline.sha, p.sha);
    assert.equal(res.body.last_pipeline.ref, 'main');
    assert.equal(res.body.last_pipeline.source, 'push');
    assert.match(res.body.last_pipeline.web_url, new RegExp(`/-/pipelines/${p.id}$`));
    // By branch name too; a second pipeline on the same sha wins.
    const again = await t.post(api(project, '/pipeline'), { ref: 'main' }, { token: developer.token });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    const byRef = await t.get(api(project, '/repository/commits/main'), { token: null });
    assert.equal(byRef.body.last_pipeline.id, again.body.id);
    assert.equal(byRef.body.last_pipeline.source, 'api');
    // A commit without pipelines.
    const first = (await t.get(api(project, '/repository/commits'), { query: { ref_name: 'main' } })).body.at(-1);
    const none = await t.get(api(project, `/repository/commits/${first.id}`));
    assert.equal(none.status, 200);
    assert.equal(none.body.status, null);
    assert.equal(none.body.last_pipeline, null);
    // The list has no pipeline fields.
    const list = await t.get(api(project, '/repository/commits'));
    assert.ok(!('last_pipeline' in list.body[0]) && !('status' in list.body[0]));
  });

  it('single commit: no pipeline for callers who may not read pipelines (public_jobs off)', async () => {
    const other = await t.createProject({ visibility: 20 });
    await t.addMember(other, guest.user, 10);
    await t.addMember(other, reporter.user, 20);
    await commitFiles(t, other, { '.gitlab-ci.yml': 'job: { script: [x] }\n' });
    const upd = await t.put(api(other, ''), { public_jobs: false });
    assert.equal(upd.status, 200, JSON.stringify(upd.body));
    for (const token of [null, outsider.token, guest.token]) {
      const res = await t.get(api(other, '/repository/commits/main'), { token });
      assert.equal(res.status, 200);
      assert.equal(res.body.last_pipeline, null);
      assert.equal(res.body.status, null);
    }
    const seen = await t.get(api(other, '/repository/commits/main'), { token: reporter.token });
    assert.equal(seen.body.last_pipeline.status, 'pending');
  });

  it('merge request: pipeline and head_pipeline, set at creation from the branch pipeline; MR pipelines list', async () => {
    const sha = await commitFiles(t, project, { 'a.txt': 'a\n' }, { branch: 'feat-a', startBranch: 'main' });
    const branchPipeline = await latestPipeline(t, project.id);
    assert.equal(branchPipeline.sha, sha);
    const created = await t.post(api(project, '/merge_requests'), { source_branch: 'feat-a', target_branch: 'main', title: 'A' }, { token: developer.token });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assertOne(MergeRequestSingleSchema, created, 'POST merge request');
    assert.equal(created.body.pipeline.id, branchPipeline.id);
    assert.equal(created.body.head_pipeline.id, branchPipeline.id);
    assert.equal(created.body.head_pipeline.detailed_status.group, branchPipeline.status);
    assert.equal(created.body.head_pipeline.coverage, null);
    assert.ok(!('detailed_status' in created.body.pipeline));
    const iid = created.body.iid;
    const read = await t.get(api(project, `/merge_requests/${iid}`), { token: reporter.token });
    assertOne(MergeRequestSingleSchema, read, 'GET merge request');
    assert.equal(read.body.head_pipeline.id, branchPipeline.id);

    // A push moves the head pipeline.
    const sha2 = await commitFiles(t, project, { 'a.txt': 'a2\n' }, { branch: 'feat-a' });
    const p2 = await latestPipeline(t, project.id);
    assert.equal(p2.sha, sha2);
    const read2 = await t.get(api(project, `/merge_requests/${iid}`), { token: reporter.token });
    assert.equal(read2.body.head_pipeline.id, p2.id);
    assert.equal(read2.body.pipeline.sha, sha2);

    // The merge request's pipelines, newest first.
    const list = await t.get(api(project, `/merge_requests/${iid}/pipelines`), { token: reporter.token });
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual(list.body.map((p: any) => p.id), [p2.id, branchPipeline.id]);
    assert.equal(list.headers['x-total'], '2');
    assert.equal((await t.get(api(project, `/merge_requests/${iid}/pipelines`), { token: outsider.token })).status, 200);
    assert.equal((await t.get(api(project, `/merge_requests/${iid}/pipelines`), { token: null })).status, 401);
    assert.equal((await t.get(api(project, `/merge_requests/9999/pipelines`), { token: reporter.token })).status, 404);

    // A merge request pipeline: jobs need rules for merge_request_event.
    assert.equal((await t.post(api(project, `/merge_requests/${iid}/pipelines`), {}, { token: reporter.token })).status, 403);
    assert.equal((await t.post(api(project, `/merge_requests/${iid}/pipelines`), {}, { token: outsider.token })).status, 403);
    const noJobs = await t.post(api(project, `/merge_requests/${iid}/pipelines`), {}, { token: developer.token });
    assert.equal(noJobs.status, 400, JSON.stringify(noJobs.body));
    await commitFiles(t, project, {
      '.gitlab-ci.yml': [
        `mr: { script: [x], rules: [{ if: '$CI_PIPELINE_SOURCE == "merge_request_event"' }] }`,
        `mr_vars: { script: [x], rules: [{ if: '$CI_MERGE_REQUEST_SOURCE_BRANCH_NAME == "feat-a" && $CI_MERGE_REQUEST_TARGET_BRANCH_NAME == "main" && $CI_COMMIT_REF_NAME == "feat-a"' }] }`,
        `on_branch: { script: [x], rules: [{ if: '$CI_COMMIT_BRANCH' }] }`,
        `branch: { script: [y] }`,
      ].join('\n') + '\n',
    }, { branch: 'feat-a' });
    const mrPipeline = await t.post(api(project, `/merge_requests/${iid}/pipelines`), {}, { token: developer.token });
    assert.equal(mrPipeline.status, 201, JSON.stringify(mrPipeline.body));
    assert.equal(mrPipeline.body.source, 'merge_request_event');
    assert.equal(mrPipeline.body.ref, `refs/merge-requests/${iid}/head`);
    assert.deepEqual(Object.keys(await jobsByName(t, mrPipeline.body.id)), ['mr', 'mr_vars']);
    // What a runner gets: the merge request's variables, no CI_COMMIT_BRANCH, a refspec for the merge request ref.
    const runnerId = await testRunner(t);
    const mrJob = (await jobsByName(t, mrPipeline.body.id)).mr;
    const taken = await t.db.transaction().execute((trx) => assignBuild(trx, mrJob.id, runnerId));
    assert.ok(taken);
    const runner = await t.db.selectFrom('ci_runners').selectAll().where('id', '=', runnerId).executeTakeFirstOrThrow();
    const payload = await buildJobPayload(t.app.cairn, taken.build, taken.token, runner);
    const vars = Object.fromEntries(payload.variables.map((v: { key: string; value: string }) => [v.key, v.value]));
    assert.equal(vars.CI_MERGE_REQUEST_IID, String(iid));
    assert.equal(vars.CI_MERGE_REQUEST_SOURCE_BRANCH_NAME, 'feat-a');
    assert.equal(vars.CI_COMMIT_REF_NAME, 'feat-a');
    assert.equal(vars.CI_PIPELINE_SOURCE, 'merge_request_event');
    assert.equal(vars.CI_COMMIT_BRANCH, undefined);
    assert.deepEqual(payload.git_info.refspecs, [`+refs/merge-requests/${iid}/head:refs/merge-requests/${iid}/head`]);
    const read3 = await t.get(api(project, `/merge_requests/${iid}`), { token: reporter.token });
    assert.equal(read3.body.head_pipeline.id, mrPipeline.body.id);
    const list2 = await t.get(api(project, `/merge_requests/${iid}/pipelines`), { token: reporter.token });
    assert.equal(list2.body[0].id, mrPipeline.body.id);
  });

  it('merge when pipeline succeeds: merges once the head pipeline passes', async () => {
    await commitFiles(t, project, { 'b.txt': 'b\n' }, { branch: 'feat-b', startBranch: 'main' });
    const mr = (await t.post(api(project, '/merge_requests'), { source_branch: 'feat-b', target_branch: 'main', title: 'B' }, { token: developer.token })).body;
    const p = await latestPipeline(t, project.id);
    assert.equal(mr.head_pipeline.id, p.id);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'running');
    const res = await t.put(api(project, `/merge_requests/${mr.iid}/merge`), { merge_when_pipeline_succeeds: true, should_remove_source_branch: true }, { token: developer.token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.state, 'opened');
    assert.equal(res.body.merge_when_pipeline_succeeds, true);
    assert.equal(res.body.head_pipeline.status, 'running');
    const test = (await jobsByName(t, p.id)).test;
    await runJob(t, test, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'success');
    const after = await t.get(api(project, `/merge_requests/${mr.iid}`), { token: developer.token });
    assert.equal(after.body.state, 'merged');
    assert.equal(after.body.merged_by.id, developer.user.id);
    const branch = await t.get(api(project, '/repository/branches/feat-b'));
    assert.equal(branch.status, 404, 'source branch removed as asked');
  });

  it('merge when pipeline succeeds: a failing pipeline drops the flag with a system note', async () => {
    await commitFiles(t, project, { 'c.txt': 'c\n' }, { branch: 'feat-c', startBranch: 'main' });
    const mr = (await t.post(api(project, '/merge_requests'), { source_branch: 'feat-c', target_branch: 'main', title: 'C' }, { token: developer.token })).body;
    const p = await latestPipeline(t, project.id);
    const res = await t.put(api(project, `/merge_requests/${mr.iid}/merge`), { merge_when_pipeline_succeeds: true }, { token: developer.token });
    assert.equal(res.body.merge_when_pipeline_succeeds, true);
    await runJob(t, (await jobsByName(t, p.id)).build, 'failed');
    assert.equal((await pipeline(t, p.id)).status, 'failed');
    const after = await t.get(api(project, `/merge_requests/${mr.iid}`), { token: developer.token });
    assert.equal(after.body.state, 'opened');
    assert.equal(after.body.merge_when_pipeline_succeeds, false);
    assert.equal(after.body.head_pipeline.status, 'failed');
    const notes = await t.get(api(project, `/merge_requests/${mr.iid}/notes`), { token: developer.token });
    assert.ok(notes.body.some((n: any) => n.system && /aborted the automatic merge because the pipeline failed/.test(n.body)), JSON.stringify(notes.body));
    // With the pipeline finished, merge_when_pipeline_succeeds merges now.
    const now = await t.put(api(project, `/merge_requests/${mr.iid}/merge`), { merge_when_pipeline_succeeds: true }, { token: developer.token });
    assert.equal(now.status, 200, JSON.stringify(now.body));
    assert.equal(now.body.state, 'merged');
  });

  it('multi-project trigger: a bridge creates a pipeline in the other project', async () => {
    const downstream = await t.createProject({ visibility: 0 });
    await t.addMember(downstream, developer.user, 30);
    await commitFiles(t, downstream, { '.gitlab-ci.yml': 'down: { script: [x] }\n' });
    const before = (await pipelinesOf(t, downstream.id)).length;
    const up = await t.createProject({ visibility: 0 });
    await t.addMember(up, developer.user, 30);
    const path = (await t.get(api(downstream, ''))).body.path_with_namespace;
    await commitFiles(t, up, { '.gitlab-ci.yml': `bridge: { trigger: { project: ${path}, strategy: depend } }\n` }, { token: developer.token });
    const upPipeline = await latestPipeline(t, up.id);
    await drainJobs(t.app.cairn);
    const downs = await pipelinesOf(t, downstream.id);
    assert.equal(downs.length, before + 1, 'a downstream pipeline');
    const down = downs[0];
    assert.equal(down.source, 'pipeline');
    const bridge = (await jobsByName(t, upPipeline.id)).bridge;
    assert.equal(bridge.downstream_pipeline_id, down.id);
    await runJob(t, (await jobsByName(t, down.id)).down, 'success');
    await drainJobs(t.app.cairn);
    assert.equal((await pipeline(t, down.id)).status, 'success');
    assert.equal((await pipeline(t, upPipeline.id)).status, 'success');
    const bridges = await t.get(api(up, `/pipelines/${upPipeline.id}/bridges`), { token: developer.token });
    assert.equal(bridges.body[0].downstream_pipeline.id, down.id);
  });

  it('runners_token: shown to maintainers, registers a project runner; reset_registration_token for projects and groups', async () => {
    const p = await t.createProject({ visibility: 20 });
    await t.addMember(p, developer.user, 30);
    await t.addMember(p, maintainer.user, 40);
    const shown = (await t.get(api(p, ''), { token: maintainer.token })).body.runners_token;
    assert.match(shown, /^GR1348941/);
    assert.ok(!('runners_token' in (await t.get(api(p, ''), { token: developer.token })).body));
    assert.ok(!('runners_token' in (await t.get(api(p, ''), { token: null })).body));
    const register = (token: string) => t.post('/api/v4/runners', { token, description: 'r', info: { name: 'gitlab-runner' } }, { token: null });
    const reg = await register(shown);
    assert.equal(reg.status, 201, JSON.stringify(reg.body));
    const runner = await t.db.selectFrom('ci_runners').selectAll().where('id', '=', reg.body.id).executeTakeFirstOrThrow();
    assert.equal(runner.runner_type, 'project_type');
    assert.ok(await t.db.selectFrom('ci_runner_projects').select('id').where('runner_id', '=', runner.id).where('project_id', '=', p.id).executeTakeFirst());

    const path = api(p, '/runners/reset_registration_token');
    assert.equal((await t.post(path, {}, { token: developer.token })).status, 403);
    assert.equal((await t.post(path, {}, { token: null })).status, 401);
    assert.equal((await t.post(path, {}, { token: outsider.token })).status, 403);
    const reset = await t.post(path, {}, { token: maintainer.token });
    assert.equal(reset.status, 201, JSON.stringify(reset.body));
    assert.deepEqual(Object.keys(reset.body).sort(), ['token', 'token_expires_at']);
    assert.notEqual(reset.body.token, shown);
    assert.equal((await t.get(api(p, ''), { token: maintainer.token })).body.runners_token, reset.body.token);
    assert.equal((await register(shown)).status, 403, 'the old token is gone');
    assert.equal((await register(reset.body.token)).status, 201);

    const group = await t.createGroup({ visibility: 20 });
    await t.addMember(group, maintainer.user, 40);
    await t.addMember(group, developer.user, 50);
    const gpath = `/api/v4/groups/${group.id}/runners/reset_registration_token`;
    assert.equal((await t.post(gpath, {}, { token: maintainer.token })).status, 403);
    const greset = await t.post(gpath, {}, { token: developer.token });
    assert.equal(greset.status, 201, JSON.stringify(greset.body));
    assert.equal((await t.get(`/api/v4/groups/${group.id}`, { token: developer.token })).body.runners_token, greset.body.token);
    const greg = await register(greset.body.token);
    assert.equal(greg.status, 201);
    assert.equal((await t.db.selectFrom('ci_runners').select('runner_type').where('id', '=', greg.body.id).executeTakeFirstOrThrow()).runner_type, 'group_type');
    assert.equal((await t.post('/api/v4/groups/999999/runners/reset_registration_token', {}, { token: developer.token })).status, 404);
  });

  it('erase and pipeline delete remove the artifact files from the store', async () => {
    const p = await t.createProject({ visibility: 0 });
    await t.addMember(p, developer.user, 30);
    await t.addMember(p, maintainer.user, 40);
    await commitFiles(t, p, { '.gitlab-ci.yml': 'one: { script: [x] }\ntwo: { script: [y] }\n' });
    const pl = await latestPipeline(t, p.id);
    const jobs = await jobsByName(t, pl.id);
    await runJob(t, jobs.one, 'success');
    await runJob(t, jobs.two, 'success');
    const store = artifactStore(t.app.cairn.config);
    const keys: Record<string, string> = {};
    for (const name of ['one', 'two']) {
      const key = `test/${p.id}/${jobs[name].id}/artifacts.zip`;
      await store.put(key, Readable.from([Buffer.from(`zip of ${name}`)]));
      await t.db.insertInto('ci_job_artifacts').values({
        job_id: jobs[name].id, project_id: p.id, file_type: 'archive', file_format: 'zip', file_name: 'artifacts.zip', size: 10, file_sha256: null, store_key: key, created_at: new Date(),
      } as any).execute();
      keys[name] = key;
    }
    assert.equal(await store.size(keys.one), 10);
    const erase = await t.post(api(p, `/jobs/${jobs.one.id}/erase`), {}, { token: maintainer.token });
    assert.equal(erase.status, 201, JSON.stringify(erase.body));
    assert.equal(await store.size(keys.one), null, 'erased job: file gone');
    assert.equal(await store.size(keys.two), 10);
    assert.equal((await t.delete(api(p, `/pipelines/${pl.id}`), { token: maintainer.token })).status, 403);
    const del = await t.delete(api(p, `/pipelines/${pl.id}`));
    assert.equal(del.status, 204);
    assert.equal(await store.size(keys.two), null, 'deleted pipeline: file gone');
    assert.equal((await t.db.selectFrom('ci_job_artifacts').select('id').where('project_id', '=', p.id).execute()).length, 0);
  });

  it('commit statuses: external statuses make an external pipeline; listing; transitions; permissions', async () => {
    const p = await t.createProject({ visibility: 20 });
    await t.addMember(p, reporter.user, 20);
    await t.addMember(p, developer.user, 30);
    const sha = await commitFiles(t, p, { 'x.txt': 'x\n' });
    const post = (body: Record<string, unknown>, token: string | null = developer.token, s = sha) => t.post(api(p, `/statuses/${s}`), body, { token });
    assert.equal((await post({ state: 'pending' }, reporter.token)).status, 403);
    assert.equal((await post({ state: 'pending' }, null)).status, 401);
    assert.equal((await post({})).status, 400);
    assert.equal((await post({ state: 'bogus' })).status, 400);
    assert.equal((await post({ state: 'pending' }, developer.token, 'f'.repeat(40))).status, 404);
    assert.equal((await post({ state: 'pending', target_url: 'javascript:alert(1)' })).status, 400);

    const pending = await post({ state: 'pending', name: 'jenkins', target_url: 'https://ci.example.com/1', description: 'queued' });
    assert.equal(pending.status, 201, JSON.stringify(pending.body));
    assert.equal(pending.body.status, 'pending');
    assert.equal(pending.body.name, 'jenkins');
    assert.equal(pending.body.ref, 'main');
    assert.equal(pending.body.sha, sha);
    assert.equal(pending.body.target_url, 'https://ci.example.com/1');
    assert.equal(pending.body.author.id, developer.user.id);
    const pl = await pipeline(t, pending.body.pipeline_id);
    assert.equal(pl.source, 'external');
    assert.equal(pl.status, 'pending');
    assert.equal((await t.db.selectFrom('ci_pending_builds').select('build_id').where('build_id', '=', pending.body.id).execute()).length, 0, 'never queued for runners');

    const again = await post({ state: 'pending', name: 'jenkins' });
    assert.equal(again.status, 400);
    assert.match(again.body.message, /Cannot transition status via :enqueue from :pending/);
    const running = await post({ state: 'running', name: 'jenkins' });
    assert.equal(running.body.id, pending.body.id, 'the same status moves on');
    assert.ok(running.body.started_at);
    assert.equal((await pipeline(t, pl.id)).status, 'running');
    const ok = await post({ state: 'success', context: 'jenkins', coverage: 87.5 });
    assert.equal(ok.body.id, pending.body.id);
    assert.equal(ok.body.status, 'success');
    assert.equal(ok.body.coverage, 87.5);
    assert.equal((await pipeline(t, pl.id)).status, 'success');
    // A finished status is not reused: a new one supersedes it.
    const fail = await post({ state: 'failed', name: 'jenkins' });
    assert.notEqual(fail.body.id, pending.body.id);
    assert.equal(fail.body.pipeline_id, pl.id);
    assert.equal((await pipeline(t, pl.id)).status, 'failed');
    await post({ state: 'success' });

    const list = await t.get(api(p, `/repository/commits/${sha}/statuses`), { token: null });
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual(list.body.map((s: any) => [s.name, s.status]), [['jenkins', 'failed'], ['default', 'success']]);
    const all = await t.get(api(p, `/repository/commits/${sha}/statuses`), { query: { all: true } });
    assert.equal(all.body.length, 3);
    assert.equal((await t.get(api(p, `/repository/commits/${sha}/statuses`), { query: { name: 'default' } })).body.length, 1);
    assert.equal((await t.get(api(p, `/repository/commits/${sha}/statuses`), { query: { ref: 'other' } })).body.length, 0);
    assert.equal((await t.get(api(p, `/repository/commits/${sha}/statuses`), { query: { order_by: 'name' } })).status, 400);
    const desc = await t.get(api(p, `/repository/commits/${sha}/statuses`), { query: { sort: 'desc' } });
    assert.equal(desc.body[0].name, 'default');
    assert.equal((await t.get(api(p, `/repository/commits/${'f'.repeat(40)}/statuses`))).status, 404);
    // The commit shows the external pipeline.
    assert.equal((await t.get(api(p, `/repository/commits/${sha}`))).body.last_pipeline.id, pl.id);

    // With a CI pipeline for the commit, the status joins it (stage external) and the list shows its jobs too.
    await commitFiles(t, project, { 'y.txt': 'y\n' });
    const ci = await latestPipeline(t, project.id);
    const ext = await t.post(api(project, `/statuses/${ci.sha}`), { state: 'running', name: 'ext' }, { token: developer.token });
    assert.equal(ext.status, 201, JSON.stringify(ext.body));
    assert.equal(ext.body.pipeline_id, ci.id);
    const names = (await t.get(api(project, `/repository/commits/${ci.sha}/statuses`), { token: reporter.token })).body.map((s: any) => s.name);
    assert.deepEqual(names.sort(), ['build', 'ext', 'test']);
    assert.equal((await t.get(api(project, `/pipelines/${ci.id}/jobs`), { token: reporter.token })).body.some((j: any) => j.name === 'ext'), false, 'not a job');
  });

  it('a branch or a tag created through the API gets its pipeline, as a push does', async () => {
    const before = (await pipelinesOf(t, project.id)).length;
    assert.equal((await t.post(`/api/v4/projects/${project.id}/repository/branches`, { branch: 'from-api', ref: 'main' }, { token: developer.token })).status, 201);
    const onBranch = await latestPipeline(t, project.id);
    assert.equal(onBranch.ref, 'from-api');
    assert.equal(onBranch.tag, false);
    assert.equal(onBranch.source, 'push');
    assert.equal((await t.post(`/api/v4/projects/${project.id}/repository/tags`, { tag_name: 'v1.0.0', ref: 'main', message: 'annotated' }, { token: maintainer.token })).status, 201);
    const onTag = await latestPipeline(t, project.id);
    assert.equal(onTag.ref, 'v1.0.0');
    assert.equal(onTag.tag, true);
    assert.equal(onTag.sha, onBranch.sha, 'the commit the annotated tag points at');
    assert.equal((await pipelinesOf(t, project.id)).length, before + 2);
  });
});
