import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { insertPersonalAccessToken } from '../../src/services/tokens.js';

/** Findings of the review of the merged areas, one block per fix. */
describe('review: merged areas', () => {
  let t: TestContext;
  let alice: TestUser;
  let sudoToken: string;
  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    const root = await t.db.selectFrom('users').select('id').where('username', '=', 'root').executeTakeFirstOrThrow();
    sudoToken = (await insertPersonalAccessToken(t.db, { userId: root.id, name: 'sudo', scopes: ['api', 'sudo'], expiresAt: null })).token;
  });
  after(async () => { await t.close(); });

  describe('ids beyond the integer range are 404, not 500', () => {
    it('in project, group and user paths', async () => {
      const big = '99999999999';
      for (const url of [
        `/api/v4/projects/${big}/members`,
        `/api/v4/projects/${big}/deploy_keys`,
        `/api/v4/groups/${big}/members`,
        `/api/v4/users/${big}/keys`,
        `/api/v4/users/${big}/keys/1`,
      ]) {
        const res = await t.get(url);
        assert.equal(res.status, 404, url);
      }
    });

    it('in sudo', async () => {
      const res = await t.get('/api/v4/user', { token: sudoToken, query: { sudo: '99999999999' } });
      assert.equal(res.status, 404);
      assert.match(res.body.message, /User with ID or username '99999999999' Not Found/);
    });
  });
  describe('banned users', () => {
    it('cannot use the API with their tokens, nor be the target of sudo', async () => {
      const banned = await t.createUser();
      assert.equal((await t.get('/api/v4/user', { token: banned.token })).status, 200);
      assert.equal((await t.post(`/api/v4/users/${banned.user.id}/ban`)).status, 201);
      assert.equal((await t.get('/api/v4/user', { token: banned.token })).status, 401);
      assert.equal((await t.post('/api/v4/user/keys', { title: 'x', key: 'ssh-ed25519 AAAA' }, { token: banned.token })).status, 401);
      assert.equal((await t.get('/api/v4/user', { token: sudoToken, query: { sudo: String(banned.user.id) } })).status, 401);
      assert.equal((await t.post(`/api/v4/users/${banned.user.id}/unban`)).status, 201);
      assert.equal((await t.get('/api/v4/user', { token: banned.token })).status, 200);
    });
  });
  describe('impersonation tokens belong to administrators', () => {
    it('the user can neither read, rotate nor revoke them through /personal_access_tokens/:id', async () => {
      const created = await t.post(`/api/v4/users/${alice.user.id}/impersonation_tokens`, { name: 'imp', scopes: ['api'] });
      assert.equal(created.status, 201);
      const id = created.body.id;
      assert.equal((await t.get(`/api/v4/personal_access_tokens/${id}`, { token: alice.token })).status, 401);
      assert.equal((await t.post(`/api/v4/personal_access_tokens/${id}/rotate`, {}, { token: alice.token })).status, 401);
      assert.equal((await t.delete(`/api/v4/personal_access_tokens/${id}`, { token: alice.token })).status, 400);
      const still = await t.get(`/api/v4/users/${alice.user.id}/impersonation_tokens/${id}`);
      assert.equal(still.body.revoked, false);
      assert.equal(still.body.active, true);
      // The administrator still may.
      assert.equal((await t.get(`/api/v4/personal_access_tokens/${id}`)).status, 200);
    });
  });
  describe('unbounded and malformed inputs', () => {
    it('a page far past the end is an empty page, not a database error', async () => {
      for (const url of ['/api/v4/users', '/api/v4/personal_access_tokens', `/api/v4/users/${alice.user.id}/keys`]) {
        const res = await t.get(url, { query: { page: '99999999999999999999', per_page: '99999999999' } });
        assert.equal(res.status, 200, url);
        assert.deepEqual(res.body, []);
        assert.equal(res.headers['x-per-page'], '100');
      }
    });

    it('a NUL byte in a parameter is a 400', async () => {
      const search = await t.get('/api/v4/users', { query: { search: 'a\u0000b' } });
      assert.equal(search.status, 400);
      assert.match(search.body.message, /Null bytes/);
      assert.equal((await t.get('/api/v4/personal_access_tokens', { query: { search: '\u0000' } })).status, 400);
      assert.equal((await t.get('/api/v4/users/a%00b/status')).status, 400);
      assert.equal((await t.put('/api/v4/user/status', { message: 'x\u0000' }, { token: alice.token })).status, 400);
      assert.equal((await t.call('POST', '/api/v4/user/keys', { form: 'title=a%00&key=b', token: alice.token })).status, 400);
    });
  });
  describe('members: ids beyond the integer range', () => {
    it('are 404 in paths, match nothing in filters, and are refused in bodies', async () => {
      const group = await t.createGroup({ owner: alice.user });
      const project = await t.createProject({ group });
      const big = '99999999999';
      for (const base of [`/api/v4/groups/${group.id}`, `/api/v4/projects/${project.id}`]) {
        assert.equal((await t.get(`${base}/members/${big}`)).status, 404);
        assert.equal((await t.get(`${base}/members/all/${big}`)).status, 404);
        assert.equal((await t.put(`${base}/members/${big}`, { access_level: 30 })).status, 404);
        assert.equal((await t.delete(`${base}/members/${big}`)).status, 404);
        assert.equal((await t.delete(`${base}/access_requests/${big}`)).status, 404);
        assert.equal((await t.put(`${base}/access_requests/${big}/approve`, {})).status, 404);
        assert.equal((await t.delete(`${base}/share/${big}`)).status, 404);
        const filtered = await t.get(`${base}/members`, { query: { 'user_ids[]': big } });
        assert.equal(filtered.status, 200);
        assert.deepEqual(filtered.body, []);
        const added = await t.post(`${base}/members`, { user_id: big, access_level: 30 });
        assert.equal(added.status, 404);
        assert.equal(added.body.message, '404 User Not Found');
        const many = await t.post(`${base}/members`, { user_id: `${big},${alice.user.id}`, access_level: 40 });
        assert.equal(many.status, 201);
        const shared = await t.post(`${base}/share`, { group_id: big, group_access: 30 });
        assert.equal(shared.status, 400);
      }
      assert.equal((await t.get(`/api/v4/groups/${group.id}/billable_members/${big}/memberships`)).status, 404);
    });
  });
  describe('very long strings into indexed columns', () => {
    // Random text does not compress, so it overflows a btree entry (about 2.7 kB) unless refused first.
    const huge = crypto.randomBytes(12000).toString('hex');

    it('custom attribute keys and values are at most 255 characters', async () => {
      const value = await t.put(`/api/v4/users/${alice.user.id}/custom_attributes/k`, { value: huge });
      assert.equal(value.status, 400);
      assert.deepEqual(value.body.message, { value: ['is too long (maximum is 255 characters)'] });
      const key = await t.put(`/api/v4/users/${alice.user.id}/custom_attributes/${huge.slice(0, 4000)}`, { value: 'v' });
      assert.equal(key.status, 400);
      assert.ok(key.body.message.key);
      assert.equal((await t.put(`/api/v4/users/${alice.user.id}/custom_attributes/k`, { value: 'x'.repeat(255) })).status, 200);
    });

    it('identity extern_uid and provider are at most 255 characters', async () => {
      const update = await t.put(`/api/v4/users/${alice.user.id}`, { extern_uid: huge, provider: 'ldapmain' });
      assert.equal(update.status, 400);
      assert.ok(update.body.message['identities.extern_uid']);
      const provider = await t.put(`/api/v4/users/${alice.user.id}`, { extern_uid: 'uid-1', provider: huge });
      assert.equal(provider.status, 400);
      const name = t.unique('long');
      const create = await t.post('/api/v4/users', { email: `${name}@example.com`, username: name, name, password: 'a-long-password-1', extern_uid: huge, provider: 'ldapmain' });
      assert.equal(create.status, 400);
      assert.ok(create.body.message['identities.extern_uid']);
    });
  });
  describe('values PostgreSQL refuses are a 400, not a 500', () => {
    const ed25519 = (last: string) => `ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJ${last}`;

    it('integers beyond the column range', async () => {
      for (const body of [{ theme_id: 99999999999 }, { color_scheme_id: 99999999999 }, { shared_runners_minutes_limit: 99999999999 }]) {
        const res = await t.put(`/api/v4/users/${alice.user.id}`, body);
        assert.equal(res.status, 400, JSON.stringify(body));
      }
      assert.equal((await t.get('/api/v4/users', { query: { saml_provider_id: '99999999999' } })).status, 400);
    });

    it('dates beyond the timestamp range', async () => {
      assert.equal((await t.post('/api/v4/user/keys', { title: 'far', key: ed25519('a'), expires_at: '275760-09-13' }, { token: alice.token })).status, 400);
      assert.equal((await t.get('/api/v4/personal_access_tokens', { query: { created_before: '99999-01-01' } })).status, 400);
      assert.equal((await t.get('/api/v4/users', { query: { created_after: '0000-01-01' } })).status, 400);
      assert.equal((await t.get('/api/v4/users', { query: { created_before: '+275760-09-13T00:00:00.000Z' } })).status, 400);
    });
  });
  describe('datetime parameters beyond year 9999', () => {
    it('are "<name> is invalid"', async () => {
      const key = await t.post('/api/v4/user/keys', { title: 'far', key: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJb', expires_at: '275760-09-13' }, { token: alice.token });
      assert.deepEqual(key.body, { error: 'expires_at is invalid' });
      assert.deepEqual((await t.get('/api/v4/personal_access_tokens', { query: { created_before: '99999-01-01' } })).body, { error: 'created_before is invalid' });
      assert.deepEqual((await t.get('/api/v4/users', { query: { created_after: '0000-01-01' } })).body, { error: 'created_after is invalid' });
    });
  });
});
