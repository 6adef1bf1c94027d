import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { IssueBasicSchema, IssueSchema, IssueSingleSchema } from '../../src/presenters/schemas/issues.js';
import { ResourceLabelEventSchema } from '../../src/presenters/schemas/labels.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('issues API', () => {
  let t: TestContext;
  let top: Namespace, sub: Namespace;
  let project: Project, subProject: Project, publicProject: Project;
  let guest: TestUser, guest2: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, owner: TestUser;
  let outsider: TestUser, blocked: TestUser, admin: TestUser;
  let base: string;
  const ids = (res: { body: any[] }) => res.body.map((i) => i.iid).sort((a, b) => a - b);

  const create = async (body: Record<string, unknown>, token = developer.token, url = `${base}/issues`) => {
    const res = await t.post(url, body, { token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body;
  };

  before(async () => {
    t = await createTestContext();
    [guest, guest2, reporter, developer, maintainer, owner, outsider, admin] = await Promise.all(Array.from({ length: 8 }, () => t.createUser()));
    blocked = await t.createUser({ state: 'blocked' });
    await t.db.updateTable('users').set({ admin: true }).where('id', '=', admin.user.id).execute();
    top = await t.createGroup({ path: t.unique('top') });
    sub = await t.createGroup({ path: t.unique('sub'), parent: top });
    project = await t.createProject({ group: top });
    subProject = await t.createProject({ group: sub });
    publicProject = await t.createProject({ group: top, visibility: 20 });
    base = `/api/v4/projects/${project.id}`;
    for (const p of [project, subProject, publicProject]) {
      for (const [u, level] of [[guest, 10], [guest2, 10], [reporter, 20], [developer, 30], [maintainer, 40], [owner, 50], [blocked, 30]] as const) {
        await t.addMember(p, u.user, level);
      }
    }
  });
  after(async () => { await t.close(); });

  it('creates an issue with every field and answers the single form', async () => {
    const ms = await t.post(`${base}/milestones`, { title: 'v1', due_date: '2030-01-01' }, { token: maintainer.token });
    assert.equal(ms.status, 201);
    const issue = await create({
      title: '  Crash on start  ', description: 'Steps\n\n- [x] one\n- [ ] two', labels: 'bug,ui', milestone_id: ms.body.id,
      assignee_ids: [developer.user.id, reporter.user.id, outsider.user.id], due_date: '2030-02-03', issue_type: 'incident',
    });
    assertOne(IssueSingleSchema, { status: 201, body: issue }, 'POST issue');
    assert.equal(issue.title, 'Crash on start');
    assert.equal(issue.state, 'opened');
    assert.equal(issue.project_id, project.id);
    assert.deepEqual(issue.labels, ['bug', 'ui']);
    assert.equal(issue.milestone.id, ms.body.id);
    // An outsider cannot see a private project's issues, so is not assigned.
    assert.deepEqual(issue.assignees.map((u: any) => u.id).sort(), [developer.user.id, reporter.user.id].sort());
    assert.equal(issue.assignee.id, issue.assignees[0].id);
    assert.equal(issue.author.id, developer.user.id);
    assert.equal(issue.due_date, '2030-02-03');
    assert.equal(issue.issue_type, 'incident');
    assert.equal(issue.type, 'INCIDENT');
    assert.equal(issue.confidential, false);
    assert.deepEqual(issue.task_completion_status, { count: 2, completed_count: 1 });
    assert.equal(issue.has_tasks, true);
    assert.equal(issue.task_status, '1 of 2 checklist items completed');
    assert.equal(issue.references.short, `#${issue.iid}`);
    assert.equal(issue.references.relative, `#${issue.iid}`);
    assert.equal(issue.references.full, `${top.full_path}/${project.path}#${issue.iid}`);
    assert.equal(issue.web_url, `${t.config.externalUrl}/${top.full_path}/${project.path}/-/issues/${issue.iid}`);
    assert.equal(issue._links.self, `${t.config.externalUrl}/api/v4/projects/${project.id}/issues/${issue.iid}`);
    assert.equal(issue.subscribed, true, 'the author is a participant');
    assert.equal(issue.user_notes_count, 0);
    assert.equal(issue.merge_requests_count, 0);
    assert.deepEqual(issue.time_stats, { time_estimate: 0, total_time_spent: 0, human_time_estimate: null, human_total_time_spent: null });

    const got = await t.get(`${base}/issues/${issue.iid}`, { token: guest.token });
    assertOne(IssueSingleSchema, got, 'GET issue');
    assert.equal(got.body.subscribed, false);
    const details = await t.get(`${base}/issues/${issue.iid}`, { token: guest.token, query: { with_labels_details: true } });
    assert.equal(details.body.labels[0].name, 'bug');
    assert.match(details.body.labels[0].color, /^#/);
  });

  it('drops metadata for guests, honours created_at and iid only for owners and admins', async () => {
    const byGuest = await create({ title: 'guest issue', labels: 'bug', assignee_ids: [developer.user.id], due_date: '2030-01-01', confidential: true }, guest.token);
    assert.deepEqual(byGuest.labels, []);
    assert.deepEqual(byGuest.assignees, []);
    assert.equal(byGuest.due_date, null);
    assert.equal(byGuest.confidential, true, 'an author may make their own issue confidential');

    const devDated = await create({ title: 'dated', created_at: '2020-01-01T00:00:00Z', iid: 900 });
    assert.notEqual(devDated.created_at, '2020-01-01T00:00:00.000Z');
    assert.notEqual(devDated.iid, 900);

    const ownerDated = await create({ title: 'imported', created_at: '2020-01-01T00:00:00Z', iid: 500 }, owner.token);
    assert.equal(ownerDated.created_at, '2020-01-01T00:00:00.000Z');
    assert.equal(ownerDated.iid, 500);
    const next = await create({ title: 'after import' });
    assert.equal(next.iid, 501, 'numbering goes on from the highest iid given');
    const dup = await t.post(`${base}/issues`, { title: 'again', iid: 500 }, { token: admin.token });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.message, 'Duplicated issue');
  });

  it('refuses bad input with 400s and anonymous or blocked writers with 401', async () => {
    const bad = async (body: unknown, status = 400) => assert.equal((await t.post(`${base}/issues`, body, { token: developer.token })).status, status, JSON.stringify(body));
    await bad({});
    await bad({ title: '   ' });
    await bad({ title: 'x'.repeat(256) });
    await bad({ title: 't', due_date: '2030-13-45' });
    await bad({ title: 't', due_date: 'tomorrow' });
    await bad({ title: 't', issue_type: 'epic' });
    await bad({ title: 't', milestone_id: 'abc' });
    // Grape checks the type of created_at whoever asks, before the permission drops it.
    await bad({ title: 't', created_at: 'not a date' });
    const blank = await t.post(`${base}/issues`, { title: '' }, { token: developer.token });
    assert.deepEqual(blank.body, { message: { title: ["can't be blank"] } });
    assert.equal((await t.post(`${base}/issues`, { title: 'anon' }, { token: null })).status, 401);
    assert.equal((await t.post(`${base}/issues`, { title: 'blocked' }, { token: blocked.token })).status, 401);
    assert.equal((await t.post(`${base}/issues`, { title: 'outsider' }, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`${base}/issues/99999`, { token: developer.token })).status, 404);
    assert.equal((await t.get(`${base}/issues/abc`, { token: developer.token })).status, 400);
    const issue = await create({ title: 'to edit' });
    assert.equal((await t.put(`${base}/issues/${issue.iid}`, {}, { token: developer.token })).status, 400);
    assert.equal((await t.put(`${base}/issues/${issue.iid}`, { state_event: 'explode' }, { token: developer.token })).status, 400);
    assert.equal((await t.put(`${base}/issues/${issue.iid}`, { title: '' }, { token: developer.token })).status, 400);
  });

  it('updates, closes and reopens with system notes; author or reporter and up may edit', async () => {
    const issue = await create({ title: 'by guest' }, guest.token);
    const url = `${base}/issues/${issue.iid}`;
    assert.equal((await t.put(url, { title: 'hijack' }, { token: guest2.token })).status, 403);
    const own = await t.put(url, { title: 'by guest, edited', labels: 'ignored' }, { token: guest.token });
    assert.equal(own.status, 200);
    assert.equal(own.body.title, 'by guest, edited');
    assert.deepEqual(own.body.labels, []);

    const closed = await t.put(url, { state_event: 'close' }, { token: reporter.token });
    assertOne(IssueSingleSchema, closed, 'close');
    assert.equal(closed.body.state, 'closed');
    assert.equal(closed.body.closed_by.id, reporter.user.id);
    assert.ok(closed.body.closed_at);
    const closedAgain = await t.put(url, { state_event: 'close' }, { token: reporter.token });
    assert.equal(closedAgain.body.closed_by.id, reporter.user.id);
    const reopened = await t.put(url, { state_event: 'reopen' }, { token: developer.token });
    assert.equal(reopened.body.state, 'opened');
    assert.equal(reopened.body.closed_by, null);
    assert.equal(reopened.body.closed_at, null);

    const notes = await t.get(`${url}/notes`, { token: guest.token, query: { sort: 'asc' } });
    assert.equal(notes.status, 200);
    assert.deepEqual(notes.body.map((n: any) => [n.body, n.system, n.noteable_type, n.noteable_iid]), [['closed', true, 'Issue', issue.iid], ['reopened', true, 'Issue', issue.iid]]);
    assert.equal(notes.body[0].author.id, reporter.user.id);

    const labelled = await t.put(url, { add_labels: 'a,b', discussion_locked: true, due_date: '2031-01-01', milestone_id: null }, { token: reporter.token });
    assert.deepEqual(labelled.body.labels, ['a', 'b']);
    assert.equal(labelled.body.discussion_locked, true);
    assert.equal(labelled.body.due_date, '2031-01-01');
    const removed = await t.put(url, { remove_labels: 'a', assignee_ids: [guest2.user.id] }, { token: reporter.token });
    assert.deepEqual(removed.body.labels, ['b']);
    assert.deepEqual(removed.body.assignees.map((u: any) => u.id), [guest2.user.id]);
    // An assignee may edit it too.
    assert.equal((await t.put(url, { description: 'assignee was here' }, { token: guest2.token })).status, 200);
    const cleared = await t.put(url, { assignee_id: 0, due_date: '' }, { token: reporter.token });
    assert.deepEqual(cleared.body.assignees, []);
    assert.equal(cleared.body.due_date, null);

    const events = await t.get(`${url}/resource_label_events`, { token: guest.token });
    assertEach(ResourceLabelEventSchema, events, 'label events');
    assert.deepEqual(events.body.map((e: any) => [e.action, e.label.name]), [['add', 'a'], ['add', 'b'], ['remove', 'a']]);
    assert.equal(events.headers['x-total'], '3');
    const one = await t.get(`${url}/resource_label_events/${events.body[2].id}`, { token: guest.token });
    assert.equal(one.body.action, 'remove');
    assert.equal((await t.get(`${url}/resource_label_events/999999`, { token: guest.token })).status, 404);
  });

  it('deletes for owners and admins only', async () => {
    const issue = await create({ title: 'doomed' });
    const url = `${base}/issues/${issue.iid}`;
    await t.post(`${url}/notes`, { body: 'a comment' }, { token: developer.token });
    assert.equal((await t.delete(url, { token: maintainer.token })).status, 403);
    assert.equal((await t.delete(url, { token: developer.token })).status, 403);
    assert.equal((await t.delete(url, { token: owner.token })).status, 204);
    assert.equal((await t.get(url, { token: owner.token })).status, 404);
    const other = await create({ title: 'doomed too' });
    assert.equal((await t.delete(`${base}/issues/${other.iid}`, { token: admin.token })).status, 204);
    assert.equal((await t.delete(`${base}/issues/${other.iid}`, { token: admin.token })).status, 404);
  });

  it('hides private projects and confidential issues from those who may not see them', async () => {
    const secret = await create({ title: 'secret', confidential: true, assignee_ids: [guest2.user.id] }, maintainer.token);
    const mine = await create({ title: 'my secret', confidential: true }, guest.token);
    const plain = await create({ title: 'plain' });
    const url = (iid: number) => `${base}/issues/${iid}`;
    const status = async (iid: number, token: string | null) => (await t.get(url(iid), { token })).status;
    assert.equal(await status(plain.iid, null), 404);
    assert.equal(await status(plain.iid, outsider.token), 404);
    assert.equal(await status(plain.iid, blocked.token), 401);
    assert.equal(await status(plain.iid, guest.token), 200);
    assert.equal(await status(secret.iid, guest.token), 404);
    assert.equal(await status(secret.iid, guest2.token), 200, 'an assignee sees it');
    assert.equal(await status(secret.iid, reporter.token), 200);
    assert.equal(await status(secret.iid, admin.token), 200);
    assert.equal(await status(mine.iid, guest.token), 200, 'the author sees it');
    assert.equal(await status(mine.iid, guest2.token), 404);
    // Its notes and every other route follow.
    assert.equal((await t.get(`${url(secret.iid)}/notes`, { token: guest.token })).status, 404);
    assert.equal((await t.post(`${url(secret.iid)}/notes`, { body: 'x' }, { token: guest.token })).status, 404);
    assert.equal((await t.get(`${url(secret.iid)}/discussions`, { token: guest.token })).status, 404);
    assert.equal((await t.put(url(secret.iid), { title: 'x' }, { token: guest.token })).status, 404);
    assert.equal((await t.post(`${url(secret.iid)}/subscribe`, {}, { token: guest.token })).status, 404);
    assert.equal((await t.get(`${url(secret.iid)}/resource_label_events`, { token: guest.token })).status, 404);

    const forGuest = await t.get(`${base}/issues`, { token: guest.token, query: { per_page: 100 } });
    assert.ok(forGuest.body.some((i: any) => i.iid === mine.iid));
    assert.ok(!forGuest.body.some((i: any) => i.iid === secret.iid));
    const forReporter = await t.get(`${base}/issues`, { token: reporter.token, query: { per_page: 100, confidential: true } });
    assert.ok(forReporter.body.some((i: any) => i.iid === secret.iid) && forReporter.body.every((i: any) => i.confidential));
    const global = await t.get('/api/v4/issues', { token: guest2.token, query: { scope: 'all', confidential: true } });
    assert.deepEqual(global.body.map((i: any) => i.iid), [secret.iid]);
    assert.equal((await t.get(`${base}/issues`, { token: null })).status, 404);
    assert.equal((await t.get(`${base}/issues`, { token: outsider.token })).status, 404);

    // Public project: anonymous callers read its issues, not its confidential ones.
    const pub = `/api/v4/projects/${publicProject.id}/issues`;
    const open = await create({ title: 'public' }, developer.token, pub);
    const hidden = await create({ title: 'public secret', confidential: true }, developer.token, pub);
    const anon = await t.get(pub, { token: null });
    assert.equal(anon.status, 200);
    assert.deepEqual(ids(anon), [open.iid]);
    assert.equal((await t.get(`${pub}/${hidden.iid}`, { token: null })).status, 404);
    assert.equal((await t.get(`${pub}/${open.iid}`, { token: null })).status, 200);
    // Non-members may open issues on a public project.
    assert.equal((await t.post(pub, { title: 'from outside' }, { token: outsider.token })).status, 201);
    // With the issues feature off, nobody but admins sees them.
    await t.db.updateTable('projects').set({ settings: sql`settings || '{"issues_access_level":"disabled"}'::jsonb` as any }).where('id', '=', publicProject.id).execute();
    assert.equal((await t.get(pub, { token: developer.token })).status, 403);
    await t.db.updateTable('projects').set({ settings: sql`settings || '{"issues_access_level":"enabled"}'::jsonb` as any }).where('id', '=', publicProject.id).execute();

    const byAdmin = await t.get(`/api/v4/issues/${secret.id}`, { token: admin.token });
    assertOne(IssueSingleSchema, byAdmin, 'GET /issues/:id');
    assert.equal((await t.get(`/api/v4/issues/${secret.id}`, { token: owner.token })).status, 403);
  });

  it('filters, orders and scopes lists as GitLab does', async () => {
    const p = await t.createProject({ group: top });
    for (const [u, level] of [[guest, 10], [reporter, 20], [developer, 30]] as const) await t.addMember(p, u.user, level);
    const url = `/api/v4/projects/${p.id}/issues`;
    const ms = (await t.post(`/api/v4/projects/${p.id}/milestones`, { title: 'm1', due_date: '2099-01-01' }, { token: developer.token })).body;
    const a = await create({ title: 'Alpha login bug', labels: 'bug,backend', milestone_id: ms.id, assignee_ids: [developer.user.id], due_date: '2000-01-01' }, developer.token, url);
    const b = await create({ title: 'Beta', description: 'the login page is slow', labels: 'perf', assignee_ids: [reporter.user.id], due_date: '2099-05-05' }, reporter.token, url);
    const c = await create({ title: 'Gamma', issue_type: 'incident' }, guest.token, url);
    await t.put(`${url}/${c.iid}`, { state_event: 'close' }, { token: developer.token });
    await t.db.insertInto('award_emoji').values({ name: 'thumbsup', user_id: reporter.user.id, awardable_type: 'Issue', awardable_id: b.id }).execute();
    await t.db.insertInto('label_priorities').values({ project_id: p.id, label_id: (await t.db.selectFrom('labels').select('id').where('project_id', '=', p.id).where('title', '=', 'perf').executeTakeFirstOrThrow()).id, priority: 1 }).execute();

    const q = async (query: Record<string, unknown>, token = reporter.token) => {
      const res = await t.get(url, { token, query });
      assert.equal(res.status, 200, `${JSON.stringify(query)}: ${JSON.stringify(res.body)}`);
      return ids(res);
    };
    const all = await t.get(url, { token: reporter.token });
    assertEach(IssueSchema, all, 'project list');
    assert.equal(all.headers['x-total'], '3');
    assert.deepEqual(all.body.map((i: any) => i.iid), [c.iid, b.iid, a.iid], 'newest first');
    assert.deepEqual(await q({ state: 'opened' }), [a.iid, b.iid]);
    assert.deepEqual(await q({ state: 'closed' }), [c.iid]);
    assert.deepEqual(await q({ state: 'all' }), [a.iid, b.iid, c.iid]);
    assert.deepEqual(await q({ labels: 'bug,backend' }), [a.iid]);
    assert.deepEqual(await q({ labels: 'bug,perf' }), []);
    assert.deepEqual(await q({ labels: 'None' }), [c.iid]);
    assert.deepEqual(await q({ labels: 'Any' }), [a.iid, b.iid]);
    assert.deepEqual(await q({ 'not[labels]': 'bug' }), [b.iid, c.iid]);
    assert.deepEqual(await q({ milestone: 'm1' }), [a.iid]);
    assert.deepEqual(await q({ milestone: 'None' }), [b.iid, c.iid]);
    assert.deepEqual(await q({ milestone: 'Any' }), [a.iid]);
    assert.deepEqual(await q({ milestone_id: 'Upcoming' }), [a.iid]);
    assert.deepEqual(await q({ milestone_id: 'None' }), [b.iid, c.iid]);
    assert.deepEqual(await q({ author_id: guest.user.id }), [c.iid]);
    assert.deepEqual(await q({ author_username: reporter.user.username.toUpperCase() }), [b.iid]);
    assert.deepEqual(await q({ 'not[author_id]': guest.user.id }), [a.iid, b.iid]);
    assert.deepEqual(await q({ assignee_id: 'None' }), [c.iid]);
    assert.deepEqual(await q({ assignee_id: 'Any' }), [a.iid, b.iid]);
    assert.deepEqual(await q({ assignee_id: reporter.user.id }), [b.iid]);
    assert.deepEqual(await q({ assignee_username: developer.user.username }), [a.iid]);
    assert.deepEqual(await q({ my_reaction_emoji: 'thumbsup' }), [b.iid]);
    assert.deepEqual(await q({ my_reaction_emoji: 'None' }), [a.iid, c.iid]);
    assert.deepEqual(await q({ search: 'login' }), [a.iid, b.iid]);
    assert.deepEqual(await q({ search: 'login', in: 'title' }), [a.iid]);
    assert.deepEqual(await q({ search: 'login', in: 'description' }), [b.iid]);
    assert.deepEqual(await q({ search: '%' }), []);
    assert.deepEqual(await q({ 'iids[]': [a.iid, c.iid] }), [a.iid, c.iid]);
    assert.deepEqual(await q({ issue_type: 'incident' }), [c.iid]);
    assert.deepEqual(await q({ due_date: 'overdue' }), [a.iid]);
    assert.deepEqual(await q({ due_date: '0' }), [c.iid]);
    assert.deepEqual(await q({ scope: 'created_by_me' }), [b.iid]);
    assert.deepEqual(await q({ scope: 'assigned_to_me' }), [b.iid]);
    assert.deepEqual(await q({ created_after: '2999-01-01T00:00:00Z' }), []);
    assert.deepEqual(await q({ created_before: '2999-01-01T00:00:00Z' }), [a.iid, b.iid, c.iid]);
    assert.deepEqual(await q({ updated_after: '2000-01-01' }), [a.iid, b.iid, c.iid]);
    assert.deepEqual(await q({ updated_before: '2000-01-01' }), []);

    const order = async (query: Record<string, unknown>) => (await t.get(url, { token: reporter.token, query })).body.map((i: any) => i.iid);
    assert.deepEqual(await order({ order_by: 'title', sort: 'asc' }), [a.iid, b.iid, c.iid]);
    assert.deepEqual(await order({ order_by: 'created_at', sort: 'asc' }), [a.iid, b.iid, c.iid]);
    assert.deepEqual(await order({ order_by: 'due_date', sort: 'asc' }), [a.iid, b.iid, c.iid]);
    assert.deepEqual((await order({ order_by: 'popularity' }))[0], b.iid);
    assert.deepEqual((await order({ order_by: 'label_priority', sort: 'asc' }))[0], b.iid);
    assert.deepEqual((await order({ order_by: 'updated_at', sort: 'desc' }))[0], c.iid);

    for (const query of [
      { order_by: 'weight' }, { sort: 'up' }, { state: 'merged' }, { scope: 'everything' }, { in: 'comments' }, { created_after: 'yesterday' },
      { assignee_id: 'someone' }, { milestone_id: 'Soon' }, { author_id: 1, author_username: 'x' }, { milestone: 'm1', milestone_id: 'Any' },
      { issue_type: 'epic' }, { due_date: 'someday' }, { confidential: 'maybe' },
    ]) {
      const res = await t.get(url, { token: reporter.token, query });
      assert.equal(res.status, 400, `${JSON.stringify(query)}: ${res.status}`);
    }

    const details = await t.get(url, { token: reporter.token, query: { with_labels_details: true, labels: 'perf' } });
    assert.equal(details.body[0].labels[0].name, 'perf');
    assert.ok('text_color' in details.body[0].labels[0]);

    // Milestone lists.
    const msIssues = await t.get(`/api/v4/projects/${p.id}/milestones/${ms.id}/issues`, { token: guest.token });
    assertEach(IssueBasicSchema, msIssues, 'milestone issues');
    assert.deepEqual(ids(msIssues), [a.iid]);
    assert.equal((await t.get(`/api/v4/projects/${p.id}/milestones/999999/issues`, { token: guest.token })).status, 404);
    const msMrs = await t.get(`/api/v4/projects/${p.id}/milestones/${ms.id}/merge_requests`, { token: reporter.token });
    assert.equal(msMrs.status, 200);
    assert.deepEqual(msMrs.body, []);

    // open_issues_count on the project and label counts are real.
    const proj = await t.get(`/api/v4/projects/${p.id}`, { token: reporter.token });
    assert.equal(proj.body.open_issues_count, 2);
    const labels = await t.get(`/api/v4/projects/${p.id}/labels`, { token: reporter.token, query: { with_counts: true } });
    const bug = labels.body.find((l: any) => l.name === 'bug');
    assert.equal(bug.open_issues_count, 1);
  });

  it('lists a group with its subgroups, and the global list by scope', async () => {
    const inSub = await create({ title: 'in the subgroup' }, developer.token, `/api/v4/projects/${subProject.id}/issues`);
    const group = await t.get(`/api/v4/groups/${top.id}/issues`, { token: developer.token, query: { per_page: 100, search: 'in the subgroup' } });
    assertEach(IssueSchema, group, 'group list');
    assert.deepEqual(group.body.map((i: any) => i.id), [inSub.id]);
    assert.equal(group.body[0].references.relative, `${sub.full_path}/${subProject.path}#${inSub.iid}`);
    const onlySub = await t.get(`/api/v4/groups/${sub.id}/issues`, { token: developer.token });
    assert.equal(onlySub.body[0].references.relative, `${subProject.path}#${inSub.iid}`);
    assert.equal((await t.get(`/api/v4/groups/${top.id}/issues`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`/api/v4/groups/${top.id}/issues`, { token: null })).status, 404);

    const mine = await t.get('/api/v4/issues', { token: developer.token, query: { per_page: 100 } });
    assertEach(IssueSchema, mine, 'global list');
    assert.ok(mine.body.every((i: any) => i.author.id === developer.user.id), 'scope defaults to created_by_me');
    assert.equal(mine.body[0].references.relative, mine.body[0].references.full);
    const assigned = await t.get('/api/v4/issues', { token: guest2.token, query: { scope: 'assigned_to_me', state: 'all' } });
    assert.ok(assigned.body.every((i: any) => i.assignees.some((u: any) => u.id === guest2.user.id)));
    assert.equal((await t.get('/api/v4/issues', { token: null })).status, 401);
    const anonymous = await t.get('/api/v4/issues', { token: null, query: { scope: 'all' } });
    assert.equal(anonymous.status, 200);
    assert.ok(anonymous.body.every((i: any) => i.project_id === publicProject.id && !i.confidential));
    assert.equal((await t.get('/api/v4/issues', { token: outsider.token, query: { scope: 'all', search: 'in the subgroup' } })).body.length, 0);
  });

  it('comments, threads and subscriptions on issues', async () => {
    const issue = await create({ title: 'talk' });
    const url = `${base}/issues/${issue.iid}`;
    const note = await t.post(`${url}/notes`, { body: 'first' }, { token: guest.token });
    assert.equal(note.status, 201);
    assert.equal(note.body.noteable_type, 'Issue');
    assert.equal(note.body.noteable_iid, issue.iid);
    const thread = await t.post(`${url}/discussions`, { body: 'a thread' }, { token: reporter.token });
    assert.equal(thread.status, 201);
    const reply = await t.post(`${url}/discussions/${thread.body.id}/notes`, { body: 'reply' }, { token: guest.token });
    assert.equal(reply.status, 201);
    assert.equal((await t.put(`${url}/notes/${note.body.id}`, { body: 'edited' }, { token: guest2.token })).status, 403);
    assert.equal((await t.put(`${url}/notes/${note.body.id}`, { body: 'edited' }, { token: guest.token })).status, 200);
    assert.equal((await t.post(`${url}/notes`, { body: 'anon' }, { token: null })).status, 401);
    const got = await t.get(url, { token: guest.token });
    assert.equal(got.body.user_notes_count, 3);

    const sub = await t.post(`${url}/subscribe`, {}, { token: guest2.token });
    assert.equal(sub.status, 201);
    assert.equal(sub.body.subscribed, true);
    assert.equal((await t.post(`${url}/subscribe`, {}, { token: guest2.token })).status, 304);
    const unsub = await t.post(`${url}/unsubscribe`, {}, { token: guest2.token });
    assert.equal(unsub.status, 201);
    assert.equal(unsub.body.subscribed, false);
    assert.equal((await t.post(`${url}/unsubscribe`, {}, { token: guest2.token })).status, 304);
    assert.equal((await t.post(`${url}/unsubscribe`, {}, { token: developer.token })).status, 201, 'the author was subscribed as a participant');
    assert.equal((await t.post(`${url}/subscribe`, {}, { token: null })).status, 401);
  });

  it('pages through a few hundred issues with GitLab headers', async () => {
    const p = await t.createProject({ group: top });
    await t.addMember(p, guest.user, 10);
    await t.addMember(p, developer.user, 30);
    await sql`insert into issues (iid, project_id, title, author_id, created_at, updated_at)
              select g, ${p.id}, 'bulk ' || g, ${developer.user.id}, now() - (g || ' minutes')::interval, now() from generate_series(1, 260) g`.execute(t.db);
    await sql`insert into internal_ids (usage, parent_id, last_value) values ('issues', ${p.id}, 260)`.execute(t.db);
    const url = `/api/v4/projects/${p.id}/issues`;
    const page = await t.get(url, { token: guest.token, query: { per_page: 100, page: 3 } });
    assert.equal(page.status, 200);
    assert.equal(page.body.length, 60);
    assert.equal(page.headers['x-total'], '260');
    assert.equal(page.headers['x-total-pages'], '3');
    assert.equal(page.headers['x-page'], '3');
    assert.equal(page.headers['x-prev-page'], '2');
    assert.equal(page.headers['x-next-page'], '');
    assert.equal(page.body[0].iid, 201, 'newest first: iid 1 is the newest');
    const past = await t.get(url, { token: guest.token, query: { per_page: 100, page: 9 } });
    assert.deepEqual(past.body, []);
    assert.equal(past.headers['x-total'], '260');
    const filtered = await t.get(url, { token: guest.token, query: { search: 'bulk 25', per_page: 5 } });
    assert.equal(filtered.headers['x-total'], '11');
    const created = await create({ title: 'after bulk' }, developer.token, url);
    assert.equal(created.iid, 261);
  });

  it('a locked discussion takes comments from members only', async () => {
    const url = `/api/v4/projects/${publicProject.id}/issues`;
    const issue = (await t.post(url, { title: 'locked one' }, { token: developer.token })).body;
    assert.equal((await t.get(`${url}/${issue.iid}`, { token: outsider.token })).body.subscribed, false);
    assert.equal((await t.post(`${url}/${issue.iid}/notes`, { body: 'open still' }, { token: outsider.token })).status, 201);
    assert.equal((await t.get(`${url}/${issue.iid}`, { token: outsider.token })).body.subscribed, true, 'a commenter takes part');
    assert.equal((await t.put(`${url}/${issue.iid}`, { discussion_locked: true }, { token: developer.token })).status, 200);
    assert.equal((await t.post(`${url}/${issue.iid}/notes`, { body: 'let me in' }, { token: outsider.token })).status, 403);
    assert.equal((await t.post(`${url}/${issue.iid}/discussions`, { body: 'a thread' }, { token: outsider.token })).status, 403);
    assert.equal((await t.post(`${url}/${issue.iid}/notes`, { body: 'member here' }, { token: guest.token })).status, 201);
    assert.equal((await t.post(`${url}/${issue.iid}/notes`, { body: 'admin here' }, { token: admin.token })).status, 201);
    assert.equal((await t.get(`${url}/${issue.iid}/notes`, { token: outsider.token })).status, 200, 'reading stays open');
  });
});
