import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { dateAfterDays, insertPersonalAccessToken } from '../../src/services/tokens.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { csrfFrom, form, signIn } from './support.js';

const PAGE = '/-/user_settings/personal_access_tokens';
const CHROMIUM = '/usr/bin/chromium';

/** `scopes[]=a&scopes[]=b` plus the other fields. */
function tokenForm(fields: Record<string, string | undefined>, scopes: string[]): string {
  const params = new URLSearchParams(form(fields));
  for (const s of scopes) params.append('scopes[]', s);
  return params.toString();
}

describe('personal access tokens page (HTTP)', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('anonymous visitors are sent to sign in, and come back', async () => {
    const res = await t.get(PAGE, { token: null });
    assert.equal(res.status, 302);
    assert.equal(res.headers.location, `/users/sign_in?redirect_to=${encodeURIComponent(PAGE)}`);
    const post = await t.call('POST', PAGE, { token: null, form: tokenForm({ name: 'x' }, ['api']) });
    assert.equal(post.status, 302);
    // An API token is not a session: the page still wants a signed-in browser.
    assert.equal((await t.get(PAGE)).status, 302);
  });

  it('lists only the active tokens of the signed-in user, with their details', async () => {
    const alice = await t.createUser();
    const bob = await t.createUser();
    const db = t.db;
    await insertPersonalAccessToken(db, { userId: alice.user.id, name: 'ci <script>', scopes: ['read_api', 'read_repository'], expiresAt: dateAfterDays(10) });
    const revoked = await insertPersonalAccessToken(db, { userId: alice.user.id, name: 'old revoked', scopes: ['api'], expiresAt: dateAfterDays(10) });
    await db.updateTable('personal_access_tokens').set({ revoked: true }).where('id', '=', revoked.row.id).execute();
    await insertPersonalAccessToken(db, { userId: alice.user.id, name: 'long expired', scopes: ['api'], expiresAt: '2020-01-01' });
    await insertPersonalAccessToken(db, { userId: alice.user.id, name: 'impersonation', scopes: ['api'], expiresAt: null, impersonation: true });
    await insertPersonalAccessToken(db, { userId: bob.user.id, name: 'bobs token', scopes: ['api'], expiresAt: null });
    const used = new Date('2024-05-06T07:08:09Z');
    await db.updateTable('personal_access_tokens').set({ last_used_at: used }).where('user_id', '=', alice.user.id).where('name', '=', 'test').execute();

    const session = await signIn(t, alice.user.username, alice.password);
    const page = await t.get(PAGE, { token: null, headers: { cookie: session.cookie } });
    assert.equal(page.status, 200);
    assert.match(page.headers['content-type'], /^text\/html/);
    assert.equal(page.headers['cache-control'], 'no-store');
    assert.match(page.text, /Active personal access tokens \(2\)/);
    assert.match(page.text, /ci &lt;script&gt;/);
    assert.doesNotMatch(page.text, /<script>/);
    assert.match(page.text, /<code>read_api<\/code> <code>read_repository<\/code>/);
    assert.match(page.text, new RegExp(`<time datetime="${dateAfterDays(10)}">${dateAfterDays(10)}</time>`));
    assert.match(page.text, /<time datetime="2024-05-06T07:08:09.000Z">2024-05-06<\/time>/);
    for (const hiddenName of ['old revoked', 'long expired', 'impersonation', 'bobs token']) assert.ok(!page.text.includes(hiddenName), hiddenName);
    // Non-administrators are not offered the administrators' scopes.
    assert.match(page.text, /value="api"/);
    assert.doesNotMatch(page.text, /value="sudo"|value="admin_mode"/);
    // Only scopes Cairn honours: none that would open nothing (no agent for Kubernetes, no registry, no AI).
    const offered = [...page.text.matchAll(/name="scopes\[\]" value="([a-z_]+)"/g)].map((m) => m[1]);
    assert.deepEqual(offered, ['api', 'read_api', 'read_user', 'read_repository', 'write_repository', 'self_rotate']);
  });

  it('creates a token (shown once, working), validates the form, and requires the CSRF token', async () => {
    const alice = await t.createUser();
    const session = await signIn(t, alice.user.username, alice.password);
    const post = (fields: Record<string, string | undefined>, scopes: string[], csrf: string | null = session.csrf) =>
      t.call('POST', PAGE, { token: null, headers: { cookie: session.cookie }, form: tokenForm({ ...fields, authenticity_token: csrf ?? undefined }, scopes) });

    const expires = dateAfterDays(20);
    const created = await post({ name: 'deploy script', expires_at: expires }, ['read_api', 'read_user']);
    assert.equal(created.status, 201);
    const token = /id="created-token" readonly value="([^"]+)"/.exec(created.text)?.[1];
    assert.match(token ?? '', /^glpat-/);
    // A copy button, run by the site's own script (the page's policy allows that one, nothing inline).
    assert.match(created.text, /<button type="button" class="secondary" data-copy="created-token">Copy token<\/button>/);
    const script = /<script src="(\/-\/assets\/cairn-[0-9a-f]+\.js)" defer><\/script>/.exec(created.text)?.[1];
    assert.ok(script, 'the site script is loaded');
    assert.match(String(created.headers['content-security-policy']), /script-src 'self'/);
    assert.equal((await t.get(script!, { token: null })).status, 200);
    const self = await t.get('/api/v4/personal_access_tokens/self', { token: token! });
    assert.equal(self.status, 200);
    assert.equal(self.body.name, 'deploy script');
    assert.deepEqual(self.body.scopes, ['read_api', 'read_user']);
    assert.equal(self.body.expires_at, expires);
    assert.equal((await t.get('/api/v4/user', { token: token! })).body.username, alice.user.username);
    // The list shows it; the token itself is never shown again.
    const list = await t.get(PAGE, { token: null, headers: { cookie: session.cookie } });
    assert.match(list.text, /deploy script/);
    assert.ok(!list.text.includes(token!));
    // Without an expiry date: the longest lifetime.
    const noDate = await post({ name: 'no date', expires_at: '' }, ['api']);
    assert.equal(noDate.status, 201);
    const noDateRow = await t.db.selectFrom('personal_access_tokens').select('expires_at').where('user_id', '=', alice.user.id).where('name', '=', 'no date').executeTakeFirstOrThrow();
    assert.equal(noDateRow.expires_at, dateAfterDays(365));

    const count = async () => (await t.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', alice.user.id).execute()).length;
    const before = await count();
    const cases: [Record<string, string>, string[], RegExp][] = [
      [{ name: '', expires_at: expires }, ['api'], /Name can&#39;t be blank/],
      [{ name: 'no scopes', expires_at: expires }, [], /Select at least one scope/],
      [{ name: 'sudo', expires_at: expires }, ['sudo'], /not sudo/],
      [{ name: 'bogus', expires_at: expires }, ['api', 'fly'], /not fly/],
      [{ name: 'bad date', expires_at: '2030-02-31' }, ['api'], /is not a date/],
      [{ name: 'past', expires_at: '2020-01-01' }, ['api'], /must be in the future/],
      [{ name: 'far', expires_at: dateAfterDays(500) }, ['api'], /must be before/],
    ];
    for (const [fields, scopes, message] of cases) {
      const res = await post(fields, scopes);
      assert.equal(res.status, 400, fields.name);
      assert.match(res.text, /role="alert"/);
      assert.match(res.text, message, fields.name);
      // The form keeps what was typed.
      if (fields.name) assert.match(res.text, new RegExp(`id="token_name" name="name" required maxlength="255" value="${fields.name}"`));
    }
    const stale = await post({ name: 'stale', expires_at: expires }, ['api'], 'not-the-token');
    assert.equal(stale.status, 422);
    const missing = await post({ name: 'stale', expires_at: expires }, ['api'], null);
    assert.equal(missing.status, 422);
    assert.equal(await count(), before);
  });

  it('administrators may give their tokens the administrators\' scopes', async () => {
    const admin = await t.createUser({ admin: true });
    const session = await signIn(t, admin.user.username, admin.password);
    const page = await t.get(PAGE, { token: null, headers: { cookie: session.cookie } });
    assert.match(page.text, /value="sudo"/);
    const res = await t.call('POST', PAGE, { token: null, headers: { cookie: session.cookie }, form: tokenForm({ name: 'admin', expires_at: dateAfterDays(5), authenticity_token: session.csrf }, ['api', 'sudo']) });
    assert.equal(res.status, 201);
  });

  it('revokes own tokens only, with the CSRF token', async () => {
    const alice = await t.createUser();
    const bob = await t.createUser();
    const session = await signIn(t, alice.user.username, alice.password);
    const mine = await insertPersonalAccessToken(t.db, { userId: alice.user.id, name: 'to revoke', scopes: ['api'], expiresAt: dateAfterDays(9) });
    const theirs = await insertPersonalAccessToken(t.db, { userId: bob.user.id, name: 'not yours', scopes: ['api'], expiresAt: dateAfterDays(9) });
    const revoke = (id: number | string, csrf: string | undefined) =>
      t.call('POST', `${PAGE}/${id}/revoke`, { token: null, headers: { cookie: session.cookie }, form: form({ authenticity_token: csrf }) });

    assert.equal((await revoke(mine.row.id, 'wrong')).status, 422);
    assert.equal((await t.get('/api/v4/user', { token: mine.token })).status, 200);
    assert.equal((await revoke(theirs.row.id, session.csrf)).status, 404);
    assert.equal((await t.get('/api/v4/user', { token: theirs.token })).status, 200);
    assert.equal((await revoke('abc', session.csrf)).status, 404);

    const done = await revoke(mine.row.id, session.csrf);
    assert.equal(done.status, 302);
    assert.equal(done.headers.location, `${PAGE}?revoked=1`);
    assert.equal((await t.get('/api/v4/user', { token: mine.token })).status, 401);
    const list = await t.get(done.headers.location, { token: null, headers: { cookie: session.cookie } });
    assert.match(list.text, /The personal access token was revoked/);
    assert.ok(!list.text.includes('to revoke'));
    // GitLab's PUT form of it, with the token as X-CSRF-Token.
    const other = await insertPersonalAccessToken(t.db, { userId: alice.user.id, name: 'put revoke', scopes: ['api'], expiresAt: dateAfterDays(9) });
    const put = await t.call('PUT', `${PAGE}/${other.row.id}/revoke`, { token: null, headers: { cookie: session.cookie, 'x-csrf-token': session.csrf } });
    assert.equal(put.status, 302);
    assert.equal((await t.get('/api/v4/user', { token: other.token })).status, 401);
    // Anonymous: sent to sign in, nothing revoked.
    const third = await insertPersonalAccessToken(t.db, { userId: alice.user.id, name: 'kept', scopes: ['api'], expiresAt: dateAfterDays(9) });
    const anon = await t.call('POST', `${PAGE}/${third.row.id}/revoke`, { token: null, form: form({ authenticity_token: session.csrf }) });
    assert.equal(anon.status, 302);
    assert.match(anon.headers.location, /^\/users\/sign_in/);
    assert.equal((await t.get('/api/v4/user', { token: third.token })).status, 200);
  });
});

