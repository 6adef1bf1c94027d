import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import { tokenDigest } from '../../src/lib/secrets.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { csrfFrom, form, sessionCookieFrom, signIn } from './support.js';

describe('sign-in, sign-out and the applications settings page', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  async function signInForm() {
    const page = await t.get('/users/sign_in', { token: null });
    return { cookie: sessionCookieFrom(page.headers)!, csrf: csrfFrom(page.text), page };
  }
  const postSignIn = (cookie: string | undefined, fields: Record<string, string | undefined>) =>
    t.call('POST', '/users/sign_in', { token: null, headers: cookie ? { cookie } : {}, form: form(fields) });

  it('the sign-in page: accessible form, hidden authenticity_token, HttpOnly SameSite=Lax cookie', async () => {
    const { page } = await signInForm();
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'], /^text\/html; charset=utf-8/);
    assert.match(page.text, /<html lang="en">/);
    assert.match(page.text, /<label for="user_login">/);
    assert.match(page.text, /<input type="password" id="user_password" name="user\[password\]"/);
    assert.match(page.text, /<input type="hidden" name="authenticity_token" value="[A-Za-z0-9]{43}">/);
    const setCookie = String(page.headers['set-cookie']);
    assert.match(setCookie, /HttpOnly/);
    assert.match(setCookie, /SameSite=Lax/);
    assert.doesNotMatch(setCookie, /Secure/);
  });

  it('sign-in with username or e-mail; the session is in the database as a digest', async () => {
    const alice = await t.createUser();
    for (const login of [alice.user.username, alice.user.email.toUpperCase()]) {
      const { cookie, csrf } = await signInForm();
      const res = await postSignIn(cookie, { 'user[login]': login, 'user[password]': alice.password, authenticity_token: csrf });
      assert.equal(res.status, 302);
      assert.equal(res.headers.location, '/');
      const newCookie = sessionCookieFrom(res.headers)!;
      assert.notEqual(newCookie, cookie);
      const id = newCookie.split('=')[1];
      const row = await t.db.selectFrom('sessions').selectAll().where('session_digest', '=', tokenDigest(id)).executeTakeFirstOrThrow();
      assert.equal(row.user_id, alice.user.id);
      assert.ok(new Date(row.expires_at).getTime() > Date.now() + 6 * 24 * 3600 * 1000);
      // The anonymous session is gone (a fresh id after sign-in).
      const oldRow = await t.db.selectFrom('sessions').select('id').where('session_digest', '=', tokenDigest(cookie.split('=')[1])).executeTakeFirst();
      assert.equal(oldRow, undefined);
    }
    const user = await t.db.selectFrom('users').selectAll().where('id', '=', alice.user.id).executeTakeFirstOrThrow();
    assert.equal(user.sign_in_count, 2);
    assert.ok(user.current_sign_in_at);
  });

  it('returns to a local redirect_to only', async () => {
    const alice = await t.createUser();
    for (const [target, expected] of [['/oauth/authorize?client_id=x', '/oauth/authorize?client_id=x'], ['https://evil.example/', '/'], ['//evil.example', '/']]) {
      const page = await t.get(`/users/sign_in?redirect_to=${encodeURIComponent(target)}`, { token: null });
      const cookie = sessionCookieFrom(page.headers)!;
      const hiddenTarget = /name="redirect_to" value="([^"]*)"/.exec(page.text)![1].replace(/&amp;/g, '&');
      const res = await postSignIn(cookie, { 'user[login]': alice.user.username, 'user[password]': alice.password, authenticity_token: csrfFrom(page.text), redirect_to: hiddenTarget });
      assert.equal(res.headers.location, expected);
    }
  });

  it('failures: one generic message, no user enumeration; CSRF required', async () => {
    const alice = await t.createUser();
    const { cookie, csrf } = await signInForm();
    const wrong = await postSignIn(cookie, { 'user[login]': alice.user.username, 'user[password]': 'wrong', authenticity_token: csrf });
    const unknown = await postSignIn(cookie, { 'user[login]': 'no-such-user', 'user[password]': 'wrong', authenticity_token: csrf });
    assert.equal(wrong.status, 401);
    assert.equal(unknown.status, 401);
    const alertOf = (html: string) => /role="alert">([^<]*)</.exec(html)?.[1];
    assert.equal(alertOf(wrong.text), 'Invalid login or password.');
    assert.equal(alertOf(unknown.text), alertOf(wrong.text));
    assert.equal(sessionCookieFrom(wrong.headers), undefined);

    const noToken = await postSignIn(cookie, { 'user[login]': alice.user.username, 'user[password]': alice.password });
    assert.equal(noToken.status, 422);
    const badToken = await postSignIn(cookie, { 'user[login]': alice.user.username, 'user[password]': alice.password, authenticity_token: 'A'.repeat(43) });
    assert.equal(badToken.status, 422);
    const noCookie = await postSignIn(undefined, { 'user[login]': alice.user.username, 'user[password]': alice.password, authenticity_token: csrf });
    assert.equal(noCookie.status, 422);
  });

  it('blocked users cannot sign in; a user blocked later loses the session', async () => {
    const blocked = await t.createUser({ state: 'blocked' });
    const { cookie, csrf } = await signInForm();
    const res = await postSignIn(cookie, { 'user[login]': blocked.user.username, 'user[password]': blocked.password, authenticity_token: csrf });
    assert.equal(res.status, 403);
    assert.equal(sessionCookieFrom(res.headers), undefined);

    const bob = await t.createUser();
    const browser = await signIn(t, bob.user.username, bob.password);
    await t.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', bob.user.id).execute();
    const page = await t.get('/-/user_settings/applications', { token: null, headers: { cookie: browser.cookie } });
    assert.equal(page.status, 302);
    assert.match(page.headers.location, /^\/users\/sign_in/);
  });

  it('two Cairn processes on one database share sessions', async () => {
    const alice = await t.createUser();
    const browser = await signIn(t, alice.user.username, alice.password);
    const other = await buildApp({ config: t.config, database: { db: t.db, kind: t.app.cairn.dbKind, writeObservers: new Set(), close: async () => {} }, prepare: false, logger: false });
    try {
      const res = await other.inject({ method: 'GET', url: '/-/user_settings/applications', headers: { cookie: browser.cookie } });
      assert.equal(res.statusCode, 200);
      assert.match(res.body, new RegExp(`@${alice.user.username}`));
    } finally {
      await other.close();
    }
  });

  it('sign out (POST with CSRF, or GET) ends the session', async () => {
    const alice = await t.createUser();
    const browser = await signIn(t, alice.user.username, alice.password);
    const stale = await t.call('POST', '/users/sign_out', { token: null, headers: { cookie: browser.cookie }, form: 'authenticity_token=nope' });
    assert.equal(stale.status, 422);
    const out = await t.call('POST', '/users/sign_out', { token: null, headers: { cookie: browser.cookie }, form: form({ authenticity_token: browser.csrf }) });
    assert.equal(out.status, 302);
    assert.match(String(out.headers['set-cookie']), /Max-Age=0/);
    assert.equal((await t.get('/-/user_settings/applications', { token: null, headers: { cookie: browser.cookie } })).status, 302);

    const second = await signIn(t, alice.user.username, alice.password);
    assert.equal((await t.get('/users/sign_out', { token: null, headers: { cookie: second.cookie } })).status, 302);
    assert.equal((await t.get('/-/user_settings/applications', { token: null, headers: { cookie: second.cookie } })).status, 302);
  });

  it('the session cookie is Secure when the external URL is https', async () => {
    const saved = t.app.cairn.config.externalUrl;
    t.app.cairn.config.externalUrl = 'https://cairn.example';
    try {
      const page = await t.get('/users/sign_in', { token: null });
      assert.match(String(page.headers['set-cookie']), /; Secure/);
    } finally {
      t.app.cairn.config.externalUrl = saved;
    }
  });

  describe('/-/user_settings/applications', () => {
    it('anonymous visitors are sent to sign in', async () => {
      for (const path of ['/-/user_settings/applications', '/oauth/applications']) {
        const res = await t.get(path, { token: null });
        assert.equal(res.status, 302);
        assert.equal(res.headers.location, `/users/sign_in?redirect_to=${encodeURIComponent(path)}`);
      }
    });

    it('register (secret shown once), list, and delete own applications', async () => {
      const alice = await t.createUser();
      const browser = await signIn(t, alice.user.username, alice.password);
      const fields = `authenticity_token=${browser.csrf}&name=My+CLI&redirect_uri=${encodeURIComponent('http://127.0.0.1:7777/cb\r\nhttps://cli.example/cb')}&confidential=0&scopes%5B%5D=read_api&scopes%5B%5D=read_user`;
      const created = await t.call('POST', '/-/user_settings/applications', { token: null, headers: { cookie: browser.cookie }, form: fields });
      assert.equal(created.status, 201, created.text);
      const secret = /id="created-secret">([^<]+)</.exec(created.text)![1];
      const uid = /id="created-application-id">([^<]+)</.exec(created.text)![1];
      assert.match(secret, /^gloas-/);
      const row = await t.db.selectFrom('oauth_applications').selectAll().where('uid', '=', uid).executeTakeFirstOrThrow();
      assert.equal(row.owner_id, alice.user.id);
      assert.equal(row.confidential, false);
      assert.deepEqual(row.scopes, ['read_api', 'read_user']);
      assert.equal(row.redirect_uri, 'http://127.0.0.1:7777/cb\nhttps://cli.example/cb');
      assert.equal(row.secret_digest, tokenDigest(secret));

      const list = await t.get('/oauth/applications', { token: null, headers: { cookie: browser.cookie } });
      assert.equal(list.status, 200);
      assert.ok(list.text.includes('My CLI') && list.text.includes(uid));
      assert.ok(!list.text.includes(secret), 'the secret is not shown again');

      // Another user can neither see nor delete it.
      const bob = await t.createUser();
      const bobBrowser = await signIn(t, bob.user.username, bob.password);
      const bobList = await t.get('/-/user_settings/applications', { token: null, headers: { cookie: bobBrowser.cookie } });
      assert.ok(!bobList.text.includes(uid));
      const bobDelete = await t.call('POST', `/-/user_settings/applications/${row.id}`, { token: null, headers: { cookie: bobBrowser.cookie }, form: `_method=delete&authenticity_token=${bobBrowser.csrf}` });
      assert.equal(bobDelete.status, 404);

      const noCsrf = await t.call('POST', `/-/user_settings/applications/${row.id}`, { token: null, headers: { cookie: browser.cookie }, form: '_method=delete' });
      assert.equal(noCsrf.status, 422);
      const del = await t.call('POST', `/-/user_settings/applications/${row.id}`, { token: null, headers: { cookie: browser.cookie }, form: `_method=delete&authenticity_token=${browser.csrf}` });
      assert.equal(del.status, 302);
      assert.equal(await t.db.selectFrom('oauth_applications').select('id').where('id', '=', row.id).executeTakeFirst(), undefined);
    });

    it('invalid input re-renders the form with the errors; CSRF required', async () => {
      const alice = await t.createUser();
      const browser = await signIn(t, alice.user.username, alice.password);
      const bad = await t.call('POST', '/-/user_settings/applications', { token: null, headers: { cookie: browser.cookie }, form: `authenticity_token=${browser.csrf}&name=%3Cb%3Ex&redirect_uri=not-a-uri` });
      assert.equal(bad.status, 400);
      assert.match(bad.text, /redirect uri must be an absolute URI\./);
      assert.match(bad.text, /scopes can&#39;t be blank/);
      assert.match(bad.text, /value="&lt;b&gt;x"/, 'values are escaped');
      const noCsrf = await t.call('POST', '/-/user_settings/applications', { token: null, headers: { cookie: browser.cookie }, form: 'name=x&redirect_uri=https://x.example&scopes[]=api' });
      assert.equal(noCsrf.status, 422);
      assert.equal((await t.db.selectFrom('oauth_applications').select('id').where('owner_id', '=', alice.user.id).execute()).length, 0);
    });

    it("the consent page of a user's application names its owner", async () => {
      const alice = await t.createUser({ name: 'Alice Owner' });
      const browser = await signIn(t, alice.user.username, alice.password);
      const created = await t.call('POST', '/-/user_settings/applications', { token: null, headers: { cookie: browser.cookie }, form: `authenticity_token=${browser.csrf}&name=Owned&redirect_uri=${encodeURIComponent('https://o.example/cb')}&confidential=1&scopes[]=read_user` });
      const uid = /id="created-application-id">([^<]+)</.exec(created.text)![1];
      const page = await t.get(`/oauth/authorize?client_id=${uid}&redirect_uri=${encodeURIComponent('https://o.example/cb')}&response_type=code&scope=read_user`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(page.status, 200);
      assert.match(page.text, /Alice Owner/);
    });
  });
});
