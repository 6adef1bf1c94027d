import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { basic, csrfFrom, form, sessionCookieFrom, tokenRequest } from '../oauth/support.js';

// Small limits keep the test fast: 3 wrong passwords lock an account, 5 failures ban an address.
const LIMITS = { maxLoginAttempts: 3, loginLockMinutes: 10, failedAuthMaxRetry: 5, failedAuthFindTime: 180, failedAuthBanTime: 3600 };

describe('failed sign-in defences', () => {
  let t: TestContext;
  let ipSeq = 0;
  /** Each case comes from its own address (the app trusts X-Forwarded-For). */
  const newIp = () => `203.0.113.${++ipSeq}`;

  before(async () => { t = await createTestContext(LIMITS); });
  after(async () => { await t.close(); });

  const grant = (ip: string, username: string, password: string) =>
    tokenRequest(t, { grant_type: 'password', username, password }, { 'x-forwarded-for': ip });

  /** Moves every lock and ban of the database into the past, as if their time had run out. */
  const expireBans = () =>
    t.db.updateTable('rate_limit_counters').set((eb) => ({ window_start: eb.val(new Date(Date.now() - 2 * 24 * 3600 * 1000)) })).execute();

  it('configuration: GitLab defaults (10 attempts / 10 minutes; 30 failures in 3 minutes ban for an hour)', () => {
    const cfg = loadConfig({});
    assert.deepEqual(
      [cfg.maxLoginAttempts, cfg.loginLockMinutes, cfg.failedAuthMaxRetry, cfg.failedAuthFindTime, cfg.failedAuthBanTime],
      [10, 10, 30, 180, 3600],
    );
    const custom = loadConfig({ CAIRN_MAX_LOGIN_ATTEMPTS: '0', CAIRN_LOGIN_LOCK_MINUTES: '60', CAIRN_FAILED_AUTH_MAX_RETRY: '0' });
    assert.equal(custom.maxLoginAttempts, 0);
    assert.equal(custom.loginLockMinutes, 60);
    assert.equal(custom.failedAuthMaxRetry, 0);
    assert.throws(() => loadConfig({ CAIRN_LOGIN_LOCK_MINUTES: '0' }), /CAIRN_LOGIN_LOCK_MINUTES/);
    assert.throws(() => loadConfig({ CAIRN_FAILED_AUTH_BAN_TIME: '-1' }), /CAIRN_FAILED_AUTH_BAN_TIME/);
  });

  it('normal use never locks: successful sign-ins do not count, and a success resets the failures', async () => {
    const u = await t.createUser();
    const ip = newIp();
    for (let i = 0; i < 8; i++) assert.equal((await grant(ip, u.user.username, u.password)).status, 200);
    // Two typos, a success, two more typos: never three in a row, so never locked.
    for (const password of ['typo1', 'typo2', u.password, 'typo3', 'typo4', u.password]) {
      const res = await grant(newIp(), u.user.username, password);
      assert.equal(res.status, password === u.password ? 200 : 400, res.text);
    }
  });

  it('the OAuth password grant locks an account after too many wrong passwords, even for the right one', async () => {
    const u = await t.createUser();
    for (let i = 0; i < LIMITS.maxLoginAttempts; i++) {
      const res = await grant(newIp(), u.user.username, `wrong-${i}`);
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'invalid_grant');
    }
    const locked = await grant(newIp(), u.user.email, u.password);
    assert.equal(locked.status, 400);
    assert.equal(locked.body.error, 'invalid_grant');
    assert.match(locked.body.error_description, /locked/);
    // Tokens still work for a locked account: only password sign-in is locked.
    assert.equal((await t.get('/api/v4/user', { token: u.token })).status, 200);
    // Others are unaffected.
    const other = await t.createUser();
    assert.equal((await grant(newIp(), other.user.username, other.password)).status, 200);
    // When the lock runs out, the right password works again.
    await expireBans();
    assert.equal((await grant(newIp(), u.user.username, u.password)).status, 200);
  });

  it('an address with too many failed sign-ins is banned (429, Retry-After), for every account; other addresses are not', async () => {
    const ip = newIp();
    const u = await t.createUser();
    for (let i = 0; i < LIMITS.failedAuthMaxRetry; i++) {
      // Unknown logins count as well: guessing user names is guessing too.
      assert.equal((await grant(ip, `nobody-${i}`, 'guess')).status, 400);
    }
    const banned = await grant(ip, u.user.username, u.password);
    assert.equal(banned.status, 429);
    assert.equal(banned.body.error, 'too_many_requests');
    assert.ok(Number(banned.headers['retry-after']) > 3500);
    assert.equal((await grant(newIp(), u.user.username, u.password)).status, 200);
    await expireBans();
    assert.equal((await grant(ip, u.user.username, u.password)).status, 200);
  });

  it('the sign-in form: wrong passwords lock the account; a banned address gets 429', async () => {
    const u = await t.createUser();
    const post = async (ip: string, login: string, password: string) => {
      const page = await t.get('/users/sign_in', { token: null, headers: { 'x-forwarded-for': ip } });
      return t.call('POST', '/users/sign_in', {
        token: null,
        headers: { cookie: sessionCookieFrom(page.headers)!, 'x-forwarded-for': ip },
        form: form({ 'user[login]': login, 'user[password]': password, authenticity_token: csrfFrom(page.text) }),
      });
    };
    for (let i = 0; i < LIMITS.maxLoginAttempts; i++) {
      const res = await post(newIp(), u.user.username, 'nope');
      assert.equal(res.status, 401);
      assert.match(res.text, /Invalid login or password/);
    }
    const locked = await post(newIp(), u.user.username, u.password);
    assert.equal(locked.status, 401);
    assert.match(locked.text, /Your account is locked/);

    // The form and the password grant share one count per address.
    const ip = newIp();
    const fresh = await t.createUser();
    for (let i = 0; i < LIMITS.failedAuthMaxRetry - 1; i++) assert.equal((await post(ip, `ghost-${i}`, 'x')).status, 401);
    assert.equal((await grant(ip, 'ghost-last', 'x')).status, 400);
    const banned = await post(ip, fresh.user.username, fresh.password);
    assert.equal(banned.status, 429);
    assert.match(banned.text, /Too many failed sign-in attempts/);
    assert.ok(banned.headers['retry-after']);
    assert.equal((await post(newIp(), fresh.user.username, fresh.password)).status, 302);
  });

  describe('git over HTTP', () => {
    let u: TestUser;
    let project: Project;
    let refsUrl: string;
    before(async () => {
      u = await t.createUser();
      project = await t.createProject({ owner: u.user });
      const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', project.namespace_id).executeTakeFirstOrThrow();
      refsUrl = `/${ns.full_path}/${project.path}.git/info/refs?service=git-upload-pack`;
    });
    const fetchRefs = (ip: string, user: string, password: string) =>
      t.get(refsUrl, { token: null, headers: { ...basic(user, password), 'x-forwarded-for': ip } });

    it('an address with too many failed authentications gets 403 for a while, even with good credentials', async () => {
      const ip = newIp();
      // git's first, credential-less request is not a failure.
      for (let i = 0; i < 10; i++) assert.equal((await t.get(refsUrl, { token: null, headers: { 'x-forwarded-for': ip } })).status, 401);
      for (let i = 0; i < LIMITS.failedAuthMaxRetry; i++) assert.equal((await fetchRefs(ip, 'someone', `bad-token-${i}`)).status, 401);
      const banned = await fetchRefs(ip, u.user.username, u.token);
      assert.equal(banned.status, 403);
      assert.match(banned.text, /Too many failed authentication attempts/);
      assert.equal((await fetchRefs(newIp(), u.user.username, u.token)).status, 200);
      // Sign-in is counted separately.
      assert.equal((await grant(ip, u.user.username, u.password)).status, 200);
    });

    it('a successful authentication resets the address count, as GitLab does', async () => {
      const ip = newIp();
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < LIMITS.failedAuthMaxRetry - 1; i++) assert.equal((await fetchRefs(ip, 'x', 'bad')).status, 401);
        assert.equal((await fetchRefs(ip, u.user.username, u.token)).status, 200);
      }
    });

    it('wrong passwords lock the account for password authentication; tokens keep working', async () => {
      const v = await t.createUser();
      const own = await t.createProject({ owner: v.user });
      const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', own.namespace_id).executeTakeFirstOrThrow();
      const url = `/${ns.full_path}/${own.path}.git/info/refs?service=git-upload-pack`;
      const get = (password: string) => t.get(url, { token: null, headers: { ...basic(v.user.username, password), 'x-forwarded-for': newIp() } });
      assert.equal((await get(v.password)).status, 200);
      for (let i = 0; i < LIMITS.maxLoginAttempts; i++) assert.equal((await get(`wrong-${i}`)).status, 401);
      const locked = await get(v.password);
      assert.equal(locked.status, 401);
      assert.match(locked.text, /locked/);
      assert.equal((await get(v.token)).status, 200);
      // The lock is the account's, whichever door was used to guess.
      assert.equal((await grant(newIp(), v.user.username, v.password)).status, 400);
      await expireBans();
      assert.equal((await get(v.password)).status, 200);
    });
  });
});
