import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { ResourceLabelEventSchema } from '../../src/presenters/schemas/labels.js';
import { DiscussionSchema, NoteSchema } from '../../src/presenters/schemas/notes.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

/** Discussions, notes, resolvable threads and system notes of merge requests (the one notes module). */
describe('merge request discussions and notes', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project;
  let base: string;
  let mrUrl: string;
  let mr: any;
  let guest: TestUser, reporter: TestUser, developer: TestUser, developer2: TestUser, maintainer: TestUser, owner: TestUser, outsider: TestUser, admin: TestUser, blocked: TestUser;

  const commit = async (branch: string, actions: Record<string, unknown>[], extra: Record<string, unknown> = {}) => {
    const res = await t.post(`${base}/repository/commits`, { branch, commit_message: `change on ${branch}`, actions, ...extra });
    assert.equal(res.status, 201, res.text);
    return res.body.id as string;
  };
  const thread = async (body: string, token: string, extra: Record<string, unknown> = {}) => {
    const res = await t.post(`${mrUrl}/discussions`, { body, ...extra }, { token });
    assert.equal(res.status, 201, res.text);
    return res.body;
  };
  const systemNotes = async () => {
    const res = await t.get(`${mrUrl}/notes`, { query: { activity_filter: 'only_activity', sort: 'asc', per_page: 100 } });
    assert.equal(res.status, 200, res.text);
    for (const n of res.body) assert.equal(n.system, true);
    return res.body as any[];
  };
  const resolveAll = async () => {
    const all = (await t.get(`${mrUrl}/discussions`, { query: { per_page: 100 } })).body;
    for (const x of all) {
      if (x.notes.some((n: any) => n.resolvable && !n.resolved)) {
        assert.equal((await t.put(`${mrUrl}/discussions/${x.id}`, { resolved: true }, { token: maintainer.token })).status, 200);
      }
    }
  };
  const single = async (token?: string) => (await t.get(mrUrl, token ? { token } : {})).body;

  before(async () => {
    t = await createTestContext();
    [guest, reporter, developer, developer2, maintainer, owner, outsider] = await Promise.all([
      t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(),
    ]);
    admin = await t.createUser({ admin: true });
    blocked = await t.createUser({ state: 'blocked' });
    group = await t.createGroup();
    project = await t.createProject({ group, visibility: 0 });
    base = `/api/v4/projects/${project.id}`;
    for (const [u, level] of [[guest, 10], [reporter, 20], [developer, 30], [developer2, 30], [maintainer, 40], [blocked, 30]] as const) await t.addMember(project, u.user, level);
    await t.addMember(group, owner.user, 50);
    await commit('main', [{ action: 'create', file_path: 'README.md', content: 'one\ntwo\nthree\n' }]);
    await commit('other', [{ action: 'create', file_path: 'other.txt', content: 'other\n' }], { start_branch: 'main' });
    await commit('feature', [
      { action: 'update', file_path: 'README.md', content: 'one\nTWO\nthree\n' },
      { action: 'create', file_path: 'added.txt', content: 'added\n' },
    ], { start_branch: 'main' });
    const res = await t.post(`${base}/merge_requests`, { source_branch: 'feature', target_branch: 'main', title: 'Change the readme', labels: 'bug' }, { token: developer.token });
    assert.equal(res.status, 201, res.text);
    mr = res.body;
    mrUrl = `${base}/merge_requests/${mr.iid}`;
  });
  after(async () => {
    await t.close();
  });

  it('starts threads and individual notes, replies, lists and reads them', async () => {
    const d = await thread('Is this right?', reporter.token);
    assertOne(DiscussionSchema, { status: 201, body: d }, 'POST discussions');
    assert.equal(d.individual_note, false);
    const n = d.notes[0];
    assert.equal(n.type, 'DiscussionNote');
    assert.equal(n.noteable_type, 'MergeRequest');
    assert.equal(n.noteable_id, mr.id);
    assert.equal(n.noteable_iid, mr.iid);
    assert.equal(n.project_id, project.id);
    assert.equal(n.resolvable, true);
    assert.equal(n.resolved, false);
    assert.equal(n.resolved_by, null);
    assert.equal(n.resolved_at, null);
    assert.equal(n.system, false);

    const reply = await t.post(`${mrUrl}/discussions/${d.id}/notes`, { body: 'Yes.' }, { token: developer.token });
    assertOne(NoteSchema, reply, 'reply');
    assert.equal(reply.body.type, 'DiscussionNote');
    assert.equal(reply.body.resolvable, true);

    const individual = await t.post(`${mrUrl}/notes`, { body: 'Looks fine overall' }, { token: developer2.token });
    assertOne(NoteSchema, individual, 'POST notes');
    assert.equal(individual.body.type, null);
    assert.equal(individual.body.resolvable, false);
    assert.equal('resolved' in individual.body, false);

    const list = await t.get(`${mrUrl}/discussions`, { token: reporter.token });
    assertEach(DiscussionSchema, list, 'GET discussions');
    const mine = list.body.find((x: any) => x.id === d.id);
    assert.deepEqual(mine.notes.map((x: any) => x.body), ['Is this right?', 'Yes.']);
    assert.equal(list.body.find((x: any) => x.notes[0].id === individual.body.id).individual_note, true);
    assert.equal((await t.get(`${mrUrl}/discussions/${d.id}`, { token: reporter.token })).body.notes.length, 2);
    assert.equal((await t.get(`${mrUrl}/notes/${individual.body.id}`, { token: reporter.token })).body.body, 'Looks fine overall');

    const read = await single(reporter.token);
    assert.equal(read.user_notes_count, 3);
  });

  it('answers by permission: 401 anonymous, 404 outsiders, 403 guests of a private project, 401/403 blocked', async () => {
    assert.equal((await t.get(`${mrUrl}/discussions`, { token: null })).status, 401);
    assert.equal((await t.get(`${mrUrl}/notes`, { token: null })).status, 401);
    assert.equal((await t.get(`${mrUrl}/discussions`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`${mrUrl}/discussions`, { token: guest.token })).status, 403);
    assert.equal((await t.post(`${mrUrl}/discussions`, { body: 'x' }, { token: guest.token })).status, 403);
    assert.ok([401, 403].includes((await t.get(`${mrUrl}/discussions`, { token: blocked.token })).status));
    assert.equal((await t.get(`${mrUrl}/discussions`, { token: admin.token })).status, 200);
    assert.equal((await t.get(`${base}/merge_requests/999/discussions`, { token: reporter.token })).status, 404);
    assert.deepEqual((await t.get(`${base}/merge_requests/999/notes`, { token: reporter.token })).body, { message: '404 Merge Request Not Found' });
    assert.deepEqual((await t.post(`${mrUrl}/discussions`, { body: '  ' }, { token: reporter.token })).body, { error: 'body is missing' });
  });

  it('puts DiffNotes on lines of the merge request diff and refuses lines it does not show', async () => {
    const refs = (await single()).diff_refs;
    const position = { ...refs, position_type: 'text', old_path: 'README.md', new_path: 'README.md' };
    const d = await thread('Capitals?', maintainer.token, { position: { ...position, new_line: 2 } });
    const n = d.notes[0];
    assert.equal(n.type, 'DiffNote');
    assert.equal(n.resolvable, true);
    assert.deepEqual(n.position, {
      base_sha: refs.base_sha, start_sha: refs.start_sha, head_sha: refs.head_sha, old_path: 'README.md', new_path: 'README.md',
      position_type: 'text', old_line: null, new_line: 2, line_range: null, ignore_whitespace_change: false,
    });
    const removed = await thread('Why remove?', maintainer.token, { position: { ...position, old_line: 2 } });
    assert.equal(removed.notes[0].position.old_line, 2);
    const addedFile = await thread('New file', maintainer.token, { position: { ...position, old_path: 'added.txt', new_path: 'added.txt', new_line: 1 } });
    assert.equal(addedFile.notes[0].type, 'DiffNote');

    const reply = await t.post(`${mrUrl}/discussions/${d.id}/notes`, { body: 'ok' }, { token: developer.token });
    assert.equal(reply.body.type, 'DiffNote');
    assert.deepEqual(reply.body.position, n.position);

    const off = await t.post(`${mrUrl}/discussions`, { body: 'x', position: { ...position, new_line: 3 } }, { token: maintainer.token });
    assert.equal(off.status, 400);
    assert.deepEqual(off.body, { message: '400 Bad request - Note {:line_code=>["can\'t be blank", "must be a valid line code"]}' });
    const missing = await t.post(`${mrUrl}/discussions`, { body: 'x', position: { ...position, head_sha: undefined, new_line: 2 } }, { token: maintainer.token });
    assert.deepEqual([missing.status, missing.body], [400, { error: 'position[head_sha] is missing' }]);
    const unknown = await t.post(`${mrUrl}/discussions`, { body: 'x', position: { ...position, head_sha: 'b'.repeat(40), new_line: 2 } }, { token: maintainer.token });
    assert.equal(unknown.status, 400);
  });

  it('resolves and unresolves threads and notes; blocking_discussions_resolved follows the project setting; merging waits for them', async () => {
    const d = await thread('Please rename', developer2.token);
    const noteId = d.notes[0].id;
    // Someone else at reporter level: neither the note's nor the merge request's author.
    const byReporter = await t.put(`${mrUrl}/discussions/${d.id}`, { resolved: true }, { token: reporter.token });
    assert.equal(byReporter.status, 403);
    assert.equal((await t.put(`${mrUrl}/discussions/${d.id}/notes/${noteId}`, { resolved: true }, { token: reporter.token })).status, 403);
    assert.deepEqual((await t.put(`${mrUrl}/discussions/${d.id}`, {}, { token: developer.token })).body, { error: 'resolved is missing' });
    assert.equal((await t.put(`${mrUrl}/discussions/${'0'.repeat(40)}`, { resolved: true }, { token: developer.token })).status, 404);

    // GitLab: unresolved threads block only where the project asks for all threads to be resolved.
    let read = await single();
    assert.equal(read.blocking_discussions_resolved, true);
    const setting = await t.put(base, { only_allow_merge_if_all_discussions_are_resolved: true });
    assert.equal(setting.status, 200, setting.text);
    read = await single();
    assert.equal(read.blocking_discussions_resolved, false);
    assert.equal(read.detailed_merge_status, 'discussions_not_resolved');
    const listed = (await t.get(`${base}/merge_requests`)).body.find((m: any) => m.iid === mr.iid);
    assert.equal(listed.blocking_discussions_resolved, false);
    assert.equal((await t.put(`${mrUrl}/merge`, {}, { token: maintainer.token })).status, 405);

    // The merge request's author (a developer here) resolves a whole thread.
    const resolved = await t.put(`${mrUrl}/discussions/${d.id}`, { resolved: true }, { token: developer.token });
    assertOne(DiscussionSchema, resolved, 'PUT discussion resolved');
    assert.equal(resolved.body.notes[0].resolved, true);
    assert.equal(resolved.body.notes[0].resolved_by.id, developer.user.id);
    assert.ok(resolved.body.notes[0].resolved_at);
    const unresolved = await t.put(`${mrUrl}/discussions/${d.id}`, { resolved: false }, { token: maintainer.token });
    assert.equal(unresolved.body.notes[0].resolved, false);
    assert.equal(unresolved.body.notes[0].resolved_by, null);
    // A note's author resolves their own note.
    const own = await t.put(`${mrUrl}/discussions/${d.id}/notes/${noteId}`, { resolved: true }, { token: developer2.token });
    assertOne(NoteSchema, own, 'PUT note resolved');
    assert.equal(own.body.resolved, true);
    assert.equal(own.body.resolved_by.id, developer2.user.id);

    // As the spec's clients send it: PUT .../discussions/:id?resolved=false.
    const viaQuery = await t.call('PUT', `${mrUrl}/discussions/${d.id}`, { query: { resolved: 'false' }, token: developer.token });
    assert.equal(viaQuery.status, 200, viaQuery.text);
    assert.equal(viaQuery.body.notes[0].resolved, false);

    // An individual note is not resolvable.
    const individual = await t.post(`${mrUrl}/notes`, { body: 'just saying' }, { token: developer.token });
    const threadOfIndividual = (await t.get(`${mrUrl}/discussions`, { query: { per_page: 100 } })).body.find((x: any) => x.notes[0].id === individual.body.id);
    assert.equal((await t.put(`${mrUrl}/discussions/${threadOfIndividual.id}`, { resolved: true }, { token: developer.token })).status, 403);
    const notResolvable = await t.put(`${mrUrl}/discussions/${threadOfIndividual.id}/notes/${individual.body.id}`, { resolved: true }, { token: developer.token });
    assert.deepEqual([notResolvable.status, notResolvable.body], [400, { message: '400 Bad request - Note is not resolvable' }]);

    // Resolve every thread left: the merge request is no longer blocked.
    await resolveAll();
    read = await single();
    assert.equal(read.blocking_discussions_resolved, true);
  });

  it('lets authors and maintainers edit and delete notes, others 403; created_at only for owners and admins', async () => {
    const d = await thread('typo hre', reporter.token);
    const noteUrl = `${mrUrl}/discussions/${d.id}/notes/${d.notes[0].id}`;
    const edited = await t.put(noteUrl, { body: 'typo here' }, { token: reporter.token });
    assert.deepEqual([edited.status, edited.body.body], [200, 'typo here']);
    assert.equal((await t.put(noteUrl, { body: 'not mine' }, { token: developer.token })).status, 403);
    assert.equal((await t.put(`${mrUrl}/notes/${d.notes[0].id}`, { body: 'not mine' }, { token: developer2.token })).status, 403);
    assert.equal((await t.delete(noteUrl, { token: developer.token })).status, 403);
    assert.equal((await t.put(noteUrl, { body: 'fixed by a maintainer' }, { token: maintainer.token })).status, 200);
    assert.equal((await t.put(noteUrl, { body: 'by the admin' }, { token: admin.token })).status, 200);
    assert.equal((await t.put(noteUrl, { body: 'x' }, { token: null })).status, 401);

    const other = await thread('to delete', developer2.token);
    assert.equal((await t.delete(`${mrUrl}/notes/${other.notes[0].id}`, { token: reporter.token })).status, 403);
    assert.equal((await t.delete(`${mrUrl}/notes/${other.notes[0].id}`, { token: developer2.token })).status, 204);
    assert.equal((await t.get(`${mrUrl}/discussions/${other.id}`)).status, 404);
    assert.equal((await t.delete(noteUrl, { token: owner.token })).status, 204);

    const past = '2020-01-02T03:04:05.000Z';
    const byDev = await thread('backdated?', developer.token, { created_at: past });
    assert.notEqual(byDev.notes[0].created_at, past);
    assert.equal((await thread('imported', owner.token, { created_at: past })).notes[0].created_at, past);
    assert.equal((await thread('imported', admin.token, { created_at: past })).notes[0].created_at, past);
  });

  it('writes system notes as GitLab does on changes; nobody edits, deletes or replies to them; they are not user notes', async () => {
    const countBefore = (await single()).user_notes_count;
    const put = async (body: Record<string, unknown>, token = developer.token) => {
      const res = await t.put(mrUrl, body, { token });
      assert.equal(res.status, 200, res.text);
      return res.body;
    };
    await put({ state_event: 'close' });
    await put({ state_event: 'reopen' });
    await put({ title: 'Draft: Change the readme' });
    await put({ title: 'Change the readme' });
    await put({ title: 'Change the docs' });
    await put({ description: 'Now with a description' });
    await put({ target_branch: 'other' });
    await put({ target_branch: 'main' });
    await put({ discussion_locked: true }, maintainer.token);
    await put({ discussion_locked: false }, maintainer.token);
    // Labels are label events, not notes.
    await put({ add_labels: 'feature' });
    assert.equal((await t.post(`${mrUrl}/approve`, {}, { token: maintainer.token })).status, 201);
    assert.equal((await t.post(`${mrUrl}/unapprove`, {}, { token: maintainer.token })).status, 201);
    const pushed = await commit('feature', [{ action: 'create', file_path: 'more.txt', content: 'more\n' }]);

    const notes = await systemNotes();
    const bodies = notes.map((n) => n.body);
    assert.deepEqual(bodies.slice(0, -1), [
      'closed',
      'reopened',
      'marked this merge request as **draft**',
      'marked this merge request as **ready**',
      'changed title from **Change the {-readme-}** to **Change the {+docs+}**',
      'changed the description',
      'changed target branch from `main` to `other`',
      'changed target branch from `other` to `main`',
      'locked this merge request',
      'unlocked this merge request',
      'approved this merge request',
      'unapproved this merge request',
    ]);
    const added = bodies.at(-1)!;
    assert.match(added, new RegExp(`^added 1 commit\\n\\n<ul><li>${pushed.slice(0, 8)} - change on feature</li></ul>\\n\\n\\[Compare with previous version\\]\\(/${group.full_path}/${project.path}/-/merge_requests/${mr.iid}/diffs\\?start_sha=[0-9a-f]{40}\\)$`));
    assertEach(NoteSchema, { status: 200, body: notes }, 'system notes');
    for (const n of notes) {
      assert.equal(n.type, null);
      assert.equal(n.resolvable, false);
    }
    assert.equal(notes[0].author.id, developer.user.id);
    assert.equal(notes.find((n) => n.body === 'approved this merge request').author.id, maintainer.user.id);
    assert.equal(notes.at(-1).author.id, 1, 'the pusher (root, through the commits API)');

    const closed = notes[0];
    const threadOfClosed = (await t.get(`${mrUrl}/discussions`, { query: { per_page: 100 } })).body.find((x: any) => x.notes[0].id === closed.id);
    assert.equal(threadOfClosed.individual_note, true);
    assert.equal((await t.put(`${mrUrl}/notes/${closed.id}`, { body: 'rewritten' }, { token: developer.token })).status, 403);
    assert.equal((await t.put(`${mrUrl}/notes/${closed.id}`, { body: 'rewritten' }, { token: admin.token })).status, 403);
    assert.equal((await t.delete(`${mrUrl}/notes/${closed.id}`, { token: admin.token })).status, 403);
    assert.equal((await t.delete(`${mrUrl}/discussions/${threadOfClosed.id}/notes/${closed.id}`, { token: maintainer.token })).status, 403);
    const reply = await t.post(`${mrUrl}/discussions/${threadOfClosed.id}/notes`, { body: 'answer' }, { token: developer.token });
    assert.equal(reply.status, 400);

    const comments = (await t.get(`${mrUrl}/notes`, { query: { activity_filter: 'only_comments', per_page: 100 } })).body;
    assert.ok(comments.every((n: any) => !n.system));
    assert.equal((await single()).user_notes_count, countBefore);

    // Merged once every thread is resolved (the project asks for it): the last system note, by whoever merged it.
    assert.equal((await t.put(`${mrUrl}/merge`, {}, { token: maintainer.token })).status, 405);
    await resolveAll();
    const merged = await t.put(`${mrUrl}/merge`, {}, { token: maintainer.token });
    assert.equal(merged.status, 200, merged.text);
    assert.equal(merged.body.state, 'merged');
    const last = (await systemNotes()).at(-1);
    assert.deepEqual([last.body, last.author.id], ['merged', maintainer.user.id]);
  });

  it('lists label events of a merge request and reads one', async () => {
    const res = await t.get(`${mrUrl}/resource_label_events`, { token: reporter.token });
    assertEach(ResourceLabelEventSchema, res, 'GET resource_label_events');
    assert.deepEqual(res.body.map((e: any) => [e.action, e.label.name]), [['add', 'bug'], ['add', 'feature']]);
    assert.equal(res.body[0].resource_type, 'MergeRequest');
    assert.equal(res.body[0].resource_id, mr.id);
    assert.equal(res.headers['x-total'], '2');
    const one = await t.get(`${mrUrl}/resource_label_events/${res.body[1].id}`, { token: reporter.token });
    assertOne(ResourceLabelEventSchema, one, 'GET one label event');
    assert.equal(one.body.label.name, 'feature');
    assert.equal((await t.get(`${mrUrl}/resource_label_events/999999`, { token: reporter.token })).status, 404);
    assert.equal((await t.get(`${mrUrl}/resource_label_events`, { token: null })).status, 401);
    assert.equal((await t.get(`${mrUrl}/resource_label_events`, { token: guest.token })).status, 403);
    assert.equal((await t.get(`${mrUrl}/resource_label_events`, { token: outsider.token })).status, 404);
  });
});
