import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { AwardEmojiSchema } from '../../src/presenters/schemas/award_emoji.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('award emoji on merge requests and their notes', () => {
  let t: TestContext;
  let guest: TestUser, reporter: TestUser, dev: TestUser, maintainer: TestUser, outsider: TestUser, blocked: TestUser;
  let group: Namespace;
  let project: Project, publicProject: Project;
  let base: string;
  let mrId: number;
  let noteId: number, systemNoteId: number, otherNoteId: number;

  const commit = (projectId: number, branch: string, files: Record<string, string>, extra: Record<string, unknown> = {}) =>
    t.post(`/api/v4/projects/${projectId}/repository/commits`, {
      branch,
      commit_message: `add ${Object.keys(files).join(',')}`,
      actions: Object.entries(files).map(([file_path, content]) => ({ action: 'create', file_path, content })),
      ...extra,
    });
  const addNote = async (mrId: number, projectId: number, body: string, system = false) =>
    (await t.db.insertInto('notes').values({
      project_id: projectId, noteable_type: 'MergeRequest', noteable_id: mrId, commit_id: null, discussion_id: Math.random().toString(16).slice(2).padEnd(40, '0'),
      type: null, body, author_id: dev.user.id, position: null, line_code: null, system,
    }).returning('id').executeTakeFirstOrThrow()).id;

  before(async () => {
    t = await createTestContext();
    [guest, reporter, dev, maintainer, outsider, blocked] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    group = await t.createGroup({ visibility: 0 });
    project = await t.createProject({ group, visibility: 0 });
    base = `/api/v4/projects/${project.id}/merge_requests`;
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, dev.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, blocked.user, 30);
    await t.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', blocked.user.id).execute();
    assert.equal((await commit(project.id, 'main', { 'README.md': 'hi\n' })).status, 201);
    for (const b of ['one', 'two', 'three']) assert.equal((await commit(project.id, b, { [`${b}.txt`]: b }, { start_branch: 'main' })).status, 201);
    for (const b of ['one', 'two', 'three']) {
      assert.equal((await t.post(base, { source_branch: b, target_branch: 'main', title: b }, { token: dev.token })).status, 201);
    }
    mrId = (await t.get(`${base}/1`)).body.id;
    noteId = await addNote(mrId, project.id, 'a comment');
    systemNoteId = await addNote(mrId, project.id, 'changed the description', true);
    otherNoteId = await addNote((await t.get(`${base}/2`)).body.id, project.id, 'on another');
    publicProject = await t.createProject({ visibility: 20 });
    assert.equal((await commit(publicProject.id, 'main', { 'a.txt': 'a' })).status, 201);
    assert.equal((await commit(publicProject.id, 'b', { 'b.txt': 'b' }, { start_branch: 'main' })).status, 201);
    assert.equal((await t.post(`/api/v4/projects/${publicProject.id}/merge_requests`, { source_branch: 'b', target_branch: 'main', title: 'pub' })).status, 201);
  });
  after(async () => { await t.close(); });

  let awardId: number;

  it('awards an emoji on a merge request (201) and lists and reads it', async () => {
    const res = await t.post(`${base}/1/award_emoji`, { name: 'thumbsup' }, { token: reporter.token });
    assertOne(AwardEmojiSchema, res, 'POST award');
    assert.equal(res.status, 201);
    assert.equal(res.body.name, 'thumbsup');
    assert.equal(res.body.user.id, reporter.user.id);
    assert.equal(res.body.awardable_type, 'MergeRequest');
    assert.equal(res.body.awardable_id, mrId);
    awardId = res.body.id;
    const list = await t.get(`${base}/1/award_emoji`, { token: reporter.token });
    assertEach(AwardEmojiSchema, list, 'GET awards');
    assert.deepEqual(list.body.map((a: any) => a.id), [awardId]);
    assert.equal(list.headers['x-total'], '1');
    const one = await t.get(`${base}/1/award_emoji/${awardId}`, { token: dev.token });
    assertOne(AwardEmojiSchema, one, 'GET award');
    assert.equal(one.body.name, 'thumbsup');
    assert.equal((await t.get(`${base}/2/award_emoji/${awardId}`, { token: dev.token })).status, 404, 'an award of another merge request');
  });

  it('refuses the same emoji twice, unknown names and bad input with GitLab\'s answers', async () => {
    const twice = await t.post(`${base}/1/award_emoji`, { name: 'thumbsup' }, { token: reporter.token });
    assert.deepEqual([twice.status, twice.body], [404, { message: '404 Award Emoji Name has already been taken Not Found' }]);
    const alias = await t.post(`${base}/1/award_emoji`, { name: '+1' }, { token: reporter.token });
    assert.equal(alias.status, 404, '+1 is thumbsup');
    const unknown = await t.post(`${base}/1/award_emoji`, { name: 'not_an_emoji' }, { token: reporter.token });
    assert.deepEqual([unknown.status, unknown.body], [404, { message: '404 Award Emoji Name is not a valid emoji name Not Found' }]);
    assert.deepEqual((await t.post(`${base}/1/award_emoji`, {}, { token: reporter.token })).body, { error: 'name is missing' });
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: '' }, { token: reporter.token })).status, 404);
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 42 }, { token: reporter.token })).status, 404, 'coerced to "42", no emoji');
    assert.equal((await t.get(`${base}/1/award_emoji/abc`, { token: dev.token })).status, 400);
    assert.equal((await t.get(`${base}/1/award_emoji/99999999999`, { token: dev.token })).status, 400);
    assert.equal((await t.get(`${base}/999/award_emoji`, { token: dev.token })).status, 404);
    assert.equal((await t.get(`${base}/1/award_emoji/999999`, { token: dev.token })).status, 404);
    // Aliases and gemojione names are known; each stored once per user.
    const down = await t.post(`${base}/1/award_emoji`, { name: '-1' }, { token: dev.token });
    assert.equal(down.status, 201);
    assert.equal(down.body.name, 'thumbsdown');
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'slight_smile' }, { token: dev.token })).status, 201);
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'thumbsup_tone2' }, { token: dev.token })).status, 201);
  });

  it('permissions: anonymous 401, outsiders 404, guests of a private project 403, blocked users 401', async () => {
    assert.equal((await t.get(`${base}/1/award_emoji`, { token: null })).status, 401);
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'tada' }, { token: null })).status, 401);
    assert.equal((await t.get(`${base}/1/award_emoji`, { token: outsider.token })).status, 404);
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'tada' }, { token: outsider.token })).status, 404);
    // A guest cannot read a private project's merge requests.
    assert.equal((await t.get(`${base}/1/award_emoji`, { token: guest.token })).status, 403);
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'tada' }, { token: guest.token })).status, 403);
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'tada' }, { token: blocked.token })).status, 401, 'a blocked user\'s token does not sign in');
    // On a public project any signed-in user reacts; anonymous callers are still refused by the merge request API.
    const pub = `/api/v4/projects/${publicProject.id}/merge_requests/1/award_emoji`;
    const res = await t.post(pub, { name: 'rocket' }, { token: outsider.token });
    assert.equal(res.status, 201);
    assert.equal((await t.get(pub, { token: guest.token })).body.length, 1);
    assert.equal((await t.get(pub, { token: null })).status, 401);
  });

  it('only the awarder or an administrator deletes an award (GitLab\'s 401 otherwise); 404 for an unknown award', async () => {
    const url = `${base}/1/award_emoji/${awardId}`;
    assert.equal((await t.delete(url, { token: null })).status, 401);
    assert.equal((await t.delete(url, { token: maintainer.token })).status, 401);
    assert.equal((await t.delete(url, { token: outsider.token })).status, 404);
    assert.equal((await t.delete(url, { token: reporter.token })).status, 204);
    assert.equal((await t.delete(url, { token: reporter.token })).status, 404);
    const again = await t.post(`${base}/1/award_emoji`, { name: 'thumbsup' }, { token: reporter.token });
    assert.equal(again.status, 201);
    assert.equal((await t.delete(`${base}/1/award_emoji/${again.body.id}`)).status, 204, 'administrators delete anyone\'s');
    assert.equal((await t.post(`${base}/1/award_emoji`, { name: 'thumbsup' }, { token: reporter.token })).status, 201);
  });

  it('awards on a merge request\'s notes: not on system notes, not through another merge request', async () => {
    const notes = `${base}/1/notes/${noteId}/award_emoji`;
    const res = await t.post(notes, { name: 'heart' }, { token: reporter.token });
    assertOne(AwardEmojiSchema, res, 'POST note award');
    assert.equal(res.status, 201);
    assert.equal(res.body.awardable_type, 'Note');
    assert.equal(res.body.awardable_id, noteId);
    const list = await t.get(notes, { token: dev.token });
    assertEach(AwardEmojiSchema, list, 'GET note awards');
    assert.deepEqual(list.body.map((a: any) => a.name), ['heart']);
    assert.equal((await t.get(`${notes}/${res.body.id}`, { token: dev.token })).body.name, 'heart');
    assert.equal((await t.post(notes, { name: 'heart' }, { token: reporter.token })).status, 404);
    assert.deepEqual((await t.post(`${base}/1/notes/${systemNoteId}/award_emoji`, { name: 'heart' }, { token: reporter.token })).body,
      { message: '404 Award Emoji Awardable cannot be awarded emoji Not Found' });
    assert.equal((await t.get(`${base}/1/notes/${otherNoteId}/award_emoji`, { token: dev.token })).status, 404, 'a note of merge request 2');
    assert.equal((await t.get(`${base}/1/notes/999999/award_emoji`, { token: dev.token })).status, 404);
    // The merge request's own awards are not the note's, and the other way round.
    assert.ok(!(await t.get(`${base}/1/award_emoji`, { token: dev.token })).body.some((a: any) => a.name === 'heart'));
    assert.equal((await t.get(`${base}/1/award_emoji/${res.body.id}`, { token: dev.token })).status, 404);
    assert.equal((await t.delete(`${notes}/${res.body.id}`, { token: dev.token })).status, 401, 'another\'s award: GitLab\'s unauthorized!');
    assert.equal((await t.delete(`${notes}/${res.body.id}`, { token: reporter.token })).status, 204);
    assert.equal((await t.get(`${base}/1/notes/${noteId}/award_emoji`, { token: outsider.token })).status, 404);
  });

  it('upvotes and downvotes count thumbsup and thumbsdown; my_reaction_emoji filters with them', async () => {
    assert.equal((await t.post(`${base}/2/award_emoji`, { name: 'thumbsup' }, { token: dev.token })).status, 201);
    assert.equal((await t.post(`${base}/2/award_emoji`, { name: 'thumbsdown' }, { token: maintainer.token })).status, 201);
    const one = (await t.get(`${base}/1`, { token: dev.token })).body;
    assert.deepEqual([one.upvotes, one.downvotes], [1, 1]);
    const list = (await t.get(base, { token: dev.token })).body;
    const byIid = new Map(list.map((m: any) => [m.iid, [m.upvotes, m.downvotes]]));
    assert.deepEqual(byIid.get(1), [1, 1]);
    assert.deepEqual(byIid.get(2), [1, 1]);
    assert.deepEqual(byIid.get(3), [0, 0]);
    const iids = async (query: Record<string, unknown>, token = dev.token) => (await t.get(base, { query, token })).body.map((m: any) => m.iid).sort();
    assert.deepEqual(await iids({ my_reaction_emoji: 'thumbsup' }), [2]);
    assert.deepEqual(await iids({ my_reaction_emoji: 'thumbsdown' }), [1]);
    assert.deepEqual(await iids({ my_reaction_emoji: 'Any' }), [1, 2]);
    assert.deepEqual(await iids({ my_reaction_emoji: 'None' }), [3]);
    assert.deepEqual(await iids({ my_reaction_emoji: 'thumbsup' }, reporter.token), [1]);
    assert.deepEqual(await iids({ 'not[my_reaction_emoji]': 'thumbsup' }), [1, 3]);
    assert.deepEqual((await t.get('/api/v4/merge_requests', { query: { my_reaction_emoji: 'thumbsdown', scope: 'all' }, token: maintainer.token })).body.map((m: any) => m.iid), [2]);
  });

  it('two awards of the same emoji at once make one', async () => {
    const results = await Promise.all([1, 2, 3].map(() => t.post(`${base}/3/award_emoji`, { name: 'eyes' }, { token: maintainer.token })));
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 404, 404]);
    assert.equal((await t.get(`${base}/3/award_emoji`, { token: dev.token })).body.length, 1);
  });

  it('deleting a merge request removes its awards', async () => {
    const mr3 = (await t.get(`${base}/3`)).body.id;
    assert.equal((await t.delete(`${base}/3`)).status, 204);
    const left = await t.db.selectFrom('award_emoji').select('id').where('awardable_type', '=', 'MergeRequest').where('awardable_id', '=', mr3).execute();
    assert.deepEqual(left, []);
  });

  it('issues and their notes take awards too; a confidential issue is a 404 to a guest; upvotes count', async () => {
    const issues = `/api/v4/projects/${project.id}/issues`;
    const issue = await t.post(issues, { title: 'an issue' }, { token: guest.token });
    assert.equal(issue.status, 201);
    const award = await t.post(`${issues}/${issue.body.iid}/award_emoji`, { name: 'thumbsup' }, { token: guest.token });
    assert.equal(award.status, 201);
    assertOne(AwardEmojiSchema, award, 'POST issue award');
    assert.equal(award.body.awardable_type, 'Issue');
    assert.equal(award.body.awardable_id, issue.body.id);
    assert.equal((await t.get(`${issues}/${issue.body.iid}`, { token: dev.token })).body.upvotes, 1);
    const note = await t.post(`${issues}/${issue.body.iid}/notes`, { body: 'me too' }, { token: dev.token });
    assert.equal(note.status, 201);
    const noteAward = await t.post(`${issues}/${issue.body.iid}/notes/${note.body.id}/award_emoji`, { name: 'tada' }, { token: reporter.token });
    assert.equal(noteAward.status, 201);
    assert.equal(noteAward.body.awardable_type, 'Note');
    const secret = await t.post(issues, { title: 'secret', confidential: true }, { token: dev.token });
    assert.equal((await t.post(`${issues}/${secret.body.iid}/award_emoji`, { name: 'eyes' }, { token: guest.token })).status, 404);
    assert.equal((await t.post(`${issues}/${secret.body.iid}/award_emoji`, { name: 'eyes' }, { token: reporter.token })).status, 201);
    assert.equal((await t.get(`${issues}/${issue.body.iid}/award_emoji`, { token: outsider.token })).status, 404);
  });
});
