import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { PostReceiveEvent } from '../../src/context.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { sshRepoUrl } from '../../src/presenters/users.js';
import { parseSshCommand } from '../../src/ssh/command.js';
import { hostKeysDir, loadHostKeys } from '../../src/ssh/host_keys.js';
import { verifySkSignature } from '../../src/ssh/sk_keys.js';
import crypto from 'node:crypto';
import { parseSshPublicKey } from '../../src/lib/ssh-keys.js';
import { startSshServer, type SshServer } from '../../src/ssh/server.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { generateHistory } from '../helpers/repo.js';
import { openTestDatabase } from '../helpers/database.js';
import { freePort, startServe } from '../helpers/serve.js';
import { cleanupSshKeys, makeSshKey, SSH_KEYGEN } from '../helpers/ssh-keys.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const HAS_SSH = SSH_KEYGEN && fs.existsSync('/usr/bin/ssh');

describe('git over SSH', { skip: HAS_SSH ? false : 'needs the OpenSSH client (ssh, ssh-keygen)' }, () => {
  let t: TestContext;
  let ssh: SshServer;
  let port: number;
  let home: string;
  let work: string;
  let group: Namespace;
  let dev: TestUser;
  let outsider: TestUser;
  let project: Project;
  let projectPath: string;
  let tip: string;
  /** Private key files by owner. */
  const keys = new Map<string, string>();
  const events: PostReceiveEvent[] = [];
  let dirSeq = 0;

  /** A new ed25519 key pair; its private key file. */
  const newKey = (type: 'ed25519' | 'rsa' | 'ecdsa' = 'ed25519', bits?: number) => {
    const k = makeSshKey(type, bits);
    return { text: k.text, file: k.file!.replace(/\.pub$/, '') };
  };
  const addUserKey = async (who: TestUser, type: 'ed25519' | 'rsa' | 'ecdsa' = 'ed25519', bits?: number) => {
    const k = newKey(type, bits);
    const res = await t.post('/api/v4/user/keys', { title: `${type} key`, key: k.text }, { token: who.token });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return { ...k, id: res.body.id as number };
  };

  const sshCommand = (keyFile: string) =>
    `ssh -F /dev/null -i ${keyFile} -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=${path.join(home, 'known_hosts')} -o StrictHostKeyChecking=accept-new -o LogLevel=ERROR`;
  const gitEnv = (keyFile: string) => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    LC_ALL: 'C',
    GIT_SSH_COMMAND: sshCommand(keyFile),
  });
  const run = (cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<Run> =>
    new Promise((resolve) => {
      execFile(cmd, args, { cwd: opts.cwd ?? work, env: opts.env, maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
    });
  /** The real git client with this key. */
  const git = (keyFile: string, args: string[], cwd?: string) =>
    run('git', ['-c', 'user.name=Test Pusher', '-c', 'user.email=pusher@example.com', '-c', 'init.defaultBranch=main', ...args], { cwd, env: gitEnv(keyFile) });
  const ok = async (keyFile: string, args: string[], cwd?: string) => {
    const res = await git(keyFile, args, cwd);
    assert.equal(res.code, 0, `git ${args.join(' ')} failed: ${res.stderr}`);
    return res.stdout.trim();
  };
  /** `ssh git@127.0.0.1 -p PORT [command]` with this key. */
  const sshRun = (keyFile: string, command?: string) =>
    run('ssh', [...sshCommand(keyFile).split(' ').slice(1), '-T', '-p', String(port), 'git@127.0.0.1', ...(command === undefined ? [] : [command])], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home } });
  const url = (fullPath: string) => `ssh://git@127.0.0.1:${port}/${fullPath}.git`;
  const dir = (name: string) => path.join(work, `${name}-${++dirSeq}`);
  const fullPathOf = async (p: Project) => {
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
    return `${ns.full_path}/${p.path}`;
  };
  const commitFile = async (keyFile: string, repo: string, file: string, content: string) => {
    fs.mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
    fs.writeFileSync(path.join(repo, file), content);
    await ok(keyFile, ['add', file], repo);
    await ok(keyFile, ['commit', '-q', '-m', `change ${file}`], repo);
    return ok(keyFile, ['rev-parse', 'HEAD'], repo);
  };

  before(async () => {
    port = await freePort();
    t = await createTestContext({ defaultBranchProtection: 0, sshPort: port });
    ssh = await startSshServer(t.app.cairn, { host: '127.0.0.1', port, log: { info() {}, warn() {}, error: (o, m) => console.error(m, o) } });
    assert.equal(ssh.port, port);
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-ssh-home-'));
    fs.writeFileSync(path.join(home, '.gitconfig'), '');
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-ssh-work-'));
    t.app.cairn.postReceiveHooks.push(async (e) => {
      events.push(e);
    });
    dev = await t.createUser();
    outsider = await t.createUser();
    group = await t.createGroup();
    await t.addMember(group, dev.user, 30);
    project = await t.createProject({ group });
    projectPath = await fullPathOf(project);
    // A real-size history: a few thousand commits.
    tip = generateHistory(projectRepoPath(t.app.cairn, project), { commits: 3000 });
    await t.db.updateTable('projects').set({ empty_repo: false }).where('id', '=', project.id).execute();
    keys.set('dev', (await addUserKey(dev)).file);
    keys.set('outsider', (await addUserKey(outsider, 'ecdsa')).file);
  });

  after(async () => {
    await ssh?.close();
    await t?.close();
    cleanupSshKeys();
    if (home) fs.rmSync(home, { recursive: true, force: true });
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('ssh without a command welcomes the key owner by name, and records the key as used', async () => {
    const res = await sshRun(keys.get('dev')!);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.stdout, `Welcome to Cairn, @${dev.user.username}!\n`);
    const row = await t.db.selectFrom('keys').select('last_used_at').where('user_id', '=', dev.user.id).executeTakeFirstOrThrow();
    assert.ok(row.last_used_at, 'last_used_at is set');
    assert.ok(Date.now() - new Date(row.last_used_at).getTime() < 60_000);
  });

  it('projects show the SSH port in ssh_url_to_repo', async () => {
    const res = await t.get(`/api/v4/projects/${project.id}`);
    assert.equal(res.body.ssh_url_to_repo, `ssh://git@127.0.0.1:${port}/${projectPath}.git`);
  });

  it('clones a repository of thousands of commits (protocol v2 and v0) and fetches what is new', async () => {
    const v2 = dir('clone-v2');
    const res = await git(keys.get('dev')!, ['-c', 'protocol.version=2', 'clone', '-q', url(projectPath), v2]);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(await ok(keys.get('dev')!, ['rev-parse', 'HEAD'], v2), tip);
    assert.equal(await ok(keys.get('dev')!, ['rev-list', '--count', 'HEAD'], v2), '3000');
    await ok(keys.get('dev')!, ['fsck', '--no-progress'], v2);

    // Protocol v2 was spoken: GIT_PROTOCOL came through the env request.
    const traced = await run('git', ['-c', 'protocol.version=2', 'ls-remote', url(projectPath), 'refs/heads/main'], { env: { ...gitEnv(keys.get('dev')!), GIT_TRACE_PACKET: '1' } });
    assert.equal(traced.code, 0, traced.stderr);
    assert.match(traced.stderr, /< version 2/);
    assert.equal(traced.stdout, `${tip}\trefs/heads/main\n`);

    const v0 = dir('clone-v0');
    await ok(keys.get('dev')!, ['-c', 'protocol.version=0', 'clone', '-q', `git@127.0.0.1:${projectPath}.git`.replace('git@127.0.0.1:', `ssh://git@127.0.0.1:${port}/`), v0]);
    assert.equal(await ok(keys.get('dev')!, ['rev-parse', 'HEAD'], v0), tip);

    // New history on the server: a fetch brings it.
    const newTip = generateHistory(projectRepoPath(t.app.cairn, project), { commits: 10, branch: 'other' });
    await ok(keys.get('dev')!, ['fetch', '-q', 'origin'], v2);
    assert.equal(await ok(keys.get('dev')!, ['rev-parse', 'origin/other'], v2), newTip);
  });

  it('pushes over SSH, with the post-receive work done before git hears back', async () => {
    const empty = await t.createProject({ group, defaultBranch: 'trunk' });
    const emptyPath = await fullPathOf(empty);
    const repo = dir('push');
    const clone = await git(keys.get('dev')!, ['clone', url(emptyPath), repo]);
    assert.equal(clone.code, 0, clone.stderr);
    const sha = await commitFile(keys.get('dev')!, repo, 'README.md', '# over ssh\n');
    const push = await git(keys.get('dev')!, ['push', 'origin', 'HEAD:main'], repo);
    assert.equal(push.code, 0, push.stderr);
    const row = await t.db.selectFrom('projects').selectAll().where('id', '=', empty.id).executeTakeFirstOrThrow();
    assert.equal(row.empty_repo, false);
    assert.equal(row.default_branch, 'main');
    const event = events.find((e) => e.projectId === empty.id);
    assert.deepEqual(event?.changes.map((c) => [c.ref, c.newSha]), [['refs/heads/main', sha]]);
    assert.equal(event?.userId, dev.user.id);

    // A large push: the thousands of commits of the first project into this one.
    const big = dir('big');
    await ok(keys.get('dev')!, ['clone', '-q', url(projectPath), big]);
    const bigPush = await git(keys.get('dev')!, ['push', url(emptyPath), 'HEAD:refs/heads/imported'], big);
    assert.equal(bigPush.code, 0, bigPush.stderr);
    assert.equal((await ok(keys.get('dev')!, ['ls-remote', url(emptyPath), 'refs/heads/imported'])).split('\t')[0], tip);
    // Deleting a branch (no pack follows the commands).
    const del = await git(keys.get('dev')!, ['push', url(emptyPath), ':refs/heads/imported'], big);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(await ok(keys.get('dev')!, ['ls-remote', url(emptyPath), 'refs/heads/imported']), '');
    // Nothing to push: the client hangs up after the advertisement.
    const noop = await git(keys.get('dev')!, ['push', 'origin', 'HEAD:main'], repo);
    assert.equal(noop.code, 0, noop.stderr);
  });

  it('refuses a developer push to a protected branch, with GitLab words', async () => {
    const p = await t.createProject({ group });
    const pPath = await fullPathOf(p);
    generateHistory(projectRepoPath(t.app.cairn, p), { commits: 5 });
    const prot = await t.post(`/api/v4/projects/${p.id}/protected_branches`, { name: 'main', push_access_level: 40, merge_access_level: 40 });
    assert.equal(prot.status, 201, JSON.stringify(prot.body));
    const repo = dir('protected');
    await ok(keys.get('dev')!, ['clone', '-q', url(pPath), repo]);
    await commitFile(keys.get('dev')!, repo, 'x.txt', 'x\n');
    const push = await git(keys.get('dev')!, ['push', 'origin', 'HEAD:main'], repo);
    assert.notEqual(push.code, 0);
    assert.match(push.stderr, /You are not allowed to push code to protected branches on this project/);
    // Another branch is fine.
    const side = await git(keys.get('dev')!, ['push', 'origin', 'HEAD:feature'], repo);
    assert.equal(side.code, 0, side.stderr);
  });

  it('deploy keys: read-only ones fetch but never push; can_push ones push, but not to protected branches; only on their projects', async () => {
    const ro = newKey();
    const res = await t.post(`/api/v4/projects/${project.id}/deploy_keys`, { title: 'read only', key: ro.text, can_push: false });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const repo = dir('deploy');
    await ok(ro.file, ['clone', '-q', url(projectPath), repo]);
    assert.equal(await ok(ro.file, ['rev-parse', 'HEAD'], repo), tip);
    await commitFile(ro.file, repo, 'deploy.txt', 'deploy\n');
    const push = await git(ro.file, ['push', 'origin', 'HEAD:deployed'], repo);
    assert.notEqual(push.code, 0);
    assert.match(push.stderr, /This deploy key does not have write access to this project/);
    // Another project (private) does not exist for the key.
    const other = await t.createProject({ group });
    const otherClone = await git(ro.file, ['clone', '-q', url(await fullPathOf(other)), dir('other')]);
    assert.notEqual(otherClone.code, 0);
    assert.match(otherClone.stderr, /could not be found/);
    const welcome = await sshRun(ro.file);
    assert.equal(welcome.stdout, 'Welcome to Cairn, Anonymous!\n');

    const rw = newKey();
    const added = await t.post(`/api/v4/projects/${project.id}/deploy_keys`, { title: 'writer', key: rw.text, can_push: true });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    const pushed = await git(rw.file, ['push', url(projectPath), 'HEAD:deployed'], repo);
    assert.equal(pushed.code, 0, pushed.stderr);
    const prot = await t.post(`/api/v4/projects/${project.id}/protected_branches`, { name: 'main', push_access_level: 30, merge_access_level: 30 });
    assert.equal(prot.status, 201, JSON.stringify(prot.body));
    const toMain = await git(rw.file, ['push', url(projectPath), 'HEAD:main'], repo);
    assert.notEqual(toMain.code, 0);
    assert.match(toMain.stderr, /You are not allowed to push code to protected branches on this project/);
    await t.delete(`/api/v4/projects/${project.id}/protected_branches/main`);
  });

  it('refuses an unknown key, an expired key, a blocked user, and outsiders of a private project', async () => {
    const stranger = newKey();
    const denied = await sshRun(stranger.file);
    assert.equal(denied.code, 255);
    assert.match(denied.stderr, /Permission denied \(publickey\)/);
    const clone = await git(stranger.file, ['clone', '-q', url(projectPath), dir('stranger')]);
    assert.notEqual(clone.code, 0);

    // The outsider's key works, but the private project does not exist for them.
    const hidden = await git(keys.get('outsider')!, ['clone', '-q', url(projectPath), dir('outsider')]);
    assert.notEqual(hidden.code, 0);
    assert.match(hidden.stderr, /The project you were looking for could not be found/);

    const expiring = await t.createUser();
    const key = await addUserKey(expiring, 'rsa', 3072);
    await t.db.updateTable('keys').set({ expires_at: new Date(Date.now() - 1000) }).where('id', '=', key.id).execute();
    const expired = await sshRun(key.file);
    assert.equal(expired.code, 1);
    assert.match(expired.stderr, /Your SSH key has expired/);

    const blocked = await t.createUser();
    await t.addMember(group, blocked.user, 30);
    const blockedKey = await addUserKey(blocked);
    assert.equal((await git(blockedKey.file, ['ls-remote', url(projectPath)])).code, 0);
    assert.equal((await t.post(`/api/v4/users/${blocked.user.id}/block`)).status, 201);
    const refused = await git(blockedKey.file, ['ls-remote', url(projectPath)]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /Your account has been blocked/);
  });

  it('refuses hostile and unknown commands in words, with a non-zero status', async () => {
    const key = keys.get('dev')!;
    for (const command of [
      "git-upload-pack '--upload-pack=touch /tmp/pwned'",
      "git-upload-pack '../../etc'",
      `git-upload-pack '${projectPath}/../../etc'`,
      `git-upload-pack '${projectPath}'; id`,
      `git-upload-pack ${projectPath} --help`,
      'ls -la',
      'sh -c id',
      'git-upload-pack',
    ]) {
      const res = await sshRun(key, command);
      assert.equal(res.code, 1, `${command}: ${res.code} ${res.stderr}`);
      assert.match(res.stderr, /^ERROR: /, command);
      assert.equal(res.stdout, '', command);
    }
    // Garbage on the wire: before the identification, and after it in place of the key exchange.
    for (const bytes of [Buffer.from('GET / HTTP/1.1\r\n\r\n'), Buffer.concat([Buffer.from('SSH-2.0-x\r\n'), Buffer.alloc(4096, 0xff)])]) {
      await new Promise<void>((resolve) => {
        const c = net.connect(port, '127.0.0.1', () => c.end(bytes));
        c.on('error', () => resolve());
        c.on('close', () => resolve());
        c.resume();
      });
    }
    // The server is still there.
    assert.equal((await sshRun(key)).code, 0);
  });

  it('serves 20 clones at once', async () => {
    const clones = await Promise.all(Array.from({ length: 20 }, (_, i) => git(keys.get('dev')!, ['clone', '-q', '--bare', url(projectPath), dir(`many${i}`)])));
    for (const c of clones) assert.equal(c.code, 0, c.stderr);
  });

  it("clones and pushes a snippet's repository", async () => {
    const created = await t.post('/api/v4/snippets', { title: 'ssh snippet', visibility: 'private', files: [{ file_path: 'a.txt', content: 'one\n' }] }, { token: dev.token });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.ssh_url_to_repo, `ssh://git@127.0.0.1:${port}/snippets/${created.body.id}.git`);
    const repo = dir('snippet');
    await ok(keys.get('dev')!, ['clone', '-q', created.body.ssh_url_to_repo, repo]);
    assert.equal(fs.readFileSync(path.join(repo, 'a.txt'), 'utf8'), 'one\n');
    await commitFile(keys.get('dev')!, repo, 'a.txt', 'two\n');
    const push = await git(keys.get('dev')!, ['push', 'origin', 'HEAD'], repo);
    assert.equal(push.code, 0, push.stderr);
    const raw = await t.get(`/api/v4/snippets/${created.body.id}/files/main/a.txt/raw`, { token: dev.token });
    assert.equal(raw.text, 'two\n');
    // Someone else's private snippet does not exist for the outsider.
    const hidden = await git(keys.get('outsider')!, ['ls-remote', created.body.ssh_url_to_repo]);
    assert.notEqual(hidden.code, 0);
    assert.match(hidden.stderr, /could not be found/);
  });

  it('git archive --remote (upload-archive)', async () => {
    const res = await git(keys.get('dev')!, ['archive', `--remote=${url(projectPath)}`, '--format=tar', 'main', 'src/dir0']);
    assert.ok(res.stdout.length > 1024, 'a tar archive came back');
    assert.equal(res.code, 0, res.stderr);
  });
});

