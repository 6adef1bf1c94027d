import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Project } from '../../src/db/schema/core.js';
import {
  DeployKeySchema, DeployKeysProjectSchema, DeployKeyWithProjectsSchema, DeployKeyWithUserSchema, SshKeySchema, SshKeyWithUserSchema,
} from '../../src/presenters/schemas/keys.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';
import { makeNodeSshKey } from '../helpers/ssh-keys.js';

describe('SSH keys and deploy keys: response forms match their schemas', () => {
  let t: TestContext;
  let alice: TestUser, owner: TestUser;
  let project: Project, other: Project;
  let userKey: { id: number }, deployKey: { id: number; fingerprint_sha256: string; fingerprint?: string };
  let userKeyFingerprint: string;
  before(async () => {
    t = await createTestContext();
    [alice, owner] = await Promise.all([t.createUser(), t.createUser()]);
    project = await t.createProject({ owner: owner.user });
    other = await t.createProject({ owner: owner.user });
    const created = await t.post('/api/v4/user/keys', { title: 'laptop', key: makeNodeSshKey('ed25519', 0, 'a@example.com').text, expires_at: '2999-01-01T00:00:00Z' }, { token: alice.token });
    assertOne(SshKeySchema, created, 'POST /user/keys');
    userKey = created.body;
    const listed = await t.get(`/api/v4/keys/${userKey.id}`);
    userKeyFingerprint = (await t.db.selectFrom('keys').select('fingerprint_sha256').where('id', '=', userKey.id).executeTakeFirstOrThrow()).fingerprint_sha256!;
    assert.equal(listed.status, 200);
    const dk = await t.post(`/api/v4/projects/${project.id}/deploy_keys`, { title: 'ci', key: makeNodeSshKey('rsa', 2048, 'ci@example.com').text, can_push: true }, { token: owner.token });
    assertOne(DeployKeysProjectSchema, dk, 'POST /projects/:id/deploy_keys');
    deployKey = dk.body;
  });
  after(async () => { await t.close(); });

  it('user keys', async () => {
    assertEach(SshKeySchema, await t.get('/api/v4/user/keys', { token: alice.token }), 'GET /user/keys');
    assertOne(SshKeySchema, await t.get(`/api/v4/user/keys/${userKey.id}`, { token: alice.token }), 'GET /user/keys/:id');
    assertEach(SshKeySchema, await t.get(`/api/v4/users/${alice.user.id}/keys`, { token: null }), 'GET /users/:id/keys');
    assertOne(SshKeySchema, await t.get(`/api/v4/users/${alice.user.id}/keys/${userKey.id}`, { token: null }), 'GET /users/:id/keys/:key_id');
    assertOne(SshKeySchema, await t.post(`/api/v4/users/${alice.user.id}/keys`, { title: 'admin-added', key: makeNodeSshKey('ecdsa', 256, 'x').text }), 'POST /users/:id/keys');
  });

  it('key lookup: by id with its user, by fingerprint with user or deploy_keys_projects', async () => {
    assertOne(SshKeyWithUserSchema, await t.get(`/api/v4/keys/${userKey.id}`), 'GET /keys/:id');
    assertOne(SshKeyWithUserSchema, await t.get(`/api/v4/keys?fingerprint=${encodeURIComponent(userKeyFingerprint)}`), 'GET /keys?fingerprint (user key)');
    assertOne(DeployKeyWithUserSchema, await t.get(`/api/v4/keys?fingerprint=${encodeURIComponent(deployKey.fingerprint_sha256)}`), 'GET /keys?fingerprint (deploy key)');
    if (deployKey.fingerprint) {
      const md5 = await t.get(`/api/v4/keys?fingerprint=${encodeURIComponent(deployKey.fingerprint)}`);
      assertOne(DeployKeyWithUserSchema, md5, 'GET /keys?fingerprint (MD5)');
      assert.equal(md5.body.deploy_keys_projects.length, 1);
    }
  });

  it('deploy keys: instance list, project list, single, enable, create', async () => {
    // GitLab answers enable with the DeployKey form (no can_push).
    assertOne(DeployKeySchema, await t.post(`/api/v4/projects/${other.id}/deploy_keys/${deployKey.id}/enable`, {}, { token: owner.token }), 'enable');
    assertOne(DeployKeySchema, await t.post('/api/v4/deploy_keys', { title: 'instance', key: makeNodeSshKey('ed25519', 0, 'i').text }), 'POST /deploy_keys');
    assertEach(DeployKeyWithProjectsSchema, await t.get('/api/v4/deploy_keys'), 'GET /deploy_keys');
    assertEach(DeployKeyWithProjectsSchema, await t.get('/api/v4/deploy_keys?public=true'), 'GET /deploy_keys?public=true');
    assertEach(DeployKeysProjectSchema, await t.get(`/api/v4/projects/${project.id}/deploy_keys`, { token: owner.token }), 'project deploy keys');
    assertOne(DeployKeysProjectSchema, await t.get(`/api/v4/projects/${project.id}/deploy_keys/${deployKey.id}`, { token: owner.token }), 'project deploy key');
    assertOne(DeployKeysProjectSchema, await t.put(`/api/v4/projects/${project.id}/deploy_keys/${deployKey.id}`, { title: 'renamed', can_push: false }, { token: owner.token }), 'PUT project deploy key');
  });

  it('the schemas reject stray fields', async () => {
    const k = (await t.get('/api/v4/user/keys', { token: alice.token })).body[0];
    assert.equal(Value.Check(SshKeySchema, { ...k, fingerprint: 'x' }), false);
  });
});
