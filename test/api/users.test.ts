import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

describe('users: list, show, create, update, delete', () => {
  let t: TestContext;
  let alice: TestUser;
  let bob: TestUser;
  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ name: 'Alice Liddell', username: t.unique('alice'), public_email: null });
    bob = await t.createUser({ name: 'Bob Builder', username: t.unique('bob'), external: true });
    await t.db.updateTable('users').set({ public_email: bob.user.email }).where('id', '=', bob.user.id).execute();
  });
  after(async () => { await t.close(); });

  describe('GET /users', () => {
    it('anonymous callers need a username', async () => {
      const res = await t.get('/api/v4/users', { token: null });
      assert.equal(res.status, 403);
      assert.deepEqual(res.body, { message: '403 Forbidden - Not authorized to access /api/v4/users' });
      const one = await t.get(`/api/v4/users?username=${alice.user.username.toUpperCase()}`, { token: null });
      assert.equal(one.status, 200);
      assert.equal(one.body.length, 1);
      assert.equal(one.body[0].id, alice.user.id);
      assert.equal(one.body[0].email, undefined);
    });

    it('non-admins get the public form, admins the admin form, paginated', async () => {
      const plain = await t.get('/api/v4/users?per_page=2', { token: alice.token });
      assert.equal(plain.status, 200);
      assert.equal(plain.body.length, 2);
      assert.deepEqual(Object.keys(plain.body[0]).sort(), ['avatar_url', 'id', 'locked', 'name', 'state', 'username', 'web_url']);
      assert.ok(Number(plain.headers['x-total']) >= 3);
      assert.equal(plain.headers['x-per-page'], '2');
      assert.match(plain.headers.link, /rel="next"/);
      // Newest first by default.
      assert.ok(plain.body[0].id > plain.body[1].id);
      const adm = await t.get('/api/v4/users');
      assert.equal(adm.status, 200);
      const a = adm.body.find((u: any) => u.id === alice.user.id);
      assert.equal(a.email, alice.user.email);
      assert.equal(a.is_admin, false);
      assert.deepEqual(a.identities, []);
    });

    it('search matches name, username and exact public email', async () => {
      const byName = await t.get('/api/v4/users?search=liddell', { token: bob.token });
      assert.deepEqual(byName.body.map((u: any) => u.id), [alice.user.id]);
      const byUser = await t.get(`/api/v4/users?search=${bob.user.username.slice(0, 5)}`, { token: alice.token });
      assert.ok(byUser.body.some((u: any) => u.id === bob.user.id));
      const byEmail = await t.get(`/api/v4/users?search=${encodeURIComponent(bob.user.email.toUpperCase())}`, { token: alice.token });
      assert.deepEqual(byEmail.body.map((u: any) => u.id), [bob.user.id]);
      // Alice's email is private: non-admins cannot find her by it, admins can.
      assert.deepEqual((await t.get(`/api/v4/users?search=${encodeURIComponent(alice.user.email)}`, { token: bob.token })).body, []);
      assert.deepEqual((await t.get(`/api/v4/users?search=${encodeURIComponent(alice.user.email)}`)).body.map((u: any) => u.id), [alice.user.id]);
    });

    it('state and type filters', async () => {
      const blocked = await t.createUser({ state: 'blocked' });
      const list = async (q: string, token?: string) => (await t.get(`/api/v4/users?per_page=100&${q}`, { token })).body.map((u: any) => u.id);
      assert.ok((await list('blocked=true')).includes(blocked.user.id));
      assert.ok(!(await list('blocked=true')).includes(alice.user.id));
      assert.ok(!(await list('active=true')).includes(blocked.user.id));
      assert.ok((await list('active=true')).includes(alice.user.id));
      assert.deepEqual(await list('external=true', alice.token), [bob.user.id]);
      assert.ok(!(await list('exclude_external=true')).includes(bob.user.id));
      const bot = await t.createUser({ user_type: 'support_bot' });
      assert.ok((await list('')).includes(bot.user.id));
      assert.ok(!(await list('exclude_internal=true')).includes(bot.user.id));
    });

    it('non-admins do not see banned or pending users', async () => {
      const banned = await t.createUser({ state: 'banned' });
      const pending = await t.createUser({ state: 'blocked_pending_approval' });
      const ids = (await t.get('/api/v4/users?per_page=100', { token: alice.token })).body.map((u: any) => u.id);
      assert.ok(!ids.includes(banned.user.id) && !ids.includes(pending.user.id));
      const all = (await t.get('/api/v4/users?per_page=100')).body.map((u: any) => u.id);
      assert.ok(all.includes(banned.user.id) && all.includes(pending.user.id));
    });

    it('created_before / created_after filter inclusively for every caller (the contract lists them outside the admin-only ones); bad dates are 400', async () => {
      await t.db.updateTable('users').set({ created_at: new Date('2001-01-01T00:00:00Z') }).where('id', '=', alice.user.id).execute();
      const old = await t.get('/api/v4/users?created_before=2002-01-01T00:00:00Z');
      assert.deepEqual(old.body.map((u: any) => u.id), [alice.user.id]);
      const recent = await t.get('/api/v4/users?created_after=2002-01-01&per_page=100');
      assert.ok(!recent.body.some((u: any) => u.id === alice.user.id));
      // Both bounds include the instant itself.
      const exact = await t.get('/api/v4/users?created_before=2001-01-01T00:00:00Z&created_after=2001-01-01T00:00:00Z');
      assert.deepEqual(exact.body.map((u: any) => u.id), [alice.user.id]);
      const nonAdmin = await t.get('/api/v4/users?created_before=2002-01-01T00:00:00Z&per_page=100', { token: bob.token });
      assert.deepEqual(nonAdmin.body.map((u: any) => u.id), [alice.user.id]);
      assert.equal(nonAdmin.body[0].email, undefined);
      const bad = await t.get('/api/v4/users?created_before=notadate');
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, { error: 'created_before is invalid' });
    });

    it('order_by and sort (admin only), with validation', async () => {
      const byName = await t.get('/api/v4/users?order_by=name&sort=asc&per_page=100');
      const names = byName.body.map((u: any) => u.name);
      assert.deepEqual(names, [...names].sort((a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)));
      const ignored = await t.get('/api/v4/users?order_by=name&sort=asc&per_page=100', { token: alice.token });
      const ids = ignored.body.map((u: any) => u.id);
      assert.deepEqual(ids, [...ids].sort((a: number, b: number) => b - a));
      const bad = await t.get('/api/v4/users?order_by=email');
      assert.equal(bad.status, 400);
      assert.match(bad.body.error, /order_by does not have a valid value/);
    });

    it('admins, two_factor, without_projects filters', async () => {
      const adminIds = (await t.get('/api/v4/users?admins=true')).body.map((u: any) => u.id);
      assert.ok(adminIds.length >= 1 && !adminIds.includes(alice.user.id));
      // admins=true from a non-admin is ignored.
      assert.ok((await t.get('/api/v4/users?admins=true&per_page=100', { token: alice.token })).body.some((u: any) => u.id === alice.user.id));
      const tfa = await t.createUser({ two_factor_enabled: true });
      assert.deepEqual((await t.get('/api/v4/users?two_factor=enabled')).body.map((u: any) => u.id), [tfa.user.id]);
      assert.ok(!(await t.get('/api/v4/users?two_factor=disabled&per_page=100')).body.some((u: any) => u.id === tfa.user.id));
      await t.createProject({ owner: bob.user });
      const noProjects = (await t.get('/api/v4/users?without_projects=true&per_page=100')).body.map((u: any) => u.id);
      assert.ok(noProjects.includes(alice.user.id));
      assert.ok(!noProjects.includes(bob.user.id));
    });

    it('extern_uid with provider is an admin lookup', async () => {
      await t.put(`/api/v4/users/${alice.user.id}`, { extern_uid: 'CN=Alice', provider: 'ldapmain' });
      const res = await t.get('/api/v4/users?extern_uid=cn%3Dalice&provider=ldapmain');
      assert.deepEqual(res.body.map((u: any) => u.id), [alice.user.id]);
      assert.equal((await t.get('/api/v4/users?extern_uid=x&provider=ldapmain', { token: alice.token })).status, 403);
      assert.equal((await t.get('/api/v4/users?extern_uid=x&provider=ldapmain', { token: null })).status, 401);
    });

    it('custom_attributes filter and with_custom_attributes', async () => {
      assert.equal((await t.put(`/api/v4/users/${bob.user.id}/custom_attributes/team`, { value: 'red' })).status, 200);
      const res = await t.get('/api/v4/users?custom_attributes[team]=red&with_custom_attributes=true');
      assert.equal(res.body.length, 1);
      assert.equal(res.body[0].id, bob.user.id);
      assert.deepEqual(res.body[0].custom_attributes, [{ key: 'team', value: 'red' }]);
      assert.deepEqual((await t.get('/api/v4/users?custom_attributes[team]=blue')).body, []);
      // Non-admins: the filter and the attributes are not theirs.
      const plain = await t.get('/api/v4/users?custom_attributes[team]=blue&with_custom_attributes=true&per_page=100', { token: alice.token });
      assert.ok(plain.body.length > 1);
      assert.equal(plain.body[0].custom_attributes, undefined);
    });
  });

  describe('GET /users/:id', () => {
    it('public single form for users, admin form for admins, 404 unknown, 403 anonymous', async () => {
      const res = await t.get(`/api/v4/users/${bob.user.id}`, { token: alice.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.username, bob.user.username);
      assert.equal(res.body.public_email, bob.user.email);
      assert.equal(res.body.followers, 0);
      assert.equal(res.body.email, undefined);
      assert.equal(res.body.is_admin, undefined);
      const adm = await t.get(`/api/v4/users/${bob.user.id}`);
      assert.equal(adm.body.email, bob.user.email);
      assert.equal(adm.body.external, true);
      assert.equal(typeof adm.body.namespace_id, 'number');
      const missing = await t.get('/api/v4/users/999999');
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 User Not Found' });
      const anon = await t.get(`/api/v4/users/${bob.user.id}`, { token: null });
      assert.equal(anon.status, 403);
    });

    it('private profiles hide their details from others but not from admins', async () => {
      const priv = await t.createUser({ private_profile: true, bio: 'secret bio', location: 'Hidden' });
      const res = await t.get(`/api/v4/users/${priv.user.id}`, { token: alice.token });
      assert.equal(res.body.bio, '');
      assert.equal(res.body.location, '');
      const adm = await t.get(`/api/v4/users/${priv.user.id}`);
      assert.equal(adm.body.bio, 'secret bio');
      assert.equal(adm.body.private_profile, true);
      assert.equal((await t.get(`/api/v4/users/${priv.user.id}/followers`, { token: alice.token })).status, 404);
      assert.equal((await t.get(`/api/v4/users/${priv.user.id}/followers`, { token: priv.token })).status, 200);
    });

    it('with_custom_attributes for admins', async () => {
      await t.put(`/api/v4/users/${alice.user.id}/custom_attributes/level`, { value: '3' });
      const res = await t.get(`/api/v4/users/${alice.user.id}?with_custom_attributes=true`);
      assert.deepEqual(res.body.custom_attributes, [{ key: 'level', value: '3' }]);
      const plain = await t.get(`/api/v4/users/${alice.user.id}?with_custom_attributes=true`, { token: bob.token });
      assert.equal(plain.body.custom_attributes, undefined);
    });
  });

  describe('POST /users', () => {
    it('creates a user with a personal namespace, in the admin form', async () => {
      const username = t.unique('new');
      const res = await t.post('/api/v4/users', {
        email: `${username}@example.org`, name: 'New Person', username, password: 'secret-pass-1',
        bio: 'hello', projects_limit: 5, can_create_group: false, external: true, skip_confirmation: true, note: 'vip',
        extern_uid: 'uid-1', provider: 'github', private_profile: null, twitter: 'np', linkedin: 'np', skype: 'np',
        website_url: 'https://np.example', organization: 'Org', location: 'Here', theme_id: 2, color_scheme_id: 3, view_diffs_file_by_file: true,
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.username, username);
      assert.equal(res.body.email, `${username}@example.org`);
      assert.equal(res.body.bio, 'hello');
      assert.equal(res.body.projects_limit, 5);
      assert.equal(res.body.can_create_group, false);
      assert.equal(res.body.external, true);
      assert.equal(res.body.private_profile, false);
      assert.equal(res.body.note, 'vip');
      assert.equal(res.body.theme_id, 2);
      assert.equal(res.body.color_scheme_id, 3);
      assert.ok(res.body.confirmed_at);
      assert.deepEqual(res.body.identities, [{ provider: 'github', extern_uid: 'uid-1', saml_provider_id: null }]);
      const ns = await t.db.selectFrom('namespaces').selectAll().where('owner_id', '=', res.body.id).executeTakeFirst();
      assert.equal(ns?.path, username);
      assert.equal(res.body.namespace_id, ns?.id);
    });

    it('form-encoded bodies work too', async () => {
      const username = t.unique('form');
      const res = await t.call('POST', '/api/v4/users', { form: `email=${username}%40example.org&name=Form&username=${username}&force_random_password=true&admin=true` });
      assert.equal(res.status, 201);
      assert.equal(res.body.is_admin, true);
      assert.equal(res.body.confirmed_at, null);
    });

    it('requires email, name, username and a password choice', async () => {
      const res = await t.post('/api/v4/users', {});
      assert.equal(res.status, 400);
      assert.equal(res.body.error, 'email is missing, password, reset_password, force_random_password are missing, at least one parameter must be provided, name is missing, username is missing');
      const both = await t.post('/api/v4/users', { email: 'x@example.org', name: 'X', username: t.unique('x'), reset_password: false, force_random_password: false });
      assert.equal(both.status, 400);
      assert.deepEqual(both.body, { message: { password: ["can't be blank"] } });
      const half = await t.post('/api/v4/users', { email: 'y@example.org', name: 'Y', username: t.unique('y'), reset_password: true, provider: 'github' });
      assert.equal(half.status, 400);
      assert.equal(half.body.error, 'extern_uid, provider provide all or none of parameters');
    });

    it('password needs at least 8 characters; reset_password/force_random_password override it', async () => {
      const short = await t.post('/api/v4/users', { email: 'short@example.org', name: 'S', username: t.unique('s'), password: 'short' });
      assert.equal(short.status, 400);
      assert.deepEqual(short.body, { message: { password: ['is too short (minimum is 8 characters)'] } });
      const random = await t.post('/api/v4/users', { email: 'rnd@example.org', name: 'R', username: t.unique('r'), password: 'short', reset_password: true });
      assert.equal(random.status, 201);
    });

    it('duplicate email or username is 409 with GitLab messages', async () => {
      const dupEmail = await t.post('/api/v4/users', { email: alice.user.email.toUpperCase(), name: 'D', username: t.unique('d'), password: 'password123' });
      assert.equal(dupEmail.status, 409);
      assert.deepEqual(dupEmail.body, { message: 'Email has already been taken' });
      const dupName = await t.post('/api/v4/users', { email: 'fresh@example.org', name: 'D', username: alice.user.username.toUpperCase(), password: 'password123' });
      assert.equal(dupName.status, 409);
      assert.deepEqual(dupName.body, { message: 'Username has already been taken' });
    });

    it('usernames follow path rules; group paths are taken', async () => {
      const bad = await t.post('/api/v4/users', { email: 'bad@example.org', name: 'B', username: '-bad', password: 'password123' });
      assert.equal(bad.status, 400);
      assert.ok(bad.body.message.username);
      const reserved = await t.post('/api/v4/users', { email: 'res@example.org', name: 'B', username: 'admin', password: 'password123' });
      assert.equal(reserved.status, 400);
      assert.ok(reserved.body.message.username);
      const group = await t.createGroup();
      const clash = await t.post('/api/v4/users', { email: 'clash@example.org', name: 'B', username: group.path, password: 'password123' });
      assert.equal(clash.status, 400);
      assert.deepEqual(clash.body.message.username, ['has already been taken']);
      const email = await t.post('/api/v4/users', { email: 'not-an-email', name: 'B', username: t.unique('e'), password: 'password123' });
      assert.deepEqual(email.body, { message: { email: ['is invalid'] } });
    });

    it('is for admins only; read_api tokens cannot write', async () => {
      const body = { email: 'nope@example.org', name: 'N', username: t.unique('n'), password: 'password123' };
      assert.equal((await t.post('/api/v4/users', body, { token: null })).status, 401);
      assert.equal((await t.post('/api/v4/users', body, { token: alice.token })).status, 403);
      const reader = await t.createUser({ admin: true, scopes: ['read_api'] });
      const res = await t.post('/api/v4/users', body, { token: reader.token });
      assert.equal(res.status, 403);
      assert.equal(res.body.error, 'insufficient_scope');
    });
  });

  describe('PUT /users/:id', () => {
    it('updates attributes and renames the personal namespace', async () => {
      const u = await t.createUser();
      const username = t.unique('renamed');
      const res = await t.put(`/api/v4/users/${u.user.id}`, { username, name: 'Renamed', bio: 'b', location: 'L', projects_limit: 7, admin: true, external: true, private_profile: true, note: 'n' });
      assert.equal(res.status, 200);
      assert.equal(res.body.username, username);
      assert.equal(res.body.name, 'Renamed');
      assert.equal(res.body.is_admin, true);
      assert.equal(res.body.private_profile, true);
      assert.equal(res.body.projects_limit, 7);
      const ns = await t.db.selectFrom('namespaces').selectAll().where('owner_id', '=', u.user.id).executeTakeFirstOrThrow();
      assert.equal(ns.full_path, username);
      assert.equal(ns.name, 'Renamed');
    });

    it('public_email must be one of the user\'s emails', async () => {
      const u = await t.createUser();
      const bad = await t.put(`/api/v4/users/${u.user.id}`, { public_email: 'someone@else.org' });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, { message: { public_email: ['is not an email you own'] } });
      const ok = await t.put(`/api/v4/users/${u.user.id}`, { public_email: u.user.email });
      assert.equal(ok.status, 200);
      assert.equal(ok.body.public_email, u.user.email);
      const cleared = await t.put(`/api/v4/users/${u.user.id}`, { public_email: '' });
      assert.equal(cleared.body.public_email, null);
    });

    it('changing the primary email drops a public email no longer owned', async () => {
      const u = await t.createUser();
      await t.put(`/api/v4/users/${u.user.id}`, { public_email: u.user.email });
      const res = await t.put(`/api/v4/users/${u.user.id}`, { email: `changed-${u.user.email}`, skip_reconfirmation: true });
      assert.equal(res.status, 200);
      assert.equal(res.body.email, `changed-${u.user.email}`);
      assert.equal(res.body.public_email, null);
    });

    it('a password set by an admin for someone else expires at once', async () => {
      const u = await t.createUser();
      const res = await t.put(`/api/v4/users/${u.user.id}`, { password: 'new-password-1' });
      assert.equal(res.status, 200);
      const row = await t.db.selectFrom('users').select(['password_expires_at', 'encrypted_password']).where('id', '=', u.user.id).executeTakeFirstOrThrow();
      assert.ok(row.password_expires_at && new Date(row.password_expires_at).getTime() <= Date.now());
      assert.notEqual(row.encrypted_password, u.user.encrypted_password);
      const short = await t.put(`/api/v4/users/${u.user.id}`, { password: 'abc' });
      assert.equal(short.status, 400);
    });

    it('duplicate email or username is 404 (the spec\'s "user modification" row), unknown user 404, non-admin 403', async () => {
      const u = await t.createUser();
      const dup = await t.put(`/api/v4/users/${u.user.id}`, { email: alice.user.email.toUpperCase() });
      assert.equal(dup.status, 404);
      assert.deepEqual(dup.body, { message: 'Email has already been taken' });
      const dupName = await t.put(`/api/v4/users/${u.user.id}`, { username: alice.user.username });
      assert.equal(dupName.status, 404);
      assert.deepEqual(dupName.body, { message: 'Username has already been taken' });
      // Nothing was changed by the refused calls.
      const after = await t.get(`/api/v4/users/${u.user.id}`);
      assert.equal(after.body.email, u.user.email);
      assert.equal(after.body.username, u.user.username);
      // Keeping one's own email or username is no conflict.
      assert.equal((await t.put(`/api/v4/users/${u.user.id}`, { email: u.user.email, username: u.user.username })).status, 200);
      assert.equal((await t.put('/api/v4/users/999999', { name: 'x' })).status, 404);
      assert.equal((await t.put(`/api/v4/users/${u.user.id}`, { name: 'x' }, { token: u.token })).status, 403);
    });

    it('identities: set through PUT, removed by DELETE /users/:id/identities/:provider', async () => {
      const u = await t.createUser();
      const res = await t.put(`/api/v4/users/${u.user.id}`, { extern_uid: 'abc', provider: 'saml' });
      assert.deepEqual(res.body.identities, [{ provider: 'saml', extern_uid: 'abc', saml_provider_id: null }]);
      const again = await t.put(`/api/v4/users/${u.user.id}`, { extern_uid: 'def', provider: 'saml' });
      assert.deepEqual(again.body.identities.map((i: any) => i.extern_uid), ['def']);
      assert.equal((await t.delete(`/api/v4/users/${u.user.id}/identities/saml`, { token: alice.token })).status, 403);
      assert.equal((await t.delete(`/api/v4/users/${u.user.id}/identities/saml`)).status, 204);
      const gone = await t.delete(`/api/v4/users/${u.user.id}/identities/saml`);
      assert.equal(gone.status, 404);
      assert.deepEqual(gone.body, { message: '404 Identity Not Found' });
      assert.equal((await t.delete('/api/v4/users/999999/identities/saml')).status, 404);
    });
  });

  describe('custom attributes', () => {
    it('GET, PUT, DELETE for admins; 403 for others', async () => {
      const u = await t.createUser();
      const base = `/api/v4/users/${u.user.id}/custom_attributes`;
      assert.deepEqual((await t.get(base)).body, []);
      assert.deepEqual((await t.put(`${base}/color`, { value: 'blue' })).body, { key: 'color', value: 'blue' });
      assert.deepEqual((await t.put(`${base}/color`, { value: 'green' })).body, { key: 'color', value: 'green' });
      assert.deepEqual((await t.get(base)).body, [{ key: 'color', value: 'green' }]);
      assert.deepEqual((await t.get(`${base}/color`)).body, { key: 'color', value: 'green' });
      const missing = await t.get(`${base}/nope`);
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 Custom Attribute Not Found' });
      assert.equal((await t.put(`${base}/x`, {})).status, 400);
      assert.equal((await t.get(base, { token: u.token })).status, 403);
      assert.equal((await t.put(`${base}/x`, { value: 'y' }, { token: u.token })).status, 403);
      assert.equal((await t.delete(`${base}/color`)).status, 204);
      assert.equal((await t.delete(`${base}/color`)).status, 404);
    });
  });

  describe('DELETE /users/:id', () => {
    it('soft delete hands contributions to a lazily created ghost user', async () => {
      const u = await t.createUser();
      const group = await t.createGroup();
      await t.addMember(group, alice.user, 50);
      await t.addMember(group, u.user, 30);
      const project = await t.createProject({ group, owner: u.user });
      const personal = await t.createProject({ owner: u.user });
      assert.equal((await t.delete(`/api/v4/users/${u.user.id}`, { token: alice.token })).status, 403);
      const res = await t.delete(`/api/v4/users/${u.user.id}`);
      assert.equal(res.status, 204);
      assert.equal((await t.get(`/api/v4/users/${u.user.id}`)).status, 404);
      const ghost = await t.db.selectFrom('users').selectAll().where('user_type', '=', 'ghost').executeTakeFirstOrThrow();
      assert.equal(ghost.name, 'Ghost User');
      const moved = await t.db.selectFrom('projects').select('creator_id').where('id', '=', project.id).executeTakeFirstOrThrow();
      assert.equal(moved.creator_id, ghost.id);
      assert.equal(await t.db.selectFrom('projects').select('id').where('id', '=', personal.id).executeTakeFirst(), undefined);
      // A second deletion reuses the same ghost.
      const v = await t.createUser();
      await t.createProject({ group, owner: v.user });
      await t.delete(`/api/v4/users/${v.user.id}`);
      assert.equal((await t.db.selectFrom('users').select('id').where('user_type', '=', 'ghost').execute()).length, 1);
    });

    it('a sole group owner cannot be soft deleted (409); hard_delete removes the group', async () => {
      const u = await t.createUser();
      const group = await t.createGroup({ owner: u.user });
      await t.createProject({ group });
      const res = await t.delete(`/api/v4/users/${u.user.id}`);
      assert.equal(res.status, 409);
      assert.deepEqual(res.body, { message: 'User cannot be removed while is the sole-owner of a group' });
      // With a second owner the group no longer blocks.
      const shared = await t.createUser();
      const group2 = await t.createGroup({ owner: shared.user });
      await t.addMember(group2, alice.user, 50);
      assert.equal((await t.delete(`/api/v4/users/${shared.user.id}`)).status, 204);
      assert.ok(await t.db.selectFrom('namespaces').select('id').where('id', '=', group2.id).executeTakeFirst());

      assert.equal((await t.delete(`/api/v4/users/${u.user.id}?hard_delete=true`)).status, 204);
      assert.equal(await t.db.selectFrom('namespaces').select('id').where('id', '=', group.id).executeTakeFirst(), undefined);
    });

    it('as in GitLab, an administrator may delete their own account; the ghost is internal', async () => {
      const admin2 = await t.createUser({ admin: true });
      assert.equal((await t.delete(`/api/v4/users/${admin2.user.id}`, { token: admin2.token })).status, 204);
      assert.equal((await t.get('/api/v4/user', { token: admin2.token })).status, 401);
      const ghost = await t.db.selectFrom('users').select('id').where('user_type', '=', 'ghost').executeTakeFirstOrThrow();
      const ids = (await t.get('/api/v4/users?exclude_internal=true&per_page=100')).body.map((u: any) => u.id);
      assert.ok(!ids.includes(ghost.id));
    });

    it('unknown user is 404; anonymous 401', async () => {
      assert.equal((await t.delete('/api/v4/users/999999')).status, 404);
      assert.equal((await t.delete(`/api/v4/users/${alice.user.id}`, { token: null })).status, 401);
    });
  });
});
