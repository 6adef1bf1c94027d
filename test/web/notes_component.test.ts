import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FastifyRequest } from 'fastify';
import type { Project } from '../../src/db/schema/core.js';
import { mergeRequestNoteable } from '../../src/noteables/index.js';
import { addSystemNote } from '../../src/services/notes.js';
import {
  loadDiscussions,
  loadNoteAwards,
  loadNoteTarget,
  positionFields,
  registerNoteActions,
  renderCommentForm,
  renderDiscussions,
} from '../../src/web/components/notes.js';
import { html } from '../../src/web/html.js';
import { projectPath, sendPage } from '../../src/web/layout.js';
import { dispatch, PageRegistry } from '../../src/web/router.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { getPage, postForm, webSignIn, type WebSession } from '../helpers/web.js';

/**
 * The discussions component over a resolvable noteable (merge requests), through HTTP: its
 * pages are mounted below /__notes/ by this test (the real merge request pages are another
 * module's), with the component's own form actions, so resolving, replying and diff notes run
 * as they do on any page that uses it.
 */
const PREFIX = '/__notes';

function mount(registry: PageRegistry) {
  const load = async (ctx: any, page: any) =>
    (await loadNoteTarget(ctx, page, mergeRequestNoteable, { merge_request_iid: Number(ctx.params.iid) }, `${PREFIX}${projectPath(page)}/-/merge_requests/${ctx.params.iid}`)).target;
  registry.projectPage('GET', 'merge_requests/:iid', async (ctx, page) => {
    const target = await load(ctx, page);
    const discussions = await loadDiscussions(ctx, target.scope);
    const awards = await loadNoteAwards(ctx, discussions);
    const diffForm = ctx.query.line
      ? renderCommentForm(ctx, target, { id: 'diff-note', thread: true, hidden: positionFields(JSON.parse(ctx.query.line)) })
      : html``;
    return sendPage(ctx, { title: 'Threads', body: html`${renderDiscussions(ctx, discussions, { target, awards })}${renderCommentForm(ctx, target)}${diffForm}` });
  });
  registerNoteActions(registry, 'merge_requests/:iid', load);
}

