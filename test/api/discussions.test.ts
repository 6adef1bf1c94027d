import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { DiscussionSchema, NoteSchema } from '../../src/presenters/schemas/notes.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

/** Discussions and notes of commits, through the one notes module every noteable shares. */
describe('discussions and notes on commits', () => {
  let t: TestContext;
  let project: Project, publicProject: Project;
  let url: string, publicUrl: string;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, owner: TestUser, outsider: TestUser, blocked: TestUser, admin: TestUser;
  let first: string, second: string, publicSha: string;
  /** The commit `second` of the private project, under which every route below lives. */
  let c: string;

  const commit = async (base: string, body: Record<string, unknown>) => {
    const res = await t.post(`${base}/repository/commits`, body);
    assert.equal(res.status, 201, res.text);
    return res.body.id as string;
  };
  const thread = async (body: string, token?: string, sha = second, extra: Record<string, unknown> = {}) => {
    const res = await t.post(`${url}/repository/commits/${sha}/discussions`, { body, ...extra }, token ? { token } : {});
    assert.equal(res.status, 201, res.text);
    return res.body;
  };

  before(async () => {
    t = await createTestContext();
    [guest, reporter, developer, maintainer, owner, outsider, admin] = await Promise.all([
      t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser({ admin: true }),
    ]);
    blocked = await t.createUser({ state: 'blocked' });
    project = await t.createProject({ owner: owner.user, visibility: 0 });
    publicProject = await t.createProject({ visibility: 20 });
    url = `/api/v4/projects/${project.id}`;
    publicUrl = `/api/v4/projects/${publicProject.id}`;
    for (const [u, level] of [[guest, 10], [reporter, 20], [developer, 30], [maintainer, 40], [blocked, 30]] as const) await t.addMember(project, u.user, level);
    first = await commit(url, { branch: 'main', commit_message: 'first', actions: [{ action: 'create', file_path: 'README.md', content: 'one\ntwo\n' }] });
    second = await commit(url, { branch: 'main', commit_message: 'second', actions: [{ action: 'update', file_path: 'README.md', content: 'one\nthree\n' }] });
    publicSha = await commit(publicUrl, { branch: 'main', commit_message: 'public', actions: [{ action: 'create', file_path: 'a.txt', content: 'a\n' }] });
    c = `${url}/repository/commits/${second}`;
  });
  after(async () => {
    await t.close();
  });

  it('creates a thread, replies, reads, edits and deletes its notes', async () => {
    const d = await thread('Why this change?', developer.token);
    assertOne(DiscussionSchema, { status: 201, body: d }, 'POST discussions');
    assert.match(d.id, /^[0-9a-f]{40}$/);
    assert.equal(d.individual_note, false);
    assert.equal(d.notes.length, 1);
    const n = d.notes[0];
    assert.equal(n.type, 'DiscussionNote');
    assert.equal(n.body, 'Why this change?');
    assert.equal(n.noteable_type, 'Commit');
    assert.equal(n.noteable_id, null);
    assert.equal(n.noteable_iid, null);
    assert.equal(n.project_id, project.id);
    assert.equal(n.resolvable, false);
    assert.equal('resolved' in n, false);
    assert.equal('position' in n, false);
    assert.equal(n.author.username, developer.user.username);

    const one = await t.get(`${c}/discussions/${d.id}`, { token: reporter.token });
    assertOne(DiscussionSchema, one, 'GET discussion');
    assert.deepEqual(one.body, d);

    const reply = await t.post(`${c}/discussions/${d.id}/notes`, { body: 'To fix the typo.' }, { token: reporter.token });
    assertOne(NoteSchema, reply, 'POST reply');
    assert.equal(reply.status, 201);
    assert.equal(reply.body.type, 'DiscussionNote');
    assert.equal(reply.body.author.username, reporter.user.username);

    const notes = await t.get(`${c}/discussions/${d.id}/notes`, { token: reporter.token });
    assertEach(NoteSchema, notes, 'GET discussion notes');
    assert.deepEqual(notes.body.map((x: any) => x.body), ['Why this change?', 'To fix the typo.']);
    const single = await t.get(`${c}/discussions/${d.id}/notes/${reply.body.id}`, { token: reporter.token });
    assertOne(NoteSchema, single, 'GET discussion note');
    assert.equal(single.body.body, 'To fix the typo.');

    const edited = await t.put(`${c}/discussions/${d.id}/notes/${n.id}`, { body: 'Why this change, really?' }, { token: developer.token });
    assertOne(NoteSchema, edited, 'PUT discussion note');
    assert.equal(edited.body.body, 'Why this change, really?');
    assert.ok(edited.body.updated_at >= n.updated_at);
    assert.equal(edited.body.created_at, n.created_at);

    // Only the author or a maintainer edits or deletes.
    assert.equal((await t.put(`${c}/discussions/${d.id}/notes/${n.id}`, { body: 'hijack' }, { token: reporter.token })).status, 403);
    assert.equal((await t.delete(`${c}/discussions/${d.id}/notes/${n.id}`, { token: reporter.token })).status, 403);
    const byMaintainer = await t.put(`${c}/discussions/${d.id}/notes/${n.id}`, { body: 'moderated' }, { token: maintainer.token });
    assert.equal(byMaintainer.status, 200);
    assert.equal(byMaintainer.body.body, 'moderated');
    assert.equal(byMaintainer.body.author.username, developer.user.username);

    assert.equal((await t.delete(`${c}/discussions/${d.id}/notes/${reply.body.id}`, { token: reporter.token })).status, 204);
    assert.equal((await t.get(`${c}/discussions/${d.id}/notes/${reply.body.id}`)).status, 404);
    assert.equal((await t.delete(`${c}/discussions/${d.id}/notes/${n.id}`, { token: maintainer.token })).status, 204);
    const gone = await t.get(`${c}/discussions/${d.id}`);
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body, { message: '404 Discussion Not Found' });
  });

  it('an individual note stands alone until a reply turns it into a thread', async () => {
    const note = await t.post(`${c}/notes`, { body: 'Looks good' }, { token: developer.token });
    assertOne(NoteSchema, note, 'POST notes');
    assert.equal(note.status, 201);
    assert.equal(note.body.type, null);
    const list = await t.get(`${c}/discussions?per_page=100`);
    const alone = list.body.find((d: any) => d.notes[0].id === note.body.id);
    assert.equal(alone.individual_note, true);
    assert.equal(alone.notes[0].type, null);

    const reply = await t.post(`${c}/discussions/${alone.id}/notes`, { body: 'Agreed' }, { token: reporter.token });
    assert.equal(reply.status, 201, reply.text);
    assert.equal(reply.body.type, 'DiscussionNote');
    const now = await t.get(`${c}/discussions/${alone.id}`);
    assert.equal(now.body.individual_note, false);
    assert.deepEqual(now.body.notes.map((n: any) => [n.type, n.body]), [['DiscussionNote', 'Looks good'], ['DiscussionNote', 'Agreed']]);
  });

  it('answers by role: private project reads need reporter, writes need a signed-in reader', async () => {
    const d = await thread('permission probe', developer.token);
    const reads = [`${c}/discussions`, `${c}/discussions/${d.id}`, `${c}/discussions/${d.id}/notes`, `${c}/discussions/${d.id}/notes/${d.notes[0].id}`, `${c}/notes`, `${c}/notes/${d.notes[0].id}`];
    const cases: [string, string | null, number][] = [
      ['anonymous', null, 404], ['outsider', outsider.token, 404], ['guest', guest.token, 403], ['blocked', blocked.token, 401],
      ['reporter', reporter.token, 200], ['developer', developer.token, 200], ['maintainer', maintainer.token, 200], ['owner', owner.token, 200], ['admin', admin.token, 200],
    ];
    for (const [who, token, status] of cases) {
      for (const path of reads) assert.equal((await t.get(path, { token })).status, status, `${who} GET ${path}`);
    }
    const writes: [string, string | null, number][] = [
      ['anonymous', null, 401], ['outsider', outsider.token, 404], ['guest', guest.token, 403], ['blocked', blocked.token, 401],
      ['reporter', reporter.token, 201], ['developer', developer.token, 201], ['maintainer', maintainer.token, 201], ['admin', admin.token, 201],
    ];
    for (const [who, token, status] of writes) {
      assert.equal((await t.post(`${c}/discussions`, { body: 'x' }, { token })).status, status, `${who} POST discussions`);
      assert.equal((await t.post(`${c}/discussions/${d.id}/notes`, { body: 'x' }, { token })).status, status, `${who} POST reply`);
      assert.equal((await t.post(`${c}/notes`, { body: 'x' }, { token })).status, status, `${who} POST notes`);
    }
    // Editing and deleting someone else's note: maintainers, owners and admins only.
    const target = d.notes[0].id;
    const edits: [string, string | null, number][] = [
      ['anonymous', null, 401], ['outsider', outsider.token, 404], ['guest', guest.token, 403], ['blocked', blocked.token, 401],
      ['reporter', reporter.token, 403], ['maintainer', maintainer.token, 200], ['owner', owner.token, 200], ['admin', admin.token, 200],
    ];
    for (const [who, token, status] of edits) {
      assert.equal((await t.put(`${c}/discussions/${d.id}/notes/${target}`, { body: `by ${who}` }, { token })).status, status, `${who} PUT thread note`);
      assert.equal((await t.put(`${c}/notes/${target}`, { body: `by ${who}` }, { token })).status, status, `${who} PUT note`);
    }
    for (const [who, token, status] of edits.filter(([, , s]) => s !== 200)) {
      assert.equal((await t.delete(`${c}/discussions/${d.id}/notes/${target}`, { token })).status, status, `${who} DELETE thread note`);
      assert.equal((await t.delete(`${c}/notes/${target}`, { token })).status, status, `${who} DELETE note`);
    }
    assert.equal((await t.delete(`${c}/notes/${target}`, { token: admin.token })).status, 204);
  });

  it('public projects: anyone reads, any signed-in user comments and edits only their own notes', async () => {
    const pc = `${publicUrl}/repository/commits/${publicSha}`;
    const mine = await t.post(`${pc}/discussions`, { body: 'drive-by' }, { token: outsider.token });
    assert.equal(mine.status, 201, mine.text);
    const list = await t.get(`${pc}/discussions`, { token: null });
    assertEach(DiscussionSchema, list, 'GET discussions anonymously');
    assertEach(NoteSchema, await t.get(`${pc}/notes`, { token: null }), 'GET notes anonymously');
    assert.equal((await t.post(`${pc}/discussions`, { body: 'anon' }, { token: null })).status, 401);
    assert.equal((await t.post(`${pc}/notes`, { body: 'anon' }, { token: null })).status, 401);
    const rootNote = await t.post(`${pc}/notes`, { body: 'from root' });
    assert.equal((await t.put(`${pc}/notes/${rootNote.body.id}`, { body: 'mine now' }, { token: outsider.token })).status, 403);
    assert.equal((await t.delete(`${pc}/notes/${rootNote.body.id}`, { token: outsider.token })).status, 403);
    const noteId = mine.body.notes[0].id;
    assert.equal((await t.put(`${pc}/discussions/${mine.body.id}/notes/${noteId}`, { body: 'edited' }, { token: outsider.token })).status, 200);
    assert.equal((await t.delete(`${pc}/discussions/${mine.body.id}/notes/${noteId}`, { token: outsider.token })).status, 204);
  });

  it('created_at is kept only for owners and administrators', async () => {
    const past = '2020-01-02T03:04:05.000Z';
    for (const [who, user, kept] of [['developer', developer, false], ['maintainer', maintainer, false], ['owner', owner, true], ['admin', admin, true]] as const) {
      const d = await thread(`dated by ${who}`, user.token, second, { created_at: past });
      assert.equal(d.notes[0].created_at === past, kept, `${who} thread`);
      const reply = await t.post(`${c}/discussions/${d.id}/notes`, { body: 'reply', created_at: past }, { token: user.token });
      assert.equal(reply.body.created_at === past, kept, `${who} reply`);
      const note = await t.post(`${c}/notes`, { body: 'note', created_at: past }, { token: user.token });
      assert.equal(note.body.created_at === past, kept, `${who} note`);
      if (kept) assert.equal(note.body.updated_at, past);
    }
    const bad = await t.post(`${c}/discussions`, { body: 'x', created_at: 'not a date' }, { token: admin.token });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body, { error: 'created_at is invalid' });
    // A date JavaScript can hold but ISO 8601 cannot write (found by the fuzzer: it answered 500).
    const far = await t.post(`${c}/notes`, { body: 'x', created_at: '+275760-09-12T23:59:59.991Z' }, { token: admin.token });
    assert.equal(far.status, 400);
    // Ignored, not checked, for callers who may not set it.
    assert.equal((await t.post(`${c}/discussions`, { body: 'x', created_at: 'not a date' }, { token: developer.token })).status, 201);
  });

  it('answers 404 for threads and notes of another commit, and for unknown ones', async () => {
    const elsewhere = await thread('on the first commit', developer.token, first);
    const noteId = elsewhere.notes[0].id;
    const own = await thread('on the second commit', developer.token);
    const under = (sha: string) => `${url}/repository/commits/${sha}`;
    for (const [method, path, body] of [
      ['GET', `${c}/discussions/${elsewhere.id}`, undefined],
      ['GET', `${c}/discussions/${elsewhere.id}/notes`, undefined],
      ['POST', `${c}/discussions/${elsewhere.id}/notes`, { body: 'x' }],
      ['GET', `${c}/discussions/${elsewhere.id}/notes/${noteId}`, undefined],
      ['PUT', `${c}/discussions/${elsewhere.id}/notes/${noteId}`, { body: 'x' }],
      ['DELETE', `${c}/discussions/${elsewhere.id}/notes/${noteId}`, undefined],
      // The note exists under this commit's thread id only if it is that thread's note.
      ['PUT', `${c}/discussions/${own.id}/notes/${noteId}`, { body: 'x' }],
      ['GET', `${c}/notes/${noteId}`, undefined],
      ['PUT', `${c}/notes/${noteId}`, { body: 'x' }],
      ['DELETE', `${c}/notes/${noteId}`, undefined],
      ['GET', `${c}/discussions/${'0'.repeat(40)}`, undefined],
      ['GET', `${c}/notes/2147483647`, undefined],
    ] as const) {
      const res = await t.call(method, path, body === undefined ? {} : { body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
    }
    assert.equal((await t.get(`${under(first)}/discussions/${elsewhere.id}`)).status, 200);
    assert.equal((await t.get(`${under(first)}/notes/${noteId}`)).status, 200);
    assert.deepEqual((await t.get(`${under('f'.repeat(40))}/discussions`)).body, { message: '404 Commit Not Found' });
    assert.equal((await t.get(`${c}/notes/abc`)).status, 400);
    // A branch name names its tip commit: the same notes.
    const viaBranch = await t.get(`${under('main')}/discussions/${own.id}`);
    assert.equal(viaBranch.status, 200);
  });

  it('refuses missing, blank and oversized bodies and parameters out of place', async () => {
    for (const body of [{}, { body: '' }, { body: '   ' }]) {
      for (const path of [`${c}/discussions`, `${c}/notes`]) {
        const res = await t.post(path, body);
        assert.equal(res.status, 400, path);
        assert.deepEqual(res.body, { error: 'body is missing' });
      }
    }
    const d = await thread('bodies');
    const noteId = d.notes[0].id;
    assert.deepEqual((await t.post(`${c}/discussions/${d.id}/notes`, {})).body, { error: 'body is missing' });
    assert.deepEqual((await t.put(`${c}/notes/${noteId}`, { body: '' })).body, { error: 'body is missing' });
    assert.deepEqual((await t.put(`${c}/discussions/${d.id}/notes/${noteId}`, { body: ' ' })).body, { error: 'body is missing' });
    assert.deepEqual((await t.put(`${c}/discussions/${d.id}/notes/${noteId}`, {})).body, { error: 'body, resolved are missing, exactly one parameter must be provided' });
    assert.deepEqual((await t.put(`${c}/discussions/${d.id}/notes/${noteId}`, { body: 'x', resolved: true })).body, { error: 'body, resolved are mutually exclusive' });
    const resolve = await t.put(`${c}/discussions/${d.id}/notes/${noteId}`, { resolved: true });
    assert.equal(resolve.status, 400);
    assert.deepEqual(resolve.body, { message: '400 Bad request - Note is not resolvable' });

    const tooLong = await t.post(`${c}/discussions`, { body: 'x'.repeat(1_000_001) });
    assert.equal(tooLong.status, 400);
    assert.deepEqual(tooLong.body, { message: '400 Bad request - Note {:note=>["is too long (maximum is 1000000 characters)"]}' });
    // Characters, not UTF-16 units: a million emoji is a million characters.
    const emoji = await t.post(`${c}/notes`, { body: '😀'.repeat(1_000_000) });
    assert.equal(emoji.status, 201, emoji.text.slice(0, 200));
    assert.equal((await t.delete(`${c}/notes/${emoji.body.id}`)).status, 204);
    const internal = await t.post(`${c}/notes`, { body: 'secret', internal: true });
    assert.equal(internal.status, 400);
  });

  it('lists notes newest first by default, by order_by and sort, with pagination headers', async () => {
    const fresh = await commit(url, { branch: 'main', commit_message: 'third', actions: [{ action: 'create', file_path: 'n.txt', content: 'n\n' }] });
    const fc = `${url}/repository/commits/${fresh}`;
    const ids: number[] = [];
    for (const body of ['n1', 'n2', 'n3']) ids.push((await t.post(`${fc}/notes`, { body }, { token: developer.token })).body.id);
    const byDefault = await t.get(`${fc}/notes`);
    assert.deepEqual(byDefault.body.map((n: any) => n.body), ['n3', 'n2', 'n1']);
    assert.equal(byDefault.headers['x-total'], '3');
    assert.deepEqual((await t.get(`${fc}/notes?sort=asc`)).body.map((n: any) => n.body), ['n1', 'n2', 'n3']);
    await t.put(`${fc}/notes/${ids[0]}`, { body: 'n1 edited' }, { token: developer.token });
    assert.deepEqual((await t.get(`${fc}/notes?order_by=updated_at`)).body.map((n: any) => n.body), ['n1 edited', 'n3', 'n2']);
    assert.deepEqual((await t.get(`${fc}/notes?order_by=updated_at&sort=asc`)).body.map((n: any) => n.body), ['n2', 'n3', 'n1 edited']);
    assert.deepEqual((await t.get(`${fc}/notes?activity_filter=only_activity`)).body, []);
    assert.equal((await t.get(`${fc}/notes?activity_filter=only_comments`)).body.length, 3);
    assert.deepEqual((await t.get(`${fc}/notes?order_by=id`)).body, { error: 'order_by does not have a valid value' });
    assert.deepEqual((await t.get(`${fc}/notes?sort=up`)).body, { error: 'sort does not have a valid value' });

    const page1 = await t.get(`${fc}/notes?per_page=2&sort=asc`);
    assert.deepEqual(page1.body.map((n: any) => n.id), ids.slice(0, 2));
    assert.equal(page1.headers['x-total'], '3');
    assert.equal(page1.headers['x-total-pages'], '2');
    assert.equal(page1.headers['x-next-page'], '2');
    assert.match(page1.headers.link, /rel="next"/);

    // Threads: a page counts threads (replies ride along), ordered by their first note.
    const replyTo = (await t.get(`${fc}/discussions`)).body[0];
    await t.post(`${fc}/discussions/${replyTo.id}/notes`, { body: 'n1 reply' });
    await thread('t4', undefined, fresh);
    const threads1 = await t.get(`${fc}/discussions?per_page=3`);
    assertEach(DiscussionSchema, threads1, 'GET discussions page 1');
    assert.deepEqual(threads1.body.map((d: any) => d.notes.map((n: any) => n.body)), [['n1 edited', 'n1 reply'], ['n2'], ['n3']]);
    assert.equal(threads1.headers['x-total'], '4');
    assert.equal(threads1.headers['x-total-pages'], '2');
    assert.equal(threads1.headers['x-page'], '1');
    assert.equal(threads1.headers['x-per-page'], '3');
    assert.equal(threads1.headers['x-next-page'], '2');
    assert.equal(threads1.headers['x-prev-page'], '');
    const threads2 = await t.get(`${fc}/discussions?per_page=3&page=2`);
    assert.deepEqual(threads2.body.map((d: any) => d.notes[0].body), ['t4']);
    assert.equal(threads2.headers['x-prev-page'], '1');
    assert.equal(threads2.headers['x-next-page'], '');
  });

  it('threads on diff lines: positions checked against the diff, kept on replies, shown by the comments API', async () => {
    const position = { base_sha: first, start_sha: first, head_sha: second, position_type: 'text', new_path: 'README.md', old_path: 'README.md' };
    const added = await thread('on an added line', developer.token, second, { position: { ...position, new_line: 2 } });
    assertOne(DiscussionSchema, { status: 201, body: added }, 'POST diff thread');
    const note = added.notes[0];
    assert.equal(added.individual_note, false);
    assert.equal(note.type, 'DiffNote');
    assert.deepEqual(note.position, {
      base_sha: first, start_sha: first, head_sha: second, old_path: 'README.md', new_path: 'README.md',
      position_type: 'text', old_line: null, new_line: 2, line_range: null, ignore_whitespace_change: false,
    });
    const removed = await thread('on a removed line', developer.token, second, { position: { ...position, old_line: 2 } });
    assert.equal(removed.notes[0].position.old_line, 2);
    const context = await thread('on an unchanged line', developer.token, second, { position: { ...position, old_line: 1, new_line: 1 } });
    assert.equal(context.notes[0].type, 'DiffNote');

    // Form encoding, as Rails clients send nested parameters; short SHAs come back in full.
    const form = `body=by+form&position[base_sha]=${first.slice(0, 10)}&position[start_sha]=${first}&position[head_sha]=${second}&position[position_type]=text&position[new_path]=README.md&position[new_line]=2`;
    const viaForm = await t.call('POST', `${c}/discussions`, { form, token: developer.token });
    assert.equal(viaForm.status, 201, viaForm.text);
    assert.equal(viaForm.body.notes[0].position.base_sha, first);
    assert.equal(viaForm.body.notes[0].position.new_line, 2);

    const reply = await t.post(`${c}/discussions/${added.id}/notes`, { body: 'reply on the line' }, { token: reporter.token });
    assert.equal(reply.body.type, 'DiffNote');
    assert.deepEqual(reply.body.position, note.position);

    const comments = await t.get(`${c}/comments?per_page=100`);
    const shown = comments.body.find((x: any) => x.note === 'on an added line');
    assert.deepEqual([shown.path, shown.line, shown.line_type], ['README.md', 2, 'new']);
    const shownRemoved = comments.body.find((x: any) => x.note === 'on a removed line');
    assert.deepEqual([shownRemoved.path, shownRemoved.line, shownRemoved.line_type], ['README.md', 2, 'old']);

    const notOnDiff = await t.post(`${c}/discussions`, { body: 'x', position: { ...position, new_line: 9 } });
    assert.equal(notOnDiff.status, 400);
    assert.deepEqual(notOnDiff.body, { message: `400 Bad request - Note {:line_code=>["can't be blank", "must be a valid line code"]}` });
    const noLine = await t.post(`${c}/discussions`, { body: 'x', position });
    assert.deepEqual(noLine.body, { message: `400 Bad request - Note {:line_code=>["can't be blank", "must be a valid line code"], :position=>["is incomplete"]}` });
    const unknownSha = await t.post(`${c}/discussions`, { body: 'x', position: { ...position, head_sha: 'a'.repeat(40), new_line: 2 } });
    assert.equal(unknownSha.status, 400);
    assert.deepEqual((await t.post(`${c}/discussions`, { body: 'x', position: { ...position, base_sha: undefined } })).body, { error: 'position[base_sha] is missing' });
    assert.deepEqual((await t.post(`${c}/discussions`, { body: 'x', position: { ...position, position_type: 'file' } })).body, { error: 'position[position_type] does not have a valid value' });
    const image = await t.post(`${c}/discussions`, { body: 'on the image', position: { ...position, position_type: 'image', width: 10, height: 10, x: 1, y: 2 } });
    assert.equal(image.status, 201, image.text);
    assertOne(DiscussionSchema, image, 'image diff thread');
  });

  it('commit comments and discussions are the same notes', async () => {
    const fresh = await commit(url, { branch: 'main', commit_message: 'fourth', actions: [{ action: 'create', file_path: 'm.txt', content: 'm\n' }] });
    const fc = `${url}/repository/commits/${fresh}`;
    const comment = await t.post(`${fc}/comments`, { note: 'a comment', path: 'm.txt', line: 1, line_type: 'new' }, { token: reporter.token });
    assert.equal(comment.status, 201);
    const d = await thread('a thread', developer.token, fresh);
    const comments = await t.get(`${fc}/comments`);
    assert.deepEqual(comments.body.map((x: any) => x.note), ['a comment', 'a thread']);
    assert.equal(comments.headers['x-total'], '2');
    const discussions = await t.get(`${fc}/discussions`);
    assert.deepEqual(discussions.body.map((x: any) => [x.notes[0].type, x.individual_note]), [['LegacyDiffNote', false], ['DiscussionNote', false]]);
    // A line comment's thread takes replies of its own type.
    const reply = await t.post(`${fc}/discussions/${discussions.body[0].id}/notes`, { body: 'about that line' }, { token: developer.token });
    assert.equal(reply.body.type, 'LegacyDiffNote');
    assert.equal('position' in reply.body, false);
    const again = await t.get(`${fc}/comments`);
    const replyShown = again.body.find((x: any) => x.note === 'about that line');
    assert.deepEqual([replyShown.path, replyShown.line, replyShown.line_type], ['m.txt', 1, 'new']);
    assert.equal((await t.delete(`${fc}/discussions/${d.id}/notes/${d.notes[0].id}`, { token: developer.token })).status, 204);
    assert.equal((await t.get(`${fc}/comments`)).body.length, 2);
    assert.deepEqual((await t.post(`${fc}/comments`, { note: '  ' })).body, { error: 'note is missing' });
  });

  it('system notes are nobody\'s to edit', async () => {
    const d = await thread('will become a system note', maintainer.token);
    await t.db.updateTable('notes').set({ system: true }).where('id', '=', d.notes[0].id).execute();
    assert.equal((await t.put(`${c}/notes/${d.notes[0].id}`, { body: 'x' }, { token: maintainer.token })).status, 403);
    assert.equal((await t.delete(`${c}/notes/${d.notes[0].id}`, { token: admin.token })).status, 403);
    assert.deepEqual((await t.post(`${c}/discussions/${d.id}/notes`, { body: 'x' })).body, { message: '400 Bad request - Discussion can not be replied to.' });
    const activity = await t.get(`${c}/notes?activity_filter=only_activity`);
    assert.deepEqual(activity.body.map((n: any) => n.id), [d.notes[0].id]);
  });

  it('declares access and a response schema on every discussions, notes and comments route', () => {
    const ours = t.app.routeTable.filter((r) => r.method !== 'HEAD' && /\/(discussions|notes|comments)(\/|$)/.test(r.url));
    assert.ok(ours.length >= 15, `${ours.length} routes`);
    for (const r of ours) {
      assert.ok(r.access, `${r.method} ${r.url} declares no access`);
      assert.ok(r.response && Object.keys(r.response).some((code) => Number(code) >= 200 && Number(code) < 300), `${r.method} ${r.url} declares no response`);
    }
  });
});
