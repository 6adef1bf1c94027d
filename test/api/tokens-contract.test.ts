import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import {
  ImpersonationTokenSchema, ImpersonationTokenWithTokenSchema, PersonalAccessTokenSchema, PersonalAccessTokenWithTokenSchema,
} from '../../src/presenters/schemas/tokens.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

const SOON = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);

describe('personal access and impersonation tokens: response forms match their schemas', () => {
  let t: TestContext;
  let alice: TestUser;
  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ scopes: ['api'], expiresAt: SOON });
  });
  after(async () => { await t.close(); });

  it('personal access tokens: list, self, single, create, rotate', async () => {
    const created = await t.post('/api/v4/user/personal_access_tokens', { name: 'cli', scopes: ['k8s_proxy'] }, { token: alice.token });
    assertOne(PersonalAccessTokenWithTokenSchema, created, 'POST /user/personal_access_tokens');
    const byAdmin = await t.post(`/api/v4/users/${alice.user.id}/personal_access_tokens`, { name: 'admin-made', scopes: ['read_api'], expires_at: SOON, description: 'd' });
    assertOne(PersonalAccessTokenWithTokenSchema, byAdmin, 'POST /users/:id/personal_access_tokens');
    assertEach(PersonalAccessTokenSchema, await t.get('/api/v4/personal_access_tokens', { token: alice.token }), 'GET /personal_access_tokens');
    assertEach(PersonalAccessTokenSchema, await t.get('/api/v4/personal_access_tokens'), 'GET /personal_access_tokens (admin)');
    assertOne(PersonalAccessTokenSchema, await t.get('/api/v4/personal_access_tokens/self', { token: alice.token }), 'GET self');
    assertOne(PersonalAccessTokenSchema, await t.get(`/api/v4/personal_access_tokens/${byAdmin.body.id}`, { token: alice.token }), 'GET :id');
    assertOne(PersonalAccessTokenWithTokenSchema, await t.post(`/api/v4/personal_access_tokens/${byAdmin.body.id}/rotate`, {}, { token: alice.token }), 'rotate');
    assertOne(PersonalAccessTokenSchema, await t.get(`/api/v4/personal_access_tokens/${byAdmin.body.id}`, { token: alice.token }), 'GET :id (revoked by rotation)');
  });

  it('impersonation tokens: create, list, single', async () => {
    const created = await t.post(`/api/v4/users/${alice.user.id}/impersonation_tokens`, { name: 'imp', scopes: ['api'], expires_at: SOON });
    assertOne(ImpersonationTokenWithTokenSchema, created, 'POST impersonation_tokens');
    assertEach(ImpersonationTokenSchema, await t.get(`/api/v4/users/${alice.user.id}/impersonation_tokens`), 'GET impersonation_tokens');
    assertOne(ImpersonationTokenSchema, await t.get(`/api/v4/users/${alice.user.id}/impersonation_tokens/${created.body.id}`), 'GET impersonation token');
    assert.equal(Value.Check(PersonalAccessTokenSchema, created.body), false, 'the plain token is not part of the stored form');
  });
});
