import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { ANONYMOUS, getPage, postForm, webSignIn, type WebSession } from '../helpers/web.js';
import type { Project } from '../../src/db/schema/core.js';

describe('web: snippets', () => {
  let t: TestContext;
  let alice: TestUser;
  let guest: TestUser;
  let outsider: TestUser;
  let aliceWeb: WebSession;
  let guestWeb: WebSession;
  let outsiderWeb: WebSession;
  let priv: Project;
  let pub: Project;
  let privPath: string;
  let pubPath: string;

  const api = (who: TestUser) => ({ token: who.token });

  async function personal(who: TestUser, body: Record<string, unknown>) {
    const res = await t.post('/api/v4/snippets', body, api(who));
    assert.equal(res.status, 201, res.text);
    return res.body as { id: number };
  }

  async function inProject(project: Project, who: TestUser, body: Record<string, unknown>) {
    const res = await t.post(`/api/v4/projects/${project.id}/snippets`, body, api(who));
    assert.equal(res.status, 201, res.text);
    return res.body as { id: number };
  }

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    guest = await t.createUser();
    outsider = await t.createUser();
    priv = await t.createProject({ owner: alice.user, visibility: 0 });
    pub = await t.createProject({ owner: alice.user, visibility: 20 });
    await t.addMember(priv, alice.user, 50);
    await t.addMember(pub, alice.user, 50);
    await t.addMember(pub, guest.user, 10);
    privPath = `/${alice.user.username}/${priv.path}`;
    pubPath = `/${alice.user.username}/${pub.path}`;
    aliceWeb = await webSignIn(t, alice);
    guestWeb = await webSignIn(t, guest);
    outsiderWeb = await webSignIn(t, outsider);
  });
  after(() => t.close());

  it('shows a personal snippet: title escaped, description rendered, files highlighted, raw link', async () => {
    const s = await personal(alice, {
      title: 'Snip <script>alert(1)</script>',
      description: 'Some *notes* <script>alert(2)</script>',
      visibility: 'public',
      files: [
        { file_path: 'hello.js', content: 'const greeting = "<b>hi</b>";\nconsole.log(greeting);\n' },
        { file_path: 'docs/readme.txt', content: 'plain <i>text</i>\n' },
      ],
    });
    const res = await getPage(t, ANONYMOUS, `/-/snippets/${s.id}`);
    assert.equal(res.status, 200, res.text);
    assert.ok(res.text.includes('Snip &lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(!res.text.includes('<script>alert'));
    assert.match(res.text, /<em>notes<\/em>/);
    assert.match(res.text, /<span class="hljs-keyword">const<\/span>/);
    assert.ok(res.text.includes('&quot;&lt;b&gt;hi&lt;/b&gt;&quot;') || res.text.includes('"&lt;b&gt;hi&lt;/b&gt;"'));
    assert.ok(res.text.includes('plain &lt;i&gt;text&lt;/i&gt;'));
    assert.ok(res.text.includes(`/-/snippets/${s.id}/raw/main/docs/readme.txt`));
    assert.ok(!res.text.includes('style="'));
    const raw = await getPage(t, ANONYMOUS, `/-/snippets/${s.id}/raw/main/hello.js`);
    assert.equal(raw.status, 200);
    assert.match(raw.headers['content-type'], /^text\/plain/);
    assert.equal(raw.headers['x-content-type-options'], 'nosniff');
    assert.match(raw.headers['content-security-policy'], /sandbox/);
    assert.equal(raw.text, 'const greeting = "<b>hi</b>";\nconsole.log(greeting);\n');
    const missing = await getPage(t, ANONYMOUS, `/-/snippets/${s.id}/raw/main/nope.txt`);
    assert.equal(missing.status, 404);
    const traversal = await getPage(t, ANONYMOUS, `/-/snippets/${s.id}/raw/main/%2e%2e/etc/passwd`);
    assert.equal(traversal.status, 404);
  });

  it('is 404 for a private personal snippet to others, sends anonymous visitors to sign in', async () => {
    const s = await personal(alice, { title: 'Private personal snip', visibility: 'private', files: [{ file_path: 'a.txt', content: 'secret' }] });
    for (const url of [`/-/snippets/${s.id}`, `/-/snippets/${s.id}/raw/main/a.txt`]) {
      const res = await getPage(t, outsiderWeb, url);
      assert.equal(res.status, 404, url);
      assert.ok(!res.text.includes('Private personal snip'));
      assert.ok(!res.text.includes('secret'));
      const anon = await getPage(t, ANONYMOUS, url);
      assert.equal(anon.status, 302, url);
      assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
    }
    const own = await getPage(t, aliceWeb, `/-/snippets/${s.id}`);
    assert.equal(own.status, 200);
    assert.ok(own.text.includes('Private personal snip'));
    const comment = await postForm(t, outsiderWeb, `/-/snippets/${s.id}/notes`, { note: 'peek' });
    assert.equal(comment.status, 404);
    // Internal: signed-in users, not anonymous ones.
    const internal = await personal(alice, { title: 'Internal personal snip', visibility: 'internal', files: [{ file_path: 'b.txt', content: 'b' }] });
    assert.equal((await getPage(t, outsiderWeb, `/-/snippets/${internal.id}`)).status, 200);
    assert.equal((await getPage(t, ANONYMOUS, `/-/snippets/${internal.id}`)).status, 302);
  });

  it('keeps project snippets to the project\'s readers and the snippet\'s visibility', async () => {
    const inPrivate = await inProject(priv, alice, { title: 'Snip of a private project', visibility: 'private', files: [{ file_path: 'x.py', content: 'print(1)\n' }] });
    const res = await getPage(t, outsiderWeb, `${privPath}/-/snippets/${inPrivate.id}`);
    assert.equal(res.status, 404);
    assert.equal((await getPage(t, outsiderWeb, `${privPath}/-/snippets`)).status, 404);
    const anon = await getPage(t, ANONYMOUS, `${privPath}/-/snippets/${inPrivate.id}`);
    assert.equal(anon.status, 302);
    const member = await getPage(t, aliceWeb, `${privPath}/-/snippets/${inPrivate.id}`);
    assert.equal(member.status, 200);
    assert.match(member.text, /<span class="hljs-built_in">print<\/span>/);
    // A private snippet in a public project: members (guests too) see it, others get a 404.
    const privateInPublic = await inProject(pub, alice, { title: 'Members-only snip', visibility: 'private', files: [{ file_path: 'm.txt', content: 'm' }] });
    const publicInPublic = await inProject(pub, alice, { title: 'Everyone snip', visibility: 'public', files: [{ file_path: 'e.txt', content: 'e' }] });
    assert.equal((await getPage(t, outsiderWeb, `${pubPath}/-/snippets/${privateInPublic.id}`)).status, 404);
    assert.equal((await getPage(t, outsiderWeb, `${pubPath}/-/snippets/${privateInPublic.id}/raw/main/m.txt`)).status, 404);
    assert.equal((await getPage(t, guestWeb, `${pubPath}/-/snippets/${privateInPublic.id}`)).status, 200);
    assert.equal((await getPage(t, ANONYMOUS, `${pubPath}/-/snippets/${publicInPublic.id}`)).status, 200);
    const raw = await getPage(t, ANONYMOUS, `${pubPath}/-/snippets/${publicInPublic.id}/raw/main/e.txt`);
    assert.equal(raw.text, 'e');
    const list = await getPage(t, outsiderWeb, `${pubPath}/-/snippets`);
    assert.equal(list.status, 200);
    assert.ok(list.text.includes('Everyone snip'));
    assert.ok(!list.text.includes('Members-only snip'));
    const guestList = await getPage(t, guestWeb, `${pubPath}/-/snippets`);
    assert.ok(guestList.text.includes('Members-only snip'));
    // A project snippet is not a personal one, nor in another project.
    assert.equal((await getPage(t, aliceWeb, `/-/snippets/${publicInPublic.id}`)).status, 404);
    assert.equal((await getPage(t, aliceWeb, `${privPath}/-/snippets/${publicInPublic.id}`)).status, 404);
  });

  it('lists the visitor\'s snippets and explores public and internal personal ones', async () => {
    const mine = await personal(outsider, { title: 'Outsider own private snip', visibility: 'private', files: [{ file_path: 'o.txt', content: 'o' }] });
    await personal(alice, { title: 'Alice public explore snip', visibility: 'public', files: [{ file_path: 'p.txt', content: 'p' }] });
    await personal(alice, { title: 'Alice internal explore snip', visibility: 'internal', files: [{ file_path: 'i.txt', content: 'i' }] });
    const own = await getPage(t, outsiderWeb, '/-/snippets');
    assert.equal(own.status, 200);
    assert.ok(own.text.includes('Outsider own private snip'));
    assert.ok(own.text.includes(`/-/snippets/${mine.id}`));
    assert.ok(!own.text.includes('Alice public explore snip'));
    assert.equal((await getPage(t, outsiderWeb, '/dashboard/snippets')).status, 200);
    assert.equal((await getPage(t, ANONYMOUS, '/-/snippets')).status, 302);
    const exploreAnon = await getPage(t, ANONYMOUS, '/explore/snippets');
    assert.equal(exploreAnon.status, 200);
    assert.ok(exploreAnon.text.includes('Alice public explore snip'));
    assert.ok(!exploreAnon.text.includes('Alice internal explore snip'));
    const explore = await getPage(t, outsiderWeb, '/explore/snippets');
    assert.ok(explore.text.includes('Alice internal explore snip'));
    assert.ok(!explore.text.includes('Outsider own private snip'));
    assert.ok(!explore.text.includes('Private personal snip'));
  });

  it('comments on project and personal snippets, escaped; CSRF refused', async () => {
    const s = await inProject(pub, alice, { title: 'Discuss me', visibility: 'public', files: [{ file_path: 'd.txt', content: 'd' }] });
    const url = `${pubPath}/-/snippets/${s.id}`;
    const forged = await postForm(t, outsiderWeb, `${url}/notes`, { note: 'forged', authenticity_token: 'bad' });
    assert.equal(forged.status, 422);
    const res = await postForm(t, outsiderWeb, `${url}/notes`, { note: 'Nice <script>alert(5)</script> **snip**' });
    assert.equal(res.status, 303, res.text);
    assert.match(res.headers.location, new RegExp(`^${url}#note_\\d+$`));
    const page = await getPage(t, ANONYMOUS, url);
    assert.match(page.text, /<strong>snip<\/strong>/);
    assert.ok(!page.text.includes('<script>alert(5)'));
    const notes = await t.get(`/api/v4/projects/${pub.id}/snippets/${s.id}/notes`, api(alice));
    assert.equal(notes.status, 200);
    assert.deepEqual(notes.body.map((n: any) => n.body), ['Nice <script>alert(5)</script> **snip**']);
    const mine = await personal(alice, { title: 'Personal with comments', visibility: 'public', files: [{ file_path: 'c.txt', content: 'c' }] });
    const p = await postForm(t, outsiderWeb, `/-/snippets/${mine.id}/notes`, { note: 'A comment on a personal snippet' });
    assert.equal(p.status, 303);
    const shown = await getPage(t, aliceWeb, `/-/snippets/${mine.id}`);
    assert.ok(shown.text.includes('A comment on a personal snippet'));
    const badCsrf = await postForm(t, outsiderWeb, `/-/snippets/${mine.id}/notes`, { note: 'x', authenticity_token: 'nope' });
    assert.equal(badCsrf.status, 422);
  });

  it('creates personal and project snippets from the form', async () => {
    const form = await getPage(t, aliceWeb, '/-/snippets/new');
    assert.equal(form.status, 200);
    const blank = await postForm(t, aliceWeb, '/-/snippets', { 'snippet[title]': '', 'snippet[content]': 'x' });
    assert.equal(blank.status, 400);
    assert.match(blank.text, /Title can(&#39;|')t be blank/);
    const badPath = await postForm(t, aliceWeb, '/-/snippets', { 'snippet[title]': 'T', 'snippet[file_name]': '../x', 'snippet[content]': 'x' });
    assert.equal(badPath.status, 400);
    const made = await postForm(t, aliceWeb, '/-/snippets', {
      'snippet[title]': 'From the <web>',
      'snippet[visibility]': 'internal',
      'snippet[file_name]': 'web.rb',
      'snippet[content]': 'puts "hi"\n',
    });
    assert.equal(made.status, 303, made.text);
    const page = await getPage(t, aliceWeb, made.headers.location);
    assert.ok(page.text.includes('From the &lt;web&gt;'));
    assert.ok(page.text.includes('web.rb'));
    const id = Number(made.headers.location.split('/').pop());
    const viaApi = await t.get(`/api/v4/snippets/${id}`, api(alice));
    assert.equal(viaApi.body.visibility, 'internal');
    assert.equal(viaApi.body.file_name, 'web.rb');
    assert.equal((await postForm(t, aliceWeb, '/-/snippets', { 'snippet[title]': 'x', 'snippet[content]': 'x', authenticity_token: 'bad' })).status, 422);

    // A project snippet: reporters and up; never more visible than the project.
    assert.equal((await getPage(t, guestWeb, `${pubPath}/-/snippets/new`)).status, 403);
    assert.equal((await postForm(t, guestWeb, `${pubPath}/-/snippets`, { 'snippet[title]': 'g', 'snippet[content]': 'g' })).status, 403);
    assert.equal((await getPage(t, outsiderWeb, `${privPath}/-/snippets/new`)).status, 404);
    const tooOpen = await postForm(t, aliceWeb, `${privPath}/-/snippets`, { 'snippet[title]': 'Too open', 'snippet[visibility]': 'public', 'snippet[content]': 'x' });
    assert.equal(tooOpen.status, 400);
    assert.match(tooOpen.text, /can not be more visible than the project(&#39;|')s/);
    const projectMade = await postForm(t, aliceWeb, `${pubPath}/-/snippets`, { 'snippet[title]': 'Project web snip', 'snippet[visibility]': 'public', 'snippet[content]': 'body' });
    assert.equal(projectMade.status, 303);
    assert.match(projectMade.headers.location, new RegExp(`^${pubPath}/-/snippets/\\d+$`));
    assert.equal((await getPage(t, ANONYMOUS, projectMade.headers.location)).status, 200);
  });
});
