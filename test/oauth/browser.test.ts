import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import * as oauth from 'oauth4webapi';
import { chromium, type Browser } from 'playwright-core';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { registerApp } from './support.js';

const CHROMIUM = '/usr/bin/chromium';

describe('OAuth in a real browser (Chromium) with an oauth4webapi client', { skip: !fs.existsSync(CHROMIUM) && `${CHROMIUM} is not installed` }, () => {
  let t: TestContext;
  let alice: TestUser;
  let browser: Browser;
  let callback: http.Server;
  let callbackUrl: string;
  const callbackHits: string[] = [];

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    t.app.cairn.config.externalUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    callback = http.createServer((req, res) => {
      callbackHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html><title>Client</title><p>Signed in.</p>');
    });
    await new Promise<void>((resolve) => callback.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(callback.address() as AddressInfo).port}/callback`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });
  after(async () => {
    await browser?.close();
    await new Promise((resolve) => callback?.close(resolve));
    await t.close();
  });

  it('sign in, authorize a PKCE client, exchange the code with oauth4webapi, call the API', async () => {
    const app = await registerApp(t, { confidential: false, redirectUri: callbackUrl, scopes: 'api read_user', name: 'Browser PKCE client' });
    const issuer = new URL(t.app.cairn.config.externalUrl);
    const insecure = { [oauth.allowInsecureRequests]: true };
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
    assert.equal(as.token_endpoint, `${issuer.origin}/oauth/token`);
    const client: oauth.Client = { client_id: app.application_id };
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const authorizeUrl = new URL(as.authorization_endpoint!);
    authorizeUrl.search = new URLSearchParams({
      client_id: client.client_id,
      redirect_uri: callbackUrl,
      response_type: 'code',
      scope: 'api read_user',
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();

    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(authorizeUrl.toString());
    // Not signed in yet: the sign-in page, which leads back to the consent page.
    assert.equal(new URL(page.url()).pathname, '/users/sign_in');
    await page.getByLabel('Username or primary email').fill(alice.user.username);
    await page.getByLabel('Password').fill(alice.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => u.pathname === '/oauth/authorize');
    assert.match(await page.getByRole('heading', { level: 1 }).innerText(), /Authorize Browser PKCE client/);
    const scopesText = await page.locator('ul.scopes').innerText();
    assert.match(scopesText, /api/);
    assert.match(scopesText, /read_user/);

    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === '_cairn_session');
    assert.ok(session?.httpOnly);
    assert.equal(session?.sameSite, 'Lax');

    await page.getByRole('button', { name: /^Authorize/ }).click();
    await page.waitForURL((u) => u.href.startsWith(callbackUrl));
    const landed = new URL(page.url());
    assert.equal(landed.searchParams.get('state'), state);
    assert.ok(landed.searchParams.get('code'));
    assert.equal(callbackHits.filter((u) => u.startsWith('/callback')).length, 1);
    await context.close();

    const params = oauth.validateAuthResponse(as, client, landed, state);
    const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, callbackUrl, verifier, insecure);
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, response);
    assert.equal(tokens.token_type, 'bearer');
    assert.equal(tokens.expires_in, 7200);
    assert.ok(tokens.refresh_token);

    const base = t.app.cairn.config.externalUrl;
    const auth = { authorization: `Bearer ${tokens.access_token}` };
    const version = await fetch(`${base}/api/v4/version`, { headers: auth });
    assert.equal(version.status, 200);
    const user = await fetch(`${base}/api/v4/user`, { headers: auth });
    if (user.status !== 404) {
      // GET /user comes from another branch; when present it must answer for the token's owner.
      assert.equal(user.status, 200);
      assert.equal((await user.json()).username, alice.user.username);
    }
    const info = await (await fetch(`${base}/oauth/token/info`, { headers: auth })).json();
    assert.equal(info.resource_owner_id, alice.user.id);
    assert.deepEqual(info.scope, ['api', 'read_user']);
    assert.deepEqual(info.application, { uid: app.application_id });

    const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, insecure));
    assert.notEqual(refreshed.access_token, tokens.access_token);
    assert.equal((await fetch(`${base}/api/v4/version`, { headers: auth })).status, 401);
  });
});
