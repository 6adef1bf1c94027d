import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { csrfFrom, form, sessionCookieFrom, tokenRequest } from '../oauth/support.js';

// Small limits keep the test fast; the failure-based lock and ban are off, so only the throttles act.
const LIMITS = { protectedPathsLimit: 3, protectedPathsPeriod: 60, oauthTokenRateLimit: 4, maxLoginAttempts: 0, failedAuthMaxRetry: 0 };

describe('throttles on sign-in and the OAuth token endpoint (GitLab protected paths)', () => {
  let t: TestContext;
  let ipSeq = 0;
  const newIp = () => `198.51.100.${++ipSeq}`;
  before(async () => { t = await createTestContext(LIMITS); });
  after(async () => { await t.close(); });

  /** The sign-in form as a browser posts it: a session cookie and its CSRF token. */
  async function postSignIn(ip: string, login: string, password: string) {
    const page = await t.get('/users/sign_in', { token: null, headers: { 'x-forwarded-for': ip } });
    return t.call('POST', '/users/sign_in', {
      token: null,
      headers: { cookie: sessionCookieFrom(page.headers)!, 'x-forwarded-for': ip },
      form: form({ 'user[login]': login, 'user[password]': password, authenticity_token: csrfFrom(page.text) }),
    });
  }
  const grant = (ip: string, username: string, password: string) =>
    tokenRequest(t, { grant_type: 'password', username, password }, { 'x-forwarded-for': ip });

  /** As if every window had run out. */
  const expire = () => t.db.deleteFrom('rate_limit_counters').where('key', 'like', '%protected_paths%').execute();

  it('configuration: GitLab defaults (10 a minute), overridable, 0 turns a throttle off', () => {
    const cfg = loadConfig({});
    assert.deepEqual([cfg.protectedPathsLimit, cfg.protectedPathsPeriod, cfg.oauthTokenRateLimit], [10, 60, 60]);
    const custom = loadConfig({ CAIRN_PROTECTED_PATHS_LIMIT: '0', CAIRN_PROTECTED_PATHS_PERIOD: '300', CAIRN_OAUTH_TOKEN_RATE_LIMIT: '5' });
    assert.deepEqual([custom.protectedPathsLimit, custom.protectedPathsPeriod, custom.oauthTokenRateLimit], [0, 300, 5]);
    assert.throws(() => loadConfig({ CAIRN_PROTECTED_PATHS_PERIOD: '0' }), /CAIRN_PROTECTED_PATHS_PERIOD/);
    assert.throws(() => loadConfig({ CAIRN_OAUTH_TOKEN_RATE_LIMIT: 'x' }), /CAIRN_OAUTH_TOKEN_RATE_LIMIT/);
  });

  it('the sign-in form: every POST from one address counts, whatever its outcome; past the limit 429 with Retry-After', async () => {
    const u = await t.createUser();
    const ip = newIp();
    const outcomes = [];
    for (const password of ['wrong', u.password, 'wrong']) outcomes.push((await postSignIn(ip, `nobody-${ip}`, password)).status);
    assert.deepEqual(outcomes, [401, 401, 401]);
    const refused = await postSignIn(ip, u.user.username, u.password);
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.text, 'Retry later\n');
    const wait = Number(refused.headers['retry-after']);
    assert.ok(wait >= 1 && wait <= 60, `Retry-After ${refused.headers['retry-after']}`);
    // Another address is not affected, and the right password works there.
    assert.equal((await postSignIn(newIp(), u.user.username, u.password)).status, 302);
    // When the window has passed, the address may try again.
    await expire();
    assert.equal((await postSignIn(ip, u.user.username, u.password)).status, 302);
  });

  it('per account: password attempts naming one account from many addresses (form and password grant together)', async () => {
    const victim = await t.createUser();
    const bystander = await t.createUser();
    assert.equal((await grant(newIp(), victim.user.username, 'guess-1')).status, 400);
    assert.equal((await postSignIn(newIp(), victim.user.email, 'guess-2')).status, 401);
    assert.equal((await grant(newIp(), victim.user.username, 'guess-3')).status, 400);
    // The fourth attempt, even with the right password, from a fresh address: refused before the password is checked.
    const refused = await grant(newIp(), victim.user.username, victim.password);
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.body.error, 'too_many_requests');
    assert.match(refused.body.error_description, /this account/);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const page = await postSignIn(newIp(), victim.user.username, victim.password);
    assert.equal(page.status, 429);
    assert.match(page.text, /Too many sign-in attempts for this account/);
    assert.ok(Number(page.headers['retry-after']) >= 1);
    // Someone else's account is not affected; tokens of the throttled account keep working.
    assert.equal((await grant(newIp(), bystander.user.username, bystander.password)).status, 200);
    assert.equal((await t.get('/api/v4/user', { token: victim.token })).status, 200);
    await expire();
    assert.equal((await grant(newIp(), victim.user.username, victim.password)).status, 200);
  });

  it('the OAuth token and revoke endpoints: per address, 429 JSON with Retry-After past the limit', async () => {
    const ip = newIp();
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await tokenRequest(t, { grant_type: 'refresh_token', refresh_token: `nope-${i}` }, { 'x-forwarded-for': ip })).status);
    statuses.push((await t.call('POST', '/oauth/revoke', { token: null, form: form({ token: 'nope' }), headers: { 'x-forwarded-for': ip } })).status);
    assert.ok(statuses.every((s) => s !== 429), `${statuses}`);
    const refused = await tokenRequest(t, { grant_type: 'refresh_token', refresh_token: 'nope' }, { 'x-forwarded-for': ip });
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.body.error, 'too_many_requests');
    assert.ok(Number(refused.headers['retry-after']) >= 1 && Number(refused.headers['retry-after']) <= 60);
    const revoke = await t.call('POST', '/oauth/revoke', { token: null, form: form({ token: 'nope' }), headers: { 'x-forwarded-for': ip } });
    assert.equal(revoke.status, 429);
    assert.notEqual((await tokenRequest(t, { grant_type: 'refresh_token', refresh_token: 'nope' }, { 'x-forwarded-for': newIp() })).status, 429);
  });

  it('the counters are rows in the database (what every Cairn process reads), not memory', async () => {
    const ip = newIp();
    await postSignIn(ip, 'someone', 'x');
    const rows = await t.db.selectFrom('rate_limit_counters').select(['key', 'count']).where('key', '=', `protected_paths:sign_in:ip:${ip}`).execute();
    assert.deepEqual(rows.map((r) => r.count), [1]);
    // Another process's requests land in the same row: simulated by adding to it directly.
    await t.db.updateTable('rate_limit_counters').set({ count: LIMITS.protectedPathsLimit }).where('key', '=', `protected_paths:sign_in:ip:${ip}`).execute();
    assert.equal((await postSignIn(ip, 'someone', 'x')).status, 429);
  });
});
