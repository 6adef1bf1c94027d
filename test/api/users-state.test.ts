import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { banUser, unblockUser } from '../../src/services/user-moderation.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

describe('users: current user, moderation, status, following', () => {
  let t: TestContext;
  let alice: TestUser;
  let bob: TestUser;
  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    bob = await t.createUser();
  });
  after(async () => { await t.close(); });

  const state = async (id: number) => (await t.db.selectFrom('users').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state;

  describe('GET /user', () => {
    it('self form for users, admin form for admins, 401 anonymous', async () => {
      const me = await t.get('/api/v4/user', { token: alice.token });
      assert.equal(me.status, 200);
      assert.equal(me.body.id, alice.user.id);
      assert.equal(me.body.email, alice.user.email);
      assert.equal(me.body.is_admin, undefined);
      assert.equal(typeof me.body.can_create_project, 'boolean');
      const root = await t.get('/api/v4/user');
      assert.equal(root.body.username, 'root');
      assert.equal(root.body.is_admin, true);
      assert.equal((await t.get('/api/v4/user', { token: null })).status, 401);
    });

    it('a read_user token may read user endpoints but nothing else, and not write', async () => {
      const reader = await t.createUser({ scopes: ['read_user'] });
      assert.equal((await t.get('/api/v4/user', { token: reader.token })).status, 200);
      assert.equal((await t.get('/api/v4/users', { token: reader.token })).status, 200);
      assert.equal((await t.get(`/api/v4/users/${alice.user.id}`, { token: reader.token })).status, 200);
      assert.equal((await t.get('/api/v4/user/status', { token: reader.token })).status, 200);
      const write = await t.put('/api/v4/user/status', { message: 'hi' }, { token: reader.token });
      assert.equal(write.status, 403);
      assert.equal(write.body.error, 'insufficient_scope');
      assert.equal((await t.get('/api/v4/version', { token: reader.token })).status, 403);
    });

    it('read_api tokens read but cannot write', async () => {
      const reader = await t.createUser({ scopes: ['read_api'] });
      assert.equal((await t.get('/api/v4/user', { token: reader.token })).status, 200);
      assert.equal((await t.post(`/api/v4/users/${alice.user.id}/follow`, {}, { token: reader.token })).status, 403);
    });

    it('admins act as another user with sudo (header or parameter)', async () => {
      const asAlice = await t.get('/api/v4/user', { headers: { sudo: String(alice.user.id) } });
      assert.equal(asAlice.status, 200);
      assert.equal(asAlice.body.id, alice.user.id);
      assert.equal(asAlice.body.is_admin, undefined);
      const byName = await t.get(`/api/v4/user?sudo=${alice.user.username}`);
      assert.equal(byName.body.id, alice.user.id);
      const notAdmin = await t.get(`/api/v4/user?sudo=${bob.user.id}`, { token: alice.token });
      assert.equal(notAdmin.status, 403);
      assert.deepEqual(notAdmin.body, { message: '403 Forbidden - Must be admin to use sudo' });
      const missing = await t.get('/api/v4/user?sudo=999999');
      assert.equal(missing.status, 404);
      // Writes under sudo are made as that user.
      const set = await t.put('/api/v4/user/status', { message: 'as alice' }, { headers: { sudo: String(alice.user.id) } });
      assert.equal(set.status, 200);
      assert.equal((await t.get(`/api/v4/users/${alice.user.id}/status`, { token: null })).body.message, 'as alice');
      await t.put('/api/v4/user/status', {}, { token: alice.token });
    });

    it('blocked users cannot use the API', async () => {
      const blocked = await t.createUser({ state: 'blocked' });
      assert.equal((await t.get('/api/v4/user', { token: blocked.token })).status, 401);
      assert.equal((await t.get('/api/v4/users', { token: blocked.token })).status, 401);
    });
  });

  describe('moderation', () => {
    it('block / unblock', async () => {
      const u = await t.createUser();
      assert.equal((await t.post(`/api/v4/users/${u.user.id}/block`, {}, { token: alice.token })).status, 403);
      const res = await t.post(`/api/v4/users/${u.user.id}/block`);
      assert.equal(res.status, 201);
      assert.equal(res.body, true);
      assert.equal(await state(u.user.id), 'blocked');
      assert.equal((await t.get('/api/v4/user', { token: u.token })).status, 401);
      const again = await t.post(`/api/v4/users/${u.user.id}/block`);
      assert.equal(again.status, 201);
      assert.equal(again.body, null);
      const un = await t.post(`/api/v4/users/${u.user.id}/unblock`);
      assert.equal(un.status, 201);
      assert.equal(un.body, true);
      assert.equal(await state(u.user.id), 'active');
      const noop = await t.post(`/api/v4/users/${u.user.id}/unblock`);
      assert.equal(noop.status, 201);
      assert.equal(noop.body, false);
      const root = (await t.get('/api/v4/user')).body;
      const self = await t.post(`/api/v4/users/${root.id}/block`);
      assert.equal(self.status, 403);
      assert.deepEqual(self.body, { message: '403 Forbidden - The API initiating user cannot be blocked by the API' });
      const ldap = await t.createUser({ state: 'ldap_blocked' });
      assert.deepEqual((await t.post(`/api/v4/users/${ldap.user.id}/block`)).body, { message: '403 Forbidden - LDAP blocked users cannot be modified by the API' });
      assert.deepEqual((await t.post(`/api/v4/users/${ldap.user.id}/unblock`)).body, { message: '403 Forbidden - LDAP blocked users cannot be unblocked by the API' });
      assert.equal((await t.post('/api/v4/users/999999/block')).status, 404);
    });

    it('deactivate / activate', async () => {
      const u = await t.createUser();
      const res = await t.post(`/api/v4/users/${u.user.id}/deactivate`);
      assert.equal(res.status, 201);
      assert.equal(res.body, true);
      assert.equal(await state(u.user.id), 'deactivated');
      const denied = await t.get('/api/v4/user', { token: u.token });
      assert.equal(denied.status, 403);
      assert.equal((await t.post(`/api/v4/users/${u.user.id}/deactivate`)).body, null);
      const unblock = await t.post(`/api/v4/users/${u.user.id}/unblock`);
      assert.deepEqual(unblock.body, { message: '403 Forbidden - Deactivated users cannot be unblocked by the API' });
      const act = await t.post(`/api/v4/users/${u.user.id}/activate`);
      assert.equal(act.status, 201);
      assert.equal(act.body, true);
      assert.equal(await state(u.user.id), 'active');

      const recent = await t.createUser({ last_activity_on: new Date().toISOString().slice(0, 10) });
      const busy = await t.post(`/api/v4/users/${recent.user.id}/deactivate`);
      assert.equal(busy.status, 403);
      assert.deepEqual(busy.body, { message: 'The user you are trying to deactivate has been active in the past 90 days and cannot be deactivated' });

      const blocked = await t.createUser({ state: 'blocked' });
      const b = await t.post(`/api/v4/users/${blocked.user.id}/deactivate`);
      assert.equal(b.status, 403);
      assert.deepEqual(b.body, { message: 'Error occurred. A blocked user cannot be deactivated' });
      const a = await t.post(`/api/v4/users/${blocked.user.id}/activate`);
      assert.deepEqual(a.body, { message: 'Error occurred. A blocked user must be unblocked to be activated' });
      assert.equal((await t.post(`/api/v4/users/${u.user.id}/deactivate`, {}, { token: alice.token })).status, 403);
    });

    it('ban / unban', async () => {
      const u = await t.createUser();
      const res = await t.post(`/api/v4/users/${u.user.id}/ban`);
      assert.equal(res.status, 201);
      assert.equal(res.body, true);
      assert.equal(await state(u.user.id), 'banned');
      const again = await t.post(`/api/v4/users/${u.user.id}/ban`);
      assert.equal(again.status, 403);
      assert.deepEqual(again.body, { message: 'You cannot ban banned users.' });
      assert.equal((await t.post(`/api/v4/users/${u.user.id}/unban`)).body, true);
      assert.equal(await state(u.user.id), 'active');
      assert.deepEqual((await t.post(`/api/v4/users/${u.user.id}/unban`)).body, { message: 'You cannot unban active users.' });
    });

    it('state changes are guarded: a decision taken on a stale row is taken again on the fresh one', async () => {
      // What two racing requests see: both loaded the user before either changed it.
      const target = await t.createUser();
      const stale = await t.db.selectFrom('users').selectAll().where('id', '=', target.user.id).executeTakeFirstOrThrow();
      assert.equal((await t.post(`/api/v4/users/${target.user.id}/ban`, {})).status, 201);
      await assert.rejects(banUser(t.db, stale), (err: any) => err.status === 403 && /You cannot ban banned users/.test(JSON.stringify(err.body)));
      assert.equal(await state(target.user.id), 'banned');
      // Unblocking a user someone else already unblocked changes nothing and says so.
      assert.equal((await t.post(`/api/v4/users/${target.user.id}/block`, {})).status, 201);
      const blocked = await t.db.selectFrom('users').selectAll().where('id', '=', target.user.id).executeTakeFirstOrThrow();
      assert.equal((await t.post(`/api/v4/users/${target.user.id}/unblock`, {})).status, 201);
      const updatedAt = (await t.db.selectFrom('users').select('updated_at').where('id', '=', target.user.id).executeTakeFirstOrThrow()).updated_at;
      assert.equal(await unblockUser(t.db, blocked), false);
      assert.equal(await state(target.user.id), 'active');
      assert.deepEqual((await t.db.selectFrom('users').select('updated_at').where('id', '=', target.user.id).executeTakeFirstOrThrow()).updated_at, updatedAt);
    });

    it('approve / reject pending users', async () => {
      const p = await t.createUser({ state: 'blocked_pending_approval' });
      const denied = await t.post(`/api/v4/users/${p.user.id}/approve`, {}, { token: alice.token });
      assert.equal(denied.status, 403);
      assert.deepEqual(denied.body, { message: 'You are not allowed to approve a user' });
      const ok = await t.post(`/api/v4/users/${p.user.id}/approve`);
      assert.equal(ok.status, 201);
      assert.deepEqual(ok.body, { message: 'Success' });
      assert.equal(await state(p.user.id), 'active');
      const not = await t.post(`/api/v4/users/${p.user.id}/approve`);
      assert.equal(not.status, 409);
      assert.deepEqual(not.body, { message: 'The user you are trying to approve is not pending approval' });

      const q = await t.createUser({ state: 'blocked_pending_approval' });
      assert.equal((await t.post(`/api/v4/users/${q.user.id}/reject`, {}, { token: alice.token })).status, 403);
      const rej = await t.post(`/api/v4/users/${q.user.id}/reject`);
      assert.equal(rej.status, 200);
      assert.deepEqual(rej.body, { message: 'Success' });
      assert.equal((await t.get(`/api/v4/users/${q.user.id}`)).status, 404);
      const notPending = await t.post(`/api/v4/users/${alice.user.id}/reject`);
      assert.equal(notPending.status, 409);
      assert.deepEqual(notPending.body, { message: 'User does not have a pending request' });
      assert.equal((await t.post('/api/v4/users/999999/approve')).status, 404);
      assert.equal((await t.post(`/api/v4/users/${alice.user.id}/approve`, {}, { token: null })).status, 401);
    });
  });

  describe('status', () => {
    it('set, read (also anonymously, by id or username) and clear', async () => {
      const u = await t.createUser();
      const empty = await t.get('/api/v4/user/status', { token: u.token });
      assert.deepEqual(empty.body, { emoji: null, availability: null, message: null, message_html: '', clear_status_at: null });
      const set = await t.put('/api/v4/user/status', { message: 'On leave <b>now</b> :palm_tree: :nosuchemoji:' }, { token: u.token });
      assert.equal(set.status, 200);
      assert.equal(set.body.emoji, 'speech_balloon');
      assert.equal(set.body.availability, 'not_set');
      assert.equal(set.body.clear_status_at, null);
      assert.equal(
        set.body.message_html,
        'On leave &lt;b&gt;now&lt;/b&gt; <gl-emoji title="palm tree" data-name="palm_tree" data-unicode-version="6.0">\u{1F334}</gl-emoji> :nosuchemoji:',
      );
      const pub = await t.get(`/api/v4/users/${u.user.username}/status`, { token: null });
      assert.equal(pub.status, 200);
      assert.equal(pub.body.message, 'On leave <b>now</b> :palm_tree: :nosuchemoji:');
      assert.equal((await t.get(`/api/v4/users/${u.user.id}/status`, { token: null })).body.emoji, 'speech_balloon');
      assert.equal((await t.get('/api/v4/users/nosuchuser/status', { token: null })).status, 404);
      const cleared = await t.put('/api/v4/user/status', { emoji: '', message: '' }, { token: u.token });
      assert.equal(cleared.status, 200);
      assert.equal(cleared.body.message, null);
      assert.equal((await t.get('/api/v4/user/status', { token: u.token })).body.emoji, null);
    });

    it('clear_status_after sets an expiry; omitting it clears the expiry; expired reads as none', async () => {
      const u = await t.createUser();
      const res = await t.put('/api/v4/user/status', { emoji: 'coffee', message: 'brb', clear_status_after: '30_minutes', availability: 'busy' }, { token: u.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.availability, 'busy');
      const at = new Date(res.body.clear_status_at).getTime();
      assert.ok(Math.abs(at - (Date.now() + 30 * 60_000)) < 60_000);
      const again = await t.put('/api/v4/user/status', { emoji: 'coffee', message: 'still' }, { token: u.token });
      assert.equal(again.body.clear_status_at, null);
      assert.equal(again.body.availability, 'busy');
      await t.db.updateTable('user_statuses').set({ clear_status_at: new Date(Date.now() - 1000) }).where('user_id', '=', u.user.id).execute();
      const expired = await t.get(`/api/v4/users/${u.user.id}/status`);
      assert.equal(expired.body.message, null);
      assert.equal(expired.body.emoji, null);
    });

    it('validates clear_status_after, emoji, message length and availability; needs auth', async () => {
      const bad = await t.put('/api/v4/user/status', { message: 'x', clear_status_after: '2_hours' }, { token: alice.token });
      assert.equal(bad.status, 400);
      assert.match(bad.body.error, /clear_status_after does not have a valid value/);
      const long = await t.put('/api/v4/user/status', { message: 'x'.repeat(101) }, { token: alice.token });
      assert.deepEqual(long.body, { message: { message: ['is too long (maximum is 100 characters)'] } });
      const emoji = await t.put('/api/v4/user/status', { emoji: 'Not An Emoji' }, { token: alice.token });
      assert.equal(emoji.status, 400);
      const avail = await t.put('/api/v4/user/status', { availability: 'away' }, { token: alice.token });
      assert.equal(avail.status, 400);
      assert.equal((await t.put('/api/v4/user/status', { message: 'x' }, { token: null })).status, 401);
      assert.equal((await t.get('/api/v4/user/status', { token: null })).status, 401);
    });

    it('PATCH changes only what is given', async () => {
      const u = await t.createUser();
      await t.put('/api/v4/user/status', { emoji: 'coffee', message: 'first' }, { token: u.token });
      const res = await t.call('PATCH', '/api/v4/user/status', { token: u.token, body: { message: 'second' } });
      assert.equal(res.status, 200);
      assert.equal(res.body.emoji, 'coffee');
      assert.equal(res.body.message, 'second');
    });
  });

  describe('following', () => {
    it('follow, unfollow, lists and counts', async () => {
      const a = await t.createUser();
      const b = await t.createUser();
      const res = await t.post(`/api/v4/users/${b.user.id}/follow`, {}, { token: a.token });
      assert.equal(res.status, 201);
      assert.equal(res.body.id, b.user.id);
      assert.equal((await t.post(`/api/v4/users/${b.user.id}/follow`, {}, { token: a.token })).status, 304);
      const followers = await t.get(`/api/v4/users/${b.user.id}/followers`, { token: alice.token });
      assert.deepEqual(followers.body.map((u: any) => u.id), [a.user.id]);
      assert.equal(followers.headers['x-total'], '1');
      const following = await t.get(`/api/v4/users/${a.user.id}/following`, { token: alice.token });
      assert.deepEqual(following.body.map((u: any) => u.id), [b.user.id]);
      const shown = await t.get(`/api/v4/users/${b.user.id}`, { token: a.token });
      assert.equal(shown.body.followers, 1);
      assert.equal(shown.body.following, 0);
      assert.equal(shown.body.is_followed, true);
      assert.equal((await t.get(`/api/v4/users/${a.user.id}`, { token: b.token })).body.following, 1);
      assert.equal((await t.get(`/api/v4/users/${a.user.id}`, { token: b.token })).body.is_followed, false);
      assert.equal((await t.get('/api/v4/user', { token: b.token })).body.followers, 1);
      const un = await t.post(`/api/v4/users/${b.user.id}/unfollow`, {}, { token: a.token });
      assert.equal(un.status, 201);
      assert.equal((await t.post(`/api/v4/users/${b.user.id}/unfollow`, {}, { token: a.token })).status, 304);
      assert.equal((await t.get(`/api/v4/users/${b.user.id}`, { token: a.token })).body.followers, 0);
    });

    it('permissions: anonymous cannot follow (401) or list (403); unknown user 404', async () => {
      assert.equal((await t.post(`/api/v4/users/${bob.user.id}/follow`, {}, { token: null })).status, 401);
      assert.equal((await t.get(`/api/v4/users/${bob.user.id}/followers`, { token: null })).status, 403);
      assert.equal((await t.post('/api/v4/users/999999/follow', {}, { token: alice.token })).status, 404);
      assert.equal((await t.get('/api/v4/users/999999/following', { token: alice.token })).status, 404);
      assert.equal((await t.post(`/api/v4/users/${alice.user.id}/follow`, {}, { token: alice.token })).status, 304);
    });

    it('deleting a user removes their follows from the counts', async () => {
      const a = await t.createUser();
      const b = await t.createUser();
      await t.post(`/api/v4/users/${b.user.id}/follow`, {}, { token: a.token });
      await t.delete(`/api/v4/users/${a.user.id}`);
      assert.equal((await t.get(`/api/v4/users/${b.user.id}`, { token: alice.token })).body.followers, 0);
    });
  });
});