describe('web: the discussions component on a merge request (resolvable threads, diff notes)', () => {
  let t: TestContext;
  let owner: TestUser, developer: TestUser, reporter: TestUser, outsider: TestUser;
  let ownerWeb: WebSession, developerWeb: WebSession, reporterWeb: WebSession, outsiderWeb: WebSession;
  let project: Project;
  let base: string;
  let mrApi: string;
  let page: string;
  let mr: any;

  before(async () => {
    const registry = new PageRegistry();
    mount(registry);
    t = await createTestContext({}, (app) => {
      app.route({
        method: ['GET', 'POST'],
        url: `${PREFIX}/*`,
        handler: (request, reply) => {
          const url = request.url.slice(PREFIX.length);
          const shifted = Object.create(request, { url: { value: url } }) as FastifyRequest;
          return dispatch(registry, shifted, reply);
        },
      });
    });
    [owner, developer, reporter, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    project = await t.createProject({ owner: owner.user, visibility: 0 });
    await t.addMember(project, owner.user, 50);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, reporter.user, 20);
    base = `/api/v4/projects/${project.id}`;
    const commit = async (branch: string, actions: Record<string, unknown>[], extra: Record<string, unknown> = {}) => {
      const res = await t.post(`${base}/repository/commits`, { branch, commit_message: `change on ${branch}`, actions, ...extra });
      assert.equal(res.status, 201, res.text);
    };
    await commit('main', [{ action: 'create', file_path: 'README.md', content: 'one\ntwo\nthree\n' }]);
    await commit('feature', [{ action: 'update', file_path: 'README.md', content: 'one\nTWO\nthree\n' }], { start_branch: 'main' });
    const res = await t.post(`${base}/merge_requests`, { source_branch: 'feature', target_branch: 'main', title: 'Shout two' }, { token: developer.token });
    assert.equal(res.status, 201, res.text);
    mr = res.body;
    mrApi = `${base}/merge_requests/${mr.iid}`;
    page = `${PREFIX}/${owner.user.username}/${project.path}/-/merge_requests/${mr.iid}`;
    [ownerWeb, developerWeb, reporterWeb, outsiderWeb] = await Promise.all([owner, developer, reporter, outsider].map((u) => webSignIn(t, u)));
  });
  after(() => t.close());

  const thread = async (body: string, who: TestUser) => {
    const res = await t.post(`${mrApi}/discussions`, { body }, { token: who.token });
    assert.equal(res.status, 201, res.text);
    return res.body as { id: string; notes: { id: number }[] };
  };
  const apiThread = async (id: string) => (await t.get(`${mrApi}/discussions/${id}`, { token: owner.token })).body;

  it('resolves and unresolves a thread by the API\'s rule (developers and up, the merge request\'s author)', async () => {
    const d = await thread('Please rename <script>x</script>', reporter);
    const asReporter = await getPage(t, reporterWeb, page);
    assert.equal(asReporter.status, 200, asReporter.text);
    assert.match(asReporter.text, /Unresolved/);
    assert.ok(!asReporter.text.includes('Resolve thread'), 'a reporter who is not the merge request\'s author may not resolve');
    assert.ok(asReporter.text.includes('Please rename'));
    assert.ok(!asReporter.text.includes('<script>x'));
    assert.equal((await postForm(t, reporterWeb, `${page}/discussions/${d.id}/resolve`, {})).status, 403);
    assert.equal((await postForm(t, ownerWeb, `${page}/discussions/${d.id}/resolve`, { authenticity_token: 'forged' })).status, 422);
    assert.equal((await apiThread(d.id)).notes[0].resolved, false);

    const asOwner = await getPage(t, ownerWeb, page);
    assert.ok(asOwner.text.includes(`action="${page}/discussions/${d.id}/resolve"`));
    const res = await postForm(t, ownerWeb, `${page}/discussions/${d.id}/resolve`, {});
    assert.equal(res.status, 303);
    assert.equal(res.headers.location, `${page}#discussion_${d.id}`);
    const resolved = await apiThread(d.id);
    assert.equal(resolved.notes[0].resolved, true);
    assert.equal(resolved.notes[0].resolved_by.username, owner.user.username);
    const shown = await getPage(t, ownerWeb, page);
    assert.match(shown.text, /class="discussion resolved"/);
    assert.match(shown.text, /Resolved<\/span> by /);
    assert.ok(shown.text.includes('Unresolve thread'));

    // The merge request's author (and any developer) unresolves it.
    const un = await postForm(t, developerWeb, `${page}/discussions/${d.id}/unresolve`, {});
    assert.equal(un.status, 303);
    assert.equal((await apiThread(d.id)).notes[0].resolved, false);
    // Unknown threads are 404; outsiders do not see the merge request at all.
    assert.equal((await postForm(t, ownerWeb, `${page}/discussions/${'a'.repeat(40)}/resolve`, {})).status, 404);
    assert.equal((await postForm(t, outsiderWeb, `${page}/discussions/${d.id}/resolve`, {})).status, 404);
    assert.equal((await getPage(t, outsiderWeb, page)).status, 404);
  });

  it('does not resolve individual notes, and renders system notes muted without a reply form', async () => {
    const note = await t.post(`${mrApi}/notes`, { body: 'Just a remark' }, { token: reporter.token });
    assert.equal(note.status, 201);
    await addSystemNote(t.db, { type: 'MergeRequest', projectId: project.id, key: { column: 'noteable_id', value: mr.id } }, owner.user.id, 'changed the description');
    const award = await t.post(`${mrApi}/notes/${note.body.id}/award_emoji`, { name: 'thumbsup' }, { token: owner.token });
    assert.equal(award.status, 201, award.text);
    const view = await getPage(t, ownerWeb, page);
    assert.match(view.text, /<li class="note system"[^>]*>[^]*?<p>changed the description<\/p>/);
    assert.match(view.text, /:thumbsup:<\/span> 1/);
    const all = (await t.get(`${mrApi}/discussions`, { token: owner.token })).body as any[];
    const remark = all.find((d) => d.notes[0].body === 'Just a remark');
    const system = all.find((d) => d.notes[0].system);
    assert.equal((await postForm(t, ownerWeb, `${page}/discussions/${remark.id}/resolve`, {})).status, 403);
    // Replying to a system note is refused; replying to the remark turns it into a thread.
    assert.equal((await postForm(t, ownerWeb, `${page}/notes`, { note: 'no', in_reply_to_discussion_id: system.id })).status, 400);
    assert.equal((await postForm(t, ownerWeb, `${page}/notes`, { note: 'Agreed', in_reply_to_discussion_id: remark.id })).status, 303);
    const after = (await t.get(`${mrApi}/discussions/${remark.id}`, { token: owner.token })).body;
    assert.equal(after.individual_note, false);
    assert.deepEqual(after.notes.map((n: any) => n.body), ['Just a remark', 'Agreed']);
    assert.equal(after.notes[1].resolvable, true);
  });

  it('starts a thread on a diff line from the form\'s position fields, and refuses a bad position', async () => {
    const refs = mr.diff_refs;
    const position = { position_type: 'text', base_sha: refs.base_sha, start_sha: refs.start_sha, head_sha: refs.head_sha, old_path: 'README.md', new_path: 'README.md', old_line: null, new_line: 2 };
    const form = await getPage(t, developerWeb, `${page}?line=${encodeURIComponent(JSON.stringify(position))}`);
    assert.match(form.text, /name="position\[new_line\]" value="2"/);
    assert.match(form.text, /name="position\[head_sha\]"/);
    const fields: Record<string, string> = { note: 'Why shout?', type: 'DiscussionNote' };
    for (const [k, v] of Object.entries(positionFields(position as any))) if (v !== null && v !== undefined) fields[k] = String(v);
    const res = await postForm(t, developerWeb, `${page}/notes`, fields);
    assert.equal(res.status, 303, res.text);
    const all = (await t.get(`${mrApi}/discussions`, { token: owner.token })).body as any[];
    const diff = all.find((d) => d.notes[0].body === 'Why shout?');
    assert.equal(diff.notes[0].type, 'DiffNote');
    assert.equal(diff.notes[0].position.new_line, 2);
    assert.equal(diff.notes[0].position.new_path, 'README.md');
    const view = await getPage(t, ownerWeb, page);
    assert.ok(view.text.includes('commented on <span class="mono">README.md line 2</span>'));
    const bad = await postForm(t, developerWeb, `${page}/notes`, { ...fields, 'position[new_line]': '99' });
    assert.equal(bad.status, 400);
    assert.match(bad.text, /The line of this comment is not in the diff/);
  });
});
