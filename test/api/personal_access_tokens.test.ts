import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { resolveCredential } from '../../src/plugins/auth.js';
import { insertPersonalAccessToken } from '../../src/services/tokens.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

function daysFromNow(days: number): string {
  const d = new Date();
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

const TOKEN_FIELDS = ['active', 'created_at', 'description', 'expires_at', 'id', 'last_used_at', 'name', 'revoked', 'scopes', 'user_id'];

describe('personal access tokens API', () => {
  let t: TestContext;
  let alice: TestUser;
  let bob: TestUser;
  let admin: TestUser;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    bob = await t.createUser();
    admin = await t.createUser({ admin: true });
  });
  after(async () => {
    await t.close();
  });

  async function tokenFor(user: TestUser, attrs: { name?: string; scopes?: string[]; expiresAt?: string | null; impersonation?: boolean } = {}) {
    return insertPersonalAccessToken(t.db, {
      userId: user.user.id,
      name: attrs.name ?? t.unique('tok'),
      scopes: attrs.scopes ?? ['api'],
      expiresAt: attrs.expiresAt ?? null,
      impersonation: attrs.impersonation,
    });
  }

  describe('GET /personal_access_tokens', () => {
    it('needs authentication', async () => {
      assert.equal((await t.get('/api/v4/personal_access_tokens', { token: null })).status, 401);
    });

    it("lists only the caller's own tokens for a non-admin, without impersonation tokens", async () => {
      const u = await t.createUser();
      await tokenFor(u, { name: 'second' });
      await tokenFor(u, { name: 'imp', impersonation: true });
      await tokenFor(bob, { name: 'bobs' });
      const res = await t.get('/api/v4/personal_access_tokens', { token: u.token });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.map((x: any) => x.name), ['test', 'second']);
      assert.deepEqual(Object.keys(res.body[0]).sort(), TOKEN_FIELDS);
      assert.equal(res.body[0].user_id, u.user.id);
      assert.equal(res.body[0].active, true);
      assert.equal(res.body[0].token, undefined);
      assert.equal(res.headers['x-total'], '2');
    });

    it('a non-admin filtering on another user gets 401; on themselves 200', async () => {
      assert.equal((await t.get(`/api/v4/personal_access_tokens?user_id=${bob.user.id}`, { token: alice.token })).status, 401);
      const own = await t.get(`/api/v4/personal_access_tokens?user_id=${alice.user.id}`, { token: alice.token });
      assert.equal(own.status, 200);
      assert.ok(own.body.every((x: any) => x.user_id === alice.user.id));
    });

    it('an admin sees everyone and filters by user_id; unknown user is 404', async () => {
      const all = await t.get('/api/v4/personal_access_tokens?per_page=100', { token: admin.token });
      assert.equal(all.status, 200);
      const owners = new Set(all.body.map((x: any) => x.user_id));
      assert.ok(owners.has(alice.user.id) && owners.has(bob.user.id));
      const bobs = await t.get(`/api/v4/personal_access_tokens?user_id=${bob.user.id}`, { token: admin.token });
      assert.ok(bobs.body.length >= 1);
      assert.ok(bobs.body.every((x: any) => x.user_id === bob.user.id));
      assert.equal((await t.get('/api/v4/personal_access_tokens?user_id=999999', { token: admin.token })).status, 404);
    });

    it('filters: revoked, state, search, created, last_used, expires, sort', async () => {
      const u = await t.createUser();
      const revoked = await tokenFor(u, { name: 'old-revoked' });
      await t.db.updateTable('personal_access_tokens').set({ revoked: true }).where('id', '=', revoked.row.id).execute();
      const expired = await tokenFor(u, { name: 'old-expired', expiresAt: '2020-01-01' });
      const later = await tokenFor(u, { name: 'Deploy Bot', expiresAt: daysFromNow(30) });
      await t.db.updateTable('personal_access_tokens').set({ last_used_at: new Date('2024-06-01T00:00:00Z'), created_at: new Date('2024-01-01T00:00:00Z') }).where('id', '=', later.row.id).execute();
      const list = (q: string) => t.get(`/api/v4/personal_access_tokens?${q}`, { token: u.token }).then((r) => {
        assert.equal(r.status, 200, r.text);
        return r.body.map((x: any) => x.name).sort();
      });
      assert.deepEqual(await list('revoked=true'), ['old-revoked']);
      assert.deepEqual(await list('state=inactive'), ['old-expired', 'old-revoked']);
      assert.deepEqual(await list('state=active'), ['Deploy Bot', 'test']);
      assert.deepEqual(await list('search=deploy'), ['Deploy Bot']);
      assert.deepEqual(await list('created_before=2024-02-01T00:00:00Z'), ['Deploy Bot']);
      // The caller's own token was used just now.
      assert.deepEqual(await list('last_used_after=2024-05-01'), ['Deploy Bot', 'test']);
      assert.deepEqual(await list('last_used_before=2024-07-01'), ['Deploy Bot']);
      assert.deepEqual(await list('last_used_before=2024-05-01'), []);
      assert.deepEqual(await list('expires_before=2021-01-01'), ['old-expired']);
      assert.deepEqual(await list(`expires_after=${daysFromNow(1)}`), ['Deploy Bot']);
      const sorted = await t.get('/api/v4/personal_access_tokens?sort=name_desc', { token: u.token });
      assert.deepEqual(sorted.body.map((x: any) => x.name), ['test', 'old-revoked', 'old-expired', 'Deploy Bot']);
      const inactive = (await t.get('/api/v4/personal_access_tokens?revoked=true', { token: u.token })).body[0];
      assert.equal(inactive.active, false);
      assert.equal(inactive.revoked, true);
      assert.equal(expired.row.expires_at, '2020-01-01');
    });

    it('bad filter values are 400', async () => {
      const bad = await t.get('/api/v4/personal_access_tokens?state=sleeping', { token: alice.token });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, { error: 'state does not have a valid value' });
      const date = await t.get('/api/v4/personal_access_tokens?created_before=yesterday', { token: alice.token });
      assert.equal(date.status, 400);
      assert.deepEqual(date.body, { error: 'created_before is invalid' });
    });
  });

  describe('single token, revoke and rotate', () => {
    it('GET /:id: owner 200, other non-admin 401, admin 200 and 404 when missing', async () => {
      const tok = await tokenFor(alice, { name: 'single', scopes: ['read_api'] });
      const own = await t.get(`/api/v4/personal_access_tokens/${tok.row.id}`, { token: alice.token });
      assert.equal(own.status, 200);
      assert.equal(own.body.name, 'single');
      assert.deepEqual(own.body.scopes, ['read_api']);
      assert.equal((await t.get(`/api/v4/personal_access_tokens/${tok.row.id}`, { token: bob.token })).status, 401);
      assert.equal((await t.get(`/api/v4/personal_access_tokens/${tok.row.id}`, { token: admin.token })).status, 200);
      assert.equal((await t.get('/api/v4/personal_access_tokens/999999', { token: admin.token })).status, 404);
      assert.equal((await t.get('/api/v4/personal_access_tokens/999999', { token: bob.token })).status, 401);
      assert.equal((await t.get('/api/v4/personal_access_tokens/abc', { token: admin.token })).status, 400);
    });

    it('GET and DELETE /self work with any scope; the revoked token then fails', async () => {
      const u = await t.createUser({ scopes: ['read_repository'] });
      const self = await t.get('/api/v4/personal_access_tokens/self', { token: u.token });
      assert.equal(self.status, 200);
      assert.deepEqual(self.body.scopes, ['read_repository']);
      assert.equal(self.body.user_id, u.user.id);
      const del = await t.delete('/api/v4/personal_access_tokens/self', { token: u.token });
      assert.equal(del.status, 204);
      assert.equal((await t.get('/api/v4/personal_access_tokens/self', { token: u.token })).status, 401);
      assert.equal((await t.get('/api/v4/personal_access_tokens/self', { token: null })).status, 401);
    });

    it('DELETE /:id: owner 204, other user 400, unknown 404, admin any', async () => {
      const a = await tokenFor(alice);
      const other = await t.delete(`/api/v4/personal_access_tokens/${a.row.id}`, { token: bob.token });
      assert.equal(other.status, 400);
      assert.deepEqual(other.body, { message: '400 Bad request - Not permitted to revoke' });
      assert.equal((await t.delete('/api/v4/personal_access_tokens/999999', { token: bob.token })).status, 404);
      assert.equal((await t.delete(`/api/v4/personal_access_tokens/${a.row.id}`, { token: alice.token })).status, 204);
      assert.equal((await t.get('/api/v4/version', { token: a.token })).status, 401);
      const b = await tokenFor(bob);
      assert.equal((await t.delete(`/api/v4/personal_access_tokens/${b.row.id}`, { token: admin.token })).status, 204);
      const row = await t.db.selectFrom('personal_access_tokens').select('revoked').where('id', '=', b.row.id).executeTakeFirstOrThrow();
      assert.equal(row.revoked, true);
    });

    it('a read_api token cannot revoke or rotate by id', async () => {
      const u = await t.createUser({ scopes: ['read_api'] });
      const tok = await tokenFor(u);
      assert.equal((await t.delete(`/api/v4/personal_access_tokens/${tok.row.id}`, { token: u.token })).status, 403);
      assert.equal((await t.post(`/api/v4/personal_access_tokens/${tok.row.id}/rotate`, {}, { token: u.token })).status, 403);
    });

    it('POST /:id/rotate issues a one-week successor and revokes the old token', async () => {
      const tok = await tokenFor(alice, { name: 'rot', scopes: ['api', 'read_user'] });
      const res = await t.post(`/api/v4/personal_access_tokens/${tok.row.id}/rotate`, {}, { token: alice.token });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.name, 'rot');
      assert.deepEqual(res.body.scopes, ['api', 'read_user']);
      assert.equal(res.body.expires_at, daysFromNow(7));
      assert.match(res.body.token, /^glpat-/);
      assert.notEqual(res.body.id, tok.row.id);
      assert.equal((await t.get('/api/v4/version', { token: res.body.token })).status, 200);
      const again = await t.post(`/api/v4/personal_access_tokens/${tok.row.id}/rotate`, {}, { token: alice.token });
      assert.equal(again.status, 400);
      assert.deepEqual(again.body, { message: '400 Bad request - Token already revoked' });
    });

    it('rotate takes expires_at, refuses bad and too distant dates, and guards others', async () => {
      const tok = await tokenFor(alice);
      const date = daysFromNow(20);
      const res = await t.post(`/api/v4/personal_access_tokens/${tok.row.id}/rotate`, { expires_at: date }, { token: alice.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.expires_at, date);
      const tok2 = await tokenFor(alice);
      assert.deepEqual((await t.post(`/api/v4/personal_access_tokens/${tok2.row.id}/rotate`, { expires_at: 'soon' }, { token: alice.token })).body, { error: 'expires_at is invalid' });
      const far = await t.post(`/api/v4/personal_access_tokens/${tok2.row.id}/rotate`, { expires_at: daysFromNow(800) }, { token: alice.token });
      assert.equal(far.status, 400);
      assert.match(far.body.message, /^400 Bad request - Expires at must be before \d{4}-\d{2}-\d{2}$/);
      assert.equal((await t.post(`/api/v4/personal_access_tokens/${tok2.row.id}/rotate`, {}, { token: bob.token })).status, 401);
      assert.equal((await t.post('/api/v4/personal_access_tokens/999999/rotate', {}, { token: admin.token })).status, 404);
      assert.equal((await t.post(`/api/v4/personal_access_tokens/${tok2.row.id}/rotate`, {}, { token: admin.token })).status, 200);
    });

    it('POST /self/rotate works with api or self_rotate scope only', async () => {
      const u = await t.createUser({ scopes: ['self_rotate'] });
      const res = await t.post('/api/v4/personal_access_tokens/self/rotate', {}, { token: u.token });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.scopes, ['self_rotate']);
      assert.equal((await t.get('/api/v4/personal_access_tokens/self', { token: u.token })).status, 401);
      const ro = await t.createUser({ scopes: ['read_api'] });
      assert.equal((await t.post('/api/v4/personal_access_tokens/self/rotate', {}, { token: ro.token })).status, 403);
    });

    it('using a revoked token that was rotated revokes the whole rotation chain', async () => {
      const tok = await tokenFor(alice, { name: 'family' });
      const first = await t.post('/api/v4/personal_access_tokens/self/rotate', {}, { token: tok.token });
      const second = await t.post('/api/v4/personal_access_tokens/self/rotate', {}, { token: first.body.token });
      assert.equal(second.status, 200);
      assert.equal((await t.get('/api/v4/version', { token: second.body.token })).status, 200);
      // The leaked original comes back: refused, and its descendants die with it.
      assert.equal((await t.get('/api/v4/version', { token: tok.token })).status, 401);
      assert.equal((await t.get('/api/v4/version', { token: second.body.token })).status, 401);
      const rows = await t.db.selectFrom('personal_access_tokens').select(['id', 'revoked']).where('name', '=', 'family').execute();
      assert.equal(rows.length, 3);
      assert.ok(rows.every((r) => r.revoked));
    });
  });

  describe('creating tokens', () => {
    it('POST /users/:user_id/personal_access_tokens (admin only)', async () => {
      const body = { name: 'made-by-admin', scopes: ['api', 'read_repository'], description: 'for CI', expires_at: daysFromNow(10) };
      assert.equal((await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, body, { token: null })).status, 401);
      assert.equal((await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, body, { token: alice.token })).status, 403);
      const res = await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, body, { token: admin.token });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), [...TOKEN_FIELDS, 'token'].sort());
      assert.equal(res.body.user_id, bob.user.id);
      assert.equal(res.body.description, 'for CI');
      assert.equal(res.body.expires_at, body.expires_at);
      const me = await t.get('/api/v4/personal_access_tokens/self', { token: res.body.token });
      assert.equal(me.body.user_id, bob.user.id);
      assert.equal((await t.post('/api/v4/users/999999/personal_access_tokens', body, { token: admin.token })).status, 404);
    });

    it('admin create: defaults expiry to the maximum lifetime and validates input', async () => {
      const res = await t.call('POST', `/api/v4/users/${bob.user.id}/personal_access_tokens`, {
        token: admin.token,
        form: 'name=formtoken&scopes[]=read_api&scopes[]=read_user',
      });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(res.body.scopes, ['read_api', 'read_user']);
      assert.equal(res.body.expires_at, daysFromNow(365));
      const comma = await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, { name: 'c', scopes: 'api,read_user' }, { token: admin.token });
      assert.deepEqual(comma.body.scopes, ['api', 'read_user']);
      const badScope = await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, { name: 'x', scopes: ['everything'] }, { token: admin.token });
      assert.equal(badScope.status, 400);
      assert.deepEqual(badScope.body, { error: 'scopes does not have a valid value' });
      const missing = await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, { scopes: ['api'] }, { token: admin.token });
      assert.equal(missing.status, 400);
      assert.deepEqual(missing.body, { error: 'name is missing' });
      const far = await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, { name: 'far', scopes: ['api'], expires_at: daysFromNow(500) }, { token: admin.token });
      assert.equal(far.status, 422);
      assert.match(far.body.message, /^Expires at must be before /);
      const empty = await t.post(`/api/v4/users/${bob.user.id}/personal_access_tokens`, { name: 'e', scopes: [] }, { token: admin.token });
      assert.equal(empty.status, 422);
      assert.deepEqual(empty.body, { message: "Scopes can't be blank" });
    });

    it('POST /user/personal_access_tokens: only k8s_proxy and self_rotate', async () => {
      assert.equal((await t.post('/api/v4/user/personal_access_tokens', { name: 'k', scopes: ['k8s_proxy'] }, { token: null })).status, 401);
      const res = await t.post('/api/v4/user/personal_access_tokens', { name: 'k', scopes: ['k8s_proxy'] }, { token: alice.token });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.user_id, alice.user.id);
      assert.deepEqual(res.body.scopes, ['k8s_proxy']);
      // A k8s_proxy token reaches no regular endpoint.
      assert.equal((await t.get('/api/v4/version', { token: res.body.token })).status, 403);
      const api = await t.post('/api/v4/user/personal_access_tokens', { name: 'k', scopes: ['api'] }, { token: alice.token });
      assert.equal(api.status, 400);
      assert.deepEqual(api.body, { error: 'scopes does not have a valid value' });
    });
  });

  describe('impersonation tokens', () => {
    it('are admin only', async () => {
      const url = `/api/v4/users/${bob.user.id}/impersonation_tokens`;
      assert.equal((await t.get(url, { token: null })).status, 401);
      assert.equal((await t.get(url, { token: alice.token })).status, 403);
      assert.equal((await t.post(url, { name: 'x', scopes: ['api'] }, { token: bob.token })).status, 403);
    });

    it('create, authenticate as the user, list with state, get and revoke', async () => {
      const target = await t.createUser();
      const url = `/api/v4/users/${target.user.id}/impersonation_tokens`;
      const res = await t.post(url, { name: 'imp', scopes: ['api'], expires_at: daysFromNow(5) }, { token: admin.token });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.impersonation, true);
      assert.equal(res.body.user_id, target.user.id);
      assert.equal(res.body.active, true);
      assert.ok(res.body.token);

      // The token acts as the user, and the request knows it is an impersonation.
      const self = await t.get('/api/v4/personal_access_tokens/self', { token: res.body.token });
      assert.equal(self.status, 200);
      assert.equal(self.body.user_id, target.user.id);
      const mine = await t.get('/api/v4/personal_access_tokens', { token: res.body.token });
      assert.deepEqual(mine.body.map((x: any) => x.name), ['test']);

      const list = await t.get(url, { token: admin.token });
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.map((x: any) => x.id), [res.body.id]);
      assert.equal(list.body[0].token, undefined);
      assert.equal((await t.get(`${url}?state=inactive`, { token: admin.token })).body.length, 0);
      assert.equal((await t.get(`${url}?state=active`, { token: admin.token })).body.length, 1);
      assert.equal((await t.get(`${url}?state=bogus`, { token: admin.token })).status, 400);

      const one = await t.get(`${url}/${res.body.id}`, { token: admin.token });
      assert.equal(one.status, 200);
      assert.equal(one.body.impersonation, true);
      // A personal token of the user is not an impersonation token.
      const personal = await t.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', target.user.id).where('impersonation', '=', false).executeTakeFirstOrThrow();
      const notImp = await t.get(`${url}/${personal.id}`, { token: admin.token });
      assert.equal(notImp.status, 404);
      assert.deepEqual(notImp.body, { message: '404 Impersonation Token Not Found' });

      assert.equal((await t.delete(`${url}/${res.body.id}`, { token: admin.token })).status, 204);
      assert.equal((await t.get('/api/v4/version', { token: res.body.token })).status, 401);
      const inactive = await t.get(`${url}?state=inactive`, { token: admin.token });
      assert.deepEqual(inactive.body.map((x: any) => x.revoked), [true]);
    });

    it('validation errors use the model form; unknown user is 404', async () => {
      const url = `/api/v4/users/${bob.user.id}/impersonation_tokens`;
      const noScopes = await t.post(url, { name: 'n' }, { token: admin.token });
      assert.equal(noScopes.status, 400);
      assert.deepEqual(noScopes.body, { message: { scopes: ["can't be blank"] } });
      const badScopes = await t.post(url, { name: 'n', scopes: ['root'] }, { token: admin.token });
      assert.deepEqual(badScopes.body, { message: { scopes: ['can only contain available scopes'] } });
      assert.deepEqual((await t.post(url, { scopes: ['api'] }, { token: admin.token })).body, { error: 'name is missing' });
      const unknown = await t.get('/api/v4/users/999999/impersonation_tokens', { token: admin.token });
      assert.equal(unknown.status, 404);
      assert.deepEqual(unknown.body, { message: '404 User Not Found' });
    });
  });

  it('the credential of an impersonation token is marked as such', async () => {
    const target = await t.createUser();
    const { token } = await tokenFor(target, { impersonation: true });
    const cred = await resolveCredential(t.app.cairn, 'private', token);
    assert.equal(cred?.kind, 'impersonation_token');
    assert.equal(cred?.user.id, target.user.id);
    const plain = await resolveCredential(t.app.cairn, 'private', target.token);
    assert.equal(plain?.kind, 'personal_access_token');
  });
});
