import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { ANONYMOUS, getPage, postForm, webSignIn, type WebSession } from '../helpers/web.js';
import type { Project } from '../../src/db/schema/core.js';

describe('web: issues', () => {
  let t: TestContext;
  let alice: TestUser;
  let reporter: TestUser;
  let outsider: TestUser;
  let aliceWeb: WebSession;
  let reporterWeb: WebSession;
  let outsiderWeb: WebSession;
  let priv: Project;
  let pub: Project;
  let privPath: string;
  let pubPath: string;

  const api = (who: TestUser) => ({ token: who.token });

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    reporter = await t.createUser();
    outsider = await t.createUser();
    priv = await t.createProject({ owner: alice.user, visibility: 0 });
    pub = await t.createProject({ owner: alice.user, visibility: 20 });
    await t.addMember(priv, alice.user, 50);
    await t.addMember(pub, alice.user, 50);
    await t.addMember(pub, reporter.user, 20);
    privPath = `/${alice.user.username}/${priv.path}`;
    pubPath = `/${alice.user.username}/${pub.path}`;
    aliceWeb = await webSignIn(t, alice);
    reporterWeb = await webSignIn(t, reporter);
    outsiderWeb = await webSignIn(t, outsider);
  });
  after(() => t.close());

  async function apiIssue(project: Project, who: TestUser, body: Record<string, unknown>) {
    const res = await t.post(`/api/v4/projects/${project.id}/issues`, body, api(who));
    assert.equal(res.status, 201, res.text);
    return res.body as { iid: number; id: number };
  }

  it('lists issues with state tabs and counts, escaping titles', async () => {
    await apiIssue(pub, alice, { title: 'Crash <script>alert(1)</script>', labels: 'bug', description: 'Boom' });
    const closed = await apiIssue(pub, alice, { title: 'An old closed one' });
    await t.put(`/api/v4/projects/${pub.id}/issues/${closed.iid}`, { state_event: 'close' }, api(alice));
    const res = await getPage(t, aliceWeb, `${pubPath}/-/issues`);
    assert.equal(res.status, 200, res.text);
    assert.ok(res.text.includes('Crash &lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(!res.text.includes('<script>alert(1)'));
    assert.ok(!res.text.includes('An old closed one'), 'the open tab hides closed issues');
    assert.match(res.text, /aria-current="page">Open<span class="count">1<\/span>/);
    assert.match(res.text, />Closed<span class="count">1<\/span>/);
    assert.match(res.text, />All<span class="count">2<\/span>/);
    assert.ok(res.text.includes('>bug</span>'));
    const closedTab = await getPage(t, aliceWeb, `${pubPath}/-/issues?state=closed`);
    assert.ok(closedTab.text.includes('An old closed one'));
    assert.ok(!closedTab.text.includes('Crash &lt;script'));
    assert.ok(!res.text.includes('style="'), 'no inline style');
  });

  it('filters by search, label, author and assignee as GitLab\'s query parameters', async () => {
    const mine = await apiIssue(pub, reporter, { title: 'Reporter wrote this', labels: 'docs,backend', assignee_ids: [alice.user.id] });
    assert.ok(mine.iid);
    const bySearch = await getPage(t, aliceWeb, `${pubPath}/-/issues?state=all&search=reporter+wrote`);
    assert.ok(bySearch.text.includes('Reporter wrote this'));
    assert.ok(!bySearch.text.includes('An old closed one'));
    const byLabel = await getPage(t, aliceWeb, `${pubPath}/-/issues?label_name[]=docs&label_name[]=backend`);
    assert.ok(byLabel.text.includes('Reporter wrote this'));
    assert.ok(!byLabel.text.includes('Crash &lt;script'));
    const byBadLabel = await getPage(t, aliceWeb, `${pubPath}/-/issues?label_name[]=docs&label_name[]=bug`);
    assert.ok(!byBadLabel.text.includes('Reporter wrote this'));
    const byAuthor = await getPage(t, aliceWeb, `${pubPath}/-/issues?author_username=${reporter.user.username}`);
    assert.ok(byAuthor.text.includes('Reporter wrote this'));
    assert.ok(!byAuthor.text.includes('Crash &lt;script'));
    const byAssignee = await getPage(t, aliceWeb, `${pubPath}/-/issues?assignee_username=${alice.user.username}`);
    assert.ok(byAssignee.text.includes('Reporter wrote this'));
    assert.ok(!byAssignee.text.includes('Crash &lt;script'));
    const sorted = await getPage(t, aliceWeb, `${pubPath}/-/issues?sort=title_asc&page=abc`);
    assert.equal(sorted.status, 200);
    assert.ok(sorted.text.indexOf('Crash &lt;script') < sorted.text.indexOf('Reporter wrote this'));
  });

  it('pages the list by 20', async () => {
    const p = await t.createProject({ owner: alice.user, visibility: 0 });
    await t.addMember(p, alice.user, 50);
    for (let i = 1; i <= 23; i++) await apiIssue(p, alice, { title: `Numbered issue ${String(i).padStart(2, '0')}` });
    const base = `/${alice.user.username}/${p.path}/-/issues`;
    const first = await getPage(t, aliceWeb, base);
    assert.equal((first.text.match(/Numbered issue/g) ?? []).length, 20);
    assert.ok(first.text.includes('Numbered issue 23'));
    assert.match(first.text, /rel="next" href="[^"]*page=2/);
    const second = await getPage(t, aliceWeb, `${base}?page=2`);
    assert.equal((second.text.match(/Numbered issue/g) ?? []).length, 3);
    assert.ok(second.text.includes('Numbered issue 01'));
  });

  it('keeps a confidential issue from a non-member, in the list and on its page', async () => {
    const secret = await apiIssue(pub, alice, { title: 'Secret confidential thing', confidential: true });
    const list = await getPage(t, outsiderWeb, `${pubPath}/-/issues`);
    assert.equal(list.status, 200);
    assert.ok(!list.text.includes('Secret confidential thing'));
    const page = await getPage(t, outsiderWeb, `${pubPath}/-/issues/${secret.iid}`);
    assert.equal(page.status, 404);
    assert.ok(!page.text.includes('Secret confidential thing'));
    const anon = await getPage(t, ANONYMOUS, `${pubPath}/-/issues/${secret.iid}`);
    assert.equal(anon.status, 302);
    assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
    // Reporters and up see it.
    const seen = await getPage(t, reporterWeb, `${pubPath}/-/issues/${secret.iid}`);
    assert.equal(seen.status, 200);
    assert.ok(seen.text.includes('Secret confidential thing'));
    assert.ok(seen.text.includes('Confidential'));
    const comment = await postForm(t, outsiderWeb, `${pubPath}/-/issues/${secret.iid}/notes`, { note: 'peek' });
    assert.equal(comment.status, 404);
  });

  it('is 404 in a private project for an outsider and sends anonymous visitors to sign in', async () => {
    const issue = await apiIssue(priv, alice, { title: 'Private issue title' });
    for (const url of [`${privPath}/-/issues`, `${privPath}/-/issues/${issue.iid}`, `${privPath}/-/issues/new`]) {
      const res = await getPage(t, outsiderWeb, url);
      assert.equal(res.status, 404, url);
      assert.ok(!res.text.includes('Private issue title'));
      const anon = await getPage(t, ANONYMOUS, url);
      assert.equal(anon.status, 302, url);
      assert.match(anon.headers.location, /^\/users\/sign_in/);
    }
    const post = await postForm(t, outsiderWeb, `${privPath}/-/issues`, { 'issue[title]': 'sneaky' });
    assert.equal(post.status, 404);
    const missing = await getPage(t, aliceWeb, `${privPath}/-/issues/99999`);
    assert.equal(missing.status, 404);
  });

  it('creates an issue from the form (Post/Redirect/Get) and re-renders the form on a blank title', async () => {
    const form = await getPage(t, aliceWeb, `${privPath}/-/issues/new`);
    assert.equal(form.status, 200);
    assert.match(form.text, /name="issue\[title\]"/);
    assert.match(form.text, /name="issue\[confidential\]"/);
    const blank = await postForm(t, aliceWeb, `${privPath}/-/issues`, { 'issue[title]': '  ', 'issue[description]': 'kept <b>draft</b>' });
    assert.equal(blank.status, 400);
    assert.match(blank.text, /Title can(&#39;|')t be blank/);
    assert.ok(blank.text.includes('kept &lt;b&gt;draft&lt;/b&gt;'));
    const res = await postForm(t, aliceWeb, `${privPath}/-/issues`, {
      'issue[title]': 'Made <img src=x onerror=alert(1)> from the web',
      'issue[description]': 'Steps:\n\n1. *click*\n\n<script>alert(2)</script>',
      'issue[confidential]': '1',
    });
    assert.equal(res.status, 303, res.text);
    const location = res.headers.location as string;
    assert.match(location, new RegExp(`^${privPath}/-/issues/\\d+$`));
    const page = await getPage(t, aliceWeb, location);
    assert.equal(page.status, 200);
    assert.ok(page.text.includes('Made &lt;img src=x onerror=alert(1)&gt; from the web'));
    assert.match(page.text, /<em>click<\/em>/);
    assert.ok(!page.text.includes('<script>alert(2)'));
    assert.ok(page.text.includes('Confidential'));
    const viaApi = await t.get(`/api/v4/projects/${priv.id}/issues/${location.split('/').pop()}`, api(alice));
    assert.equal(viaApi.body.confidential, true);
    assert.equal(viaApi.body.author.username, alice.user.username);
  });

  it('refuses forms without the session\'s CSRF token (422)', async () => {
    const issue = await apiIssue(priv, alice, { title: 'CSRF target' });
    for (const [url, fields] of [
      [`${privPath}/-/issues`, { 'issue[title]': 'forged' }],
      [`${privPath}/-/issues/${issue.iid}/notes`, { note: 'forged' }],
      [`${privPath}/-/issues/${issue.iid}/close`, {}],
    ] as const) {
      const res = await postForm(t, aliceWeb, url, { ...fields, authenticity_token: 'not-the-token' });
      assert.equal(res.status, 422, url);
      const none = await postForm(t, { ...aliceWeb, csrf: '' }, url, { ...fields });
      assert.equal(none.status, 422, url);
    }
    const list = await t.get(`/api/v4/projects/${priv.id}/issues?search=forged`, api(alice));
    assert.equal(list.body.length, 0);
    const notes = await t.get(`/api/v4/projects/${priv.id}/issues/${issue.iid}/notes`, api(alice));
    assert.equal(notes.body.length, 0);
  });

  it('comments and replies: the note shows escaped and rendered, a reply joins the thread', async () => {
    const issue = await apiIssue(pub, alice, { title: 'Talk about it' });
    const url = `${pubPath}/-/issues/${issue.iid}`;
    const res = await postForm(t, outsiderWeb, `${url}/notes`, { note: 'First **bold** <script>alert(3)</script>' });
    assert.equal(res.status, 303, res.text);
    assert.match(res.headers.location, new RegExp(`^${url}#note_\\d+$`));
    const page = await getPage(t, aliceWeb, url);
    assert.match(page.text, /<strong>bold<\/strong>/);
    assert.ok(!page.text.includes('<script>alert(3)'));
    assert.ok(page.text.includes(outsider.user.name));
    const discussionId = /data-discussion-id="([0-9a-f]{40})"/.exec(page.text)![1];
    assert.match(page.text, /name="in_reply_to_discussion_id"/);
    const reply = await postForm(t, aliceWeb, `${url}/notes`, { note: 'A reply', in_reply_to_discussion_id: discussionId });
    assert.equal(reply.status, 303);
    const discussions = await t.get(`/api/v4/projects/${pub.id}/issues/${issue.iid}/discussions`, api(alice));
    assert.equal(discussions.body.length, 1);
    assert.deepEqual(discussions.body[0].notes.map((n: any) => n.body), ['First **bold** <script>alert(3)</script>', 'A reply']);
    // A new thread, and a blank comment re-renders the page with the message.
    const thread = await postForm(t, aliceWeb, `${url}/notes`, { note: 'A thread', type: 'DiscussionNote' });
    assert.equal(thread.status, 303);
    const after = await t.get(`/api/v4/projects/${pub.id}/issues/${issue.iid}/discussions`, api(alice));
    assert.equal(after.body[1].individual_note, false);
    const blank = await postForm(t, aliceWeb, `${url}/notes`, { note: '   ' });
    assert.equal(blank.status, 400);
    assert.match(blank.text, /Comment can(&#39;|')t be blank/);
    const unknown = await postForm(t, aliceWeb, `${url}/notes`, { note: 'x', in_reply_to_discussion_id: 'f'.repeat(40) });
    assert.equal(unknown.status, 404);
    // Anonymous visitors are sent to sign in, and see no form.
    const anon = await getPage(t, ANONYMOUS, url);
    assert.equal(anon.status, 200);
    assert.ok(!anon.text.includes('name="note"'));
    assert.match(anon.text, /Sign in<\/a> to comment/);
    const anonPost = await postForm(t, ANONYMOUS, `${url}/notes`, { note: 'anon' });
    assert.equal(anonPost.status, 302);
  });

  it('closes and reopens for those who may, with the system notes; 403 for others', async () => {
    const issue = await apiIssue(pub, alice, { title: 'Close me' });
    const url = `${pubPath}/-/issues/${issue.iid}`;
    const outsiderView = await getPage(t, outsiderWeb, url);
    assert.ok(!outsiderView.text.includes('Close issue'));
    const refused = await postForm(t, outsiderWeb, `${url}/close`, {});
    assert.equal(refused.status, 403);
    const view = await getPage(t, aliceWeb, url);
    assert.ok(view.text.includes('Close issue'));
    const closed = await postForm(t, aliceWeb, `${url}/close`, {});
    assert.equal(closed.status, 303);
    assert.equal(closed.headers.location, url);
    const page = await getPage(t, aliceWeb, url);
    assert.match(page.text, /data-issue-state>Closed</);
    assert.ok(page.text.includes('Reopen issue'));
    assert.match(page.text, /class="note system"[^>]*>[^]*?<p>closed<\/p>/);
    assert.equal((await t.get(`/api/v4/projects/${pub.id}/issues/${issue.iid}`, api(alice))).body.state, 'closed');
    const reopened = await postForm(t, aliceWeb, `${url}/reopen`, {});
    assert.equal(reopened.status, 303);
    assert.equal((await t.get(`/api/v4/projects/${pub.id}/issues/${issue.iid}`, api(alice))).body.state, 'opened');
    // The author of an issue may close it whatever their level (GitLab's rule).
    const own = await apiIssue(pub, outsider, { title: 'Outsider wrote it' });
    const byAuthor = await postForm(t, outsiderWeb, `${pubPath}/-/issues/${own.iid}/close`, {});
    assert.equal(byAuthor.status, 303);
  });

  it('does not resolve issue threads (as the API: only merge request threads resolve)', async () => {
    const issue = await apiIssue(pub, alice, { title: 'Threads here' });
    const url = `${pubPath}/-/issues/${issue.iid}`;
    const d = await t.post(`/api/v4/projects/${pub.id}/issues/${issue.iid}/discussions`, { body: 'thread' }, api(alice));
    assert.equal(d.status, 201);
    const page = await getPage(t, aliceWeb, url);
    assert.ok(!page.text.includes('Resolve thread'));
    const res = await postForm(t, aliceWeb, `${url}/discussions/${d.body.id}/resolve`, {});
    assert.equal(res.status, 403);
  });

  it('shows a locked discussion\'s comment form only to members', async () => {
    const issue = await apiIssue(pub, alice, { title: 'Locked talk' });
    await t.put(`/api/v4/projects/${pub.id}/issues/${issue.iid}`, { discussion_locked: true }, api(alice));
    const url = `${pubPath}/-/issues/${issue.iid}`;
    const outsiderView = await getPage(t, outsiderWeb, url);
    assert.match(outsiderView.text, /discussion is locked/);
    const refused = await postForm(t, outsiderWeb, `${url}/notes`, { note: 'let me in' });
    assert.equal(refused.status, 403);
    const member = await postForm(t, reporterWeb, `${url}/notes`, { note: 'members may' });
    assert.equal(member.status, 303);
  });

  it('lists the issues assigned to the signed-in user on the dashboard', async () => {
    const assigned = await apiIssue(priv, alice, { title: 'Assigned to alice on the dashboard', assignee_ids: [alice.user.id] });
    await apiIssue(priv, alice, { title: 'Nobody has this one' });
    const res = await getPage(t, aliceWeb, '/dashboard/issues');
    assert.equal(res.status, 200);
    assert.ok(res.text.includes('Assigned to alice on the dashboard'));
    assert.ok(!res.text.includes('Nobody has this one'));
    assert.ok(res.text.includes(`${privPath}/-/issues/${assigned.iid}`));
    const other = await getPage(t, outsiderWeb, '/dashboard/issues');
    assert.ok(!other.text.includes('Assigned to alice on the dashboard'));
    const closed = await getPage(t, aliceWeb, '/dashboard/issues?state=closed');
    assert.ok(!closed.text.includes('Assigned to alice on the dashboard'));
    const anon = await getPage(t, ANONYMOUS, '/dashboard/issues');
    assert.equal(anon.status, 302);
  });
});
