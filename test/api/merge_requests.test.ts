import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { MergeRequestSchema, MergeRequestSingleSchema } from '../../src/presenters/schemas/merge_requests.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('merge requests: create, read, list, update, close, reopen, delete', () => {
  let t: TestContext;
  let dev: TestUser, guest: TestUser, reporter: TestUser, maintainer: TestUser, outsider: TestUser, owner: TestUser;
  let group: Namespace;
  let project: Project;
  let base: string;

  const commit = (branch: string, files: Record<string, string>, extra: Record<string, unknown> = {}, token?: string) =>
    t.post(`${base}/repository/commits`, {
      branch,
      commit_message: `change ${Object.keys(files).join(',')}`,
      actions: Object.entries(files).map(([file_path, content]) => ({ action: 'create', file_path, content })),
      ...extra,
    }, token ? { token } : undefined);
  const update = (branch: string, files: Record<string, string>, extra: Record<string, unknown> = {}) =>
    t.post(`${base}/repository/commits`, {
      branch,
      commit_message: `update ${Object.keys(files).join(',')}`,
      actions: Object.entries(files).map(([file_path, content]) => ({ action: 'update', file_path, content })),
      ...extra,
    });

  before(async () => {
    t = await createTestContext();
    [dev, guest, reporter, maintainer, outsider, owner] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    group = await t.createGroup();
    project = await t.createProject({ group, visibility: 0 });
    base = `/api/v4/projects/${project.id}`;
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, dev.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(group, owner.user, 50);
    assert.equal((await commit('main', { 'README.md': 'hello\n', 'shared.txt': 'one\ntwo\nthree\n' })).status, 201);
    assert.equal((await commit('feature', { 'feature.txt': 'feature\n' }, { start_branch: 'main' })).status, 201);
    assert.equal((await update('conflicting', { 'shared.txt': 'one\nbranch\nthree\n' }, { start_branch: 'main' })).status, 201);
    assert.equal((await update('main', { 'shared.txt': 'one\nmain\nthree\n' })).status, 201);
  });
  after(async () => { await t.close(); });

  it('creates a merge request with its git facts and answers in the single form', async () => {
    const res = await t.post(`${base}/merge_requests`, {
      source_branch: 'feature', target_branch: 'main', title: 'Draft: Add the feature', description: '- [x] one\n- [ ] two',
      assignee_ids: [dev.user.id], reviewer_ids: [maintainer.user.id],
    }, { token: dev.token });
    assertOne(MergeRequestSingleSchema, res, 'POST merge request');
    const mr = res.body;
    assert.equal(mr.iid, 1);
    assert.equal(mr.state, 'opened');
    assert.equal(mr.draft, true);
    assert.equal(mr.work_in_progress, true);
    assert.equal(mr.merge_status, 'can_be_merged');
    assert.equal(mr.has_conflicts, false);
    assert.equal(mr.project_id, project.id);
    assert.equal(mr.source_project_id, project.id);
    assert.equal(mr.author.id, dev.user.id);
    assert.deepEqual(mr.assignees.map((u: any) => u.id), [dev.user.id]);
    assert.equal(mr.assignee.id, dev.user.id);
    assert.deepEqual(mr.reviewers.map((u: any) => u.id), [maintainer.user.id]);
    assert.deepEqual(mr.task_completion_status, { count: 2, completed_count: 1 });
    assert.equal(mr.changes_count, '1');
    assert.match(mr.sha, /^[0-9a-f]{40}$/);
    assert.equal(mr.diff_refs.head_sha, mr.sha);
    assert.match(mr.diff_refs.base_sha, /^[0-9a-f]{40}$/);
    assert.equal(mr.references.full, `${group.full_path}/${project.path}!1`);
    assert.equal(mr.web_url, `${t.config.externalUrl}/${group.full_path}/${project.path}/-/merge_requests/1`);
    assert.equal(mr.subscribed, true, 'the author is a participant');
    assert.deepEqual(mr.time_stats, { time_estimate: 0, total_time_spent: 0, human_time_estimate: null, human_total_time_spent: null });
  });

  it('renders title and description as HTML with render_html=true, sanitised', async () => {
    const plain = await t.get(`${base}/merge_requests/1`, { token: dev.token });
    assert.equal('description_html' in plain.body, false, 'only on request');
    const html = await t.get(`${base}/merge_requests/1?render_html=true`, { token: dev.token });
    assertOne(MergeRequestSingleSchema, html, 'GET merge request render_html');
    assert.equal(html.body.title_html, 'Draft: Add the feature');
    assert.match(html.body.description_html, /<input[^>]+type="checkbox"/);
    assert.doesNotMatch(html.body.description_html, /<p>- \[x\]/);
  });

  it('refuses duplicates, missing branches and bad input with GitLab answers', async () => {
    const dup = await t.post(`${base}/merge_requests`, { source_branch: 'feature', target_branch: 'main', title: 'again' }, { token: dev.token });
    assert.equal(dup.status, 409);
    assert.deepEqual(dup.body, { message: ['Another open merge request already exists for this source branch: !1'] });
    const missing = await t.post(`${base}/merge_requests`, { source_branch: 'nope', target_branch: 'main', title: 'x' }, { token: dev.token });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body, { message: ['Source branch does not exist'] });
    const same = await t.post(`${base}/merge_requests`, { source_branch: 'main', target_branch: 'main', title: 'x' }, { token: dev.token });
    assert.equal(same.status, 400);
    const noTitle = await t.post(`${base}/merge_requests`, { source_branch: 'feature', target_branch: 'main' }, { token: dev.token });
    assert.equal(noTitle.status, 400);
    assert.deepEqual(noTitle.body, { error: 'title is missing' });
    const blank = await t.post(`${base}/merge_requests`, { source_branch: 'conflicting', target_branch: 'main', title: '   ' }, { token: dev.token });
    assert.deepEqual([blank.status, blank.body], [400, { message: ["Title can't be blank"] }]);
  });

  it('sees conflicts made by real histories', async () => {
    const res = await t.post(`${base}/merge_requests`, { source_branch: 'conflicting', target_branch: 'main', title: 'Clash' }, { token: dev.token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.merge_status, 'cannot_be_merged');
    assert.equal(res.body.has_conflicts, true);
    assert.equal(res.body.detailed_merge_status, 'conflict');
    const single = await t.get(`${base}/merge_requests/${res.body.iid}`, { token: reporter.token, query: { include_diverged_commits_count: true } });
    assert.equal(single.status, 200);
    assert.equal(single.body.diverged_commits_count, 1);
  });

  it('answers by permission: 401 anonymous, 404 outsiders and guests of a private project, reporters read, developers write', async () => {
    assert.equal((await t.get(`${base}/merge_requests`, { token: null })).status, 401);
    assert.equal((await t.get(`${base}/merge_requests`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`${base}/merge_requests/1`, { token: guest.token })).status, 403);
    assert.equal((await t.get(`${base}/merge_requests/1`, { token: reporter.token })).status, 200);
    const reporterCreate = await t.post(`${base}/merge_requests`, { source_branch: 'feature', target_branch: 'conflicting', title: 'x' }, { token: reporter.token });
    assert.equal(reporterCreate.status, 403);
    assert.equal((await t.put(`${base}/merge_requests/1`, { title: 'Renamed by a reporter' }, { token: reporter.token })).status, 403);
    assert.equal((await t.delete(`${base}/merge_requests/1`, { token: maintainer.token })).status, 403);
    assert.equal((await t.get(`${base}/merge_requests/999`, { token: reporter.token })).status, 404);
  });

  it('updates fields and people, closes and reopens with guarded state changes', async () => {
    const upd = await t.put(`${base}/merge_requests/1`, { title: 'Add the feature', assignee_ids: [], reviewer_ids: [reporter.user.id, maintainer.user.id] }, { token: maintainer.token });
    assertOne(MergeRequestSingleSchema, upd, 'PUT');
    assert.equal(upd.body.draft, false);
    assert.deepEqual(upd.body.assignees, []);
    assert.deepEqual(upd.body.reviewers.map((u: any) => u.id).sort(), [reporter.user.id, maintainer.user.id].sort());
    const closed = await t.put(`${base}/merge_requests/1`, { state_event: 'close' }, { token: dev.token });
    assert.equal(closed.body.state, 'closed');
    assert.equal(closed.body.closed_by.id, dev.user.id);
    assert.ok(closed.body.closed_at);
    const again = await t.put(`${base}/merge_requests/1`, { state_event: 'close' }, { token: dev.token });
    assert.equal(again.body.state, 'closed');
    const reopened = await t.put(`${base}/merge_requests/1`, { state_event: 'reopen' }, { token: dev.token });
    assert.equal(reopened.body.state, 'opened');
    assert.equal(reopened.body.closed_by, null);
    assert.equal(reopened.body.merge_status, 'can_be_merged');
    const bad = await t.put(`${base}/merge_requests/1`, { state_event: 'merge' }, { token: dev.token });
    assert.equal(bad.status, 400);
  });

  it('lists with filters, both forms, and pagination headers', async () => {
    const all = await t.get(`${base}/merge_requests`, { token: reporter.token });
    assertEach(MergeRequestSchema, all, 'project list');
    assert.equal(all.headers['x-total'], '2');
    assert.deepEqual(all.body.map((m: any) => m.iid), [2, 1]);
    const asc = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { sort: 'asc', per_page: 1 } });
    assert.deepEqual(asc.body.map((m: any) => m.iid), [1]);
    assert.equal(asc.headers['x-next-page'], '2');
    const byBranch = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { source_branch: 'conflicting' } });
    assert.deepEqual(byBranch.body.map((m: any) => m.iid), [2]);
    const byReviewer = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { reviewer_id: reporter.user.id } });
    assert.deepEqual(byReviewer.body.map((m: any) => m.iid), [1]);
    const noReviewer = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { reviewer_id: 'None' } });
    assert.deepEqual(noReviewer.body.map((m: any) => m.iid), [2]);
    const notAuthor = await t.get(`${base}/merge_requests?not[author_id]=${dev.user.id}`, { token: reporter.token });
    assert.deepEqual(notAuthor.body, []);
    const search = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { search: 'clash' } });
    assert.deepEqual(search.body.map((m: any) => m.iid), [2]);
    const iids = await t.get(`${base}/merge_requests?iids[]=1`, { token: reporter.token });
    assert.deepEqual(iids.body.map((m: any) => m.iid), [1]);
    const simple = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { view: 'simple' } });
    assert.deepEqual(Object.keys(simple.body[0]).sort(), ['created_at', 'description', 'id', 'iid', 'project_id', 'state', 'title', 'updated_at', 'web_url']);
    const both = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { author_id: dev.user.id, author_username: dev.user.username } });
    assert.equal(both.status, 400);
    const tooMany = await t.get(`${base}/merge_requests?approved_by_ids[]=1&approved_by_ids[]=2&approved_by_ids[]=3&approved_by_ids[]=4&approved_by_ids[]=5&approved_by_ids[]=6`, { token: reporter.token });
    assert.equal(tooMany.status, 400);
  });

  it('the global list shows the caller\'s own by default and scope=all what they may read', async () => {
    const mine = await t.get('/api/v4/merge_requests', { token: dev.token });
    assert.deepEqual(mine.body.map((m: any) => m.iid).sort(), [1, 2]);
    const theirs = await t.get('/api/v4/merge_requests', { token: reporter.token });
    assert.deepEqual(theirs.body, []);
    const readable = await t.get('/api/v4/merge_requests', { token: reporter.token, query: { scope: 'all' } });
    assert.equal(readable.body.length, 2);
    const none = await t.get('/api/v4/merge_requests', { token: outsider.token, query: { scope: 'all' } });
    assert.deepEqual(none.body, []);
    const groupList = await t.get(`/api/v4/groups/${group.id}/merge_requests`, { token: reporter.token });
    assert.equal(groupList.body.length, 2);
  });

  it('lists commits, changes and diffs', async () => {
    const commits = await t.get(`${base}/merge_requests/1/commits`, { token: reporter.token });
    assert.equal(commits.status, 200);
    assert.equal(commits.body.length, 1);
    assert.equal(commits.body[0].title, 'change feature.txt');
    const changes = await t.get(`${base}/merge_requests/1/changes`, { token: reporter.token });
    assert.equal(changes.status, 200);
    assert.deepEqual(changes.body.changes.map((c: any) => c.new_path), ['feature.txt']);
    assert.equal(changes.body.changes[0].new_file, true);
    const diffs = await t.get(`${base}/merge_requests/1/diffs`, { token: reporter.token });
    assert.deepEqual(diffs.body.map((c: any) => c.new_path), ['feature.txt']);
    assert.match(diffs.body[0].diff, /\+feature/);
  });

  it('follows pushes to the source branch', async () => {
    const before = (await t.get(`${base}/merge_requests/1`, { token: reporter.token })).body.sha;
    assert.equal((await commit('feature', { 'more.txt': 'more\n' })).status, 201);
    const after = (await t.get(`${base}/merge_requests/1`, { token: reporter.token })).body;
    assert.notEqual(after.sha, before);
    assert.equal(after.changes_count, '2');
  });

  it('subscribes and unsubscribes, 304 when nothing changes', async () => {
    const sub = await t.post(`${base}/merge_requests/1/subscribe`, {}, { token: owner.token });
    assert.equal(sub.status, 201);
    assert.equal(sub.body.subscribed, true);
    assert.equal((await t.post(`${base}/merge_requests/1/subscribe`, {}, { token: owner.token })).status, 304);
    const unsub = await t.post(`${base}/merge_requests/1/unsubscribe`, {}, { token: owner.token });
    assert.equal(unsub.body.subscribed, false);
    assert.equal((await t.post(`${base}/merge_requests/1/unsubscribe`, {}, { token: owner.token })).status, 304);
  });

  it('carries labels and a milestone, filters by them, shows label details on request', async () => {
    const ms = await t.post(`${base}/milestones`, { title: 'v1.0' }, { token: maintainer.token });
    assert.equal(ms.status, 201, JSON.stringify(ms.body));
    const upd = await t.put(`${base}/merge_requests/2`, { labels: 'bug,backend', milestone_id: ms.body.id }, { token: maintainer.token });
    assert.equal(upd.status, 200, JSON.stringify(upd.body));
    assert.deepEqual(upd.body.labels, ['backend', 'bug']);
    assert.equal(upd.body.milestone.title, 'v1.0');
    const add = await t.put(`${base}/merge_requests/2`, { add_labels: 'ux', remove_labels: 'bug' }, { token: maintainer.token });
    assert.deepEqual(add.body.labels, ['backend', 'ux']);
    const byLabel = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { labels: 'UX' } });
    assert.deepEqual(byLabel.body.map((m: any) => m.iid), [2]);
    const none = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { labels: 'None' } });
    assert.deepEqual(none.body.map((m: any) => m.iid), [1]);
    const notLabel = await t.get(`${base}/merge_requests?not[labels]=ux`, { token: reporter.token });
    assert.deepEqual(notLabel.body.map((m: any) => m.iid), [1]);
    const byMilestone = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { milestone: 'v1.0' } });
    assert.deepEqual(byMilestone.body.map((m: any) => m.iid), [2]);
    const anyMilestone = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { milestone: 'None' } });
    assert.deepEqual(anyMilestone.body.map((m: any) => m.iid), [1]);
    const details = await t.get(`${base}/merge_requests`, { token: reporter.token, query: { with_labels_details: true, labels: 'ux' } });
    assert.deepEqual(Object.keys(details.body[0].labels[0]).sort(), ['color', 'description', 'description_html', 'id', 'name', 'text_color']);
    const events = await t.db.selectFrom('resource_label_events').select(['action']).where('target_type', '=', 'MergeRequest').execute();
    assert.equal(events.length, 4, 'two adds, one add, one remove');
  });

  it('lets the owner delete, 204', async () => {
    const created = await t.post(`${base}/merge_requests`, { source_branch: 'feature', target_branch: 'conflicting', title: 'to delete' }, { token: dev.token });
    assert.equal(created.status, 201);
    assert.equal((await t.delete(`${base}/merge_requests/${created.body.iid}`, { token: owner.token })).status, 204);
    assert.equal((await t.get(`${base}/merge_requests/${created.body.iid}`, { token: owner.token })).status, 404);
  });
});
