import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { lfsObjectKey, lfsObjectsSize, lfsStore } from '../../src/lfs/objects.js';
import { startS3 } from '../helpers/s3.js';
import { createTestContext, ROOT_TOKEN, type TestContext, type TestUser } from '../helpers/app.js';

// Git LFS over HTTP with Debian's real git-lfs client: push, clone with smudge, locks, and the
// refusals (credentials, private projects, checksums, sizes, LFS disabled).

const LFS_TYPE = 'application/vnd.git-lfs+json';
const BIG_SIZE = 24 * 1024 * 1024;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const sha256 = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest('hex');

describe('Git LFS over HTTP', () => {
  let t: TestContext;
  let base: string;
  let home: string;
  let work: string;
  let group: Namespace;
  let dev: TestUser;
  let maintainer: TestUser;
  let reporter: TestUser;
  let outsider: TestUser;
  let project: Project;
  let projectPath: string;
  let seq = 0;
  const files = new Map<string, Buffer>();

  const env = () => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_LFS_SKIP_PUSH_CHECK: '0',
    LC_ALL: 'C',
  });
  const git = (args: string[], cwd: string): Promise<Run> =>
    new Promise((resolve) => {
      execFile(
        'git',
        ['-c', 'user.name=LFS Tester', '-c', 'user.email=lfs@example.com', '-c', 'init.defaultBranch=main', ...args],
        { cwd, env: env(), maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
    });
  const ok = async (args: string[], cwd: string) => {
    const res = await git(args, cwd);
    assert.equal(res.code, 0, `git ${args.join(' ')} failed: ${res.stderr}`);
    return res.stdout.trim();
  };
  const dir = (name: string) => {
    const d = path.join(work, `${name}-${++seq}`);
    fs.mkdirSync(d, { recursive: true });
    return d;
  };
  const url = (fullPath: string, password: string, user = 'oauth2') => `http://${encodeURIComponent(user)}:${encodeURIComponent(password)}@${base}/${fullPath}.git`;
  const basic = (user: string, password: string) => 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
  const fullPathOf = async (p: Project) => {
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
    return `${ns.full_path}/${p.path}`;
  };
  /** A repository with LFS installed locally (the filters in its own config) and origin set. */
  const lfsRepo = async (name: string, remote: string) => {
    const d = dir(name);
    await ok(['init', '-q'], d);
    await ok(['lfs', 'install', '--local'], d);
    await ok(['remote', 'add', 'origin', remote], d);
    return d;
  };
  const batch = (fullPath: string, body: unknown, auth?: string) =>
    t.app.inject({
      method: 'POST',
      url: `/${fullPath}.git/info/lfs/objects/batch`,
      headers: { 'content-type': LFS_TYPE, accept: LFS_TYPE, ...(auth ? { authorization: auth } : {}) },
      payload: JSON.stringify(body),
    });
  const linkedCount = async (projectId: number) =>
    Number((await t.db.selectFrom('lfs_objects_projects').select((eb) => eb.fn.countAll().as('n')).where('project_id', '=', projectId).executeTakeFirstOrThrow()).n);

  before(async () => {
    t = await createTestContext({ defaultBranchProtection: 0 });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    // The hrefs of batch answers are built on the external URL.
    (t.app.cairn.config as { externalUrl: string }).externalUrl = `http://${base}`;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-lfs-home-'));
    fs.writeFileSync(path.join(home, '.gitconfig'), '');
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-lfs-work-'));
    dev = await t.createUser();
    maintainer = await t.createUser();
    reporter = await t.createUser();
    outsider = await t.createUser();
    group = await t.createGroup();
    await t.addMember(group, dev.user, 30);
    await t.addMember(group, maintainer.user, 40);
    await t.addMember(group, reporter.user, 20);
    project = await t.createProject({ group });
    projectPath = await fullPathOf(project);
  });

  after(async () => {
    await t.close();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('pushes 50 tracked files and a large object, and a clone smudges the same bytes', async () => {
    const repo = await lfsRepo('push', url(projectPath, dev.token));
    await ok(['lfs', 'track', '*.bin'], repo);
    for (let i = 0; i < 50; i++) files.set(`small/f${i}.bin`, crypto.randomBytes(1000 + i * 37));
    files.set('big.bin', crypto.randomBytes(BIG_SIZE));
    fs.mkdirSync(path.join(repo, 'small'));
    for (const [name, bytes] of files) fs.writeFileSync(path.join(repo, name), bytes);
    fs.writeFileSync(path.join(repo, 'README.md'), '# lfs\n');
    await ok(['add', '.'], repo);
    await ok(['commit', '-q', '-m', 'lfs files'], repo);
    const push = await git(['push', 'origin', 'main'], repo);
    assert.equal(push.code, 0, push.stderr);

    assert.equal(await linkedCount(project.id), 51);
    const expectedSize = [...files.values()].reduce((n, b) => n + b.length, 0);
    assert.equal(await lfsObjectsSize(t.db, project.id), expectedSize);
    assert.equal(await lfsStore(t.app.cairn).size(lfsObjectKey(sha256(files.get('big.bin')!))), BIG_SIZE);

    // A reporter clones: the smudge filter downloads every object.
    const clone = await lfsRepo('clone', url(projectPath, reporter.token));
    await ok(['fetch', '-q', 'origin'], clone);
    await ok(['checkout', '-q', '-b', 'main', 'origin/main'], clone);
    for (const [name, bytes] of files) assert.ok(fs.readFileSync(path.join(clone, name)).equals(bytes), `${name} differs after clone`);

    // A second push of the same objects transfers nothing: the batch answer has no actions.
    const res = await batch(projectPath, { operation: 'upload', objects: [{ oid: sha256(files.get('big.bin')!), size: BIG_SIZE }] }, basic('oauth2', dev.token));
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], LFS_TYPE);
    const obj = res.json().objects[0];
    assert.equal(obj.actions, undefined);
    // HEAD of an object: its size, no body.
    const head = await t.app.inject({ method: 'HEAD', url: `/${projectPath}.git/gitlab-lfs/objects/${sha256(files.get('small/f0.bin')!)}`, headers: { authorization: basic('oauth2', reporter.token) } });
    assert.equal(head.statusCode, 200);
    assert.equal(head.headers['content-length'], String(files.get('small/f0.bin')!.length));
    assert.equal(head.rawPayload.length, 0);
  });

  it('the raw file endpoint resolves a pointer with ?lfs=true', async () => {
    const name = 'small/f3.bin';
    const pointer = await t.app.inject({ method: 'GET', url: `/api/v4/projects/${project.id}/repository/files/${encodeURIComponent(name)}/raw?ref=main`, headers: { 'private-token': reporter.token } });
    assert.equal(pointer.statusCode, 200);
    assert.match(pointer.body, /^version https:\/\/git-lfs.github.com\/spec\/v1\noid sha256:[0-9a-f]{64}\nsize \d+\n$/);
    const resolved = await t.app.inject({ method: 'GET', url: `/api/v4/projects/${project.id}/repository/files/${encodeURIComponent(name)}/raw?ref=main&lfs=true`, headers: { 'private-token': reporter.token } });
    assert.equal(resolved.statusCode, 200);
    assert.ok(resolved.rawPayload.equals(files.get(name)!));
  });

  it('locks and unlocks with git lfs: owners unlock, others only as maintainers with --force', async () => {
    const devRepo = await lfsRepo('lock-dev', url(projectPath, dev.token));
    await ok(['fetch', '-q', 'origin'], devRepo);
    await ok(['checkout', '-q', '-b', 'main', 'origin/main'], devRepo);
    const lock = await git(['lfs', 'lock', 'small/f1.bin'], devRepo);
    assert.equal(lock.code, 0, lock.stderr);
    assert.match(lock.stdout, /Locked small\/f1.bin/);
    const again = await git(['lfs', 'lock', 'small/f1.bin'], devRepo);
    assert.notEqual(again.code, 0);
    const list = await ok(['lfs', 'locks'], devRepo);
    assert.match(list, /small\/f1.bin/);

    // A reporter sees locks but may not take one.
    const reporterRepo = await lfsRepo('lock-rep', url(projectPath, reporter.token));
    await ok(['fetch', '-q', 'origin'], reporterRepo);
    await ok(['checkout', '-q', '-b', 'main', 'origin/main'], reporterRepo);
    assert.match(await ok(['lfs', 'locks'], reporterRepo), /small\/f1.bin/);
    assert.notEqual((await git(['lfs', 'lock', 'small/f2.bin'], reporterRepo)).code, 0);

    // The maintainer cannot unlock another's lock without --force, then can.
    const mRepo = await lfsRepo('lock-m', url(projectPath, maintainer.token));
    await ok(['fetch', '-q', 'origin'], mRepo);
    await ok(['checkout', '-q', '-b', 'main', 'origin/main'], mRepo);
    assert.notEqual((await git(['lfs', 'unlock', 'small/f1.bin'], mRepo)).code, 0);
    const forced = await git(['lfs', 'unlock', '--force', 'small/f1.bin'], mRepo);
    assert.equal(forced.code, 0, forced.stderr);
    assert.doesNotMatch(await ok(['lfs', 'locks'], devRepo), /small\/f1.bin/);

    // A developer's own lock: they unlock it; another developer may not even with force.
    await ok(['lfs', 'lock', 'small/f2.bin'], devRepo);
    const other = await t.createUser();
    await t.addMember(group, other.user, 30);
    const id = (await t.db.selectFrom('lfs_file_locks').select('id').where('path', '=', 'small/f2.bin').executeTakeFirstOrThrow()).id;
    const forbidden = await t.app.inject({
      method: 'POST',
      url: `/${projectPath}.git/info/lfs/locks/${id}/unlock`,
      headers: { 'content-type': LFS_TYPE, authorization: basic('oauth2', other.token) },
      payload: JSON.stringify({ force: true }),
    });
    assert.equal(forbidden.statusCode, 403);
    assert.equal(forbidden.headers['content-type'], LFS_TYPE);
    assert.ok(forbidden.json().message);
    await ok(['lfs', 'unlock', 'small/f2.bin'], devRepo);
    const verify = await t.app.inject({
      method: 'POST',
      url: `/${projectPath}.git/info/lfs/locks/verify`,
      headers: { 'content-type': LFS_TYPE, authorization: basic('oauth2', dev.token) },
      payload: '{}',
    });
    assert.equal(verify.statusCode, 200);
    assert.deepEqual(verify.json(), { ours: [], theirs: [] });
  });

  it('refuses wrong credentials (401) and hides a private project from outsiders (404), in LFS error form', async () => {
    const oid = sha256(files.get('big.bin')!);
    const wrong = await batch(projectPath, { operation: 'download', objects: [{ oid, size: BIG_SIZE }] }, basic('oauth2', 'not-a-token'));
    assert.equal(wrong.statusCode, 401);
    assert.equal(wrong.headers['content-type'], LFS_TYPE);
    assert.match(wrong.headers['www-authenticate'] as string, /Basic/);
    assert.equal(typeof wrong.json().message, 'string');
    const anonymous = await batch(projectPath, { operation: 'download', objects: [{ oid, size: BIG_SIZE }] });
    assert.equal(anonymous.statusCode, 401);
    const hidden = await batch(projectPath, { operation: 'download', objects: [{ oid, size: BIG_SIZE }] }, basic('oauth2', outsider.token));
    assert.equal(hidden.statusCode, 404);
    assert.equal(hidden.headers['content-type'], LFS_TYPE);
    assert.equal(typeof hidden.json().message, 'string');
    const direct = await t.app.inject({ method: 'GET', url: `/${projectPath}.git/gitlab-lfs/objects/${oid}`, headers: { authorization: basic('oauth2', outsider.token) } });
    assert.equal(direct.statusCode, 404);
    // A reporter reads but may not upload.
    const upload = await batch(projectPath, { operation: 'upload', objects: [{ oid, size: BIG_SIZE }] }, basic('oauth2', reporter.token));
    assert.equal(upload.statusCode, 403);
    // The git client with a wrong token fails to fetch the objects.
    const clone = await lfsRepo('wrong', url(projectPath, 'not-a-token'));
    assert.notEqual((await git(['fetch', '-q', 'origin'], clone)).code, 0);
    // An outsider's clone of the private project fails too.
    const outsiderClone = await lfsRepo('outsider', url(projectPath, outsider.token));
    assert.notEqual((await git(['lfs', 'fetch', 'origin', 'main'], outsiderClone)).code, 0);
  });

  it('refuses an upload whose bytes do not match the oid (422) and leaves nothing visible', async () => {
    const claimed = crypto.randomBytes(4096);
    const oid = sha256(claimed);
    const auth = basic('oauth2', dev.token);
    const res = await t.app.inject({
      method: 'PUT',
      url: `/${projectPath}.git/gitlab-lfs/objects/${oid}/${claimed.length}`,
      headers: { 'content-type': 'application/octet-stream', authorization: auth },
      payload: crypto.randomBytes(4096),
    });
    assert.equal(res.statusCode, 422);
    assert.equal(res.headers['content-type'], LFS_TYPE);
    assert.match(res.json().message, /does not match/);
    // A short body is refused as well.
    const short = await t.app.inject({
      method: 'PUT',
      url: `/${projectPath}.git/gitlab-lfs/objects/${oid}/${claimed.length}`,
      headers: { 'content-type': 'application/octet-stream', authorization: auth },
      payload: claimed.subarray(0, 100),
    });
    assert.equal(short.statusCode, 422);
    assert.equal(await lfsStore(t.app.cairn).size(lfsObjectKey(oid)), null);
    const after = await batch(projectPath, { operation: 'download', objects: [{ oid, size: claimed.length }] }, auth);
    assert.equal(after.json().objects[0].error.code, 404);
    // Bad oids never reach the store.
    const bad = await t.app.inject({ method: 'GET', url: `/${projectPath}.git/gitlab-lfs/objects/..%2F..%2Fetc`, headers: { authorization: auth } });
    assert.equal(bad.statusCode, 422);
    const badBatch = await batch(projectPath, { operation: 'upload', objects: [{ oid: 'ABC', size: 1 }, { oid, size: -1 }] }, auth);
    assert.deepEqual(badBatch.json().objects.map((o: any) => o.error.code), [422, 422]);
    const garbage = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/info/lfs/objects/batch`, headers: { 'content-type': LFS_TYPE, authorization: auth }, payload: '{nope' });
    assert.equal(garbage.statusCode, 422);
    // The right bytes are accepted and then visible.
    const good = await t.app.inject({
      method: 'PUT',
      url: `/${projectPath}.git/gitlab-lfs/objects/${oid}/${claimed.length}`,
      headers: { 'content-type': 'application/octet-stream', authorization: auth },
      payload: claimed,
    });
    assert.equal(good.statusCode, 200);
    const verified = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/gitlab-lfs/objects/verify`, headers: { 'content-type': LFS_TYPE, authorization: auth }, payload: JSON.stringify({ oid, size: claimed.length }) });
    assert.equal(verified.statusCode, 200);
  });

  it('refuses an object above CAIRN_MAX_LFS_OBJECT_SIZE (413), in the batch, the upload and git lfs push', async () => {
    const config = t.app.cairn.config as { maxLfsObjectSize: number };
    const saved = config.maxLfsObjectSize;
    config.maxLfsObjectSize = 64 * 1024;
    try {
      const bytes = crypto.randomBytes(100 * 1024);
      const oid = sha256(bytes);
      const auth = basic('oauth2', dev.token);
      const res = await batch(projectPath, { operation: 'upload', objects: [{ oid, size: bytes.length }] }, auth);
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().objects[0].error.code, 413);
      const put = await t.app.inject({ method: 'PUT', url: `/${projectPath}.git/gitlab-lfs/objects/${oid}/${bytes.length}`, headers: { 'content-type': 'application/octet-stream', authorization: auth }, payload: bytes });
      assert.equal(put.statusCode, 413);
      const repo = await lfsRepo('oversize', url(projectPath, dev.token));
      await ok(['fetch', '-q', 'origin'], repo);
      await ok(['checkout', '-q', '-b', 'main', 'origin/main'], repo);
      fs.writeFileSync(path.join(repo, 'huge.bin'), bytes);
      await ok(['add', 'huge.bin'], repo);
      await ok(['commit', '-q', '-m', 'huge'], repo);
      const push = await git(['push', 'origin', 'main'], repo);
      assert.notEqual(push.code, 0);
      assert.equal(await lfsStore(t.app.cairn).size(lfsObjectKey(oid)), null);
    } finally {
      config.maxLfsObjectSize = saved;
    }
  });

  it('answers 404 when LFS is disabled on the project', async () => {
    const p = await t.createProject({ group });
    const fp = await fullPathOf(p);
    const put = await t.app.inject({ method: 'PUT', url: `/api/v4/projects/${p.id}`, headers: { 'private-token': maintainer.token, 'content-type': 'application/json' }, payload: JSON.stringify({ lfs_enabled: false }) });
    assert.equal(put.statusCode, 200, put.body);
    assert.equal(put.json().lfs_enabled, false);
    const res = await batch(fp, { operation: 'download', objects: [] }, basic('oauth2', dev.token));
    assert.equal(res.statusCode, 404);
    assert.equal(res.headers['content-type'], LFS_TYPE);
  });

  it('links objects on fork, and removes an object once no project links it', async () => {
    const bytes = crypto.randomBytes(2048);
    const oid = sha256(bytes);
    const source = await t.createProject({ group });
    const sourcePath = await fullPathOf(source);
    const put = await t.app.inject({ method: 'PUT', url: `/${sourcePath}.git/gitlab-lfs/objects/${oid}/${bytes.length}`, headers: { 'content-type': 'application/octet-stream', authorization: basic('oauth2', dev.token) }, payload: bytes });
    assert.equal(put.statusCode, 200, put.body);
    // The same bytes in the first project too: one stored object, two links.
    const put2 = await t.app.inject({ method: 'PUT', url: `/${projectPath}.git/gitlab-lfs/objects/${oid}/${bytes.length}`, headers: { 'content-type': 'application/octet-stream', authorization: basic('oauth2', dev.token) }, payload: bytes });
    assert.equal(put2.statusCode, 200);
    assert.equal((await t.db.selectFrom('lfs_objects').select('id').where('oid', '=', oid).execute()).length, 1);

    const fork = await t.app.inject({ method: 'POST', url: `/api/v4/projects/${source.id}/fork`, headers: { 'private-token': dev.token, 'content-type': 'application/json' }, payload: JSON.stringify({ namespace_path: dev.user.username, path: `fork-${seq}` }) });
    assert.equal(fork.statusCode, 201, fork.body);
    const forkId = fork.json().id as number;
    assert.equal(await linkedCount(forkId), 1);

    const removeProject = async (id: number, token: string) => {
      const del = await t.app.inject({ method: 'DELETE', url: `/api/v4/projects/${id}`, headers: { 'private-token': token } });
      assert.equal(del.statusCode, 202, del.body);
      await drainJobs(t.app.cairn);
    };
    await removeProject(source.id, ROOT_TOKEN);
    await removeProject(forkId, dev.token);
    // Still linked by the first project: kept.
    assert.equal(await lfsStore(t.app.cairn).size(lfsObjectKey(oid)), bytes.length);
    await t.db.deleteFrom('lfs_objects_projects').where('project_id', '=', project.id).where('lfs_object_id', '=', (await t.db.selectFrom('lfs_objects').select('id').where('oid', '=', oid).executeTakeFirstOrThrow()).id).execute();
    const other = await t.createProject({ group });
    const put3 = await t.app.inject({ method: 'PUT', url: `/${await fullPathOf(other)}.git/gitlab-lfs/objects/${oid}/${bytes.length}`, headers: { 'content-type': 'application/octet-stream', authorization: basic('oauth2', dev.token) }, payload: bytes });
    assert.equal(put3.statusCode, 200);
    await removeProject(other.id, ROOT_TOKEN);
    assert.equal(await lfsStore(t.app.cairn).size(lfsObjectKey(oid)), null);
    assert.equal((await t.db.selectFrom('lfs_objects').select('id').where('oid', '=', oid).execute()).length, 0);
  });
});

