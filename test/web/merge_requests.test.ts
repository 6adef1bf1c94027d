import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { ANONYMOUS, getPage, postForm, webSignIn, type WebSession } from '../helpers/web.js';

describe('web: merge requests (list, overview, commits, changes, threads, merge)', () => {
  let t: TestContext;
  let alice: TestUser, dev: TestUser, reporter: TestUser, outsider: TestUser;
  let aliceWeb: WebSession, devWeb: WebSession, reporterWeb: WebSession, outsiderWeb: WebSession;
  let project: Project;
  let api: string;
  let web: string;
  let seq = 0;

  const write = async (branch: string, file: string, content: string, extra: Record<string, unknown> = {}) => {
    const exists = (await t.get(`${api}/repository/files/${encodeURIComponent(file)}`, { query: { ref: (extra.start_branch as string) ?? branch } })).status === 200;
    const res = await t.post(`${api}/repository/commits`, {
      branch, commit_message: `${branch}: ${file} #${++seq}`, actions: [{ action: exists ? 'update' : 'create', file_path: file, content }], ...extra,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.id as string;
  };
  const open = async (source: string, title: string, extra: Record<string, unknown> = {}, who = dev) => {
    const res = await t.post(`${api}/merge_requests`, { source_branch: source, target_branch: 'main', title, ...extra }, { token: who.token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body as { iid: number; sha: string; diff_refs: { base_sha: string; start_sha: string; head_sha: string } };
  };

  before(async () => {
    // Developers merge into main here: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    [alice, dev, reporter, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    project = await t.createProject({ owner: alice.user, visibility: 0 });
    api = `/api/v4/projects/${project.id}`;
    web = `/${alice.user.username}/${project.path}`;
    await t.addMember(project, dev.user, 30);
    await t.addMember(project, reporter.user, 20);
    await write('main', 'shared.txt', 'one\ntwo\nthree\n');
    await write('main', 'src/app.ts', 'export const a = 1;\nexport const b = 2;\nexport const c = 3;\n');
    [aliceWeb, devWeb, reporterWeb, outsiderWeb] = await Promise.all([webSignIn(t, alice), webSignIn(t, dev), webSignIn(t, reporter), webSignIn(t, outsider)]);
  });
  after(() => t.close());

  it('lists merge requests with state tabs, counts, filters and escaped titles', async () => {
    await write('list-a', 'a.txt', 'a\n', { start_branch: 'main' });
    await write('list-b', 'b.txt', 'b\n', { start_branch: 'main' });
    await write('list-c', 'c.txt', 'c\n', { start_branch: 'main' });
    const a = await open('list-a', 'Alpha <script>alert(1)</script>', { labels: 'bug', assignee_ids: [alice.user.id] });
    const b = await open('list-b', 'Beta change', {}, alice);
    const c = await open('list-c', 'Gamma closed');
    await t.put(`${api}/merge_requests/${c.iid}`, { state_event: 'close' }, { token: dev.token });

    const res = await getPage(t, devWeb, `${web}/-/merge_requests`);
    assert.equal(res.status, 200, res.text);
    assert.ok(res.text.includes('Alpha &lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(!res.text.includes('<script>alert(1)'));
    assert.ok(res.text.includes(`${web}/-/merge_requests/${b.iid}`));
    assert.ok(!res.text.includes('Gamma closed'), 'closed ones are on their own tab');
    assert.match(res.text, /aria-current="page">Open<span class="count">2<\/span>/);
    assert.match(res.text, />Closed<span class="count">1<\/span>/);
    assert.match(res.text, />All<span class="count">3<\/span>/);
    assert.ok(!res.text.includes('style="'));

    const closed = await getPage(t, devWeb, `${web}/-/merge_requests?state=closed`);
    assert.ok(closed.text.includes('Gamma closed'));
    assert.ok(!closed.text.includes('Beta change'));

    const only = async (query: string, expected: string[], absent: string[]) => {
      const r = await getPage(t, devWeb, `${web}/-/merge_requests?${query}`);
      assert.equal(r.status, 200, query);
      for (const title of expected) assert.ok(r.text.includes(title), `${query}: ${title}`);
      for (const title of absent) assert.ok(!r.text.includes(title), `${query}: not ${title}`);
    };
    await only('search=beta', ['Beta change'], ['Alpha &lt;']);
    await only(`author_username=${alice.user.username}`, ['Beta change'], ['Alpha &lt;']);
    await only(`assignee_username=${alice.user.username}`, ['Alpha &lt;'], ['Beta change']);
    await only('label_name[]=bug', ['Alpha &lt;'], ['Beta change']);
    await only('target_branch=nope', [], ['Alpha &lt;', 'Beta change']);
    await only('state=all&sort=title_desc', ['Gamma closed', 'Beta change'], []);
    const sorted = await getPage(t, devWeb, `${web}/-/merge_requests?state=all&sort=title_asc`);
    assert.ok(sorted.text.indexOf('Alpha') < sorted.text.indexOf('Beta change') && sorted.text.indexOf('Beta change') < sorted.text.indexOf('Gamma closed'));
    // Bad values fall back to the defaults rather than failing.
    await only('state=bogus&sort=bogus&page=-3', ['Beta change'], []);

    const dashboard = await getPage(t, aliceWeb, '/dashboard/merge_requests');
    assert.equal(dashboard.status, 200);
    assert.ok(dashboard.text.includes('Alpha &lt;'), 'assigned to alice');
    assert.ok(!dashboard.text.includes('Beta change'));
    const mine = await getPage(t, aliceWeb, `/dashboard/merge_requests?author_username=${alice.user.username}`);
    assert.ok(mine.text.includes('Beta change'));
    assert.ok(!mine.text.includes('Alpha &lt;'));
    assert.equal((await getPage(t, ANONYMOUS, '/dashboard/merge_requests')).status, 302);
    void a;
  });

  it('is 404 to an outsider and sends an anonymous visitor to sign in', async () => {
    await write('private-x', 'x.txt', 'x\n', { start_branch: 'main' });
    const mr = await open('private-x', 'Secret work');
    for (const path of ['/-/merge_requests', `/-/merge_requests/${mr.iid}`, `/-/merge_requests/${mr.iid}/diffs`, `/-/merge_requests/${mr.iid}/commits`]) {
      const res = await getPage(t, outsiderWeb, web + path);
      assert.equal(res.status, 404, path);
      assert.ok(!res.text.includes('Secret work'));
      const anon = await getPage(t, ANONYMOUS, web + path);
      assert.equal(anon.status, 302, path);
      assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
    }
    const post = await postForm(t, outsiderWeb, `${web}/-/merge_requests/${mr.iid}/merge`, {});
    assert.equal(post.status, 404);
    assert.equal((await getPage(t, devWeb, `${web}/-/merge_requests/999999`)).status, 404);
    assert.equal((await getPage(t, devWeb, `${web}/-/merge_requests/abc`)).status, 404);
    const dash = await getPage(t, outsiderWeb, `/dashboard/merge_requests?author_username=${dev.user.username}`);
    assert.ok(!dash.text.includes('Secret work'), 'the dashboard lists only what the visitor may read');
  });

  it('shows the overview: description, branches, commits and changes tabs, the merge button for those who may merge', async () => {
    await write('feature-view', 'shared.txt', 'one\ntwo\nthree\nfour\n', { start_branch: 'main' });
    const mr = await open('feature-view', 'View me', { description: 'Some **bold** <img src=x onerror=alert(1)>' });
    const res = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}`);
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /<strong>bold<\/strong>/);
    assert.ok(!/<img[^>]*onerror/.test(res.text), 'the description is sanitised');
    assert.ok(res.text.includes('feature-view'));
    assert.match(res.text, /Commits<span class="count">1<\/span>/);
    assert.match(res.text, /Changes<span class="count">1<\/span>/);
    assert.match(res.text, /action="[^"]*\/merge_requests\/\d+\/merge"/);
    assert.match(res.text, /name="should_remove_source_branch"/);
    assert.match(res.text, /name="squash"/);

    const commits = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}/commits`);
    assert.equal(commits.status, 200);
    assert.ok(commits.text.includes('feature-view: shared.txt'));
    assert.ok(commits.text.includes(mr.sha.slice(0, 8)));

    // A reporter sees it, but no merge button, and the merge itself is refused.
    const asReporter = await getPage(t, reporterWeb, `${web}/-/merge_requests/${mr.iid}`);
    assert.equal(asReporter.status, 200);
    assert.ok(!/\/merge"/.test(asReporter.text));
    assert.match(asReporter.text, /data-blocker="not_allowed"/);
    const refused = await postForm(t, reporterWeb, `${web}/-/merge_requests/${mr.iid}/merge`, { sha: mr.sha });
    assert.equal(refused.status, 403);
    assert.equal((await t.get(`${api}/merge_requests/${mr.iid}`)).body.state, 'opened');
    // Nor may a reporter close someone else's merge request.
    assert.equal((await postForm(t, reporterWeb, `${web}/-/merge_requests/${mr.iid}`, { 'merge_request[state_event]': 'close' })).status, 403);
  });

  it('refuses a form without the session token (422)', async () => {
    await write('csrf', 'csrf.txt', 'c\n', { start_branch: 'main' });
    const mr = await open('csrf', 'CSRF target');
    const bad = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/merge`, { authenticity_token: 'forged', sha: mr.sha });
    assert.equal(bad.status, 422);
    const none = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/notes`, { authenticity_token: '', note: 'hi' });
    assert.equal(none.status, 422);
    assert.equal((await t.get(`${api}/merge_requests/${mr.iid}`)).body.state, 'opened');
    assert.equal((await t.get(`${api}/merge_requests/${mr.iid}/discussions`, { token: dev.token })).body.length, 0);
  });

  it('comments on a diff line with the position of the merge request diff, shows the thread under its line, resolves and unresolves it', async () => {
    await write('diff-note', 'src/app.ts', 'export const a = 1;\nexport const b = "<changed>";\nexport const c = 3;\n', { start_branch: 'main' });
    const mr = await open('diff-note', 'Diff notes');
    const diffs = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}/diffs`);
    assert.equal(diffs.status, 200, diffs.text);
    assert.ok(diffs.text.includes('&quot;&lt;changed&gt;&quot;'));
    // The comment link of the added line 2 opens the form under that line.
    const link = /href="([^"]*line_code=([0-9a-f]{40}_0_2)[^"]*)"/.exec(diffs.text);
    assert.ok(link, 'a comment link on the added line');
    const code = link[2];
    assert.ok(link[1].startsWith('?line_code='), 'a short link, relative to the changes tab');
    const withForm = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}/diffs${link[1].replace(/&amp;/g, '&').split('#')[0]}`);
    assert.equal(withForm.status, 200);
    assert.match(withForm.text, new RegExp(`<tr class="add" id="${code}">[\\s\\S]*?</tr><tr class="notes"><td colspan="3"><div class="diff-note-form" id="new-diff-note">`), 'the form is under its line');
    assert.match(withForm.text, /name="position\[new_line\]" value="2"/);
    assert.ok(!withForm.text.includes('name="position[old_line]"'), 'an added line has no old line');

    const action = new RegExp(`<form method="post" action="([^"]+)" class="comment-form">(?:(?!</form>)[\\s\\S])*name="position\\[new_line\\]"`).exec(withForm.text);
    assert.ok(action, 'the form posts the position');
    assert.equal(action[1], `${web}/-/merge_requests/${mr.iid}/diffs/notes`);
    const fields: Record<string, string> = {};
    for (const m of withForm.text.matchAll(/<input type="hidden" name="(position\[[a-z_]+\]|line_code)" value="([^"]*)">/g)) fields[m[1]] = m[2];
    const empty = await postForm(t, devWeb, action[1], { ...fields, type: 'DiscussionNote', note: '   ' });
    assert.equal(empty.status, 400);
    assert.match(empty.text, /can(&#39;|')t be blank/);
    assert.match(empty.text, /id="new-diff-note"/, 'the form is shown again');
    assert.ok(empty.text.includes(`href="${web}/-/merge_requests/${mr.iid}/diffs?line_code=`), 'links are absolute on the answer to a post');

    const posted = await postForm(t, devWeb, action[1], { ...fields, type: 'DiscussionNote', note: 'Why <b>quotes</b>?' });
    assert.equal(posted.status, 303, posted.text);
    assert.match(posted.headers.location, new RegExp(`/-/merge_requests/${mr.iid}/diffs#note_\\d+$`));

    const threads = (await t.get(`${api}/merge_requests/${mr.iid}/discussions`, { token: dev.token })).body;
    assert.equal(threads.length, 1);
    const note = threads[0].notes[0];
    assert.equal(note.type, 'DiffNote');
    assert.equal(note.body, 'Why <b>quotes</b>?');
    assert.equal(note.author.id, dev.user.id);
    assert.equal(note.resolvable, true);
    assert.deepEqual(
      { base: note.position.base_sha, start: note.position.start_sha, head: note.position.head_sha },
      { base: mr.diff_refs.base_sha, start: mr.diff_refs.start_sha, head: mr.diff_refs.head_sha },
    );
    assert.equal(note.position.new_path, 'src/app.ts');
    assert.equal(note.position.old_path, 'src/app.ts');
    assert.equal(note.position.new_line, 2);
    assert.equal(note.position.old_line, null);
    assert.equal(note.position.position_type, 'text');

    for (const view of ['inline', 'parallel']) {
      const page = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}/diffs?view=${view}`);
      assert.ok(page.text.includes('Why &lt;b&gt;quotes&lt;/b&gt;?'), view);
      assert.match(page.text, /<tr class="notes">[\s\S]*?Why/, view);
    }
    const overview = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}`);
    assert.match(overview.text, /Started a thread on/);

    const threadId = threads[0].id;
    const resolve = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/diffs/discussions/${threadId}/resolve`, {});
    assert.equal(resolve.status, 303);
    assert.match(resolve.headers.location, /\/diffs#discussion_/);
    let after = (await t.get(`${api}/merge_requests/${mr.iid}/discussions/${threadId}`, { token: dev.token })).body;
    assert.equal(after.notes[0].resolved, true);
    assert.equal(after.notes[0].resolved_by.id, dev.user.id);
    const resolvedPage = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}/diffs`);
    assert.match(resolvedPage.text, /Unresolve thread/);
    // A reporter may not resolve someone else's thread.
    assert.equal((await postForm(t, reporterWeb, `${web}/-/merge_requests/${mr.iid}/discussions/${threadId}/unresolve`, {})).status, 403);
    assert.equal((await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/discussions/${threadId}/unresolve`, {})).status, 303);
    after = (await t.get(`${api}/merge_requests/${mr.iid}/discussions/${threadId}`, { token: dev.token })).body;
    assert.equal(after.notes[0].resolved, false);

    // A reply joins the thread; a general comment is its own note.
    const reply = await postForm(t, reporterWeb, `${web}/-/merge_requests/${mr.iid}/diffs/notes`, { note: 'Because.', in_reply_to_discussion_id: threadId });
    assert.equal(reply.status, 303);
    assert.match(reply.headers.location, /\/diffs#note_\d+$/);
    const comment = await postForm(t, reporterWeb, `${web}/-/merge_requests/${mr.iid}/notes`, { note: 'Looks fine' });
    assert.equal(comment.status, 303);
    assert.match(comment.headers.location, new RegExp(`/-/merge_requests/${mr.iid}#note_\\d+$`));
    const all = (await t.get(`${api}/merge_requests/${mr.iid}/discussions`, { token: dev.token })).body;
    assert.equal(all.length, 2);
    assert.equal(all[0].notes.length, 2);
    assert.equal(all[0].notes[1].body, 'Because.');
    assert.equal(all[1].notes[0].body, 'Looks fine');
    assert.equal(all[1].individual_note, true);

    // A position that is not a line of the diff is refused with the form shown again.
    const wrong = await postForm(t, devWeb, action[1], { ...fields, 'position[new_line]': '77', note: 'Nowhere' });
    assert.equal(wrong.status, 400);
    assert.match(wrong.text, /could not be saved: The line of this comment is not in the diff/);
    assert.ok(wrong.text.includes('Nowhere'), 'the text is kept');
  });

  it('merges through the form: the merge request is merged and its source branch deleted (checked through the API)', async () => {
    await write('to-merge', 'merge-me.txt', 'merged content\n', { start_branch: 'main' });
    const mr = await open('to-merge', 'Merge me');
    const res = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/merge`, { sha: mr.sha, should_remove_source_branch: 'true' });
    assert.equal(res.status, 303, res.text);
    assert.equal(res.headers.location, `${web}/-/merge_requests/${mr.iid}`);
    const state = (await t.get(`${api}/merge_requests/${mr.iid}`)).body;
    assert.equal(state.state, 'merged');
    assert.equal(state.merged_by.id, dev.user.id);
    assert.equal((await t.get(`${api}/repository/branches/to-merge`)).status, 404);
    const file = await t.get(`${api}/repository/files/merge-me.txt/raw`, { query: { ref: 'main' } });
    assert.equal(file.text, 'merged content\n');
    const page = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}`);
    assert.match(page.text, /<span class="badge merged">Merged<\/span> by/);
    assert.ok(page.text.includes(state.merge_commit_sha.slice(0, 8)));
    assert.ok(!/data-merge/.test(page.text));
    // Merging again is refused with the reason, not a 500.
    const again = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/merge`, {});
    assert.equal(again.status, 422);
  });

  it('shows why a merge request cannot be merged (conflicts, draft, unresolved threads) and refuses the merge', async () => {
    await write('clash', 'shared.txt', 'one\nclash\nthree\n', { start_branch: 'main' });
    await write('main', 'shared.txt', 'one\nmain moved\nthree\n');
    const mr = await open('clash', 'Conflicting');
    const res = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}`);
    assert.equal(res.status, 200);
    assert.match(res.text, /data-blocker="conflict"/);
    assert.match(res.text, /cannot be merged/);
    assert.ok(!/data-merge/.test(res.text));
    const refused = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}/merge`, { sha: mr.sha });
    assert.equal(refused.status, 422);
    assert.match(refused.text, /could not be merged/);
    assert.equal((await t.get(`${api}/merge_requests/${mr.iid}`)).body.state, 'opened');

    await write('drafty', 'drafty.txt', 'd\n', { start_branch: 'main' });
    const draft = await open('drafty', 'Draft: unfinished');
    assert.match((await getPage(t, devWeb, `${web}/-/merge_requests/${draft.iid}`)).text, /data-blocker="draft_status"/);

    // With the project's rule on, an unresolved thread blocks the merge.
    await write('threads', 'threads.txt', 't\n', { start_branch: 'main' });
    const threaded = await open('threads', 'Has a thread');
    assert.equal((await t.put(api, { only_allow_merge_if_all_discussions_are_resolved: true })).status, 200);
    assert.equal((await postForm(t, devWeb, `${web}/-/merge_requests/${threaded.iid}/notes`, { note: 'Fix this', type: 'DiscussionNote' })).status, 303);
    const blocked = await getPage(t, devWeb, `${web}/-/merge_requests/${threaded.iid}`);
    assert.match(blocked.text, /data-blocker="discussions_not_resolved"/);
    assert.equal((await t.put(api, { only_allow_merge_if_all_discussions_are_resolved: false })).status, 200);
  });

  it('closes and reopens through the form (the author may)', async () => {
    await write('closing', 'closing.txt', 'c\n', { start_branch: 'main' });
    const mr = await open('closing', 'Close me');
    const close = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}`, { 'merge_request[state_event]': 'close' });
    assert.equal(close.status, 303);
    assert.equal((await t.get(`${api}/merge_requests/${mr.iid}`)).body.state, 'closed');
    const page = await getPage(t, devWeb, `${web}/-/merge_requests/${mr.iid}`);
    assert.match(page.text, /Reopen merge request/);
    assert.match(page.text, /closed/);
    const reopen = await postForm(t, devWeb, `${web}/-/merge_requests/${mr.iid}`, { 'merge_request[state_event]': 'reopen' });
    assert.equal(reopen.status, 303);
    assert.equal((await t.get(`${api}/merge_requests/${mr.iid}`)).body.state, 'opened');
  });
  it('shows a public project\'s merge requests to anonymous visitors, without forms', async () => {
    const pub = await t.createProject({ owner: alice.user, visibility: 20 });
    const pubApi = `/api/v4/projects/${pub.id}`;
    const res1 = await t.post(`${pubApi}/repository/commits`, { branch: 'main', commit_message: 'init', actions: [{ action: 'create', file_path: 'a.txt', content: 'a\n' }] });
    assert.equal(res1.status, 201);
    await t.post(`${pubApi}/repository/commits`, { branch: 'topic', start_branch: 'main', commit_message: 'topic', actions: [{ action: 'update', file_path: 'a.txt', content: 'b\n' }] });
    const mr = (await t.post(`${pubApi}/merge_requests`, { source_branch: 'topic', target_branch: 'main', title: 'Public change' })).body;
    const pubWeb = `/${alice.user.username}/${pub.path}/-/merge_requests`;
    const list = await getPage(t, ANONYMOUS, pubWeb);
    assert.equal(list.status, 200);
    assert.ok(list.text.includes('Public change'));
    const view = await getPage(t, ANONYMOUS, `${pubWeb}/${mr.iid}`);
    assert.equal(view.status, 200);
    assert.ok(!view.text.includes('data-merge'), 'no merge button');
    assert.ok(!view.text.includes('authenticity_token'), 'no forms');
    assert.match(view.text, /Sign in<\/a> to merge/);
    const diffs = await getPage(t, ANONYMOUS, `${pubWeb}/${mr.iid}/diffs`);
    assert.equal(diffs.status, 200);
    assert.ok(!diffs.text.includes('comment-here'), 'no comment links');
    // Posting needs a session: sent to sign in.
    const post = await postForm(t, ANONYMOUS, `${pubWeb}/${mr.iid}/notes`, { note: 'hi' });
    assert.equal(post.status, 302);
  });
});