describe('personal access tokens page in a real browser (Chromium)', { skip: !fs.existsSync(CHROMIUM) && `${CHROMIUM} is not installed` }, () => {
  let t: TestContext;
  let browser: Browser;
  let base: string;
  before(async () => {
    t = await createTestContext();
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    t.app.cairn.config.externalUrl = base;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  });
  after(async () => {
    await browser?.close();
    await t.close();
  });

  it('sign in, create a token, copy it once, use it, revoke it', async () => {
    const alice = await t.createUser();
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${base}${PAGE}`);
    assert.equal(new URL(page.url()).pathname, '/users/sign_in');
    await page.getByLabel('Username or primary email').fill(alice.user.username);
    await page.getByLabel('Password').fill(alice.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => u.pathname === PAGE);
    assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'Personal access tokens');
    // The token createUser made.
    assert.match(await page.locator('#active-heading').innerText(), /\(1\)/);

    await page.getByLabel('Token name').fill('laptop git');
    const expires = dateAfterDays(45);
    await page.getByLabel('Expiration date').fill(expires);
    await page.getByRole('checkbox', { name: /read_repository/ }).check();
    await page.getByRole('checkbox', { name: /write_repository/ }).check();
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.waitForSelector('#created-token');
    const token = await page.locator('#created-token').inputValue();
    assert.match(token, /^glpat-/);
    assert.match(await page.getByRole('status').innerText(), /laptop git has been created/);
    const row = page.getByRole('row', { name: /laptop git/ });
    assert.match(await row.innerText(), /read_repository/);
    assert.match(await row.innerText(), new RegExp(expires));
    assert.match(await row.innerText(), /Never/);

    const self = await (await fetch(`${base}/api/v4/personal_access_tokens/self`, { headers: { 'private-token': token } })).json();
    assert.deepEqual(self.scopes, ['read_repository', 'write_repository']);
    assert.equal(self.expires_at, expires);

    // Reloading does not show the token again.
    await page.goto(`${base}${PAGE}`);
    assert.equal(await page.locator('#created-token').count(), 0);
    assert.ok(!(await page.content()).includes(token));

    await page.getByRole('button', { name: 'Revoke laptop git' }).click();
    await page.waitForURL((u) => u.pathname === PAGE && u.search === '?revoked=1');
    assert.match(await page.getByRole('status').innerText(), /revoked/);
    assert.equal(await page.getByRole('row', { name: /laptop git/ }).count(), 0);
    const after = await fetch(`${base}/api/v4/personal_access_tokens/self`, { headers: { 'private-token': token } });
    assert.equal(after.status, 401);

    // A failed form keeps what was typed and says why.
    await page.getByLabel('Token name').fill('no scopes chosen');
    await page.getByRole('button', { name: 'Create token' }).click();
    await page.waitForSelector('[role=alert]');
    assert.match(await page.getByRole('alert').innerText(), /Select at least one scope/);
    assert.equal(await page.getByLabel('Token name').inputValue(), 'no scopes chosen');
    await context.close();
  });
});
