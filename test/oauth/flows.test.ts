import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { authenticateOAuthToken } from '../../src/oauth/index.js';
import { resolveCredential } from '../../src/plugins/auth.js';
import { authorize, basic, bearer, pkcePair, registerApp, signIn, tokenRequest, type Browser, type RegisteredApp } from './support.js';

const REDIRECT = 'https://client.example/callback';

describe('OAuth flows', () => {
  let t: TestContext;
  let alice: TestUser;
  let browser: Browser;
  let publicApp: RegisteredApp;
  let confidentialApp: RegisteredApp;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    browser = await signIn(t, alice.user.username, alice.password);
    publicApp = await registerApp(t, { confidential: false, scopes: 'api read_user read_api openid email read_repository' });
    confidentialApp = await registerApp(t, { confidential: true, scopes: 'api read_user' });
  });
  after(async () => { await t.close(); });

  async function codeFor(app: RegisteredApp, extra: Record<string, string | undefined> = {}) {
    const loc = await authorize(t, browser, { client_id: app.application_id, redirect_uri: REDIRECT, response_type: 'code', state: 'xyz', scope: 'api', ...extra });
    assert.equal(loc.origin + loc.pathname, REDIRECT);
    return loc.searchParams.get('code')!;
  }

  describe('authorization code with PKCE', () => {
    it('S256: code, state passed through, token exchange, token works on the API', async () => {
      const { verifier, challenge } = pkcePair('S256');
      const loc = await authorize(t, browser, {
        client_id: publicApp.application_id, redirect_uri: REDIRECT, response_type: 'code', state: 'st@te with spaces&x=1',
        scope: 'api read_user', code_challenge: challenge, code_challenge_method: 'S256',
      });
      assert.equal(loc.searchParams.get('state'), 'st@te with spaces&x=1');
      const code = loc.searchParams.get('code')!;
      assert.match(code, /^[0-9a-f]{64}$/);
      const res = await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT, code_verifier: verifier });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.body.token_type, 'Bearer');
      assert.equal(res.body.expires_in, 7200);
      assert.equal(res.body.scope, 'api read_user');
      assert.equal(typeof res.body.refresh_token, 'string');
      assert.ok(Math.abs(res.body.created_at - Date.now() / 1000) < 60);
      const version = await t.get('/api/v4/version', bearer(res.body.access_token));
      assert.equal(version.status, 200);
      const viaQuery = await t.get(`/api/v4/version?access_token=${res.body.access_token}`, { token: null });
      assert.equal(viaQuery.status, 200);
      const info = await t.get('/oauth/token/info', bearer(res.body.access_token));
      assert.equal(info.status, 200);
      assert.equal(info.body.resource_owner_id, alice.user.id);
      assert.deepEqual(info.body.scope, ['api', 'read_user']);
      assert.deepEqual(info.body.scopes, ['api', 'read_user']);
      assert.deepEqual(info.body.application, { uid: publicApp.application_id });
      assert.ok(info.body.expires_in > 7100 && info.body.expires_in <= 7200);
      assert.equal(info.body.expires_in_seconds, info.body.expires_in);
      assert.equal(info.body.created_at, res.body.created_at);
    });

    it('plain challenge method', async () => {
      const { verifier, challenge } = pkcePair('plain');
      const code = await codeFor(publicApp, { code_challenge: challenge, code_challenge_method: 'plain' });
      const res = await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT, code_verifier: verifier });
      assert.equal(res.status, 200, res.text);
    });

    it('wrong, malformed and missing verifiers are refused', async () => {
      const { challenge } = pkcePair('S256');
      const code = await codeFor(publicApp, { code_challenge: challenge, code_challenge_method: 'S256' });
      const base = { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT };
      const wrong = await tokenRequest(t, { ...base, code_verifier: pkcePair().verifier });
      assert.equal(wrong.status, 400);
      assert.equal(wrong.body.error, 'invalid_grant');
      assert.equal(typeof wrong.body.error_description, 'string');
      const short = await tokenRequest(t, { ...base, code_verifier: 'a'.repeat(42) });
      assert.equal(short.status, 400);
      assert.equal(short.body.error, 'invalid_request');
      const badChars = await tokenRequest(t, { ...base, code_verifier: 'a'.repeat(42) + '!' });
      assert.equal(badChars.body.error, 'invalid_request');
      const tooLong = await tokenRequest(t, { ...base, code_verifier: 'a'.repeat(129) });
      assert.equal(tooLong.body.error, 'invalid_request');
      const none = await tokenRequest(t, base);
      assert.equal(none.status, 400);
      assert.equal(none.body.error, 'invalid_request');
    });

    it('a malformed code_challenge or method goes back to the client as invalid_request', async () => {
      const loc = await t.get(`/oauth/authorize?client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&state=s1&scope=api&code_challenge=short&code_challenge_method=S256`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(loc.status, 302);
      const url = new URL(loc.headers.location);
      assert.equal(url.searchParams.get('error'), 'invalid_request');
      assert.equal(url.searchParams.get('state'), 's1');
      const m = await t.get(`/oauth/authorize?client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=api&code_challenge=${pkcePair().challenge}&code_challenge_method=S512`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(new URL(m.headers.location).searchParams.get('error'), 'invalid_request');
    });

    it('redirect_uri at the token endpoint must equal the one of the authorization', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await codeFor(publicApp, { code_challenge: challenge, code_challenge_method: 'S256' });
      const res = await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT + '/other', code_verifier: verifier });
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'invalid_grant');
      const missing = await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code, code_verifier: verifier });
      assert.equal(missing.body.error, 'invalid_request');
    });

    it('a code is single-use: reusing it fails and revokes the tokens issued from it', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await codeFor(publicApp, { code_challenge: challenge, code_challenge_method: 'S256' });
      const req = { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT, code_verifier: verifier };
      const first = await tokenRequest(t, req);
      assert.equal(first.status, 200);
      assert.equal((await t.get('/api/v4/version', bearer(first.body.access_token))).status, 200);
      const second = await tokenRequest(t, req);
      assert.equal(second.status, 400);
      assert.equal(second.body.error, 'invalid_grant');
      const after = await t.get('/api/v4/version', bearer(first.body.access_token));
      assert.equal(after.status, 401);
      assert.equal(after.body.error, 'invalid_token');
      const refresh = await tokenRequest(t, { grant_type: 'refresh_token', client_id: publicApp.application_id, refresh_token: first.body.refresh_token });
      assert.equal(refresh.body.error, 'invalid_grant');
    });

    it('a code expires after ten minutes', async () => {
      const code = await codeFor(publicApp);
      await t.db.updateTable('oauth_access_grants').set({ created_at: sql`now() - interval '11 minutes'` as any }).where('revoked_at', 'is', null).execute();
      const res = await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT });
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'invalid_grant');
    });

    it("a code belongs to its client; unknown codes and clients are refused", async () => {
      const code = await codeFor(publicApp);
      const other = await tokenRequest(t, { grant_type: 'authorization_code', client_id: confidentialApp.application_id, client_secret: confidentialApp.secret, code, redirect_uri: REDIRECT });
      assert.equal(other.body.error, 'invalid_grant');
      const unknown = await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code: 'f'.repeat(64), redirect_uri: REDIRECT });
      assert.equal(unknown.body.error, 'invalid_grant');
      const noClient = await tokenRequest(t, { grant_type: 'authorization_code', client_id: 'nope', code, redirect_uri: REDIRECT });
      assert.equal(noClient.status, 401);
      assert.equal(noClient.body.error, 'invalid_client');
    });
  });

  describe('authorization code with client secret', () => {
    it('secret in the form or in HTTP Basic', async () => {
      const code = await codeFor(confidentialApp);
      const res = await tokenRequest(t, { grant_type: 'authorization_code', client_id: confidentialApp.application_id, client_secret: confidentialApp.secret, code, redirect_uri: REDIRECT });
      assert.equal(res.status, 200, res.text);
      const code2 = await codeFor(confidentialApp);
      const viaBasic = await tokenRequest(t, { grant_type: 'authorization_code', code: code2, redirect_uri: REDIRECT }, basic(confidentialApp.application_id, confidentialApp.secret));
      assert.equal(viaBasic.status, 200, viaBasic.text);
    });

    it('a wrong or missing secret is invalid_client (401) and leaves the code usable', async () => {
      const code = await codeFor(confidentialApp);
      const base = { grant_type: 'authorization_code', client_id: confidentialApp.application_id, code, redirect_uri: REDIRECT };
      const wrong = await tokenRequest(t, { ...base, client_secret: 'gloas-' + '0'.repeat(64) });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.body.error, 'invalid_client');
      assert.equal(typeof wrong.body.error_description, 'string');
      const wrongBasic = await tokenRequest(t, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT }, basic(confidentialApp.application_id, 'bad'));
      assert.equal(wrongBasic.status, 401);
      const missing = await tokenRequest(t, base);
      assert.equal(missing.status, 401);
      assert.equal(missing.body.error, 'invalid_client');
      const ok = await tokenRequest(t, { ...base, client_secret: confidentialApp.secret });
      assert.equal(ok.status, 200);
    });

    it('invalid_client: a client that tried HTTP Basic gets a Basic challenge naming the error; body credentials get none', async () => {
      const description = 'Client authentication failed: the client is unknown, sent no authentication, or used an unsupported method.';
      const challenge = `Basic realm="Cairn OAuth", error="invalid_client", error_description="${description}"`;
      const code = await codeFor(confidentialApp);
      const base = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT };
      const check = (res: Awaited<ReturnType<typeof tokenRequest>>, challenged: boolean, what: string) => {
        assert.equal(res.status, 401, what);
        assert.deepEqual(res.body, { error: 'invalid_client', error_description: description }, what);
        assert.equal(res.headers['cache-control'], 'no-store', what);
        assert.equal(res.headers['www-authenticate'], challenged ? challenge : undefined, what);
      };
      // HTTP Basic: a wrong secret, an unknown client, a header that is no id:secret pair.
      check(await tokenRequest(t, base, basic(confidentialApp.application_id, 'wrong')), true, 'wrong secret, Basic');
      check(await tokenRequest(t, base, basic('nope', 'x')), true, 'unknown client, Basic');
      check(await tokenRequest(t, base, { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }), true, 'malformed Basic');
      check(await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password }, basic(confidentialApp.application_id, 'wrong')), true, 'password grant, Basic');
      check(await tokenRequest(t, { grant_type: 'refresh_token', refresh_token: 'r'.repeat(64) }, basic('nope', 'x')), true, 'refresh grant, Basic');
      // Credentials in the body (or none): the same 401 and body, no challenge.
      check(await tokenRequest(t, { ...base, client_id: confidentialApp.application_id, client_secret: 'wrong' }), false, 'wrong secret, body');
      check(await tokenRequest(t, { ...base, client_id: 'nope' }), false, 'unknown client, body');
      check(await tokenRequest(t, { ...base, client_id: confidentialApp.application_id }), false, 'no secret, body');
      check(await tokenRequest(t, base), false, 'no client at all');
      // Nothing of that consumed the code.
      const ok = await tokenRequest(t, base, basic(confidentialApp.application_id, confidentialApp.secret));
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.headers['www-authenticate'], undefined);
    });
  });

  describe('authorization endpoint', () => {
    it('not signed in: redirect to sign-in and back', async () => {
      const url = `/oauth/authorize?client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=api`;
      const res = await t.get(url, { token: null });
      assert.equal(res.status, 302);
      const loc = new URL(res.headers.location, 'http://x');
      assert.equal(loc.pathname, '/users/sign_in');
      assert.equal(loc.searchParams.get('redirect_to'), url);
    });

    it('the consent page names the application and the scopes', async () => {
      const res = await t.get(`/oauth/authorize?client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=api+read_user`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(res.status, 200);
      assert.match(res.headers['content-type'], /^text\/html/);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      const name = (await t.get('/api/v4/applications')).body.find((a: any) => a.id === publicApp.id).application_name;
      assert.ok(res.text.includes(name));
      assert.ok(res.text.includes('<code>api</code>') && res.text.includes('<code>read_user</code>'));
      assert.match(res.text, />Authorize /);
      assert.match(res.text, />Deny</);
      assert.match(res.text, /name="_method" value="delete"/);
    });

    it('unknown client_id or an unregistered redirect_uri: an error page, never a redirect', async () => {
      const bad = await t.get(`/oauth/authorize?client_id=nope&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(bad.status, 400);
      assert.equal(bad.headers.location, undefined);
      assert.match(bad.text, /invalid_client/);
      for (const uri of [REDIRECT + '/x', REDIRECT + '?a=1', 'https://evil.example/callback', REDIRECT.toUpperCase()]) {
        const res = await t.get(`/oauth/authorize?client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent(uri)}&response_type=code&scope=api`, { token: null, headers: { cookie: browser.cookie } });
        assert.equal(res.status, 400, uri);
        assert.equal(res.headers.location, undefined);
        assert.match(res.text, /invalid_redirect_uri/);
      }
      // The POST (Authorize button) is checked the same way.
      const post = await t.call('POST', '/oauth/authorize', {
        token: null, headers: { cookie: browser.cookie },
        form: `client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent('https://evil.example/')}&response_type=code&scope=api&authenticity_token=${browser.csrf}`,
      });
      assert.equal(post.status, 400);
      assert.equal(post.headers.location, undefined);
    });

    it('a scope the application was not granted is invalid_scope (back to the client, with state)', async () => {
      const res = await t.get(`/oauth/authorize?client_id=${confidentialApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=api+sudo&state=abc`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(res.status, 302);
      const loc = new URL(res.headers.location);
      assert.equal(loc.origin + loc.pathname, REDIRECT);
      assert.equal(loc.searchParams.get('error'), 'invalid_scope');
      assert.equal(loc.searchParams.get('state'), 'abc');
      const unknown = await t.get(`/oauth/authorize?client_id=${confidentialApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=everything`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(new URL(unknown.headers.location).searchParams.get('error'), 'invalid_scope');
      const badType = await t.get(`/oauth/authorize?client_id=${confidentialApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=magic&state=q`, { token: null, headers: { cookie: browser.cookie } });
      assert.equal(new URL(badType.headers.location).searchParams.get('error'), 'unsupported_response_type');
    });

    it('Deny redirects with error=access_denied and the state', async () => {
      const loc = await authorize(t, browser, { client_id: publicApp.application_id, redirect_uri: REDIRECT, response_type: 'code', state: 'deny-me', scope: 'api' }, 'deny');
      assert.equal(loc.origin + loc.pathname, REDIRECT);
      assert.equal(loc.searchParams.get('error'), 'access_denied');
      assert.equal(loc.searchParams.get('state'), 'deny-me');
      assert.equal(loc.searchParams.get('code'), null);
    });

    it('the Authorize form needs the session CSRF token', async () => {
      const fields = `client_id=${publicApp.application_id}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=api`;
      const none = await t.call('POST', '/oauth/authorize', { token: null, headers: { cookie: browser.cookie }, form: fields });
      assert.equal(none.status, 422);
      const wrong = await t.call('POST', '/oauth/authorize', { token: null, headers: { cookie: browser.cookie }, form: `${fields}&authenticity_token=${'x'.repeat(43)}` });
      assert.equal(wrong.status, 422);
      assert.equal(wrong.headers.location, undefined);
    });

    it('a scope asked for at the token endpoint that was not granted is invalid_scope', async () => {
      const res = await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password, scope: 'sudo' }, basic(confidentialApp.application_id, confidentialApp.secret));
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'invalid_scope');
    });
  });

  describe('implicit grant', () => {
    it('puts access_token, token_type, expires_in and state in the fragment', async () => {
      const loc = await authorize(t, browser, { client_id: publicApp.application_id, redirect_uri: REDIRECT, response_type: 'token', state: 'imp', scope: 'read_user' });
      assert.equal(loc.search, '');
      const frag = new URLSearchParams(loc.hash.slice(1));
      assert.equal(frag.get('token_type'), 'Bearer');
      assert.equal(frag.get('expires_in'), '7200');
      assert.equal(frag.get('state'), 'imp');
      const token = frag.get('access_token')!;
      const info = await t.get(`/oauth/token/info?access_token=${token}`, { token: null });
      assert.equal(info.status, 200);
      assert.deepEqual(info.body.scope, ['read_user']);
    });
  });

  describe('resource owner password credentials', () => {
    it('default scope api; the response has access_token, token_type, expires_in', async () => {
      const res = await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.token_type, 'Bearer');
      assert.equal(res.body.expires_in, 7200);
      assert.equal(res.body.scope, 'api');
      const info = await t.get('/oauth/token/info', bearer(res.body.access_token));
      assert.equal(info.body.application, null);
      assert.deepEqual(info.body.scope, ['api']);
    });

    it('e-mail as login and HTTP Basic client authentication', async () => {
      const res = await tokenRequest(t, { grant_type: 'password', username: alice.user.email, password: alice.password, scope: 'read_user' }, basic(confidentialApp.application_id, confidentialApp.secret));
      assert.equal(res.status, 200, res.text);
      const info = await t.get('/oauth/token/info', bearer(res.body.access_token));
      assert.deepEqual(info.body.application, { uid: confidentialApp.application_id });
      const badClient = await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password }, basic(confidentialApp.application_id, 'wrong'));
      assert.equal(badClient.status, 401);
      assert.equal(badClient.body.error, 'invalid_client');
    });

    it('wrong password, unknown user and blocked users: invalid_grant', async () => {
      const wrong = await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: 'nope' });
      assert.equal(wrong.status, 400);
      assert.equal(wrong.body.error, 'invalid_grant');
      const unknown = await tokenRequest(t, { grant_type: 'password', username: 'nobody-here', password: 'nope' });
      assert.deepEqual(unknown.body, wrong.body);
      const blocked = await t.createUser({ state: 'blocked' });
      const b = await tokenRequest(t, { grant_type: 'password', username: blocked.user.username, password: blocked.password });
      assert.equal(b.body.error, 'invalid_grant');
    });

    it('refused for users with two-factor authentication', async () => {
      const tfa = await t.createUser({ two_factor_enabled: true });
      const res = await tokenRequest(t, { grant_type: 'password', username: tfa.user.username, password: tfa.password });
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'invalid_grant');
    });

    it('unknown grant types and missing grant_type', async () => {
      const res = await tokenRequest(t, { grant_type: 'client_credentials', client_id: confidentialApp.application_id, client_secret: confidentialApp.secret });
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'unsupported_grant_type');
      const none = await tokenRequest(t, {});
      assert.equal(none.body.error, 'invalid_request');
    });
  });

  describe('refresh tokens', () => {
    it('rotation: the old access and refresh tokens stop working', async () => {
      const { verifier, challenge } = pkcePair();
      const code = await codeFor(publicApp, { code_challenge: challenge, code_challenge_method: 'S256' });
      const first = (await tokenRequest(t, { grant_type: 'authorization_code', client_id: publicApp.application_id, code, redirect_uri: REDIRECT, code_verifier: verifier })).body;
      const refreshed = await tokenRequest(t, { grant_type: 'refresh_token', client_id: publicApp.application_id, refresh_token: first.refresh_token, redirect_uri: REDIRECT, code_verifier: verifier });
      assert.equal(refreshed.status, 200, refreshed.text);
      assert.notEqual(refreshed.body.access_token, first.access_token);
      assert.notEqual(refreshed.body.refresh_token, first.refresh_token);
      assert.equal(refreshed.body.scope, 'api');
      assert.equal((await t.get('/api/v4/version', bearer(refreshed.body.access_token))).status, 200);
      const old = await t.get('/api/v4/version', bearer(first.access_token));
      assert.equal(old.status, 401);
      assert.equal(old.body.error, 'invalid_token');
      const oldInfo = await t.get('/oauth/token/info', bearer(first.access_token));
      assert.equal(oldInfo.status, 401);
      const again = await tokenRequest(t, { grant_type: 'refresh_token', client_id: publicApp.application_id, refresh_token: first.refresh_token });
      assert.equal(again.status, 400);
      assert.equal(again.body.error, 'invalid_grant');
    });

    it('works after the access token expired; an expired token is refused by the API', async () => {
      const code = await codeFor(confidentialApp);
      const first = (await tokenRequest(t, { grant_type: 'authorization_code', client_id: confidentialApp.application_id, client_secret: confidentialApp.secret, code, redirect_uri: REDIRECT })).body;
      await t.db.updateTable('oauth_access_tokens').set({ created_at: sql`now() - interval '3 hours'` as any }).where('refresh_token_digest', 'is not', null).where('revoked_at', 'is', null).execute();
      const expired = await t.get('/api/v4/version', bearer(first.access_token));
      assert.equal(expired.status, 401);
      assert.equal(expired.body.error, 'invalid_token');
      assert.match(expired.body.error_description, /expired/);
      const info = await t.get('/oauth/token/info', bearer(first.access_token));
      assert.equal(info.status, 401);
      assert.equal(info.body.error, 'invalid_token');
      // A confidential client must authenticate to refresh.
      const noSecret = await tokenRequest(t, { grant_type: 'refresh_token', client_id: confidentialApp.application_id, refresh_token: first.refresh_token });
      assert.equal(noSecret.status, 401);
      const otherClient = await tokenRequest(t, { grant_type: 'refresh_token', client_id: publicApp.application_id, refresh_token: first.refresh_token });
      assert.equal(otherClient.body.error, 'invalid_grant');
      const res = await tokenRequest(t, { grant_type: 'refresh_token', refresh_token: first.refresh_token }, basic(confidentialApp.application_id, confidentialApp.secret));
      assert.equal(res.status, 200, res.text);
      assert.equal((await t.get('/api/v4/version', bearer(res.body.access_token))).status, 200);
    });
  });

  describe('revocation', () => {
    it('POST /oauth/revoke answers 200 {} and the token stops working', async () => {
      const res = (await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password })).body;
      const revoke = await t.call('POST', '/oauth/revoke', { token: null, form: `token=${res.access_token}` });
      assert.equal(revoke.status, 200);
      assert.deepEqual(revoke.body, {});
      const api = await t.get('/api/v4/version', bearer(res.access_token));
      assert.equal(api.status, 401);
      assert.match(api.body.error_description, /revoked/);
      const info = await t.get('/oauth/token/info', bearer(res.access_token));
      assert.equal(info.status, 401);
      const refresh = await tokenRequest(t, { grant_type: 'refresh_token', refresh_token: res.refresh_token });
      assert.equal(refresh.body.error, 'invalid_grant');
      const unknown = await t.call('POST', '/oauth/revoke', { token: null, form: 'token=unknown' });
      assert.equal(unknown.status, 200);
    });

    it("a confidential client's token is revoked only by that client", async () => {
      const code = await codeFor(confidentialApp);
      const tok = (await tokenRequest(t, { grant_type: 'authorization_code', client_id: confidentialApp.application_id, client_secret: confidentialApp.secret, code, redirect_uri: REDIRECT })).body;
      const anonymous = await t.call('POST', '/oauth/revoke', { token: null, form: `token=${tok.access_token}` });
      assert.equal(anonymous.status, 403);
      assert.equal(anonymous.body.error, 'unauthorized_client');
      assert.equal((await t.get('/api/v4/version', bearer(tok.access_token))).status, 200);
      const byRefresh = await t.call('POST', '/oauth/revoke', {
        token: null,
        form: `token=${tok.refresh_token}&token_type_hint=refresh_token&client_id=${confidentialApp.application_id}&client_secret=${confidentialApp.secret}`,
      });
      assert.equal(byRefresh.status, 200);
      assert.equal((await t.get('/api/v4/version', bearer(tok.access_token))).status, 401);
    });
  });

  describe('using the tokens', () => {
    async function tokenWith(scope: string) {
      const res = await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password, scope }, basic(publicApp.application_id, publicApp.secret ?? ''));
      if (res.status !== 200) {
        const plain = await tokenRequest(t, { grant_type: 'password', username: alice.user.username, password: alice.password, scope });
        assert.equal(plain.status, 200, plain.text);
        return plain.body.access_token as string;
      }
      return res.body.access_token as string;
    }

    it('scopes map onto the API rules: read_repository or openid alone cannot call the API', async () => {
      for (const scope of ['read_repository', 'openid', 'email']) {
        const res = await t.get('/api/v4/version', bearer(await tokenWith(scope)));
        assert.equal(res.status, 403, scope);
        assert.equal(res.body.error, 'insufficient_scope');
      }
      assert.equal((await t.get('/api/v4/version', bearer(await tokenWith('read_api')))).status, 200);
    });

    it('a read_api token cannot write; an api token can (as an administrator)', async () => {
      const root = await tokenRequest(t, { grant_type: 'password', username: 'root', password: 'root-password-123', scope: 'read_api' });
      assert.equal(root.status, 200, root.text);
      const denied = await t.call('POST', '/api/v4/applications', { ...bearer(root.body.access_token), body: { name: 'x', redirect_uri: REDIRECT, scopes: 'api' } });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.error, 'insufficient_scope');
      const full = await tokenRequest(t, { grant_type: 'password', username: 'root', password: 'root-password-123' });
      const ok = await t.call('POST', '/api/v4/applications', { ...bearer(full.body.access_token), body: { name: 'x', redirect_uri: REDIRECT, scopes: 'api' } });
      assert.equal(ok.status, 201);
      const aliceToken = await tokenWith('api');
      const notAdmin = await t.call('POST', '/api/v4/applications', { ...bearer(aliceToken), body: { name: 'x', redirect_uri: REDIRECT, scopes: 'api' } });
      assert.equal(notAdmin.status, 403);
    });

    it('a blocked user\'s token is refused', async () => {
      const bob = await t.createUser();
      const tok = (await tokenRequest(t, { grant_type: 'password', username: bob.user.username, password: bob.password })).body.access_token;
      assert.equal((await t.get('/api/v4/version', bearer(tok))).status, 200);
      await t.db.updateTable('users').set({ state: 'blocked' }).where('id', '=', bob.user.id).execute();
      assert.equal((await t.get('/api/v4/version', bearer(tok))).status, 401);
    });

    it('authenticateOAuthToken and resolveCredential(bearer) give the OAuth credential (git over HTTP uses them)', async () => {
      const token = await tokenWith('read_repository');
      const cred = await authenticateOAuthToken(t.app.cairn, token);
      assert.ok(cred);
      assert.equal(cred.kind, 'oauth');
      assert.equal(cred.user.id, alice.user.id);
      assert.deepEqual(cred.scopes, ['read_repository']);
      const viaResolver = await resolveCredential(t.app.cairn, 'bearer', token);
      assert.equal(viaResolver?.kind, 'oauth');
      assert.equal(await authenticateOAuthToken(t.app.cairn, 'unknown'), null);
      await t.call('POST', '/oauth/revoke', { token: null, form: `token=${token}` });
      assert.equal(await authenticateOAuthToken(t.app.cairn, token), null);
      // Tokens are stored as digests only.
      const stored = await t.db.selectFrom('oauth_access_tokens').select('token_digest').execute();
      assert.ok(stored.every((r) => r.token_digest !== token));
    });

    it('the OpenID userinfo endpoint needs the openid scope', async () => {
      const noOpenid = await t.get('/oauth/userinfo', bearer(await tokenWith('api')));
      assert.equal(noOpenid.status, 403);
      const res = await t.get('/oauth/userinfo', bearer(await tokenWith('openid email')));
      assert.equal(res.status, 200);
      assert.equal(res.body.sub, String(alice.user.id));
      assert.equal(res.body.preferred_username, alice.user.username);
      assert.equal(res.body.email, alice.user.email);
    });
  });

  describe('token info and metadata', () => {
    it('token info without a token or with an unknown one is 401 invalid_token', async () => {
      const none = await t.get('/oauth/token/info', { token: null });
      assert.equal(none.status, 401);
      assert.equal(none.body.error, 'invalid_token');
      const unknown = await t.get('/oauth/token/info?access_token=abc', { token: null });
      assert.equal(unknown.status, 401);
    });

    it('discovery documents list the endpoints, issuer = externalUrl', async () => {
      for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
        const res = await t.get(path, { token: null });
        assert.equal(res.status, 200);
        const base = t.config.externalUrl;
        assert.equal(res.body.issuer, base);
        assert.equal(res.body.authorization_endpoint, `${base}/oauth/authorize`);
        assert.equal(res.body.token_endpoint, `${base}/oauth/token`);
        assert.equal(res.body.revocation_endpoint, `${base}/oauth/revoke`);
        assert.deepEqual(res.body.code_challenge_methods_supported, ['plain', 'S256']);
        assert.ok(res.body.scopes_supported.includes('read_repository'));
        assert.equal(res.headers['access-control-allow-origin'], '*');
      }
      const preflight = await t.call('OPTIONS', '/oauth/token', { token: null, headers: { origin: 'https://spa.example', 'access-control-request-method': 'POST' } });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers['access-control-allow-origin'], '*');
    });

    it('a JSON token request works too', async () => {
      const res = await t.call('POST', '/oauth/token', { token: null, body: { grant_type: 'password', username: alice.user.username, password: alice.password } });
      assert.equal(res.status, 200);
    });
  });
});
