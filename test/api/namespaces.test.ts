import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('Namespaces API', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('lists the caller namespace and groups; admins see all', async () => {
    const alice = await t.createUser();
    const bob = await t.createUser();
    const owned = await t.createGroup({ owner: alice.user, visibility: 20 });
    const joined = await t.createGroup({ visibility: 0 });
    await t.addMember(joined, alice.user, 30);
    const foreign = await t.createGroup({ owner: bob.user, visibility: 20 });
    await t.createProject({ owner: alice.user });
    assert.equal((await t.get('/api/v4/namespaces', { token: null })).status, 401);
    const res = await t.get('/api/v4/namespaces', { token: alice.token });
    assert.equal(res.status, 200);
    const byId = new Map(res.body.map((n: any) => [n.id, n]));
    assert.equal(res.body.length, 3);
    const personal: any = res.body.find((n: any) => n.kind === 'user');
    assert.equal(personal.path, alice.user.username);
    assert.equal(personal.projects_count, 1);
    assert.equal(personal.web_url, `${t.config.externalUrl}/${alice.user.username}`);
    assert.equal((byId.get(owned.id) as any).members_count_with_descendants, 1);
    assert.equal((byId.get(joined.id) as any).members_count_with_descendants, undefined);
    assert.ok(!byId.has(foreign.id));
    const ownedOnly = await t.get('/api/v4/namespaces', { token: alice.token, query: { owned_only: true } });
    assert.deepEqual(ownedOnly.body.map((n: any) => n.id).sort(), [personal.id, owned.id].sort());
    const search = await t.get('/api/v4/namespaces', { token: alice.token, query: { search: joined.path } });
    assert.deepEqual(search.body.map((n: any) => n.id), [joined.id]);
    const admin = await t.get('/api/v4/namespaces', { query: { per_page: 100 } });
    assert.ok(admin.body.some((n: any) => n.id === foreign.id));
  });

  it('reads one namespace by id or path for owners and members only', async () => {
    const alice = await t.createUser();
    const bob = await t.createUser();
    const group = await t.createGroup({ owner: alice.user, visibility: 20 });
    const mine = await t.get(`/api/v4/namespaces/${encodeURIComponent(alice.user.username)}`, { token: alice.token });
    assert.equal(mine.status, 200);
    assert.equal(mine.body.kind, 'user');
    assert.equal((await t.get(`/api/v4/namespaces/${mine.body.id}`, { token: bob.token })).status, 404);
    const g = await t.get(`/api/v4/namespaces/${group.id}`, { token: alice.token });
    assert.equal(g.body.full_path, group.full_path);
    assert.equal(g.body.kind, 'group');
    assert.equal((await t.get(`/api/v4/namespaces/${group.id}`, { token: bob.token })).status, 404);
    assert.equal((await t.get('/api/v4/namespaces/424242')).status, 404);
  });

  it('exists: answers with a suggestion for taken paths', async () => {
    const alice = await t.createUser();
    const group = await t.createGroup({ path: 'taken-path', owner: alice.user });
    await t.createGroup({ path: 'taken-path1' });
    const res = await t.get('/api/v4/namespaces/taken-path/exists', { token: alice.token });
    assert.deepEqual(res.body, { exists: true, suggests: ['taken-path2'] });
    assert.deepEqual((await t.get('/api/v4/namespaces/free-path/exists', { token: alice.token })).body, { exists: false, suggests: [] });
    await t.createGroup({ path: 'inner', parent: group });
    assert.equal((await t.get('/api/v4/namespaces/inner/exists', { token: alice.token, query: { parent_id: group.id } })).body.exists, true);
    assert.equal((await t.get('/api/v4/namespaces/inner/exists', { token: alice.token })).body.exists, false);
    assert.equal((await t.get('/api/v4/namespaces/inner/exists', { token: null })).status, 401);
  });
});
