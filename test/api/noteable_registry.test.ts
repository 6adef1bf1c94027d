import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RowId } from '../../src/api/params.js';
import type { Project } from '../../src/db/schema/core.js';
import { NOTEABLES } from '../../src/noteables/index.js';
import { defineNoteable } from '../../src/noteables/registry.js';
import { notFound } from '../../src/plugins/errors.js';
import { DiscussionSchema, NoteSchema } from '../../src/presenters/schemas/notes.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertOne } from '../helpers/contract.js';

/**
 * A kind registered by one object gets every discussions and notes route. The kind here is a
 * stand-in for merge requests (rows with an iid, resolvable threads) under a test prefix, so
 * the parts commits do not use (noteable_id, noteable_iid, resolving) are driven too.
 */
const stand_in = defineNoteable<{ iid: number }>({
  type: 'MergeRequest',
  parent: 'project',
  prefix: '/projects/:id/test_noteables/:thing_iid',
  params: { thing_iid: RowId },
  abilities: { read: 'read_project', create: 'push_code', admin: 'admin_note', setCreatedAt: 'set_note_created_at', resolve: 'push_code' },
  resolvable: true,
  async find({ access, params }) {
    const iid = Number(params.thing_iid);
    if (iid < 1 || iid > 3) throw notFound('Thing');
    return { record: { iid }, iid, scope: { type: 'MergeRequest', projectId: access.project.id, key: { column: 'noteable_id', value: 1000 + iid } } };
  },
});

describe('noteable registry: one registration serves the whole set', () => {
  let t: TestContext;
  let project: Project;
  let base: string;
  let reporter: TestUser, developer: TestUser, other: TestUser;

  before(async () => {
    NOTEABLES.push(stand_in);
    t = await createTestContext();
    [reporter, developer, other] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    project = await t.createProject({ visibility: 0 });
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, other.user, 30);
    base = `/api/v4/projects/${project.id}/test_noteables`;
  });
  after(async () => {
    await t.close();
  });

  it('registers every route under the prefix with its parameters checked', async () => {
    const urls = t.app.routeTable.filter((r) => r.url.includes('/test_noteables/')).map((r) => `${r.method} ${r.url.replace('/api/v4/projects/:id/test_noteables/:thing_iid', '')}`);
    for (const expected of [
      'GET /discussions', 'GET /discussions/:discussion_id', 'POST /discussions', 'GET /discussions/:discussion_id/notes',
      'POST /discussions/:discussion_id/notes', 'GET /discussions/:discussion_id/notes/:note_id', 'PUT /discussions/:discussion_id/notes/:note_id',
      'DELETE /discussions/:discussion_id/notes/:note_id', 'GET /notes', 'GET /notes/:note_id', 'POST /notes', 'PUT /notes/:note_id', 'DELETE /notes/:note_id',
    ]) assert.ok(urls.includes(expected), `${expected} missing from ${urls.join(', ')}`);
    assert.equal((await t.get(`${base}/abc/discussions`)).status, 400);
    assert.deepEqual((await t.get(`${base}/9/discussions`)).body, { message: '404 Thing Not Found' });
  });

  it('keeps notes by noteable_id with its iid, and resolves threads', async () => {
    const created = await t.post(`${base}/1/discussions`, { body: 'Please rename' }, { token: developer.token });
    assertOne(DiscussionSchema, created, 'POST discussions');
    const note = created.body.notes[0];
    assert.equal(note.noteable_type, 'MergeRequest');
    assert.equal(note.noteable_id, 1001);
    assert.equal(note.noteable_iid, 1);
    assert.equal(note.resolvable, true);
    assert.equal(note.resolved, false);
    assert.equal(note.resolved_by, null);
    assert.equal(note.resolved_at, null);

    // Another thing of the same project does not see it.
    assert.equal((await t.get(`${base}/2/discussions/${created.body.id}`)).status, 404);
    assert.deepEqual((await t.get(`${base}/2/discussions`)).body, []);

    const url = `${base}/1/discussions/${created.body.id}/notes/${note.id}`;
    assert.equal((await t.put(url, { resolved: true }, { token: reporter.token })).status, 403);
    const resolved = await t.put(url, { resolved: true }, { token: other.token });
    assertOne(NoteSchema, resolved, 'PUT resolved');
    assert.equal(resolved.body.resolved, true);
    assert.equal(resolved.body.resolved_by.username, other.user.username);
    assert.ok(resolved.body.resolved_at);
    const again = await t.put(url, { resolved: 'true' }, { token: developer.token });
    assert.equal(again.body.resolved_by.username, other.user.username, 'resolving twice keeps the first resolver');
    const reopened = await t.put(url, { resolved: false }, { token: developer.token });
    assert.equal(reopened.body.resolved, false);
    assert.equal(reopened.body.resolved_by, null);

    // Individual notes are not resolvable.
    const single = await t.post(`${base}/1/notes`, { body: 'fine' }, { token: developer.token });
    assert.equal(single.body.resolvable, false);
    assert.equal('resolved' in single.body, false);
    const list = await t.get(`${base}/1/discussions`);
    const alone = list.body.find((d: any) => d.notes[0].id === single.body.id);
    assert.equal((await t.put(`${base}/1/discussions/${alone.id}/notes/${single.body.id}`, { resolved: true }, { token: developer.token })).status, 400);

    // Abilities come from the registration: reporters may not write here.
    assert.equal((await t.post(`${base}/1/notes`, { body: 'x' }, { token: reporter.token })).status, 403);
    assert.equal((await t.get(`${base}/1/notes`, { token: reporter.token })).status, 200);
  });

  it('refuses a prefix outside its parent', () => {
    assert.throws(() => defineNoteable({ ...stand_in, prefix: '/groups/:id/things/:thing_iid' }), /must start with/);
  });
});