describe('ssh command parsing', () => {
  it('accepts the three git commands with a quoted or bare repository path', () => {
    assert.deepEqual(parseSshCommand("git-upload-pack '/group/project.git'"), { ok: true, service: 'git-upload-pack', path: 'group/project' });
    assert.deepEqual(parseSshCommand("git-receive-pack 'a/b/c.git'"), { ok: true, service: 'git-receive-pack', path: 'a/b/c' });
    assert.deepEqual(parseSshCommand('git-upload-archive group/project'), { ok: true, service: 'git-upload-archive', path: 'group/project' });
    assert.deepEqual(parseSshCommand("git upload-pack 'snippets/12.git'"), { ok: true, service: 'git-upload-pack', path: 'snippets/12' });
  });

  it('accepts git-lfs-authenticate with a path and download or upload', () => {
    assert.deepEqual(parseSshCommand('git-lfs-authenticate group/project.git download'), { ok: true, service: 'git-lfs-authenticate', path: 'group/project', operation: 'download' });
    assert.deepEqual(parseSshCommand("git-lfs-authenticate '/a/b/c.git' upload"), { ok: true, service: 'git-lfs-authenticate', path: 'a/b/c', operation: 'upload' });
  });

  it('refuses options, traversal, several arguments, shell syntax and other commands', () => {
    for (const c of [
      "git-upload-pack '--upload-pack=x'",
      "git-upload-pack '-x/y'",
      "git-upload-pack '../../etc'",
      "git-upload-pack 'a/../b'",
      "git-upload-pack 'a/./b'",
      "git-upload-pack '/etc'",
      "git-upload-pack 'a/b' 'c/d'",
      "git-upload-pack 'a/b'\n",
      'git-upload-pack a/b;id',
      "git-upload-pack 'a/b'\\''x'",
      'git-upload-pack $(id)/x',
      'git-lfs-authenticate a/b delete',
      'git-lfs-authenticate a/b',
      "git-lfs-authenticate '../a/b' upload",
      'git-lfs-authenticate a/b;id download',
      "git-lfs-authenticate 'a/b' download x",
      'git-shell',
      '',
      'x'.repeat(5000),
    ]) {
      assert.equal(parseSshCommand(c).ok, false, c);
    }
  });
});

