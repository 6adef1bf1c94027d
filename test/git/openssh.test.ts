import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { issueLfsToken } from '../../src/lfs/tokens.js';
import { startSshServer, type SshServer } from '../../src/ssh/server.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { freePort } from '../helpers/serve.js';
import { cleanupSshKeys, makeSshKey, SSH_KEYGEN } from '../helpers/ssh-keys.js';

// Git over SSH the OpenSSH way (sshd on its own port, `cairn ssh authorized-keys` as its
// AuthorizedKeysCommand, `cairn shell key-N` as the forced command) with Debian's sshd and the
// OpenSSH client, and `git-lfs-authenticate` (git-lfs over an ssh:// remote) against the built-in
// SSH server with Debian's git-lfs.

const ROOT = path.resolve(import.meta.dirname, '../..');
const CAIRN = path.join(ROOT, 'bin/cairn.mjs');
const SSHD = '/usr/sbin/sshd';
const HAS_SSH = SSH_KEYGEN && fs.existsSync('/usr/bin/ssh');
const HAS_LFS = ['/usr/bin/git-lfs', '/usr/local/bin/git-lfs'].some((f) => fs.existsSync(f));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const run = (cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<Run> =>
  new Promise((resolve) => {
    execFile(cmd, args, { cwd: opts.cwd, env: opts.env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
    );
  });

/** A client side: a home, a work directory, keys, and git / ssh run with one key. */
function client(getPort: () => number, sshUser: string) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-openssh-home-'));
  fs.writeFileSync(path.join(home, '.gitconfig'), '');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-openssh-work-'));
  let seq = 0;
  const sshArgs = (keyFile: string) => [
    '-F', '/dev/null', '-i', keyFile, '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes',
    '-o', `UserKnownHostsFile=${path.join(home, 'known_hosts')}`, '-o', 'StrictHostKeyChecking=accept-new', '-o', 'LogLevel=ERROR',
  ];
  const env = (keyFile: string) => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    LC_ALL: 'C',
    GIT_SSH_COMMAND: `ssh ${sshArgs(keyFile).join(' ')}`,
  });
  const git = (keyFile: string, args: string[], cwd?: string) =>
    run('git', ['-c', 'user.name=Test Pusher', '-c', 'user.email=pusher@example.com', '-c', 'init.defaultBranch=main', ...args], { cwd: cwd ?? work, env: env(keyFile) });
  return {
    home,
    work,
    git,
    ok: async (keyFile: string, args: string[], cwd?: string) => {
      const res = await git(keyFile, args, cwd);
      assert.equal(res.code, 0, `git ${args.join(' ')} failed: ${res.stderr}`);
      return res.stdout.trim();
    },
    ssh: (keyFile: string, command?: string) =>
      run('ssh', [...sshArgs(keyFile), '-T', '-p', String(getPort()), `${sshUser}@127.0.0.1`, ...(command === undefined ? [] : [command])], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home } }),
    url: (fullPath: string) => `ssh://${sshUser}@127.0.0.1:${getPort()}/${fullPath}.git`,
    dir: (name: string) => path.join(work, `${name}-${++seq}`),
    close: () => {
      fs.rmSync(home, { recursive: true, force: true });
      fs.rmSync(work, { recursive: true, force: true });
    },
  };
}

const newKey = (type: 'ed25519' | 'ecdsa' = 'ed25519') => {
  const k = makeSshKey(type);
  return { text: k.text, file: k.file!.replace(/\.pub$/, '') };
};

async function fullPathOf(t: TestContext, p: Project) {
  const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
  return `${ns.full_path}/${p.path}`;
}

async function addUserKey(t: TestContext, who: TestUser, body: Record<string, unknown> = {}) {
  const k = newKey();
  const res = await t.post('/api/v4/user/keys', { title: 'key', key: k.text, ...body }, { token: who.token });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return { ...k, id: res.body.id as number };
}

