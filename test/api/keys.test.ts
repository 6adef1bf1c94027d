import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { cleanupSshKeys, makeNodeSshKey, makeSshKey, SSH_KEYGEN, sshKeygenFingerprints } from '../helpers/ssh-keys.js';

const SSH_KEY_FIELDS = ['created_at', 'expires_at', 'id', 'key', 'title', 'usage_type'];
const DEPLOY_KEY_FIELDS = ['can_push', 'created_at', 'expires_at', 'fingerprint', 'fingerprint_sha256', 'id', 'key', 'title', 'usage_type'];

const blobOf = (text: string) => text.split(' ').slice(0, 2).join(' ');

describe('SSH keys API', () => {
  let t: TestContext;
  let alice: TestUser;
  let bob: TestUser;
  let admin: TestUser;
  let host: string;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ name: 'Alice Example' });
    bob = await t.createUser();
    admin = await t.createUser({ admin: true });
    host = new URL(t.config.externalUrl).hostname;
  });
  after(async () => {
    cleanupSshKeys();
    await t.close();
  });

  describe('the current user\'s keys', () => {
    it('need authentication', async () => {
      assert.equal((await t.get('/api/v4/user/keys', { token: null })).status, 401);
      assert.equal((await t.post('/api/v4/user/keys', { title: 'x', key: makeSshKey().text }, { token: null })).status, 401);
    });

    it('adds an ed25519 key: GitLab fields, comment hidden, fingerprints as ssh-keygen computes them', async () => {
      const k = makeSshKey('ed25519', undefined, 'alice@laptop.example');
      const res = await t.post('/api/v4/user/keys', { title: 'laptop', key: k.text }, { token: alice.token });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), SSH_KEY_FIELDS);
      assert.equal(res.body.title, 'laptop');
      assert.equal(res.body.usage_type, 'auth_and_signing');
      assert.equal(res.body.expires_at, null);
      assert.equal(res.body.key, `${blobOf(k.text)} Alice Example (${host})`);
      assert.ok(!res.body.key.includes('alice@laptop'));
      const row = await t.db.selectFrom('keys').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
      assert.equal(row.key, k.text);
      assert.match(row.fingerprint_sha256, /^SHA256:[A-Za-z0-9+/]{43}$/);
      assert.match(row.fingerprint!, /^([0-9a-f]{2}:){15}[0-9a-f]{2}$/);
      if (SSH_KEYGEN && k.file) {
        const expected = sshKeygenFingerprints(k.file);
        assert.equal(row.fingerprint_sha256, expected.sha256);
        assert.equal(row.fingerprint, expected.md5);
      }
    });

    it('accepts RSA (>= 1024 bits) and ECDSA keys of every curve', async () => {
      const keys = [makeSshKey('rsa', 2048), makeSshKey('rsa', 1024), makeSshKey('ecdsa', 256), makeSshKey('ecdsa', 384), makeSshKey('ecdsa', 521)];
      for (const k of keys) {
        const res = await t.post('/api/v4/user/keys', { title: 'k', key: k.text }, { token: bob.token });
        assert.equal(res.status, 201, `${k.text.split(' ')[0]}: ${res.text}`);
        if (SSH_KEYGEN && k.file) {
          const row = await t.db.selectFrom('keys').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
          assert.equal(row.fingerprint_sha256, sshKeygenFingerprints(k.file).sha256);
        }
      }
    });

    it('accepts security-key (sk-) variants', async () => {
      // An sk-ssh-ed25519 blob: type, the 32-byte key, the application string.
      const ed = Buffer.from(makeNodeSshKey('ed25519', 256, 'x').text.split(' ')[1], 'base64');
      const str = (s: Buffer | string) => { const b = Buffer.isBuffer(s) ? s : Buffer.from(s); const l = Buffer.alloc(4); l.writeUInt32BE(b.length); return Buffer.concat([l, b]); };
      const pk = ed.subarray(ed.length - 32);
      const blob = Buffer.concat([str('sk-ssh-ed25519@openssh.com'), str(pk), str('ssh:')]);
      const res = await t.post('/api/v4/user/keys', { title: 'yubikey', key: `sk-ssh-ed25519@openssh.com ${blob.toString('base64')} me` }, { token: bob.token });
      assert.equal(res.status, 201, res.text);
    });

    it('refuses invalid text, a blob of another type, weak RSA and DSA', async () => {
      const invalid = await t.post('/api/v4/user/keys', { title: 'bad', key: 'ssh-ed25519 not-a-key' }, { token: alice.token });
      assert.equal(invalid.status, 400);
      assert.deepEqual(invalid.body, { message: { key: ['is invalid'], fingerprint_sha256: ['cannot be generated'] } });
      const ed = makeSshKey('ed25519').text.split(' ')[1];
      const mismatch = await t.post('/api/v4/user/keys', { title: 'bad', key: `ssh-rsa ${ed}` }, { token: alice.token });
      assert.deepEqual(mismatch.body.message.key, ['is invalid']);
      const weak = await t.post('/api/v4/user/keys', { title: 'weak', key: makeNodeSshKey('rsa', 512, 'w').text }, { token: alice.token });
      assert.equal(weak.status, 400);
      assert.deepEqual(weak.body, { message: { key: ['must be at least 1024 bits'] } });
      let dsa: string | null = null;
      try { dsa = makeSshKey('dsa').text; } catch { /* this OpenSSH has no DSA */ }
      if (dsa) {
        const res = await t.post('/api/v4/user/keys', { title: 'dsa', key: dsa }, { token: alice.token });
        assert.equal(res.status, 400);
        assert.match(res.body.message.key[0], /^type is forbidden/);
      }
      assert.deepEqual((await t.post('/api/v4/user/keys', { key: ed }, { token: alice.token })).body, { error: 'title is missing' });
      assert.deepEqual((await t.post('/api/v4/user/keys', { title: 'x' }, { token: alice.token })).body, { error: 'key is missing' });
      const blankTitle = await t.post('/api/v4/user/keys', { title: '', key: makeSshKey().text }, { token: alice.token });
      assert.deepEqual(blankTitle.body, { message: { title: ["can't be blank"] } });
    });

    it('refuses a key already registered anywhere, whatever its comment', async () => {
      const k = makeSshKey();
      assert.equal((await t.post('/api/v4/user/keys', { title: 'a', key: k.text }, { token: alice.token })).status, 201);
      const again = await t.post('/api/v4/user/keys', { title: 'b', key: `${blobOf(k.text)} other-comment` }, { token: bob.token });
      assert.equal(again.status, 400);
      assert.deepEqual(again.body, { message: { fingerprint_sha256: ['has already been taken'] } });
    });

    it('joins a blob wrapped over lines and stores it normalized', async () => {
      const k = makeSshKey();
      const [type, b64, comment] = k.text.split(' ');
      const wrapped = `  ${type} ${b64.slice(0, 20)}\n${b64.slice(20, 50)}\r\n${b64.slice(50)} ${comment}\n`;
      const res = await t.post('/api/v4/user/keys', { title: 'wrapped', key: wrapped }, { token: alice.token });
      assert.equal(res.status, 201, res.text);
      const row = await t.db.selectFrom('keys').select('key').where('id', '=', res.body.id).executeTakeFirstOrThrow();
      assert.equal(row.key, k.text);
    });

    it('usage_type and expires_at', async () => {
      const future = new Date(Date.now() + 30 * 86400_000).toISOString().slice(0, 10);
      const res = await t.post('/api/v4/user/keys', { title: 's', key: makeSshKey().text, usage_type: 'signing', expires_at: future }, { token: alice.token });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.usage_type, 'signing');
      assert.equal(res.body.expires_at, `${future}T00:00:00.000Z`);
      const badType = await t.post('/api/v4/user/keys', { title: 's', key: makeSshKey().text, usage_type: 'everything' }, { token: alice.token });
      assert.deepEqual(badType.body, { error: 'usage_type does not have a valid value' });
      const past = await t.post('/api/v4/user/keys', { title: 's', key: makeSshKey().text, expires_at: '2020-01-01T00:00:00Z' }, { token: alice.token });
      assert.deepEqual(past.body, { message: { key: ['has expired'] } });
      const badDate = await t.post('/api/v4/user/keys', { title: 's', key: makeSshKey().text, expires_at: 'tomorrow' }, { token: alice.token });
      assert.deepEqual(badDate.body, { error: 'expires_at is invalid' });
    });

    it('lists, reads and deletes only the caller\'s own keys', async () => {
      const u = await t.createUser();
      const a = await t.post('/api/v4/user/keys', { title: 'one', key: makeSshKey().text }, { token: u.token });
      const b = await t.post('/api/v4/user/keys', { title: 'two', key: makeSshKey().text }, { token: u.token });
      const list = await t.get('/api/v4/user/keys', { token: u.token });
      assert.equal(list.status, 200);
      assert.deepEqual(list.body.map((k: any) => k.title), ['one', 'two']);
      assert.equal(list.headers['x-total'], '2');
      assert.equal((await t.get(`/api/v4/user/keys/${a.body.id}`, { token: u.token })).body.title, 'one');
      const foreign = await t.get(`/api/v4/user/keys/${a.body.id}`, { token: bob.token });
      assert.equal(foreign.status, 404);
      assert.deepEqual(foreign.body, { message: '404 Key Not Found' });
      assert.equal((await t.delete(`/api/v4/user/keys/${a.body.id}`, { token: bob.token })).status, 404);
      assert.equal((await t.delete(`/api/v4/user/keys/${a.body.id}`, { token: u.token })).status, 204);
      assert.equal((await t.get(`/api/v4/user/keys/${a.body.id}`, { token: u.token })).status, 404);
      assert.deepEqual((await t.get('/api/v4/user/keys', { token: u.token })).body.map((k: any) => k.id), [b.body.id]);
    });

    it('a read_user token reads keys but cannot add one', async () => {
      const u = await t.createUser({ scopes: ['read_user'] });
      assert.equal((await t.get('/api/v4/user/keys', { token: u.token })).status, 200);
      assert.equal((await t.post('/api/v4/user/keys', { title: 'x', key: makeSshKey().text }, { token: u.token })).status, 403);
    });
  });

  describe("other users' keys", () => {
    it('are public by id or username; unknown user 404', async () => {
      const u = await t.createUser({ name: 'Pub Lic' });
      const k = makeSshKey();
      const created = await t.post(`/api/v4/users/${u.user.id}/keys`, { title: 'pub', key: k.text }, { token: admin.token });
      assert.equal(created.status, 201, created.text);
      const byName = await t.get(`/api/v4/users/${u.user.username}/keys`, { token: null });
      assert.equal(byName.status, 200);
      assert.deepEqual(byName.body.map((x: any) => x.key), [`${blobOf(k.text)} Pub Lic (${host})`]);
      assert.equal((await t.get(`/api/v4/users/${u.user.id}/keys`, { token: bob.token })).body.length, 1);
      const one = await t.get(`/api/v4/users/${u.user.id}/keys/${created.body.id}`, { token: null });
      assert.equal(one.status, 200);
      assert.equal(one.body.title, 'pub');
      assert.equal((await t.get(`/api/v4/users/${bob.user.id}/keys/${created.body.id}`, { token: null })).status, 404);
      const missing = await t.get('/api/v4/users/no-such-user-here/keys', { token: null });
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 User Not Found' });
    });

    it('only administrators add and delete them', async () => {
      const u = await t.createUser();
      const body = { title: 'adm', key: makeSshKey().text };
      assert.equal((await t.post(`/api/v4/users/${u.user.id}/keys`, body, { token: null })).status, 401);
      assert.equal((await t.post(`/api/v4/users/${u.user.id}/keys`, body, { token: bob.token })).status, 403);
      assert.equal((await t.post('/api/v4/users/999999/keys', body, { token: admin.token })).status, 404);
      const created = await t.post(`/api/v4/users/${u.user.id}/keys`, body, { token: admin.token });
      assert.equal(created.status, 201);
      assert.deepEqual((await t.get('/api/v4/user/keys', { token: u.token })).body.map((k: any) => k.id), [created.body.id]);
      assert.equal((await t.delete(`/api/v4/users/${u.user.id}/keys/${created.body.id}`, { token: bob.token })).status, 403);
      assert.equal((await t.delete(`/api/v4/users/${bob.user.id}/keys/${created.body.id}`, { token: admin.token })).status, 404);
      assert.equal((await t.delete(`/api/v4/users/${u.user.id}/keys/${created.body.id}`, { token: admin.token })).status, 204);
      assert.equal((await t.get('/api/v4/user/keys', { token: u.token })).body.length, 0);
    });
  });

  describe('deploy keys', () => {
    let owner: TestUser;
    let maintainer: TestUser;
    let developer: TestUser;
    let outsider: TestUser;
    let project: Project;
    let other: Project;

    before(async () => {
      owner = await t.createUser();
      maintainer = await t.createUser();
      developer = await t.createUser();
      outsider = await t.createUser();
      project = await t.createProject({ owner: owner.user });
      other = await t.createProject({ owner: owner.user });
      await t.addMember(project, maintainer.user, 40);
      await t.addMember(project, developer.user, 30);
    });

    it('need a maintainer of the project', async () => {
      const url = `/api/v4/projects/${project.id}/deploy_keys`;
      assert.equal((await t.get(url, { token: null })).status, 401);
      assert.equal((await t.get(url, { token: outsider.token })).status, 404);
      assert.equal((await t.get(url, { token: developer.token })).status, 403);
      assert.equal((await t.post(url, { title: 'd', key: makeSshKey().text }, { token: developer.token })).status, 403);
      assert.equal((await t.get(url, { token: maintainer.token })).status, 200);
      assert.equal((await t.get('/api/v4/projects/999999/deploy_keys', { token: admin.token })).status, 404);
    });

    it('add, read, list, update and delete a project deploy key', async () => {
      const k = makeSshKey('ed25519', undefined, 'ci@build');
      const url = `/api/v4/projects/${project.id}/deploy_keys`;
      const res = await t.post(url, { title: 'ci', key: k.text, can_push: true }, { token: maintainer.token });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), DEPLOY_KEY_FIELDS);
      assert.equal(res.body.key, k.text);
      assert.equal(res.body.can_push, true);
      assert.match(res.body.fingerprint_sha256, /^SHA256:/);
      if (SSH_KEYGEN && k.file) assert.equal(res.body.fingerprint_sha256, sshKeygenFingerprints(k.file).sha256);

      // The same key again is the same deploy key on the project.
      const again = await t.post(url, { title: 'ci again', key: k.text }, { token: maintainer.token });
      assert.equal(again.status, 201);
      assert.equal(again.body.id, res.body.id);
      assert.equal(again.body.title, 'ci');

      const list = await t.get(url, { token: maintainer.token });
      assert.deepEqual(list.body.map((x: any) => [x.id, x.can_push]), [[res.body.id, true]]);
      const one = await t.get(`${url}/${res.body.id}`, { token: maintainer.token });
      assert.equal(one.status, 200);
      assert.equal(one.body.title, 'ci');
      assert.equal((await t.get(`${url}/999999`, { token: maintainer.token })).status, 404);

      const upd = await t.put(`${url}/${res.body.id}`, { title: 'ci-renamed', can_push: false }, { token: maintainer.token });
      assert.equal(upd.status, 200, upd.text);
      assert.equal(upd.body.title, 'ci-renamed');
      assert.equal(upd.body.can_push, false);
      const none = await t.put(`${url}/${res.body.id}`, {}, { token: maintainer.token });
      assert.equal(none.status, 400);
      assert.deepEqual(none.body, { error: 'title, can_push are missing, at least one parameter must be provided' });
      assert.equal((await t.put(`${url}/${res.body.id}`, { can_push: true }, { token: developer.token })).status, 403);

      const del = await t.delete(`${url}/${res.body.id}`, { token: maintainer.token });
      assert.equal(del.status, 204);
      assert.equal((await t.get(url, { token: maintainer.token })).body.length, 0);
      // Used by no other project: the key itself is gone, so the text may be registered again.
      assert.equal(await t.db.selectFrom('keys').select('id').where('id', '=', res.body.id).executeTakeFirst(), undefined);
      const missing = await t.delete(`${url}/${res.body.id}`, { token: maintainer.token });
      assert.deepEqual(missing.body, { message: '404 Deploy key Not Found' });
    });

    it('reuses a key the caller reaches in another project; refuses keys they cannot reach', async () => {
      const k = makeSshKey();
      const first = await t.post(`/api/v4/projects/${project.id}/deploy_keys`, { title: 'shared', key: k.text }, { token: owner.token });
      assert.equal(first.status, 201);
      // The owner maintains both projects: the key is reused, with its own can_push here.
      const second = await t.post(`/api/v4/projects/${other.id}/deploy_keys`, { title: 'ignored', key: k.text, can_push: true }, { token: owner.token });
      assert.equal(second.status, 201);
      assert.equal(second.body.id, first.body.id);
      assert.equal(second.body.can_push, true);
      assert.equal((await t.get(`/api/v4/projects/${project.id}/deploy_keys/${first.body.id}`, { token: owner.token })).body.can_push, false);

      // Someone else's own project cannot take over that key.
      const stranger = await t.createUser();
      const theirs = await t.createProject({ owner: stranger.user });
      const taken = await t.post(`/api/v4/projects/${theirs.id}/deploy_keys`, { title: 'steal', key: k.text }, { token: stranger.token });
      assert.equal(taken.status, 400);
      assert.deepEqual(taken.body, { message: { 'deploy_key.fingerprint_sha256': ['has already been taken'] } });
      assert.equal((await t.post(`/api/v4/projects/${theirs.id}/deploy_keys/${first.body.id}/enable`, {}, { token: stranger.token })).status, 404);

      // Removing it from one project keeps it for the other.
      assert.equal((await t.delete(`/api/v4/projects/${project.id}/deploy_keys/${first.body.id}`, { token: owner.token })).status, 204);
      assert.equal((await t.get(`/api/v4/projects/${other.id}/deploy_keys/${first.body.id}`, { token: owner.token })).status, 200);

      const invalid = await t.post(`/api/v4/projects/${theirs.id}/deploy_keys`, { title: 'bad', key: 'ssh-rsa AAAA' }, { token: stranger.token });
      assert.deepEqual(invalid.body, { message: { 'deploy_key.key': ['is invalid'], 'deploy_key.fingerprint_sha256': ['cannot be generated'] } });
      const userKey = makeSshKey();
      await t.post('/api/v4/user/keys', { title: 'mine', key: userKey.text }, { token: stranger.token });
      const asDeploy = await t.post(`/api/v4/projects/${theirs.id}/deploy_keys`, { title: 'dup', key: userKey.text }, { token: stranger.token });
      assert.deepEqual(asDeploy.body, { message: { 'deploy_key.fingerprint_sha256': ['has already been taken'] } });
    });

    it('enable attaches a reachable key to another project', async () => {
      const k = makeSshKey();
      const created = await t.post(`/api/v4/projects/${other.id}/deploy_keys`, { title: 'to-enable', key: k.text }, { token: owner.token });
      const third = await t.createProject({ owner: owner.user });
      const res = await t.post(`/api/v4/projects/${third.id}/deploy_keys/${created.body.id}/enable`, {}, { token: owner.token });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.id, created.body.id);
      assert.equal(res.body.can_push, undefined);
      assert.deepEqual((await t.get(`/api/v4/projects/${third.id}/deploy_keys`, { token: owner.token })).body.map((x: any) => x.id), [created.body.id]);
      const missing = await t.post(`/api/v4/projects/${third.id}/deploy_keys/999999/enable`, {}, { token: owner.token });
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 Deploy key Not Found' });
    });

    it('renaming a private key shared by several projects needs maintainer access to all of them (or admin)', async () => {
      // The owner maintains `project` and `other`; `maintainer` maintains only `project`.
      const k = makeSshKey();
      const created = await t.post(`/api/v4/projects/${other.id}/deploy_keys`, { title: 'shared-ci', key: k.text }, { token: owner.token });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id;
      assert.equal((await t.post(`/api/v4/projects/${project.id}/deploy_keys/${id}/enable`, {}, { token: owner.token })).status, 201);

      // A maintainer of one of the projects may set can_push there, but the shared title stays.
      const attempt = await t.put(`/api/v4/projects/${project.id}/deploy_keys/${id}`, { title: 'hijacked', can_push: true }, { token: maintainer.token });
      assert.equal(attempt.status, 200, attempt.text);
      assert.equal(attempt.body.title, 'shared-ci');
      assert.equal(attempt.body.can_push, true);
      assert.equal((await t.get(`/api/v4/projects/${other.id}/deploy_keys/${id}`, { token: owner.token })).body.title, 'shared-ci');

      // The owner maintains every project using it: the rename applies everywhere.
      const byOwner = await t.put(`/api/v4/projects/${project.id}/deploy_keys/${id}`, { title: 'renamed-by-owner' }, { token: owner.token });
      assert.equal(byOwner.body.title, 'renamed-by-owner');
      assert.equal((await t.get(`/api/v4/projects/${other.id}/deploy_keys/${id}`, { token: owner.token })).body.title, 'renamed-by-owner');

      // An administrator may rename it from any project.
      const byAdmin = await t.put(`/api/v4/projects/${project.id}/deploy_keys/${id}`, { title: 'renamed-by-admin' }, { token: admin.token });
      assert.equal(byAdmin.body.title, 'renamed-by-admin');

      // Once only `project` uses it, its maintainer manages every project of the key and may rename it.
      assert.equal((await t.delete(`/api/v4/projects/${other.id}/deploy_keys/${id}`, { token: owner.token })).status, 204);
      const alone = await t.put(`/api/v4/projects/${project.id}/deploy_keys/${id}`, { title: 'maintainer-owned' }, { token: maintainer.token });
      assert.equal(alone.body.title, 'maintainer-owned');
    });

    it('instance deploy keys: admin creates and lists; maintainers may enable but not rename them', async () => {
      const k = makeSshKey();
      assert.equal((await t.post('/api/v4/deploy_keys', { title: 'global', key: k.text }, { token: owner.token })).status, 403);
      assert.equal((await t.get('/api/v4/deploy_keys', { token: owner.token })).status, 403);
      assert.equal((await t.get('/api/v4/deploy_keys', { token: null })).status, 401);
      const res = await t.post('/api/v4/deploy_keys', { title: 'global', key: k.text }, { token: admin.token });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.key, k.text);
      assert.ok(res.body.fingerprint_sha256);

      const enabled = await t.post(`/api/v4/projects/${project.id}/deploy_keys/${res.body.id}/enable`, {}, { token: maintainer.token });
      assert.equal(enabled.status, 201);
      await t.put(`/api/v4/projects/${project.id}/deploy_keys/${res.body.id}`, { can_push: true }, { token: maintainer.token });
      const renamed = await t.put(`/api/v4/projects/${project.id}/deploy_keys/${res.body.id}`, { title: 'mine now' }, { token: maintainer.token });
      assert.equal(renamed.status, 200);
      assert.equal(renamed.body.title, 'global');

      const all = await t.get('/api/v4/deploy_keys?per_page=100', { token: admin.token });
      assert.equal(all.status, 200);
      const global = all.body.find((x: any) => x.id === res.body.id);
      assert.deepEqual(global.projects_with_write_access.map((p: any) => p.id), [project.id]);
      assert.deepEqual(global.projects_with_readonly_access, []);
      assert.deepEqual(Object.keys(global.projects_with_write_access[0]).sort(), ['created_at', 'description', 'id', 'name', 'name_with_namespace', 'path', 'path_with_namespace']);
      const onlyPublic = await t.get('/api/v4/deploy_keys?public=true', { token: admin.token });
      assert.deepEqual(onlyPublic.body.map((x: any) => x.id), [res.body.id]);

      // A public key stays when its last project lets go of it.
      assert.equal((await t.delete(`/api/v4/projects/${project.id}/deploy_keys/${res.body.id}`, { token: maintainer.token })).status, 204);
      assert.ok(await t.db.selectFrom('keys').select('id').where('id', '=', res.body.id).executeTakeFirst());
    });
  });

  describe('key lookup (admin)', () => {
    let userKey: { id: number; text: string; file?: string };
    let deployKey: { id: number; text: string };
    let owner: TestUser;

    before(async () => {
      owner = await t.createUser({ name: 'Key Owner' });
      const k = makeSshKey();
      const res = await t.post('/api/v4/user/keys', { title: 'lookup', key: k.text }, { token: owner.token });
      userKey = { id: res.body.id, text: k.text, file: k.file };
      const project = await t.createProject({ owner: owner.user });
      const d = makeSshKey();
      const dres = await t.post(`/api/v4/projects/${project.id}/deploy_keys`, { title: 'deploy', key: d.text, can_push: true }, { token: owner.token });
      deployKey = { id: dres.body.id, text: d.text };
    });

    const fingerprints = async (id: number) => t.db.selectFrom('keys').select(['fingerprint', 'fingerprint_sha256']).where('id', '=', id).executeTakeFirstOrThrow();

    it('GET /keys/:id returns the key with its user; admins only', async () => {
      assert.equal((await t.get(`/api/v4/keys/${userKey.id}`, { token: null })).status, 401);
      assert.equal((await t.get(`/api/v4/keys/${userKey.id}`, { token: owner.token })).status, 403);
      const res = await t.get(`/api/v4/keys/${userKey.id}`, { token: admin.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.id, userKey.id);
      assert.equal(res.body.title, 'lookup');
      assert.equal(res.body.user.id, owner.user.id);
      assert.equal(res.body.user.username, owner.user.username);
      assert.ok('bio' in res.body.user && 'created_at' in res.body.user);
      const missing = await t.get('/api/v4/keys/999999', { token: admin.token });
      assert.equal(missing.status, 404);
    });

    it('GET /keys?fingerprint= finds SHA256 (encoded, lower-case prefix, raw +) and MD5 fingerprints', async () => {
      const fp = await fingerprints(userKey.id);
      if (SSH_KEYGEN && userKey.file) assert.equal(fp.fingerprint_sha256, sshKeygenFingerprints(userKey.file).sha256);
      const encoded = await t.get(`/api/v4/keys?fingerprint=${encodeURIComponent(fp.fingerprint_sha256)}`, { token: admin.token });
      assert.equal(encoded.status, 200, encoded.text);
      assert.equal(encoded.body.id, userKey.id);
      assert.equal(encoded.body.user.id, owner.user.id);
      assert.equal(encoded.body.deploy_keys_projects, undefined);
      const lower = await t.get(`/api/v4/keys?fingerprint=${encodeURIComponent(fp.fingerprint_sha256.replace('SHA256:', 'sha256:'))}`, { token: admin.token });
      assert.equal(lower.body.id, userKey.id);
      const raw = await t.get(`/api/v4/keys?fingerprint=${fp.fingerprint_sha256}`, { token: admin.token });
      assert.equal(raw.body.id, userKey.id);
      const md5 = await t.get(`/api/v4/keys?fingerprint=${fp.fingerprint}`, { token: admin.token });
      assert.equal(md5.status, 200);
      assert.equal(md5.body.id, userKey.id);
      const upper = await t.get(`/api/v4/keys?fingerprint=${fp.fingerprint!.toUpperCase()}`, { token: admin.token });
      assert.equal(upper.body.id, userKey.id);
    });

    it('deploy key fingerprints also return deploy_keys_projects', async () => {
      const fp = await fingerprints(deployKey.id);
      const res = await t.get(`/api/v4/keys?fingerprint=${encodeURIComponent(fp.fingerprint_sha256)}`, { token: admin.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.id, deployKey.id);
      assert.equal(res.body.user.id, owner.user.id);
      assert.equal(res.body.deploy_keys_projects.length, 1);
      assert.deepEqual(Object.keys(res.body.deploy_keys_projects[0]).sort(), ['can_push', 'created_at', 'deploy_key_id', 'id', 'project_id', 'updated_at']);
      assert.equal(res.body.deploy_keys_projects[0].can_push, true);
    });

    it('bad, unknown and missing fingerprints; admins only', async () => {
      const bad = await t.get('/api/v4/keys?fingerprint=not-a-fingerprint', { token: admin.token });
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, { message: 'Failed to return the key' });
      const badSha = await t.get('/api/v4/keys?fingerprint=SHA256%3Aabc', { token: admin.token });
      assert.equal(badSha.status, 400);
      const unknown = await t.get(`/api/v4/keys?fingerprint=${'ab:'.repeat(15)}ab`, { token: admin.token });
      assert.equal(unknown.status, 404);
      assert.deepEqual(unknown.body, { message: '404 Key Not Found' });
      assert.deepEqual((await t.get('/api/v4/keys', { token: admin.token })).body, { error: 'fingerprint is missing' });
      assert.equal((await t.get(`/api/v4/keys?fingerprint=${'ab:'.repeat(15)}ab`, { token: owner.token })).status, 403);
    });
  });
});
