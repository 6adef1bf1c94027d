import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace } from '../../src/db/schema/core.js';
import { EpicSchema } from '../../src/presenters/schemas/epics.js';
import { ResourceLabelEventSchema } from '../../src/presenters/schemas/labels.js';
import { DiscussionSchema, NoteSchema } from '../../src/presenters/schemas/notes.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

/** Minimal group epics (GitLab's Epics API) and their discussions, notes and label events. */
describe('group epics', () => {
  let t: TestContext;
  let group: Namespace, privateGroup: Namespace, otherGroup: Namespace;
  let base: string;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, owner: TestUser, outsider: TestUser, admin: TestUser;
  let epic: any, secret: any;

  before(async () => {
    t = await createTestContext();
    [guest, reporter, developer, maintainer, owner, outsider] = await Promise.all([
      t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(),
    ]);
    admin = await t.createUser({ admin: true });
    group = await t.createGroup({ visibility: 20 });
    privateGroup = await t.createGroup({ visibility: 0 });
    otherGroup = await t.createGroup({ visibility: 20 });
    for (const [u, level] of [[guest, 10], [reporter, 20], [developer, 30], [maintainer, 40], [owner, 50]] as const) await t.addMember(group, u.user, level);
    base = `/api/v4/groups/${group.id}/epics`;
    // Epics elsewhere first, so that ids and iids differ below.
    for (const title of ['elsewhere 1', 'elsewhere 2']) assert.equal((await t.post(`/api/v4/groups/${otherGroup.id}/epics`, { title })).status, 201);
  });
  after(async () => {
    await t.close();
  });

  it('creates epics for reporters and up, with labels and fixed dates', async () => {
    const res = await t.post(base, {
      title: 'Roadmap', description: 'The plan', labels: 'planning,q1', start_date_is_fixed: true, start_date_fixed: '2024-01-10',
      due_date_is_fixed: true, due_date_fixed: '2024-03-31',
    }, { token: reporter.token });
    assertOne(EpicSchema, res, 'POST epic');
    epic = res.body;
    assert.equal(epic.iid, 1);
    assert.notEqual(epic.id, epic.iid);
    assert.equal(epic.group_id, group.id);
    assert.equal(epic.state, 'opened');
    assert.equal(epic.author.id, reporter.user.id);
    assert.deepEqual(epic.labels, ['planning', 'q1']);
    assert.equal(epic.start_date, '2024-01-10');
    assert.equal(epic.start_date_fixed, '2024-01-10');
    assert.equal(epic.start_date_is_fixed, true);
    assert.equal(epic.due_date, '2024-03-31');
    assert.equal(epic.end_date, '2024-03-31');
    assert.equal(epic.confidential, false);
    assert.deepEqual(epic.references, { short: '&1', relative: '&1', full: `${group.full_path}&1` });
    assert.equal(epic.web_url, `${t.config.externalUrl}/groups/${group.full_path}/-/epics/1`);
    const labels = await t.db.selectFrom('labels').select(['title', 'group_id', 'project_id']).where('group_id', '=', group.id).orderBy('title').execute();
    assert.deepEqual(labels.map((l) => l.title), ['planning', 'q1']);

    const conf = await t.post(base, { title: 'Secret plan', confidential: true }, { token: maintainer.token });
    assert.equal(conf.status, 201);
    secret = conf.body;
    assert.equal(secret.iid, 2);

    assert.equal((await t.post(base, { title: 'x' }, { token: guest.token })).status, 403);
    assert.equal((await t.post(base, { title: 'x' }, { token: outsider.token })).status, 403);
    assert.equal((await t.post(base, { title: 'x' }, { token: null })).status, 401);
    assert.equal((await t.post(`/api/v4/groups/${privateGroup.id}/epics`, { title: 'x' }, { token: outsider.token })).status, 404);
    assert.deepEqual((await t.post(base, {}, { token: reporter.token })).body, { error: 'title is missing' });
    assert.deepEqual((await t.post(base, { title: '  ' }, { token: reporter.token })).body, { message: { title: ["can't be blank"] } });
    assert.equal((await t.post(base, { title: 'x', start_date_fixed: 'soon' }, { token: reporter.token })).status, 400);
  });

  it('lists and reads epics; confidential ones only for reporters and up', async () => {
    const anon = await t.get(base, { token: null });
    assertEach(EpicSchema, anon, 'GET epics');
    assert.deepEqual(anon.body.map((e: any) => e.iid), [1]);
    assert.deepEqual((await t.get(base, { token: guest.token })).body.map((e: any) => e.iid), [1]);
    const byReporter = await t.get(base, { token: reporter.token });
    assert.deepEqual(byReporter.body.map((e: any) => e.iid), [2, 1]);
    assert.equal(byReporter.headers['x-total'], '2');
    assert.deepEqual((await t.get(base, { token: reporter.token, query: { sort: 'asc' } })).body.map((e: any) => e.iid), [1, 2]);
    assert.deepEqual((await t.get(base, { token: reporter.token, query: { labels: 'q1' } })).body.map((e: any) => e.iid), [1]);
    assert.deepEqual((await t.get(base, { token: reporter.token, query: { labels: 'None' } })).body.map((e: any) => e.iid), [2]);
    assert.deepEqual((await t.get(base, { token: reporter.token, query: { search: 'secret' } })).body.map((e: any) => e.iid), [2]);
    assert.deepEqual((await t.get(base, { token: reporter.token, query: { author_id: reporter.user.id } })).body.map((e: any) => e.iid), [1]);
    const details = await t.get(base, { token: reporter.token, query: { with_labels_details: true, labels: 'q1' } });
    assert.equal(details.body[0].labels[0].name, 'planning');
    assert.equal((await t.get(base, { token: reporter.token, query: { created_after: 'nope' } })).status, 400);

    assert.equal((await t.get(`${base}/1`, { token: null })).status, 200);
    assert.equal((await t.get(`${base}/2`, { token: guest.token })).status, 404);
    assert.equal((await t.get(`${base}/2`, { token: reporter.token })).status, 200);
    assert.equal((await t.get(`${base}/99`, { token: reporter.token })).status, 404);
    assert.equal((await t.get(`/api/v4/groups/${privateGroup.id}/epics`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`/api/v4/groups/${privateGroup.id}/epics`, { token: admin.token })).status, 200);
  });

  it('updates, closes and reopens epics; label changes become label events', async () => {
    const upd = await t.put(`${base}/1`, { title: 'Roadmap 2024', add_labels: 'urgent', remove_labels: 'q1', due_date_fixed: '2024-04-30' }, { token: developer.token });
    assertOne(EpicSchema, upd, 'PUT epic');
    assert.equal(upd.body.title, 'Roadmap 2024');
    assert.deepEqual(upd.body.labels, ['planning', 'urgent']);
    assert.equal(upd.body.due_date, '2024-04-30');
    assert.equal(upd.body.start_date, '2024-01-10');
    const closed = await t.put(`${base}/1`, { state_event: 'close' }, { token: reporter.token });
    assert.equal(closed.body.state, 'closed');
    assert.ok(closed.body.closed_at);
    assert.deepEqual((await t.get(base, { token: null, query: { state: 'closed' } })).body.map((e: any) => e.iid), [1]);
    const reopened = await t.put(`${base}/1`, { state_event: 'reopen' }, { token: reporter.token });
    assert.deepEqual([reopened.body.state, reopened.body.closed_at], ['opened', null]);
    const unfixed = await t.put(`${base}/1`, { start_date_is_fixed: false }, { token: reporter.token });
    assert.equal(unfixed.body.start_date, null);

    assert.equal((await t.put(`${base}/1`, { title: 'x' }, { token: guest.token })).status, 403);
    assert.equal((await t.put(`${base}/1`, { title: 'x' }, { token: null })).status, 401);
    assert.equal((await t.put(`${base}/1`, { state_event: 'explode' }, { token: reporter.token })).status, 400);
    assert.deepEqual((await t.put(`${base}/1`, { title: '' }, { token: reporter.token })).body, { message: { title: ["can't be blank"] } });

    const events = await t.get(`${base}/${epic.id}/resource_label_events`, { token: null });
    assertEach(ResourceLabelEventSchema, events, 'epic label events');
    assert.deepEqual(events.body.map((e: any) => [e.action, e.label.name]), [['add', 'planning'], ['add', 'q1'], ['add', 'urgent'], ['remove', 'q1']]);
    assert.equal(events.body[0].resource_type, 'Epic');
    assert.equal(events.body[0].resource_id, epic.id);
    const one = await t.get(`${base}/${epic.id}/resource_label_events/${events.body[2].id}`, { token: guest.token });
    assert.equal(one.body.label.name, 'urgent');
    assert.equal((await t.get(`${base}/${secret.id}/resource_label_events`, { token: guest.token })).status, 404);
  });

  it('has discussions and notes, naming the epic by its id as GitLab does', async () => {
    const url = `${base}/${epic.id}`;
    const d = await t.post(`${url}/discussions`, { body: 'What about Q2?' }, { token: guest.token });
    assertOne(DiscussionSchema, d, 'POST epic discussion');
    const n = d.body.notes[0];
    assert.equal(n.noteable_type, 'Epic');
    assert.equal(n.noteable_id, epic.id);
    assert.equal(n.noteable_iid, null);
    assert.equal(n.project_id, null);
    assert.equal(n.resolvable, false);
    const reply = await t.post(`${url}/discussions/${d.body.id}/notes`, { body: 'Later.' }, { token: reporter.token });
    assertOne(NoteSchema, reply, 'reply');
    const note = await t.post(`${url}/notes`, { body: 'A plain note' }, { token: developer.token });
    assert.equal(note.status, 201);
    assertEach(DiscussionSchema, await t.get(`${url}/discussions`, { token: null }), 'GET epic discussions');
    assert.equal((await t.get(`${url}/notes`, { token: null })).body.length, 3);

    const noteUrl = `${url}/discussions/${d.body.id}/notes/${n.id}`;
    assert.equal((await t.put(noteUrl, { body: 'edited' }, { token: reporter.token })).status, 403);
    assert.equal((await t.put(noteUrl, { body: 'edited' }, { token: guest.token })).status, 200);
    assert.equal((await t.put(noteUrl, { body: 'by a maintainer' }, { token: maintainer.token })).status, 200);
    // Epic threads do not resolve: 403 without resolve_note, 400 for the note's author.
    assert.equal((await t.put(noteUrl, { resolved: true }, { token: maintainer.token })).status, 403);
    assert.deepEqual((await t.put(noteUrl, { resolved: true }, { token: guest.token })).body, { message: '400 Bad request - Note is not resolvable' });
    assert.equal((await t.put(`${url}/discussions/${d.body.id}`, { resolved: true }, { token: owner.token })).status, 404);
    assert.equal((await t.delete(`${url}/notes/${note.body.id}`, { token: guest.token })).status, 403);
    assert.equal((await t.delete(`${url}/notes/${note.body.id}`, { token: developer.token })).status, 204);
    assert.equal((await t.post(`${url}/discussions`, { body: 'x' }, { token: null })).status, 401);
    assert.equal((await t.post(`${url}/discussions`, { body: 'x' }, { token: outsider.token })).status, 201, 'a public group: anyone signed in may comment');

    const past = '2021-05-06T07:08:09.000Z';
    assert.notEqual((await t.post(`${url}/notes`, { body: 'old', created_at: past }, { token: maintainer.token })).body.created_at, past);
    assert.equal((await t.post(`${url}/notes`, { body: 'old', created_at: past }, { token: owner.token })).body.created_at, past);

    // The iid is not the id here: the discussions API does not find epic 1 by its iid.
    assert.equal((await t.get(`${base}/${epic.iid}/discussions`, { token: reporter.token })).status, 404);
    assert.equal((await t.get(`${base}/${secret.id}/discussions`, { token: guest.token })).status, 404);
    assert.equal((await t.get(`${base}/${secret.id}/discussions`, { token: reporter.token })).status, 200);
    assert.equal((await t.get(`/api/v4/groups/${otherGroup.id}/epics/${epic.id}/discussions`, { token: admin.token })).status, 404);
  });

  it('deletes epics for owners only', async () => {
    assert.equal((await t.delete(`${base}/2`, { token: maintainer.token })).status, 403);
    assert.equal((await t.delete(`${base}/2`, { token: owner.token })).status, 204);
    assert.equal((await t.get(`${base}/2`, { token: owner.token })).status, 404);
    assert.equal((await t.delete(`${base}/2`, { token: owner.token })).status, 404);
    assert.equal((await t.delete(`${base}/1`, { token: admin.token })).status, 204);
    const notes = await t.db.selectFrom('notes').select('id').where('noteable_type', '=', 'Epic').where('noteable_id', '=', epic.id).execute();
    assert.deepEqual(notes, []);
  });
});
