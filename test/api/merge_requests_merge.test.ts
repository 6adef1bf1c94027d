import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { MergeRequestSingleSchema } from '../../src/presenters/schemas/merge_requests.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertOne } from '../helpers/contract.js';

describe('merge requests: merge, merge_ref, merge when pipeline succeeds, rebase, approvals', () => {
  let t: TestContext;
  let dev: TestUser, reporter: TestUser, maintainer: TestUser;
  let project: Project;
  let base: string;
  let seq = 0;
  const git = (...args: string[]) => execFileSync('git', ['--git-dir', projectRepoPath(t.app.cairn, project), ...args], { encoding: 'utf8' }).trim();

  const write = async (branch: string, file: string, content: string, extra: Record<string, unknown> = {}) => {
    const exists = (await t.get(`${base}/repository/files/${encodeURIComponent(file)}`, { query: { ref: (extra.start_branch as string) ?? branch } })).status === 200;
    const res = await t.post(`${base}/repository/commits`, {
      branch, commit_message: `${branch}: ${file} #${++seq}`, actions: [{ action: exists ? 'update' : 'create', file_path: file, content }], ...extra,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const open = async (source: string, title = `MR from ${source}`, extra: Record<string, unknown> = {}) => {
    const res = await t.post(`${base}/merge_requests`, { source_branch: source, target_branch: 'main', title, ...extra }, { token: dev.token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };

  before(async () => {
    // Developers merge into main here: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    [dev, reporter, maintainer] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    project = await t.createProject({ visibility: 0 });
    base = `/api/v4/projects/${project.id}`;
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, dev.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await write('main', 'shared.txt', 'one\ntwo\nthree\n');
  });
  after(async () => { await t.close(); });

  it('merges with a merge commit and answers the single form with state merged', async () => {
    await write('f1', 'f1.txt', 'f1\n', { start_branch: 'main' });
    const mr = await open('f1');
    assert.equal((await t.put(`${base}/merge_requests/${mr.iid}/merge`, {}, { token: reporter.token })).status, 401);
    const stale = await t.put(`${base}/merge_requests/${mr.iid}/merge`, { sha: '0'.repeat(40) }, { token: dev.token });
    assert.equal(stale.status, 409);
    const mainBefore = git('rev-parse', 'main');
    const res = await t.put(`${base}/merge_requests/${mr.iid}/merge`, { sha: mr.sha, should_remove_source_branch: true }, { token: dev.token });
    assertOne(MergeRequestSingleSchema, res, 'PUT merge');
    assert.equal(res.body.state, 'merged');
    assert.equal(res.body.merged_by.id, dev.user.id);
    assert.equal(res.body.merge_user.id, dev.user.id);
    assert.ok(res.body.merged_at);
    assert.equal(git('rev-parse', 'main'), res.body.merge_commit_sha);
    assert.equal(git('rev-parse', 'main^1'), mainBefore);
    assert.equal(git('rev-parse', 'main^2'), mr.sha);
    assert.match(git('log', '-1', '--format=%B', 'main'), new RegExp(`^Merge branch 'f1' into 'main'\\n\\nMR from f1\\n\\nSee merge request .*!${mr.iid}`));
    assert.throws(() => git('rev-parse', '--verify', 'refs/heads/f1'), 'the source branch was removed');
    const again = await t.put(`${base}/merge_requests/${mr.iid}/merge`, {}, { token: dev.token });
    assert.equal(again.status, 405);
    assert.equal((await t.get(`${base}/merge_requests/${mr.iid}/merge_ref`, { token: dev.token })).status, 400);
  });

  it('refuses drafts and closed requests (405) and conflicts (406)', async () => {
    await write('draft', 'draft.txt', 'd\n', { start_branch: 'main' });
    const draft = await open('draft', 'Draft: not yet');
    assert.equal((await t.put(`${base}/merge_requests/${draft.iid}/merge`, {}, { token: dev.token })).status, 405);
    await t.put(`${base}/merge_requests/${draft.iid}`, { state_event: 'close' }, { token: dev.token });
    assert.equal((await t.put(`${base}/merge_requests/${draft.iid}/merge`, {}, { token: dev.token })).status, 405);

    await write('clash', 'shared.txt', 'one\nclash\nthree\n', { start_branch: 'main' });
    await write('main', 'shared.txt', 'one\nmain moved\nthree\n');
    const clash = await open('clash');
    assert.equal(clash.has_conflicts, true);
    assert.equal((await t.put(`${base}/merge_requests/${clash.iid}/merge`, {}, { token: dev.token })).status, 406);
    const ref = await t.get(`${base}/merge_requests/${clash.iid}/merge_ref`, { token: dev.token });
    assert.equal(ref.status, 400);
  });

  it('writes the merge ref without moving the target', async () => {
    await write('f2', 'f2.txt', 'f2\n', { start_branch: 'main' });
    const mr = await open('f2');
    const main = git('rev-parse', 'main');
    const res = await t.get(`${base}/merge_requests/${mr.iid}/merge_ref`, { token: dev.token });
    assert.equal(res.status, 200);
    assert.match(res.body.commit_id, /^[0-9a-f]{40}$/);
    assert.equal(git('rev-parse', `refs/merge-requests/${mr.iid}/merge`), res.body.commit_id);
    assert.equal(git('rev-parse', 'main'), main);
    assert.equal(git('rev-parse', `${res.body.commit_id}^1`), main);
  });

  it('squashes with the given message', async () => {
    await write('sq', 'sq1.txt', '1\n', { start_branch: 'main' });
    await write('sq', 'sq2.txt', '2\n');
    const mr = await open('sq');
    const res = await t.put(`${base}/merge_requests/${mr.iid}/merge`, { squash: true, squash_commit_message: 'One commit', merge_commit_message: 'Custom merge' }, { token: maintainer.token });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.squash, true);
    assert.equal(git('log', '-1', '--format=%s', res.body.squash_commit_sha), 'One commit');
    assert.equal(git('log', '-1', '--format=%s', 'main'), 'Custom merge');
    assert.equal(git('rev-parse', 'main^2'), res.body.squash_commit_sha);
  });

  it('merge when pipeline succeeds: without a pipeline it merges now; cancel answers 405 / 406', async () => {
    await write('mwps', 'mwps.txt', 'x\n', { start_branch: 'main' });
    const mr = await open('mwps');
    const notSet = await t.post(`${base}/merge_requests/${mr.iid}/cancel_merge_when_pipeline_succeeds`, {}, { token: dev.token });
    assert.equal(notSet.status, 406);
    const res = await t.put(`${base}/merge_requests/${mr.iid}/merge`, { merge_when_pipeline_succeeds: true }, { token: dev.token });
    assert.equal(res.body.state, 'merged');
    const merged = await t.post(`${base}/merge_requests/${mr.iid}/cancel_merge_when_pipeline_succeeds`, {}, { token: dev.token });
    assert.equal(merged.status, 405);
  });

  it('rebases in the queue: 202, then rebase_in_progress false and the source on top of the target', async () => {
    await write('rb', 'rb.txt', 'rb\n', { start_branch: 'main' });
    await write('main', 'other.txt', 'main moved on\n');
    const mr = await open('rb');
    assert.equal((await t.put(`${base}/merge_requests/${mr.iid}/rebase`, {}, { token: reporter.token })).status, 403);
    const res = await t.put(`${base}/merge_requests/${mr.iid}/rebase`, {}, { token: dev.token });
    assert.deepEqual([res.status, res.body], [202, { rebase_in_progress: true }]);
    const during = await t.get(`${base}/merge_requests/${mr.iid}`, { token: dev.token, query: { include_rebase_in_progress: true } });
    assert.equal(during.body.rebase_in_progress, true);
    await drainJobs(t.app.cairn);
    const afterRebase = await t.get(`${base}/merge_requests/${mr.iid}`, { token: dev.token, query: { include_rebase_in_progress: true, include_diverged_commits_count: true } });
    assert.equal(afterRebase.body.rebase_in_progress, false);
    assert.equal(afterRebase.body.merge_error, null);
    assert.equal(afterRebase.body.diverged_commits_count, 0);
    assert.equal(git('rev-parse', 'rb^'), git('rev-parse', 'main'));

    const beforeOther = git('rev-parse', 'main~1');
    const res2 = await t.post(`${base}/repository/commits`, {
      branch: 'rbclash', start_sha: beforeOther, commit_message: 'clash', actions: [{ action: 'create', file_path: 'other.txt', content: 'conflicting\n' }],
    });
    assert.equal(res2.status, 201, JSON.stringify(res2.body));
    const clash = await open('rbclash');
    assert.equal((await t.put(`${base}/merge_requests/${clash.iid}/rebase`, {}, { token: dev.token })).status, 202);
    await drainJobs(t.app.cairn);
    const failed = await t.get(`${base}/merge_requests/${clash.iid}`, { token: dev.token, query: { include_rebase_in_progress: true } });
    assert.equal(failed.body.rebase_in_progress, false);
    assert.match(failed.body.merge_error, /^Rebase failed/);
  });

  it('approves once per user, not by the author, and filters by approver', async () => {
    await write('ap', 'ap.txt', 'ap\n', { start_branch: 'main' });
    const mr = await open('ap');
    assert.equal((await t.post(`${base}/merge_requests/${mr.iid}/approve`, {}, { token: dev.token })).status, 401, 'the author');
    // Without approve_merge_request (update_merge_request): GitLab's authorize!, 403; for unapprove too.
    assert.equal((await t.post(`${base}/merge_requests/${mr.iid}/approve`, {}, { token: reporter.token })).status, 403, 'a reporter');
    assert.equal((await t.post(`${base}/merge_requests/${mr.iid}/unapprove`, {}, { token: reporter.token })).status, 403, 'a reporter unapproves');
    assert.equal((await t.post(`${base}/merge_requests/${mr.iid}/unapprove`, {}, { token: dev.token })).status, 404, 'no approval of theirs');
    const ok = await t.post(`${base}/merge_requests/${mr.iid}/approve`, {}, { token: maintainer.token });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.approved, true);
    assert.deepEqual(ok.body.approved_by.map((a: any) => a.user.id), [maintainer.user.id]);
    assert.equal((await t.post(`${base}/merge_requests/${mr.iid}/approve`, {}, { token: maintainer.token })).status, 401, 'twice');
    const list = await t.get(`${base}/merge_requests?approved_by_ids[]=${maintainer.user.id}`, { token: dev.token });
    assert.deepEqual(list.body.map((m: any) => m.iid), [mr.iid]);
    const un = await t.post(`${base}/merge_requests/${mr.iid}/unapprove`, {}, { token: maintainer.token });
    assert.equal(un.body.approved, false);
  });

  it('two merges of one merge request at once give exactly one merge', async () => {
    await write('race', 'race.txt', 'race\n', { start_branch: 'main' });
    const mr = await open('race');
    const main = git('rev-parse', 'main');
    const results = await Promise.all([1, 2, 3, 4].map(() => t.put(`${base}/merge_requests/${mr.iid}/merge`, {}, { token: maintainer.token })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses.filter((s) => s === 200), [200], JSON.stringify(statuses));
    assert.ok(statuses.every((s) => s === 200 || s === 405 || s === 406), JSON.stringify(statuses));
    assert.equal(git('rev-parse', 'main^1'), main, 'one merge commit on top of the old main');
    assert.equal(git('rev-list', '--count', `${main}..main`), '2');
  });
  it('with only_allow_merge_if_pipeline_succeeds, refuses a merge until the head pipeline succeeds (405)', async () => {
    await write('ci-gate', 'ci-gate.txt', 'gate\n', { start_branch: 'main' });
    const mr = await open('ci-gate');
    assert.equal((await t.put(base, { only_allow_merge_if_pipeline_succeeds: true })).status, 200);
    try {
      assert.equal((await t.put(`${base}/merge_requests/${mr.iid}/merge`, {}, { token: maintainer.token })).status, 405, 'no pipeline');
      const row = await t.db.selectFrom('merge_requests').select('id').where('target_project_id', '=', project.id).where('iid', '=', mr.iid).executeTakeFirstOrThrow();
      const pipeline = await t.db.insertInto('ci_pipelines')
        .values({ iid: 9000 + mr.iid, project_id: project.id, ref: 'ci-gate', sha: mr.sha, before_sha: null, source: 'push', status: 'failed', created_at: new Date(), updated_at: new Date() } as any)
        .returning('id').executeTakeFirstOrThrow();
      await t.db.updateTable('merge_requests').set({ head_pipeline_id: pipeline.id }).where('id', '=', row.id).execute();
      assert.equal((await t.put(`${base}/merge_requests/${mr.iid}/merge`, {}, { token: maintainer.token })).status, 405, 'a failed pipeline');
      await t.db.updateTable('ci_pipelines').set({ status: 'success' }).where('id', '=', pipeline.id).execute();
      const merged = await t.put(`${base}/merge_requests/${mr.iid}/merge`, {}, { token: maintainer.token });
      assert.equal(merged.status, 200, JSON.stringify(merged.body));
      assert.equal(merged.body.state, 'merged');
    } finally {
      await t.put(base, { only_allow_merge_if_pipeline_succeeds: false });
    }
  });

  it('places a diff note on the merge request diff (base_sha..head_sha) when the target moved on since', async () => {
    await write('moved', 'shared.txt', 'one\ntwo\nthree\nfour from moved\n', { start_branch: 'main' });
    const mr = await open('moved');
    // The target gets a line at the top of the same file: in start_sha..head_sha the old lines shift.
    const current = (await t.get(`${base}/repository/files/shared.txt/raw`, { query: { ref: 'main' } })).text;
    await write('main', 'shared.txt', 'zero\n' + current);
    const fresh = (await t.get(`${base}/merge_requests/${mr.iid}`, { token: dev.token })).body;
    assert.notEqual(fresh.diff_refs.start_sha, fresh.diff_refs.base_sha, 'the target moved past the base');
    const diffs = (await t.get(`${base}/merge_requests/${mr.iid}/diffs`, { token: dev.token })).body;
    // The removed line "main moved" is line 2 of the base (of the moved target, line 3).
    assert.match(diffs[0].diff, /^@@ -1,3 \+1,4 @@\n one\n-main moved\n/);
    const res = await t.post(`${base}/merge_requests/${mr.iid}/discussions`, {
      body: 'On the removed line',
      position: { ...fresh.diff_refs, position_type: 'text', old_path: 'shared.txt', new_path: 'shared.txt', old_line: 2 },
    }, { token: dev.token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.notes[0].position.old_line, 2);
  });
});
