// Merge request pipelines as GitLab runs them: on opening and on each push to the source branch
// (source merge_request_event, on refs/merge-requests/:iid/head, when the configuration has jobs
// for it), the head pipeline, CI_OPEN_MERGE_REQUESTS for workflow rules against duplicates, the
// target branch's pipeline after a merge, and auto-merge waiting for the merge request pipeline.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createMergeRequestPipeline } from '../../src/ci/pipelines/merge_request_pipelines.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, pipeline, pipelinesOf, runJob } from '../helpers/ci.js';

const MR_ONLY = `
test:
  rules:
    - if: '$CI_PIPELINE_SOURCE == "merge_request_event"'
  script: [sleep 24h]
`;

// GitLab's documented pattern: merge request pipelines, and branch pipelines only for branches
// without an open merge request.
const NO_DUPLICATES = `
workflow:
  rules:
    - if: $CI_PIPELINE_SOURCE == "merge_request_event"
    - if: $CI_COMMIT_BRANCH && $CI_OPEN_MERGE_REQUESTS
      when: never
    - if: $CI_COMMIT_BRANCH
build:
  script: [make]
`;

describe('merge request pipelines', () => {
  let t: TestContext;
  let developer: TestUser;
  const api = (p: Project, rest: string) => `/api/v4/projects/${p.id}${rest}`;

  before(async () => {
    t = await createTestContext({ defaultBranchProtection: 0 });
    developer = await t.createUser();
  });
  after(async () => {
    await t?.close();
  });

  async function projectWith(ci: string, settings: Record<string, unknown> = {}) {
    const project = await t.createProject();
    await t.addMember(project, developer.user, 30);
    await commitFiles(t, project, { 'README.md': 'hi\n', '.gitlab-ci.yml': ci });
    if (Object.keys(settings).length) {
      const res = await t.put(api(project, ''), settings);
      assert.equal(res.status, 200, JSON.stringify(res.body));
    }
    return project;
  }

  async function openMergeRequest(project: Project, branch: string) {
    await commitFiles(t, project, { [`${branch}.txt`]: 'x\n' }, { branch, startBranch: 'main', token: developer.token });
    const res = await t.post(api(project, '/merge_requests'), { source_branch: branch, target_branch: 'main', title: branch }, { token: developer.token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  }

  it('runs one when the merge request is opened, on its head ref, as its head pipeline, with its variables', async () => {
    const project = await projectWith(MR_ONLY);
    const before = (await pipelinesOf(t, project.id)).length;
    const mr = await openMergeRequest(project, 'feature');
    const pipelines = await pipelinesOf(t, project.id);
    // The branch push made none (its only job is for merge requests); the merge request made one.
    assert.equal(pipelines.length, before + 1);
    const p = pipelines[0];
    assert.equal(p.source, 'merge_request_event');
    assert.equal(p.ref, `refs/merge-requests/${mr.iid}/head`);
    assert.equal(p.sha, mr.sha);
    assert.equal(p.merge_request_id, mr.id);
    assert.equal(p.user_id, developer.user.id);
    assert.equal(mr.head_pipeline?.id, p.id, 'the answer to the creation shows it');
    const read = await t.get(api(project, `/merge_requests/${mr.iid}`), { token: developer.token });
    assert.equal(read.body.head_pipeline.id, p.id);
    assert.equal(read.body.head_pipeline.source, 'merge_request_event');
    const listed = await t.get(api(project, `/merge_requests/${mr.iid}/pipelines`), { token: developer.token });
    assert.deepEqual(listed.body.map((x: { id: number }) => x.id), [p.id]);
    assert.deepEqual(Object.keys(await jobsByName(t, p.id)), ['test']);
  });

  it('runs a new one on each push to the source branch, and none twice for one head', async () => {
    const project = await projectWith(MR_ONLY + 'branch_job: { script: [x] }\n');
    const mr = await openMergeRequest(project, 'push-me');
    const first = (await pipelinesOf(t, project.id))[0];
    assert.equal(first.source, 'merge_request_event');
    const sha = await commitFiles(t, project, { 'more.txt': 'more\n' }, { branch: 'push-me', token: developer.token });
    const [mrPipeline, branchPipeline] = await pipelinesOf(t, project.id);
    // The branch pipeline first, then the merge request's: the newest at the head is the head pipeline.
    assert.equal(branchPipeline.source, 'push');
    assert.equal(branchPipeline.ref, 'push-me');
    assert.equal(branchPipeline.sha, sha);
    assert.deepEqual(Object.keys(await jobsByName(t, branchPipeline.id)), ['branch_job']);
    assert.equal(mrPipeline.source, 'merge_request_event');
    assert.equal(mrPipeline.sha, sha);
    const read = await t.get(api(project, `/merge_requests/${mr.iid}`), { token: developer.token });
    assert.equal(read.body.head_pipeline.id, mrPipeline.id);
    // Replayed (after a crash, or a push that did not move the head): nothing new.
    const count = (await pipelinesOf(t, project.id)).length;
    assert.equal(await createMergeRequestPipeline(t.app.cairn, { mergeRequestId: mr.id, sha, userId: developer.user.id }), null);
    // An old head is not the merge request's any more.
    assert.equal(await createMergeRequestPipeline(t.app.cairn, { mergeRequestId: mr.id, sha: mr.sha, userId: developer.user.id }), null);
    assert.equal((await pipelinesOf(t, project.id)).length, count);
    // A closed merge request gets none.
    await t.put(api(project, `/merge_requests/${mr.iid}`), { state_event: 'close' }, { token: developer.token });
    await commitFiles(t, project, { 'closed.txt': 'x\n' }, { branch: 'push-me', token: developer.token });
    assert.equal((await pipelinesOf(t, project.id))[0].source, 'push');
  });

  it('from a fork: runs in the fork, on the source branch, on opening and on each push; the target runs none', async () => {
    const upstream = await projectWith(MR_ONLY);
    const forked = await t.post(api(upstream, '/fork'), { path: `fork-${upstream.path}`, name: `fork-${upstream.path}` }, { token: developer.token });
    assert.equal(forked.status, 201, JSON.stringify(forked.body));
    const fork = forked.body as Project;
    const upstreamBefore = (await pipelinesOf(t, upstream.id)).length;
    await commitFiles(t, fork.id, { 'forked.txt': 'x\n' }, { branch: 'from-fork', startBranch: 'main', token: developer.token });
    const opened = await t.post(api(fork, '/merge_requests'), { source_branch: 'from-fork', target_branch: 'main', target_project_id: upstream.id, title: 'from a fork' }, { token: developer.token });
    assert.equal(opened.status, 201, JSON.stringify(opened.body));
    const mr = opened.body;
    const [first] = await pipelinesOf(t, fork.id);
    assert.equal(first.source, 'merge_request_event');
    assert.equal(first.ref, 'from-fork', "the fork has no refs/merge-requests of the target's");
    assert.equal(first.sha, mr.sha);
    assert.equal(first.merge_request_id, mr.id);
    assert.equal(first.user_id, developer.user.id);
    assert.equal((await pipelinesOf(t, upstream.id)).length, upstreamBefore, "the target's jobs and secrets are not run for a fork");
    assert.equal(mr.head_pipeline?.id, first.id);
    assert.deepEqual(Object.keys(await jobsByName(t, first.id)), ['test']);
    const sha = await commitFiles(t, fork.id, { 'more.txt': 'more\n' }, { branch: 'from-fork', token: developer.token });
    const [second] = await pipelinesOf(t, fork.id);
    assert.notEqual(second.id, first.id);
    assert.equal(second.sha, sha);
    assert.equal(second.source, 'merge_request_event');
    const read = await t.get(api(upstream, `/merge_requests/${mr.iid}`), { token: developer.token });
    assert.equal(read.body.head_pipeline.id, second.id);
    assert.equal(read.body.head_pipeline.project_id, fork.id);
    const listed = await t.get(api(upstream, `/merge_requests/${mr.iid}/pipelines`), { token: developer.token });
    assert.deepEqual(listed.body.map((p: { id: number }) => p.id), [second.id, first.id]);
  });

  it('creates nothing for a configuration without merge request jobs, and nothing without a configuration', async () => {
    const project = await projectWith('build: { script: [make] }\n');
    const mr = await openMergeRequest(project, 'plain');
    const pipelines = await pipelinesOf(t, project.id);
    assert.ok(pipelines.every((p) => p.source === 'push'), 'branch pipelines only');
    assert.equal(mr.head_pipeline?.ref, 'plain', 'the branch pipeline is the head pipeline');
    const bare = await t.createProject();
    await t.addMember(bare, developer.user, 30);
    await commitFiles(t, bare, { 'README.md': 'x\n' });
    await openMergeRequest(bare, 'no-ci');
    assert.equal((await pipelinesOf(t, bare.id)).length, 0);
  });

  it('sets CI_OPEN_MERGE_REQUESTS, so workflow rules keep a branch with an open merge request to merge request pipelines', async () => {
    const project = await projectWith(NO_DUPLICATES);
    const before = await pipelinesOf(t, project.id);
    await commitFiles(t, project, { 'x.txt': 'x\n' }, { branch: 'dup', startBranch: 'main', token: developer.token });
    const branchOnly = await pipelinesOf(t, project.id);
    assert.equal(branchOnly.length, before.length + 1, 'no merge request yet: a branch pipeline');
    assert.equal(branchOnly[0].source, 'push');
    const mr = (await t.post(api(project, '/merge_requests'), { source_branch: 'dup', target_branch: 'main', title: 'dup' }, { token: developer.token })).body;
    await commitFiles(t, project, { 'y.txt': 'y\n' }, { branch: 'dup', token: developer.token });
    const after = await pipelinesOf(t, project.id);
    // Opening made a merge request pipeline; the push made one more, and no branch pipeline.
    assert.equal(after.length, branchOnly.length + 2);
    assert.deepEqual(after.slice(0, 2).map((p) => p.source), ['merge_request_event', 'merge_request_event']);
    // The job sees it too.
    const runnerPayloadVars = await t.db.selectFrom('ci_builds').select('id').where('pipeline_id', '=', after[0].id).execute();
    assert.equal(runnerPayloadVars.length, 1);
    const { buildJobPayload } = await import('../../src/ci/protocol/payload.js');
    const { assignBuild } = await import('../../src/ci/jobs/state.js');
    const { testRunner } = await import('../helpers/ci.js');
    const runnerId = await testRunner(t);
    const taken = await t.db.transaction().execute((trx) => assignBuild(trx, runnerPayloadVars[0].id, runnerId));
    assert.ok(taken);
    const runner = await t.db.selectFrom('ci_runners').selectAll().where('id', '=', runnerId).executeTakeFirstOrThrow();
    const payload = await buildJobPayload(t.app.cairn, taken.build, taken.token, runner);
    const vars = Object.fromEntries(payload.variables.map((v: { key: string; value: string }) => [v.key, v.value]));
    const fullPath = (await t.get(api(project, ''))).body.path_with_namespace;
    assert.equal(vars.CI_OPEN_MERGE_REQUESTS, `${fullPath}!${mr.iid}`);
  });

  it('a merge runs the target branch\'s pipeline, from the old target to the merge commit', async () => {
    const project = await projectWith('build: { script: [make] }\n');
    const mr = await openMergeRequest(project, 'to-merge');
    const oldMain = (await t.get(api(project, '/repository/branches/main'))).body.commit.id;
    const merged = await t.put(api(project, `/merge_requests/${mr.iid}/merge`), {}, { token: developer.token });
    assert.equal(merged.status, 200, JSON.stringify(merged.body));
    assert.equal(merged.body.state, 'merged');
    const target = (await pipelinesOf(t, project.id))[0];
    assert.equal(target.ref, 'main');
    assert.equal(target.source, 'push');
    assert.equal(target.sha, merged.body.merge_commit_sha);
    assert.equal(target.before_sha, oldMain);
    assert.equal(target.user_id, developer.user.id);
    // No post-receive journal is left behind.
    const journals = await t.db.selectFrom('background_jobs').select('kind').where('kind', 'in', ['post_receive.resume', 'merge_request.pipeline']).execute();
    assert.deepEqual(journals, []);
  });

  it('merge when pipeline succeeds waits for the merge request pipeline (python-gitlab\'s functional test), then merges', async () => {
    const project = await projectWith(MR_ONLY);
    const mr = await openMergeRequest(project, 'auto');
    const p = (await pipelinesOf(t, project.id))[0];
    assert.equal(p.source, 'merge_request_event');
    const res = await t.put(api(project, `/merge_requests/${mr.iid}/merge`), { merge_when_pipeline_succeeds: true }, { token: developer.token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.state, 'opened');
    assert.equal(res.body.merged_at, null);
    assert.equal(res.body.merge_when_pipeline_succeeds, true);
    await runJob(t, (await jobsByName(t, p.id)).test, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'success');
    const after = await t.get(api(project, `/merge_requests/${mr.iid}`), { token: developer.token });
    assert.equal(after.body.state, 'merged');
  });

  it('auto-merge without a pipeline: merges now, unless pipelines must succeed, then it waits for the first one', async () => {
    const free = await projectWith('build: { script: [make], rules: [{ if: $NEVER }] }\n');
    const now = await openMergeRequest(free, 'no-pipeline');
    assert.equal(now.head_pipeline, null);
    const merged = await t.put(api(free, `/merge_requests/${now.iid}/merge`), { auto_merge: true }, { token: developer.token });
    assert.equal(merged.status, 200, JSON.stringify(merged.body));
    assert.equal(merged.body.state, 'merged');

    const strict = await projectWith('build: { script: [make], rules: [{ if: $RUN_IT }] }\n', { only_allow_merge_if_pipeline_succeeds: true });
    const waits = await openMergeRequest(strict, 'waits');
    assert.equal(waits.head_pipeline, null);
    const flagged = await t.put(api(strict, `/merge_requests/${waits.iid}/merge`), { merge_when_pipeline_succeeds: true }, { token: developer.token });
    assert.equal(flagged.status, 200, JSON.stringify(flagged.body));
    assert.equal(flagged.body.state, 'opened');
    assert.equal(flagged.body.merge_when_pipeline_succeeds, true);
    // A plain merge is still refused there (no pipeline succeeded).
    assert.equal((await t.put(api(strict, `/merge_requests/${waits.iid}/merge`), {}, { token: developer.token })).status, 405);
    // The first pipeline comes (through the API, with the variable its rule wants) and succeeds.
    const run = await t.post(api(strict, '/pipeline'), { ref: 'waits', variables: [{ key: 'RUN_IT', value: '1' }] }, { token: developer.token });
    assert.equal(run.status, 201, JSON.stringify(run.body));
    await runJob(t, (await jobsByName(t, run.body.id)).build, 'success');
    const after = await t.get(api(strict, `/merge_requests/${waits.iid}`), { token: developer.token });
    assert.equal(after.body.state, 'merged');
  });
});
