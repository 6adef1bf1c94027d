import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Namespace } from '../../src/db/schema/core.js';
import { NamespaceSchema } from '../../src/presenters/schemas/namespaces.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('namespaces: response forms match their schemas', () => {
  let t: TestContext;
  let owner: TestUser, dev: TestUser;
  let group: Namespace, sub: Namespace;
  before(async () => {
    t = await createTestContext();
    [owner, dev] = await Promise.all([t.createUser(), t.createUser()]);
    group = await t.createGroup({ owner: owner.user });
    sub = await t.createGroup({ parent: group });
    await t.addMember(group, dev.user, 30);
    await t.createProject({ group: sub });
  });
  after(async () => { await t.close(); });

  it('list and single for users, group owners and admins', async () => {
    assertEach(NamespaceSchema, await t.get('/api/v4/namespaces', { token: dev.token }), 'GET /namespaces (developer)');
    assertEach(NamespaceSchema, await t.get('/api/v4/namespaces', { token: owner.token }), 'GET /namespaces (owner)');
    assertEach(NamespaceSchema, await t.get('/api/v4/namespaces'), 'GET /namespaces (admin)');
    for (const ns of [group, sub]) {
      assertOne(NamespaceSchema, await t.get(`/api/v4/namespaces/${ns.id}`, { token: dev.token }), `GET /namespaces/${ns.full_path} (developer)`);
      assertOne(NamespaceSchema, await t.get(`/api/v4/namespaces/${encodeURIComponent(ns.full_path)}`, { token: owner.token }), `GET /namespaces/${ns.full_path} (owner)`);
    }
    const own = (await t.get(`/api/v4/namespaces/${owner.user.username}`, { token: owner.token }));
    assertOne(NamespaceSchema, own, 'personal namespace');
    assert.equal(own.body.kind, 'user');
    const asOwner = (await t.get(`/api/v4/namespaces/${group.id}`, { token: owner.token })).body;
    assert.equal(typeof asOwner.members_count_with_descendants, 'number');
    assert.equal(Value.Check(NamespaceSchema, { ...asOwner, extra: 1 }), false);
  });
});