async function addDeployKey(t: TestContext, project: Project, who: TestUser, canPush: boolean) {
  const k = newKey();
  const res = await t.post(`/api/v4/projects/${project.id}/deploy_keys`, { title: `deploy ${canPush}`, key: k.text, can_push: canPush }, { token: who.token });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return { ...k, id: res.body.id as number };
}

/** The decoded Basic credential of a git-lfs-authenticate answer. */
function lfsCredential(answer: { header: { Authorization: string } }) {
  const decoded = Buffer.from(answer.header.Authorization.replace(/^Basic /, ''), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

describe('git-lfs-authenticate and git-lfs over SSH (built-in server)', { skip: HAS_SSH && HAS_LFS ? false : 'needs the OpenSSH client and git-lfs' }, () => {
  let t: TestContext;
  let ssh: SshServer;
  let port: number;
  let c: ReturnType<typeof client>;
  let base: string;
  let group: Namespace;
  let dev: TestUser;
  let reporter: TestUser;
  let outsider: TestUser;
  let project: Project;
  let projectPath: string;
  const keys = new Map<string, string>();

  const batch = (fullPath: string, operation: string, auth: string, oid = 'a'.repeat(64)) =>
    t.app.inject({
      method: 'POST',
      url: `/${fullPath}.git/info/lfs/objects/batch`,
      headers: { 'content-type': 'application/vnd.git-lfs+json', accept: 'application/vnd.git-lfs+json', authorization: auth },
      payload: JSON.stringify({ operation, objects: [{ oid, size: 3 }] }),
    });
  const authenticate = async (who: string, fullPath: string, op: string) => {
    const res = await c.ssh(keys.get(who)!, `git-lfs-authenticate ${fullPath}.git ${op}`);
    assert.equal(res.code, 0, res.stderr);
    return JSON.parse(res.stdout);
  };

  before(async () => {
    port = await freePort();
    t = await createTestContext({ defaultBranchProtection: 0, sshPort: port });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    (t.app.cairn.config as { externalUrl: string }).externalUrl = base;
    ssh = await startSshServer(t.app.cairn, { host: '127.0.0.1', port, log: { info() {}, warn() {}, error: (o, m) => console.error(m, o) } });
    c = client(() => port, 'git');
    dev = await t.createUser();
    reporter = await t.createUser();
    outsider = await t.createUser();
    group = await t.createGroup();
    await t.addMember(group, dev.user, 30);
    await t.addMember(group, reporter.user, 20);
    project = await t.createProject({ group });
    projectPath = await fullPathOf(t, project);
    keys.set('dev', (await addUserKey(t, dev)).file);
    keys.set('reporter', (await addUserKey(t, reporter)).file);
    keys.set('outsider', (await addUserKey(t, outsider)).file);
  });

  after(async () => {
    await ssh?.close();
    await t?.close();
    cleanupSshKeys();
    c?.close();
  });

  it("answers GitLab's JSON, with a credential the LFS API takes for that project and operation only", async () => {
    const answer = await authenticate('dev', projectPath, 'download');
    assert.equal(answer.href, `${base}/${projectPath}.git/info/lfs`);
    assert.equal(answer.expires_in, 7200);
    const cred = lfsCredential(answer);
    assert.equal(cred.username, dev.user.username);
    // Only a digest-free signed credential: nothing about it is stored.
    const down = await batch(projectPath, 'download', answer.header.Authorization);
    assert.equal(down.statusCode, 200, down.body);
    // A download credential does not upload.
    const up = await batch(projectPath, 'upload', answer.header.Authorization);
    assert.equal(up.statusCode, 401, up.body);
    // An upload credential uploads (and reads, as a batch upload does first).
    const upAnswer = await authenticate('dev', `/${projectPath}`, 'upload');
    const up2 = await batch(projectPath, 'upload', upAnswer.header.Authorization);
    assert.equal(up2.statusCode, 200, up2.body);
    assert.ok(JSON.parse(up2.body).objects[0].actions.upload.href);

    // Another project the user may push to: the credential is not for it.
    const other = await t.createProject({ group });
    const otherPath = await fullPathOf(t, other);
    assert.equal((await batch(otherPath, 'download', upAnswer.header.Authorization)).statusCode, 401);
    // Not a git credential: git over HTTP refuses it.
    const refs = await t.app.inject({ method: 'GET', url: `/${projectPath}.git/info/refs?service=git-upload-pack`, headers: { authorization: upAnswer.header.Authorization } });
    assert.equal(refs.statusCode, 401);
    // Tampered with, another user's name, or expired: refused.
    const tampered = 'Basic ' + Buffer.from(`${cred.username}:${cred.password.slice(0, -2)}xx`).toString('base64');
    assert.equal((await batch(projectPath, 'download', tampered)).statusCode, 401);
    const renamed = 'Basic ' + Buffer.from(`${reporter.user.username}:${cred.password}`).toString('base64');
    assert.equal((await batch(projectPath, 'download', renamed)).statusCode, 401);
    const keyId = (await t.db.selectFrom('keys').select('id').where('user_id', '=', dev.user.id).executeTakeFirstOrThrow()).id;
    const old = issueLfsToken(t.app.cairn.config, { keyId, projectId: project.id, operation: 'download' }, Date.now() - 7201 * 1000);
    assert.equal((await batch(projectPath, 'download', 'Basic ' + Buffer.from(`${dev.user.username}:${old.token}`).toString('base64'))).statusCode, 401);
  });

  it('refuses what git would refuse: a reporter uploading, an outsider of a private project, bad arguments, LFS disabled', async () => {
    const refused = await c.ssh(keys.get('reporter')!, `git-lfs-authenticate ${projectPath}.git upload`);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /not allowed to push/i);
    assert.equal((await authenticate('reporter', projectPath, 'download')).href, `${base}/${projectPath}.git/info/lfs`);
    const hidden = await c.ssh(keys.get('outsider')!, `git-lfs-authenticate ${projectPath}.git download`);
    assert.notEqual(hidden.code, 0);
    assert.match(hidden.stderr, /could not be found/i);
    for (const bad of [`git-lfs-authenticate ${projectPath}.git delete`, 'git-lfs-authenticate', `git-lfs-authenticate ${projectPath};id download`]) {
      const res = await c.ssh(keys.get('dev')!, bad);
      assert.notEqual(res.code, 0, bad);
      assert.match(res.stderr, /git-lfs-authenticate takes a repository path and an operation/, bad);
    }
    const noLfs = await t.createProject({ group });
    const res = await t.put(`/api/v4/projects/${noLfs.id}`, { lfs_enabled: false });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const off = await c.ssh(keys.get('dev')!, `git-lfs-authenticate ${await fullPathOf(t, noLfs)}.git download`);
    assert.notEqual(off.code, 0);
    assert.match(off.stderr, /Git LFS is disabled/);
  });

  it('git lfs pushes and a clone smudges through an ssh:// remote (git-lfs calls git-lfs-authenticate)', async () => {
    const dev_ = keys.get('dev')!;
    const repo = c.dir('lfs-push');
    await c.ok(dev_, ['init', '-q', repo]);
    await c.ok(dev_, ['lfs', 'install', '--local'], repo);
    await c.ok(dev_, ['remote', 'add', 'origin', c.url(projectPath)], repo);
    await c.ok(dev_, ['lfs', 'track', '*.bin'], repo);
    const blob = crypto.randomBytes(300_000);
    fs.writeFileSync(path.join(repo, 'data.bin'), blob);
    await c.ok(dev_, ['add', '.'], repo);
    await c.ok(dev_, ['commit', '-q', '-m', 'lfs over ssh'], repo);
    const push = await c.git(dev_, ['push', 'origin', 'main'], repo);
    assert.equal(push.code, 0, push.stderr);
    const oid = crypto.createHash('sha256').update(blob).digest('hex');
    const linked = await t.db.selectFrom('lfs_objects_projects').innerJoin('lfs_objects', 'lfs_objects.id', 'lfs_objects_projects.lfs_object_id').select('lfs_objects.oid').where('project_id', '=', project.id).execute();
    assert.deepEqual(linked.map((r) => r.oid), [oid]);

    const clone = c.dir('lfs-clone');
    const res = await c.git(keys.get('reporter')!, ['-c', 'filter.lfs.smudge=git-lfs smudge -- %f', '-c', 'filter.lfs.process=git-lfs filter-process', '-c', 'filter.lfs.required=true', 'clone', '-q', c.url(projectPath), clone]);
    assert.equal(res.code, 0, res.stderr);
    assert.ok(fs.readFileSync(path.join(clone, 'data.bin')).equals(blob), 'the clone has the bytes, not the pointer');
  });
});

/** Whether PostgreSQL at `url` answers (the OpenSSH mode needs it). */
const OPENSSH_SKIP = !process.env.DATABASE_URL
  ? 'the OpenSSH mode needs PostgreSQL: set DATABASE_URL'
  : !fs.existsSync(SSHD)
    ? `needs OpenSSH's sshd (${SSHD}, Debian package openssh-server)`
    : !HAS_SSH
      ? 'needs the OpenSSH client (ssh, ssh-keygen)'
      : false;

describe('cairn ssh authorized-keys without PostgreSQL', () => {
  it('refuses with a clear message, and prints no key line', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-openssh-pglite-'));
    try {
      const k = newKey();
      const [type, blob] = k.text.split(' ');
      const res = await run(process.execPath, [CAIRN, 'ssh', 'authorized-keys', type, blob], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', CAIRN_DATA_DIR: dataDir } });
      assert.equal(res.code, 1);
      assert.equal(res.stdout, '');
      assert.match(res.stderr, /the OpenSSH mode needs PostgreSQL \(set DATABASE_URL\)/);
      const shell = await run(process.execPath, [CAIRN, 'shell', 'key-1'], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', CAIRN_DATA_DIR: dataDir, SSH_ORIGINAL_COMMAND: "git-upload-pack 'a/b.git'" } });
      assert.equal(shell.code, 1);
      assert.match(shell.stderr, /^ERROR: .*needs PostgreSQL/);
      const usage = await run(process.execPath, [CAIRN, 'ssh', 'authorized-keys', type], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', CAIRN_DATA_DIR: dataDir } });
      assert.equal(usage.code, 2);
      assert.match(usage.stderr, /give the key type and the base64 key/);
    } finally {
      cleanupSshKeys();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('git over SSH behind OpenSSH (sshd, cairn ssh authorized-keys, cairn shell)', { skip: OPENSSH_SKIP }, () => {
  let t: TestContext;
  let port: number;
  let sshd: ChildProcess;
  let sshdLog = '';
  let confDir: string;
  let wrapper: string;
  let c: ReturnType<typeof client>;
  let group: Namespace;
  let dev: TestUser;
  let project: Project;
  let projectPath: string;
  const user = os.userInfo().username;
  const keys = new Map<string, { file: string; text: string; id: number }>();

  /** `cairn ssh authorized-keys` as sshd runs it (through the wrapper, with its environment). */
  const authorizedKeys = (text: string) => {
    const [type, blob] = text.trim().split(' ');
    return run(wrapper, ['ssh', 'authorized-keys', type, blob], { env: { PATH: '/usr/bin:/bin' } });
  };

  before(async () => {
    port = await freePort();
    t = await createTestContext({ defaultBranchProtection: 0 });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    (t.app.cairn.config as { externalUrl: string }).externalUrl = base;
    // sshd runs its AuthorizedKeysCommand only from a path no other user can write to, all the way
    // up: not under /tmp, so under the checkout's .cache.
    fs.mkdirSync(path.join(ROOT, '.cache'), { recursive: true });
    confDir = fs.mkdtempSync(path.join(ROOT, '.cache', 'openssh-test-'));
    wrapper = path.join(confDir, 'cairn');
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const env: Record<string, string> = {
      DATABASE_URL: t.databaseUrl!,
      CAIRN_DATA_DIR: t.tmpDir,
      CAIRN_EXTERNAL_URL: base,
      CAIRN_DEFAULT_BRANCH_PROTECTION: '0',
      CAIRN_LOG_LEVEL: 'error',
      CAIRN_SSH_SHELL_COMMAND: wrapper,
      PATH: process.env.PATH ?? '/usr/bin:/bin',
    };
    fs.writeFileSync(wrapper, `#!/bin/sh\n${Object.entries(env).map(([k, v]) => `export ${k}=${q(v)}`).join('\n')}\nexec ${q(process.execPath)} ${q(CAIRN)} "$@"\n`, { mode: 0o755 });
    const hostKey = path.join(confDir, 'host_ed25519');
    const gen = await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
    assert.equal(gen.code, 0, gen.stderr);
    const config = path.join(confDir, 'sshd_config');
    fs.writeFileSync(
      config,
      [
        `Port ${port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${hostKey}`,
        `PidFile ${path.join(confDir, 'sshd.pid')}`,
        'AuthorizedKeysFile none',
        `AuthorizedKeysCommand ${wrapper} ssh authorized-keys %t %k`,
        `AuthorizedKeysCommandUser ${user}`,
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        // Run as root (as in CI containers) the test logs in as root: only with the forced command.
        'PermitRootLogin forced-commands-only',
        'AcceptEnv GIT_PROTOCOL',
        'StrictModes no',
        'LogLevel ERROR',
        '',
      ].join('\n'),
    );
    // As root, sshd wants its privilege separation directory.
    if (process.getuid?.() === 0) fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
    sshd = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    sshd.stderr!.on('data', (b) => (sshdLog += String(b)));
    for (let i = 0; ; i++) {
      const up = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, '127.0.0.1', () => {
          s.destroy();
          resolve(true);
        });
        s.on('error', () => resolve(false));
      });
      if (up) break;
      if (i > 100 || sshd.exitCode !== null) throw new Error(`sshd did not start: ${sshdLog}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    c = client(() => port, user);
    dev = await t.createUser();
    group = await t.createGroup();
    await t.addMember(group, dev.user, 30);
    project = await t.createProject({ group, defaultBranch: 'main' });
    projectPath = await fullPathOf(t, project);
    keys.set('dev', await addUserKey(t, dev));
    const maintainer = await t.createUser();
    await t.addMember(group, maintainer.user, 40);
    keys.set('deploy-ro', await addDeployKey(t, project, maintainer, false));
  });

  after(async () => {
    sshd?.kill();
    await t?.close();
    cleanupSshKeys();
    c?.close();
    if (confDir) fs.rmSync(confDir, { recursive: true, force: true });
  });

  it("prints a forced-command line for a known key, nothing for unknown and expired ones", async () => {
    const dev_ = keys.get('dev')!;
    const res = await authorizedKeys(dev_.text);
    assert.equal(res.code, 0, res.stderr);
    const [type, blob] = dev_.text.trim().split(' ');
    assert.equal(res.stdout, `command="${wrapper} shell key-${dev_.id}",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty ${type} ${blob}\n`);
    const deploy = await authorizedKeys(keys.get('deploy-ro')!.text);
    assert.match(deploy.stdout, new RegExp(`shell key-${keys.get('deploy-ro')!.id}"`));

    const unknown = newKey();
    const none = await authorizedKeys(unknown.text);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, '');
    const expired = await addUserKey(t, dev);
    await t.db.updateTable('keys').set({ expires_at: new Date(Date.now() - 60_000).toISOString() as any }).where('id', '=', expired.id).execute();
    assert.equal((await authorizedKeys(expired.text)).stdout, '');
    // A blob that is not of the type named: nothing.
    assert.equal((await run(wrapper, ['ssh', 'authorized-keys', 'ssh-rsa', blob])).stdout, '');
  });

  it('welcomes, clones and pushes through sshd; the push is recorded and reaches the server process', async () => {
    const key = keys.get('dev')!.file;
    const hello = await c.ssh(key);
    assert.equal(hello.code, 0, hello.stderr + sshdLog);
    assert.equal(hello.stdout, `Welcome to Cairn, @${dev.user.username}!\n`);
    const used = await t.db.selectFrom('keys').select('last_used_at').where('id', '=', keys.get('dev')!.id).executeTakeFirstOrThrow();
    assert.ok(used.last_used_at, 'the key is recorded as used');

    // The server process reads the project (and caches it) before the push.
    assert.equal((await t.get(`/api/v4/projects/${project.id}`, { token: dev.token })).body.empty_repo, true);
    const repo = c.dir('push');
    const clone = await c.git(key, ['clone', c.url(projectPath), repo]);
    assert.equal(clone.code, 0, clone.stderr);
    fs.writeFileSync(path.join(repo, 'README.md'), '# through sshd\n');
    fs.writeFileSync(path.join(repo, '.gitlab-ci.yml'), 'test:\n  script: echo hi\n');
    await c.ok(key, ['add', '.'], repo);
    await c.ok(key, ['commit', '-q', '-m', 'first'], repo);
    const sha = await c.ok(key, ['rev-parse', 'HEAD'], repo);
    const push = await c.git(key, ['-c', 'protocol.version=2', 'push', 'origin', 'HEAD:main'], repo);
    assert.equal(push.code, 0, push.stderr);
    // Post-receive work was done by the shell process before git heard back: a pipeline for the
    // push, and the server's cached project row dropped (through PostgreSQL's notifications).
    const pipelines = await t.db.selectFrom('ci_pipelines').select(['sha', 'ref', 'user_id']).where('project_id', '=', project.id).execute();
    assert.deepEqual(pipelines, [{ sha, ref: 'main', user_id: dev.user.id }]);
    let shown: any;
    for (let i = 0; i < 50; i++) {
      shown = (await t.get(`/api/v4/projects/${project.id}`, { token: dev.token })).body;
      if (shown.empty_repo === false) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(shown.empty_repo, false);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/repository/branches/main`, { token: dev.token })).body.commit.id, sha);

    // Protocol v2 through sshd (AcceptEnv GIT_PROTOCOL), and a fresh clone has the push.
    const traced = await run('git', ['-c', 'protocol.version=2', 'ls-remote', c.url(projectPath), 'refs/heads/main'], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: c.home, GIT_TRACE_PACKET: '1', GIT_SSH_COMMAND: `ssh -F /dev/null -i ${key} -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=${path.join(c.home, 'known_hosts')} -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR` },
    });
    assert.equal(traced.code, 0, traced.stderr);
    assert.match(traced.stderr, /< version 2/);
    assert.equal(traced.stdout, `${sha}\trefs/heads/main\n`);

    // git-lfs-authenticate through sshd too.
    const lfs = await c.ssh(key, `git-lfs-authenticate ${projectPath}.git download`);
    assert.equal(lfs.code, 0, lfs.stderr);
    assert.equal(JSON.parse(lfs.stdout).href, `${(t.app.cairn.config as { externalUrl: string }).externalUrl}/${projectPath}.git/info/lfs`);
  });

  it('a read-only deploy key clones but may not push; an unknown key gets no session; hostile commands are refused', async () => {
    const deploy = keys.get('deploy-ro')!.file;
    const repo = c.dir('deploy');
    await c.ok(deploy, ['clone', '-q', c.url(projectPath), repo]);
    fs.writeFileSync(path.join(repo, 'deploy.txt'), 'no\n');
    await c.ok(deploy, ['add', '.'], repo);
    await c.ok(deploy, ['commit', '-q', '-m', 'deploy'], repo);
    const push = await c.git(deploy, ['push', 'origin', 'HEAD:main'], repo);
    assert.notEqual(push.code, 0);
    assert.match(push.stderr, /This deploy key does not have write access to this project/);
    assert.equal((await c.ssh(deploy)).stdout, 'Welcome to Cairn, Anonymous!\n');

    const stranger = newKey();
    const refused = await c.ssh(stranger.file);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /Permission denied \(publickey\)/);

    const hostile = await c.ssh(keys.get('dev')!.file, 'sh -c id');
    assert.equal(hostile.code, 1);
    assert.match(hostile.stderr, /^ERROR: This is a git server/);
    assert.equal(hostile.stdout, '');
  });
});
