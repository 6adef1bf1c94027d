import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { hashPassword, PASSWORD_HASH_PARAMS, passwordHashOutdated, usePasswordHashParams, verifyPassword } from '../../src/lib/secrets.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { tokenRequest } from '../oauth/support.js';

/** A hash in the format of hashPassword, with N=2^14 (what Cairn used before). */
function oldHash(password: string): string {
  const salt = crypto.randomBytes(16);
  const key = crypto.scryptSync(password, salt, 32, { N: 16384, r: 8, p: 1 });
  return `scrypt$16384$8$1$${salt.toString('base64')}$${key.toString('base64')}`;
}

describe('password hashes', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext();
    // The test helper lowers the cost for speed (test/helpers/app.ts); this file checks the real one.
    usePasswordHashParams(PASSWORD_HASH_PARAMS);
  });
  after(async () => { await t.close(); });

  it('are scrypt N=2^15, r=8, p=1 and verify; older parameters still verify but are outdated', async () => {
    const hash = await hashPassword('correct horse battery');
    assert.match(hash, /^scrypt\$32768\$8\$1\$/);
    assert.equal(await verifyPassword('correct horse battery', hash), true);
    assert.equal(await verifyPassword('wrong', hash), false);
    assert.equal(passwordHashOutdated(hash), false);
    const old = oldHash('correct horse battery');
    assert.equal(await verifyPassword('correct horse battery', old), true);
    assert.equal(passwordHashOutdated(old), true);
    assert.equal(passwordHashOutdated(null), false);
  });

  it('an outdated hash is replaced at the next good sign-in, and not at a wrong one', async () => {
    const u = await t.createUser();
    const old = oldHash(u.password);
    await t.db.updateTable('users').set({ encrypted_password: old }).where('id', '=', u.user.id).execute();
    const stored = async () => (await t.db.selectFrom('users').select('encrypted_password').where('id', '=', u.user.id).executeTakeFirstOrThrow()).encrypted_password;

    assert.equal((await tokenRequest(t, { grant_type: 'password', username: u.user.username, password: 'not-it' })).status, 400);
    assert.equal(await stored(), old);

    const res = await tokenRequest(t, { grant_type: 'password', username: u.user.username, password: u.password });
    assert.equal(res.status, 200, res.text);
    const upgraded = await stored();
    assert.match(upgraded!, /^scrypt\$32768\$8\$1\$/);
    assert.equal(await verifyPassword(u.password, upgraded), true);
    // And the upgraded hash signs in.
    assert.equal((await tokenRequest(t, { grant_type: 'password', username: u.user.username, password: u.password })).status, 200);
  });
});
