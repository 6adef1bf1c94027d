import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree } from '../helpers/repo.js';
import { ANONYMOUS, getPage, webSignIn, type WebSession } from '../helpers/web.js';
import type { Project } from '../../src/db/schema/core.js';

describe('web: the project page and the page router', () => {
  let t: TestContext;
  let alice: TestUser;
  let outsider: TestUser;
  let aliceWeb: WebSession;
  let outsiderWeb: WebSession;
  let priv: Project;
  let pub: Project;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    outsider = await t.createUser();
    priv = await t.createProject({ owner: alice.user, visibility: 0 });
    pub = await t.createProject({ owner: alice.user, visibility: 20 });
    const w = workTree(t, priv);
    w.write('README.md', '# Hello <script>alert(1)</script>\n\nSome *text*.\n');
    w.commit('Initial commit');
    w.push();
    aliceWeb = await webSignIn(t, alice);
    outsiderWeb = await webSignIn(t, outsider);
  });
  after(() => t.close());

  it('shows a member the project with its README rendered, escaped, and the clone URL', async () => {
    const res = await getPage(t, aliceWeb, `/${alice.user.username}/${priv.path}`);
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers['content-type'], /^text\/html/);
    assert.match(res.headers['content-security-policy'], /script-src 'self'/);
    assert.equal(res.headers['x-frame-options'], 'DENY');
    assert.match(res.text, /<h1>Hello &lt;script&gt;alert\(1\)&lt;\/script&gt;<\/h1>/);
    assert.match(res.text, /<em>text<\/em>/);
    assert.ok(res.text.includes(`/${alice.user.username}/${priv.path}.git`));
    assert.ok(!res.text.includes('style="'), 'no inline style (the CSP forbids it)');
  });

  it('is 404 to a signed-in outsider and sends an anonymous visitor to sign in', async () => {
    const res = await getPage(t, outsiderWeb, `/${alice.user.username}/${priv.path}`);
    assert.equal(res.status, 404);
    assert.ok(!res.text.includes(priv.name));
    const anon = await getPage(t, ANONYMOUS, `/${alice.user.username}/${priv.path}`);
    assert.equal(anon.status, 302);
    assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
  });

  it('shows a public project to anyone', async () => {
    const res = await getPage(t, ANONYMOUS, `/${alice.user.username}/${pub.path}`);
    assert.equal(res.status, 200);
    assert.match(res.text, /The repository for this project is empty/);
  });

  it('keeps the JSON 404 of the API and of unknown paths', async () => {
    const api = await getPage(t, aliceWeb, '/api/v4/nothing-here');
    assert.equal(api.status, 404);
    assert.deepEqual(api.body, { error: '404 Not Found' });
    const bad = await getPage(t, aliceWeb, '/%E0%A4%A/x');
    assert.ok(bad.status === 400 || bad.status === 404, String(bad.status));
    const traversal = await getPage(t, aliceWeb, `/${alice.user.username}/%2e%2e/-/tree/main`);
    assert.equal(traversal.status, 404);
  });

  it('serves the style sheet and the script with long-lived caching', async () => {
    const page = await getPage(t, ANONYMOUS, `/${alice.user.username}/${pub.path}`);
    const css = /href="(\/-\/assets\/cairn-[0-9a-f]+\.css)"/.exec(page.text)![1];
    const js = /src="(\/-\/assets\/cairn-[0-9a-f]+\.js)"/.exec(page.text)![1];
    const a = await getPage(t, ANONYMOUS, css);
    assert.equal(a.status, 200);
    assert.match(a.headers['content-type'], /^text\/css/);
    assert.match(a.headers['cache-control'], /immutable/);
    const b = await getPage(t, ANONYMOUS, js);
    assert.match(b.headers['content-type'], /^text\/javascript/);
  });
});