describe('Git LFS objects on S3 object storage (streamed through Cairn)', () => {
  let t: TestContext;
  let s3: Awaited<ReturnType<typeof startS3>>;
  let dev: TestUser;
  let fullPath: string;
  before(async () => {
    s3 = await startS3();
    t = await createTestContext({ objectStoreUrl: s3.url });
    dev = await t.createUser();
    const group = await t.createGroup();
    await t.addMember(group, dev.user, 30);
    const project = await t.createProject({ group });
    fullPath = `${group.full_path}/${project.path}`;
  });
  after(async () => {
    await t.close();
    await s3.close();
  });

  it('uploads, refuses a wrong checksum without leaving an object, and downloads', async () => {
    const auth = 'Basic ' + Buffer.from(`oauth2:${dev.token}`).toString('base64');
    const bytes = crypto.randomBytes(9 * 1024 * 1024 + 3);
    const oid = sha256(bytes);
    const put = (payload: Buffer) =>
      t.app.inject({ method: 'PUT', url: `/${fullPath}.git/gitlab-lfs/objects/${oid}/${bytes.length}`, headers: { 'content-type': 'application/octet-stream', authorization: auth }, payload });
    const wrong = Buffer.from(bytes);
    wrong[wrong.length - 1] ^= 0xff;
    assert.equal((await put(wrong)).statusCode, 422);
    assert.equal(await lfsStore(t.app.cairn).size(lfsObjectKey(oid)), null);
    assert.equal((await put(bytes)).statusCode, 200);
    const res = await t.app.inject({
      method: 'POST',
      url: `/${fullPath}.git/info/lfs/objects/batch`,
      headers: { 'content-type': LFS_TYPE, authorization: auth },
      payload: JSON.stringify({ operation: 'download', objects: [{ oid, size: bytes.length }] }),
    });
    const href = new URL(res.json().objects[0].actions.download.href);
    const got = await t.app.inject({ method: 'GET', url: href.pathname, headers: { authorization: auth } });
    assert.equal(got.statusCode, 200);
    assert.ok(got.rawPayload.equals(bytes));
  });
});
