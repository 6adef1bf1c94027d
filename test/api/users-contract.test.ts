import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TSchema } from 'typebox';
import { Value } from 'typebox/value';
import {
  CustomAttributeSchema, UserAdminSchema, UserAdminWithCustomAttributesSchema, UserBasicSchema, UserBasicWithCustomAttributesSchema,
  UserSelfSchema, UserSingleSchema, UserStatusSchema, UserExtendedSchema,
} from '../../src/presenters/schemas/users.js';
import { presentUserExtended } from '../../src/presenters/users.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

/** Fails with the schema's complaints when a real response does not match its form exactly. */
function assertMatches(schema: TSchema, value: unknown, what: string) {
  const errors = [...Value.Errors(schema, value)].map((e) => `${e.instancePath || '/'} ${e.message}`);
  assert.deepEqual(errors, [], `${what}: ${errors.join('; ')}`);
}

describe('users: response forms match their schemas', () => {
  let t: TestContext;
  let user: TestUser;
  before(async () => {
    t = await createTestContext();
    user = await t.createUser({ bio: 'bio', job_title: 'Dev', organization: 'Org', last_activity_on: '2024-01-02' });
    await t.put(`/api/v4/users/${user.user.id}`, { extern_uid: 'x1', provider: 'github', public_email: user.user.email });
    await t.put(`/api/v4/users/${user.user.id}/custom_attributes/k`, { value: 'v' });
  });
  after(async () => { await t.close(); });

  it('list: basic form for users, admin form for admins (with custom attributes)', async () => {
    for (const u of (await t.get('/api/v4/users', { token: user.token })).body) assertMatches(UserBasicSchema, u, 'GET /users (user)');
    for (const u of (await t.get('/api/v4/users')).body) assertMatches(UserAdminSchema, u, 'GET /users (admin)');
    for (const u of (await t.get('/api/v4/users?with_custom_attributes=true')).body) {
      assertMatches(UserAdminWithCustomAttributesSchema, u, 'GET /users?with_custom_attributes (admin)');
    }
  });

  it('single: single form for users, admin form for admins', async () => {
    const other = await t.createUser();
    assertMatches(UserSingleSchema, (await t.get(`/api/v4/users/${user.user.id}`, { token: other.token })).body, 'GET /users/:id (user)');
    assertMatches(UserAdminSchema, (await t.get(`/api/v4/users/${user.user.id}`)).body, 'GET /users/:id (admin)');
  });

  it('current user: self form, admin form for admins', async () => {
    assertMatches(UserSelfSchema, (await t.get('/api/v4/user', { token: user.token })).body, 'GET /user');
    assertMatches(UserAdminSchema, (await t.get('/api/v4/user')).body, 'GET /user (admin)');
  });

  it('create and update answer the admin form', async () => {
    const username = t.unique('contract');
    const created = await t.post('/api/v4/users', { email: `${username}@example.org`, name: 'C', username, password: 'password123' });
    assertMatches(UserAdminSchema, created.body, 'POST /users');
    assertMatches(UserAdminSchema, (await t.put(`/api/v4/users/${created.body.id}`, { bio: 'x' })).body, 'PUT /users/:id');
  });

  it('follow answers the basic form; followers lists basic forms', async () => {
    const other = await t.createUser();
    assertMatches(UserBasicSchema, (await t.post(`/api/v4/users/${user.user.id}/follow`, {}, { token: other.token })).body, 'follow');
    for (const u of (await t.get(`/api/v4/users/${user.user.id}/followers`, { token: other.token })).body) assertMatches(UserBasicSchema, u, 'followers');
  });

  it('status and custom attributes', async () => {
    assertMatches(UserStatusSchema, (await t.get('/api/v4/user/status', { token: user.token })).body, 'empty status');
    assertMatches(UserStatusSchema, (await t.put('/api/v4/user/status', { message: 'm', clear_status_after: '1_day' }, { token: user.token })).body, 'PUT status');
    assertMatches(UserStatusSchema, (await t.get(`/api/v4/users/${user.user.id}/status`, { token: null })).body, 'GET users/:id/status');
    assertMatches(CustomAttributeSchema, (await t.get(`/api/v4/users/${user.user.id}/custom_attributes/k`)).body, 'custom attribute');
  });

  it('the extended form (used by other areas) and the schemas reject stray fields', async () => {
    const extended = presentUserExtended({ baseUrl: 'http://x' }, user.user);
    assertMatches(UserExtendedSchema, JSON.parse(JSON.stringify(extended)), 'extended');
    assert.equal(Value.Check(UserBasicSchema, { ...(await t.get('/api/v4/users', { token: user.token })).body[0], extra: 1 }), false);
    assert.equal(Value.Check(UserBasicWithCustomAttributesSchema, { id: 1 }), false);
  });
});
