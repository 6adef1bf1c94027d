import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('meta endpoints and conventions', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('GET /version needs a credential and answers as GitLab', async () => {
    assert.equal((await t.get('/api/v4/version', { token: null })).status, 401);
    const res = await t.get('/api/v4/version');
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.match(res.body.version, /^\d+\.\d+\.\d+$/);
    assert.equal(typeof res.body.revision, 'string');
  });

  it('GET /metadata has the same version and kas settings', async () => {
    const res = await t.get('/api/v4/metadata');
    assert.equal(res.status, 200);
    assert.equal(res.body.kas.enabled, false);
  });

  it('health, liveness and readiness', async () => {
    const health = await t.get('/-/health', { token: null });
    assert.equal(health.status, 200);
    assert.equal(health.text, 'GitLab OK');
    assert.deepEqual((await t.get('/-/liveness', { token: null })).body, { status: 'ok' });
    const ready = await t.get('/-/readiness', { token: null });
    assert.equal(ready.status, 200);
    assert.equal(ready.body.status, 'ok');
  });

  it('while stopping (the shutdown blackout): readiness fails, requests are still served with Connection: close', async () => {
    t.app.cairn.draining = true;
    try {
      const ready = await t.get('/-/readiness', { token: null });
      assert.equal(ready.status, 503);
      assert.deepEqual(ready.body, { status: 'failed', master_check: [{ status: 'failed', message: 'shutting down' }], db_check: [{ status: 'ok' }] });
      const served = await t.get('/api/v4/version');
      assert.equal(served.status, 200);
      assert.equal(served.headers.connection, 'close');
    } finally {
      t.app.cairn.draining = false;
    }
    assert.equal((await t.get('/-/readiness', { token: null })).status, 200);
  });

  it('unknown token is 401 with GitLab body; unknown route 404', async () => {
    const res = await t.get('/api/v4/version', { token: 'nope' });
    assert.equal(res.status, 401);
    assert.deepEqual(res.body, { message: '401 Unauthorized' });
    const missing = await t.get('/api/v4/no/such/route');
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, { error: '404 Not Found' });
  });

  it('expired and revoked tokens are 401; blocked users are 401', async () => {
    const expired = await t.createUser({ expiresAt: '2020-01-01' });
    assert.equal((await t.get('/api/v4/version', { token: expired.token })).status, 401);
    const blocked = await t.createUser({ state: 'blocked' });
    assert.equal((await t.get('/api/v4/version', { token: blocked.token })).status, 401);
    const ok = await t.createUser();
    await t.db.updateTable('personal_access_tokens').set({ revoked: true }).where('user_id', '=', ok.user.id).execute();
    assert.equal((await t.get('/api/v4/version', { token: ok.token })).status, 401);
  });

  it('token via private_token query and Authorization: Bearer', async () => {
    const u = await t.createUser();
    assert.equal((await t.get(`/api/v4/version?private_token=${u.token}`, { token: null })).status, 200);
    assert.equal((await t.get('/api/v4/version', { token: null, headers: { authorization: `Bearer ${u.token}` } })).status, 200);
  });

  it('a read_user token cannot reach other endpoints', async () => {
    const u = await t.createUser({ scopes: ['read_user'] });
    const res = await t.get('/api/v4/version', { token: u.token });
    assert.equal(res.status, 403);
    assert.equal(res.body.error, 'insufficient_scope');
  });
});