describe('ssh host keys', () => {
  it('are made once under the data directory, private ones 0600, and kept', () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-hostkeys-'));
    try {
      const first = loadHostKeys(dataDir);
      assert.equal(first.length, 2);
      assert.match(first[0].toString(), /BEGIN OPENSSH PRIVATE KEY/);
      for (const f of ['ssh_host_ed25519_key', 'ssh_host_rsa_key']) {
        assert.equal(fs.statSync(path.join(hostKeysDir(dataDir), f)).mode & 0o777, 0o600);
        assert.ok(fs.existsSync(path.join(hostKeysDir(dataDir), `${f}.pub`)));
      }
      const again = loadHostKeys(dataDir);
      assert.deepEqual(again, first);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('ssh clone URLs', () => {
  it('name the port unless it is 22 (or SSH is off), as GitLab shows them', () => {
    assert.equal(sshRepoUrl('https://git.example.com', 2222, 'g/p'), 'ssh://git@git.example.com:2222/g/p.git');
    assert.equal(sshRepoUrl('https://git.example.com:8443/', 22, 'g/sub/p'), 'git@git.example.com:g/sub/p.git');
    assert.equal(sshRepoUrl('http://127.0.0.1:8080', 0, 'g/p'), 'git@127.0.0.1:g/p.git');
  });
});

describe('cairn serve with git over SSH', { skip: HAS_SSH ? false : 'needs the OpenSSH client (ssh, ssh-keygen)' }, () => {
  it('listens on CAIRN_SSH_PORT with host keys made under the data directory, and stops on SIGTERM', async () => {
    const testDb = process.env.DATABASE_URL ? await openTestDatabase() : null;
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-ssh-serve-'));
    const sshPort = await freePort();
    const token = 'ssh-serve-root-token-0123456789';
    const server = await startServe({ databaseUrl: testDb?.databaseUrl ?? undefined, dataDir, rootToken: token, env: { CAIRN_SSH_PORT: String(sshPort), CAIRN_SSH_HOST: '127.0.0.1' } });
    try {
      const key = makeSshKey('ed25519');
      const added = await fetch(`${server.url}/api/v4/user/keys`, { method: 'POST', headers: { 'private-token': token, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'root', key: key.text }) });
      assert.equal(added.status, 201);
      const project = await (await fetch(`${server.url}/api/v4/projects`, { method: 'POST', headers: { 'private-token': token, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'served' }) })).json();
      assert.equal(project.ssh_url_to_repo, `ssh://git@127.0.0.1:${sshPort}/root/served.git`);
      const welcome = await new Promise<Run>((resolve) =>
        execFile('ssh', ['-F', '/dev/null', '-i', key.file!.replace(/\.pub$/, ''), '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes', '-o', 'UserKnownHostsFile=/dev/null', '-o', 'StrictHostKeyChecking=no', '-o', 'LogLevel=ERROR', '-T', '-p', String(sshPort), 'git@127.0.0.1'], (err, stdout, stderr) =>
          resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
        ),
      );
      assert.equal(welcome.code, 0, welcome.stderr);
      assert.equal(welcome.stdout, 'Welcome to Cairn, @root!\n');
      assert.equal(fs.statSync(path.join(dataDir, 'ssh', 'ssh_host_ed25519_key')).mode & 0o777, 0o600);

      const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
      server.child.kill('SIGTERM');
      assert.equal(await exited, 0);
      const refused = await new Promise<boolean>((resolve) => {
        const c = net.connect(sshPort, '127.0.0.1', () => (c.end(), resolve(false)));
        c.on('error', () => resolve(true));
      });
      assert.ok(refused, 'the SSH port is closed');
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await testDb?.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
      cleanupSshKeys();
    }
  });
});

describe('security key (sk-) signatures', () => {
  const str = (b: Buffer | string) => {
    const body = Buffer.isBuffer(b) ? b : Buffer.from(b);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(body.length);
    return Buffer.concat([len, body]);
  };
  const sha256 = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest();
  const data = Buffer.from('session id and userauth request');
  const counter = Buffer.from([0, 0, 0, 7]);
  /** What an authenticator signs (PROTOCOL.u2f). */
  const signed = (flags: number, d: Buffer = data) => Buffer.concat([sha256('ssh:'), Buffer.from([flags]), counter, sha256(d)]);

  it('verifies sk-ssh-ed25519 signatures with user presence, as OpenSSH makes them', () => {
    const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
    const pk = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
    const blob = Buffer.concat([str('sk-ssh-ed25519@openssh.com'), str(pk), str('ssh:')]);
    // The key text the keys API stores is the same blob.
    assert.equal(parseSshPublicKey(`sk-ssh-ed25519@openssh.com ${blob.toString('base64')}`)?.family, 'ED25519_SK');
    const sig = (flags: number, d?: Buffer) => Buffer.concat([crypto.sign(null, signed(flags, d), privateKey), Buffer.from([flags]), counter]);
    assert.equal(verifySkSignature(blob, sig(0x01), data), true);
    assert.equal(verifySkSignature(blob, sig(0x05), data), true);
    assert.equal(verifySkSignature(blob, sig(0x00), data), false, 'no user presence');
    assert.equal(verifySkSignature(blob, sig(0x01, Buffer.from('other')), data), false);
    assert.equal(verifySkSignature(blob, sig(0x01).subarray(0, 60), data), false);
  });

  it('verifies sk-ecdsa-sha2-nistp256 signatures', () => {
    const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const q = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
    const blob = Buffer.concat([str('sk-ecdsa-sha2-nistp256@openssh.com'), str('nistp256'), str(q), str('ssh:')]);
    assert.equal(parseSshPublicKey(`sk-ecdsa-sha2-nistp256@openssh.com ${blob.toString('base64')}`)?.family, 'ECDSA_SK');
    const mpint = (b: Buffer) => str(b[0] & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
    const sig = (flags: number) => {
      const rs = crypto.sign('sha256', signed(flags), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      return Buffer.concat([mpint(rs.subarray(0, 32)), mpint(rs.subarray(32)), Buffer.from([flags]), counter]);
    };
    assert.equal(verifySkSignature(blob, sig(0x01), data), true);
    assert.equal(verifySkSignature(blob, sig(0x00), data), false);
    assert.equal(verifySkSignature(blob, sig(0x01), Buffer.from('tampered')), false);
  });
});
