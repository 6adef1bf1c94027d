import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import zlib from 'node:zlib';
import type { AddressInfo } from 'node:net';
import type { PostReceiveEvent } from '../../src/context.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { issueAccessToken } from '../../src/oauth/tokens.js';
import { insertPersonalAccessToken } from '../../src/services/tokens.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { generateHistory } from '../helpers/repo.js';

const ZERO = '0'.repeat(40);

interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

describe('git over HTTP', () => {
  let t: TestContext;
  let base: string;
  let home: string;
  let work: string;
  let group: Namespace;
  let dev: TestUser;
  let reporter: TestUser;
  let guest: TestUser;
  let outsider: TestUser;
  let project: Project;
  let projectPath: string;
  const events: PostReceiveEvent[] = [];
  let dirSeq = 0;

  const gitEnv = () => ({
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    LC_ALL: 'C',
  });

  /** Runs the real git client (asynchronously: the server answers in this same process). */
  const git = (args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<GitRun> =>
    new Promise((resolve) => {
      execFile(
        'git',
        ['-c', 'user.name=Test Pusher', '-c', 'user.email=pusher@example.com', '-c', 'init.defaultBranch=main', ...args],
        { cwd: opts.cwd ?? work, env: { ...gitEnv(), ...opts.env }, maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
    });
  const ok = async (args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}) => {
    const res = await git(args, opts);
    assert.equal(res.code, 0, `git ${args.join(' ')} failed: ${res.stderr}`);
    return res.stdout.trim();
  };
  const dir = (name: string) => path.join(work, `${name}-${++dirSeq}`);
  const url = (fullPath: string, cred?: { user?: string; password: string }, suffix = '.git') => {
    const auth = cred ? `${encodeURIComponent(cred.user ?? 'oauth2')}:${encodeURIComponent(cred.password)}@` : '';
    return `http://${auth}${base}/${fullPath}${suffix}`;
  };
  const fullPathOf = async (p: Project) => {
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
    return `${ns.full_path}/${p.path}`;
  };
  const commitFile = async (repo: string, file: string, content: string, message = `change ${file}`) => {
    fs.mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
    fs.writeFileSync(path.join(repo, file), content);
    await ok(['add', file], { cwd: repo });
    await ok(['commit', '-q', '-m', message], { cwd: repo });
    return ok(['rev-parse', 'HEAD'], { cwd: repo });
  };
  const projectRow = (id: number) => t.db.selectFrom('projects').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const basic = (user: string, password: string) => 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
  const pkt = (s: string) => (s.length + 4).toString(16).padStart(4, '0') + s;

  before(async () => {
    // Developers make first pushes to main here (default protection has its own test): none.
    t = await createTestContext({ defaultBranchProtection: 0 });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-git-home-'));
    fs.writeFileSync(path.join(home, '.gitconfig'), '');
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-git-work-'));
    t.app.cairn.postReceiveHooks.push(async (e) => {
      events.push(e);
    });
    dev = await t.createUser();
    reporter = await t.createUser();
    guest = await t.createUser();
    outsider = await t.createUser();
    const top = await t.createGroup();
    group = await t.createGroup({ parent: top });
    await t.addMember(group, dev.user, 30);
    await t.addMember(group, reporter.user, 20);
    await t.addMember(group, guest.user, 10);
    project = await t.createProject({ group });
    projectPath = await fullPathOf(project);
    assert.equal(projectPath.split('/').length, 3);
  });

  after(async () => {
    await t.close();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('clones an empty project, pushes, and a second clone (without .git) sees the same history', async () => {
    const first = dir('first');
    const clone = await git(['clone', url(projectPath, { password: dev.token }), first]);
    assert.equal(clone.code, 0, clone.stderr);
    assert.match(clone.stderr, /empty repository/);
    const sha = await commitFile(first, 'README.md', '# hello\n');
    const push = await git(['push', 'origin', 'main'], { cwd: first });
    assert.equal(push.code, 0, push.stderr);

    const second = dir('second');
    await ok(['clone', '-q', url(projectPath, { password: dev.token }, ''), second]);
    assert.equal(await ok(['rev-parse', 'HEAD'], { cwd: second }), sha);
    assert.equal(fs.readFileSync(path.join(second, 'README.md'), 'utf8'), '# hello\n');

    const row = await projectRow(project.id);
    assert.equal(row.empty_repo, false);
    assert.equal(row.default_branch, 'main');
    assert.ok(new Date(row.last_activity_at).getTime() >= new Date(project.last_activity_at).getTime());
    const event = events.find((e) => e.projectId === project.id);
    assert.deepEqual(event, { projectId: project.id, userId: dev.user.id, changes: [{ ref: 'refs/heads/main', oldSha: ZERO, newSha: sha }], pushOptions: [] });

    // A further push from the first clone reaches the second through fetch.
    const before = events.length;
    const next = await commitFile(first, 'src/a.txt', 'a\n');
    await ok(['push', '-q', 'origin', 'main'], { cwd: first });
    assert.deepEqual(events.slice(before), [{ projectId: project.id, userId: dev.user.id, changes: [{ ref: 'refs/heads/main', oldSha: sha, newSha: next }], pushOptions: [] }]);
    await ok(['fetch', '-q', 'origin'], { cwd: second });
    assert.equal(await ok(['rev-parse', 'origin/main'], { cwd: second }), next);
    await ok(['pull', '-q', '--ff-only'], { cwd: second });
    assert.equal(fs.readFileSync(path.join(second, 'src/a.txt'), 'utf8'), 'a\n');
  });

  it('the first push sets the default branch when the configured one does not exist', async () => {
    const p = await t.createProject({ group, defaultBranch: 'main' });
    const fp = await fullPathOf(p);
    const repo = dir('trunk');
    await ok(['clone', '-q', url(fp, { password: dev.token }), repo]);
    await ok(['checkout', '-q', '-b', 'trunk'], { cwd: repo });
    const sha = await commitFile(repo, 'x.txt', 'x\n');
    await ok(['push', '-q', 'origin', 'trunk'], { cwd: repo });
    const row = await projectRow(p.id);
    assert.equal(row.default_branch, 'trunk');
    assert.equal(row.empty_repo, false);
    // HEAD follows, so a fresh clone checks the branch out.
    const again = dir('trunk-clone');
    await ok(['clone', '-q', url(fp, { password: dev.token }), again]);
    assert.equal(await ok(['rev-parse', '--abbrev-ref', 'HEAD'], { cwd: again }), 'trunk');
    assert.equal(await ok(['rev-parse', 'HEAD'], { cwd: again }), sha);
    // A later branch does not change it.
    await ok(['checkout', '-q', '-b', 'main'], { cwd: repo });
    await commitFile(repo, 'y.txt', 'y\n');
    await ok(['push', '-q', 'origin', 'main'], { cwd: repo });
    assert.equal((await projectRow(p.id)).default_branch, 'trunk');
  });

  it('refuses pushes from reporters and from read_repository tokens, but lets them fetch', async () => {
    const readOnly = await insertPersonalAccessToken(t.db, { userId: dev.user.id, name: 'ro', scopes: ['read_repository'], expiresAt: null });
    for (const [who, password, message] of [
      ['reporter', reporter.token, /You are not allowed to push code to this project/],
      ['read_repository', readOnly.token, /You are not allowed to upload code/],
    ] as const) {
      const repo = dir(who);
      await ok(['clone', '-q', url(projectPath, { password }), repo]);
      await commitFile(repo, `${who}.txt`, 'nope\n');
      const push = await git(['push', 'origin', 'main'], { cwd: repo });
      assert.notEqual(push.code, 0, `${who} push should fail`);
      assert.match(push.stderr, message);
    }
    const readApi = await insertPersonalAccessToken(t.db, { userId: dev.user.id, name: 'ra', scopes: ['read_api'], expiresAt: null });
    const res = await git(['ls-remote', url(projectPath, { password: readApi.token })]);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /You are not allowed to download code/);
  });

  it('guests cannot read code of private projects; outsiders get 404; anonymous get 401', async () => {
    const g = await git(['ls-remote', url(projectPath, { password: guest.token })]);
    assert.notEqual(g.code, 0);
    assert.match(g.stderr, /not allowed to download code from this project/);

    const o = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('oauth2', outsider.token) } });
    assert.equal(o.status, 404);
    assert.match(o.text, /could not be found/);

    const anon = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, { token: null });
    assert.equal(anon.status, 401);
    assert.equal(anon.headers['www-authenticate'], 'Basic realm="GitLab"');
    const cli = await git(['ls-remote', url(projectPath)]);
    assert.notEqual(cli.code, 0);
    assert.match(cli.stderr, /Authentication failed|could not read Username/);

    const unknownAuthed = await t.get(`/${group.full_path}/nope.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('oauth2', dev.token) } });
    assert.equal(unknownAuthed.status, 404);
    const unknownAnon = await t.get(`/${group.full_path}/nope.git/info/refs?service=git-upload-pack`, { token: null });
    assert.equal(unknownAnon.status, 401);
    const unknownPost = await t.call('POST', `/nobody/nothing.git/git-upload-pack`, {
      token: null,
      headers: { authorization: basic('oauth2', dev.token), 'content-type': 'application/x-git-upload-pack-request' },
    });
    assert.equal(unknownPost.status, 404);
  });

  it('takes OAuth access tokens with the user name oauth2, within their scopes', async () => {
    const issue = (scopes: string[], ttl = 7200) =>
      issueAccessToken(t.db, { userId: dev.user.id, applicationId: null, scopes, ttl, withRefreshToken: false });
    const write = await issue(['write_repository']);
    const repo = dir('oauth');
    await ok(['clone', '-q', url(projectPath, { password: write.accessToken }), repo]);
    await commitFile(repo, 'oauth.txt', 'via oauth\n');
    await ok(['push', '-q', 'origin', 'main'], { cwd: repo });
    assert.equal(events.at(-1)!.userId, dev.user.id);

    const refs = `/${projectPath}.git/info/refs?service=git-upload-pack`;
    const otherName = await t.get(refs, { token: null, headers: { authorization: basic(dev.user.username, write.accessToken) } });
    assert.equal(otherName.status, 401);
    const read = await issue(['read_repository']);
    assert.equal((await t.get(refs, { token: null, headers: { authorization: basic('oauth2', read.accessToken) } })).status, 200);
    const push = await t.get(`/${projectPath}.git/info/refs?service=git-receive-pack`, { token: null, headers: { authorization: basic('oauth2', read.accessToken) } });
    assert.equal(push.status, 403);
    const profile = await issue(['read_user']);
    assert.equal((await t.get(refs, { token: null, headers: { authorization: basic('oauth2', profile.accessToken) } })).status, 403);
    const expired = await issue(['api'], 1);
    await t.db.updateTable('oauth_access_tokens').set({ created_at: new Date(Date.now() - 3600_000) }).where('id', '=', expired.row.id).execute();
    const res = await t.get(refs, { token: null, headers: { authorization: basic('oauth2', expired.accessToken) } });
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], 'Basic realm="GitLab"');
  });

  it('wrong, expired and blocked credentials are 401; deactivated users 403', async () => {
    const wrong = await t.get(`/${projectPath}/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('oauth2', 'glpat-wrong') } });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers['www-authenticate'], 'Basic realm="GitLab"');
    assert.match(wrong.text, /^HTTP Basic: Access denied/);
    const expired = await t.createUser({ expiresAt: '2020-01-01' });
    await t.addMember(group, expired.user, 30);
    const blocked = await t.createUser({ state: 'blocked' });
    await t.addMember(group, blocked.user, 30);
    const deactivated = await t.createUser({ state: 'deactivated' });
    await t.addMember(group, deactivated.user, 30);
    for (const [u, status] of [[expired, 401], [blocked, 401], [deactivated, 403]] as const) {
      const res = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('oauth2', u.token) } });
      assert.equal(res.status, status, u.user.state);
    }
    const blockedPassword = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, {
      token: null,
      headers: { authorization: basic(blocked.user.username, blocked.password) },
    });
    assert.equal(blockedPassword.status, 401);
  });

  it('accepts the user name with the real password (and refuses it with two-factor authentication)', async () => {
    const repo = dir('password');
    await ok(['clone', '-q', url(projectPath, { user: dev.user.username, password: dev.password }), repo]);
    await commitFile(repo, 'pw.txt', 'by password\n');
    await ok(['push', '-q', 'origin', 'main'], { cwd: repo });
    const viaEmail = await t.get(`/${projectPath}.git/info/refs?service=git-receive-pack`, { token: null, headers: { authorization: basic(dev.user.email, dev.password) } });
    assert.equal(viaEmail.status, 200);
    const bad = await git(['ls-remote', url(projectPath, { user: dev.user.username, password: 'wrong-password' })]);
    assert.notEqual(bad.code, 0);
    const tfa = await t.createUser({ two_factor_enabled: true });
    await t.addMember(group, tfa.user, 30);
    const res = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic(tfa.user.username, tfa.password) } });
    assert.equal(res.status, 401);
    assert.match(res.text, /personal access token/);
    // Its token works, with any user name.
    const tok = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('anything', tfa.token) } });
    assert.equal(tok.status, 200);
  });

  it('anonymous users clone public projects but cannot push; internal projects need a sign-in', async () => {
    const pub = await t.createProject({ group: await t.createGroup({ visibility: 20 }), visibility: 20 });
    const pubPath = await fullPathOf(pub);
    const seed = dir('pub-seed');
    await ok(['clone', '-q', url(pubPath, { password: t.app.cairn.config.rootToken! }), seed]);
    const sha = await commitFile(seed, 'pub.txt', 'public\n');
    await ok(['push', '-q', 'origin', 'main'], { cwd: seed });

    const anon = dir('pub-anon');
    await ok(['clone', '-q', url(pubPath), anon]);
    assert.equal(await ok(['rev-parse', 'HEAD'], { cwd: anon }), sha);
    await commitFile(anon, 'anon.txt', 'anonymous\n');
    const push = await git(['push', 'origin', 'main'], { cwd: anon });
    assert.notEqual(push.code, 0);
    const receive = await t.get(`/${pubPath}.git/info/refs?service=git-receive-pack`, { token: null });
    assert.equal(receive.status, 401);

    const internal = await t.createProject({ group: await t.createGroup({ visibility: 10 }), visibility: 10 });
    const intPath = await fullPathOf(internal);
    assert.equal((await t.get(`/${intPath}.git/info/refs?service=git-upload-pack`, { token: null })).status, 401);
    const signedIn = await t.get(`/${intPath}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('oauth2', outsider.token) } });
    assert.equal(signedIn.status, 200);
    const outsiderPush = await t.get(`/${intPath}.git/info/refs?service=git-receive-pack`, { token: null, headers: { authorization: basic('oauth2', outsider.token) } });
    assert.equal(outsiderPush.status, 403);
  });

  it('advertises refs in protocol v0 (with the service preamble) and v2', async () => {
    const v0 = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('oauth2', dev.token) } });
    assert.equal(v0.status, 200);
    assert.equal(v0.headers['content-type'], 'application/x-git-upload-pack-advertisement');
    assert.match(String(v0.headers['cache-control']), /no-cache/);
    assert.ok(v0.text.startsWith('001e# service=git-upload-pack\n0000'), v0.text.slice(0, 60));
    assert.match(v0.text, /refs\/heads\/main/);

    const v2 = await t.get(`/${projectPath}.git/info/refs?service=git-upload-pack`, {
      token: null,
      headers: { authorization: basic('oauth2', dev.token), 'git-protocol': 'version=2' },
    });
    assert.equal(v2.status, 200);
    assert.ok(v2.text.startsWith('000eversion 2\n'), v2.text.slice(0, 60));
    assert.match(v2.text, /ls-refs/);

    const rp = await t.get(`/${projectPath}.git/info/refs?service=git-receive-pack`, { token: null, headers: { authorization: basic('oauth2', dev.token) } });
    assert.equal(rp.headers['content-type'], 'application/x-git-receive-pack-advertisement');
    assert.ok(rp.text.startsWith('001f# service=git-receive-pack\n0000'));
    assert.match(rp.text, /report-status/);

    const dumb = await t.get(`/${projectPath}.git/info/refs`, { token: null, headers: { authorization: basic('oauth2', dev.token) } });
    assert.equal(dumb.status, 403);

    const v2cli = await git(['-c', 'protocol.version=2', 'ls-remote', url(projectPath, { password: dev.token })], { env: { GIT_TRACE_PACKET: '1' } });
    assert.equal(v2cli.code, 0, v2cli.stderr);
    assert.match(v2cli.stdout, /\trefs\/heads\/main/);
    assert.match(v2cli.stderr, /version 2/);
    const v0cli = await git(['-c', 'protocol.version=0', 'ls-remote', url(projectPath, { password: dev.token })]);
    assert.equal(v0cli.code, 0, v0cli.stderr);
    assert.equal(v0cli.stdout, v2cli.stdout);
  });

  it('accepts gzip request bodies (direct, and from git for large negotiations)', async () => {
    const head = (await ok(['ls-remote', url(projectPath, { password: dev.token }), 'refs/heads/main'])).split('\t')[0];
    const auth = { authorization: basic('oauth2', dev.token), 'content-type': 'application/x-git-upload-pack-request' };
    // v2 ls-refs
    const lsRefs = zlib.gzipSync(pkt('command=ls-refs\n') + '0001' + pkt('ref-prefix refs/heads/\n') + '0000');
    const r1 = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-upload-pack`, payload: lsRefs, headers: { ...auth, 'content-encoding': 'gzip', 'git-protocol': 'version=2' } });
    assert.equal(r1.statusCode, 200);
    assert.equal(r1.headers['content-type'], 'application/x-git-upload-pack-result');
    assert.match(r1.body, new RegExp(`${head} refs/heads/main`));
    // v0 fetch of one commit
    const want = zlib.gzipSync(pkt(`want ${head} ofs-delta\n`) + '0000' + pkt('done\n'));
    const r2 = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-upload-pack`, payload: want, headers: { ...auth, 'content-encoding': 'gzip' } });
    assert.equal(r2.statusCode, 200);
    assert.ok(r2.rawPayload.includes(Buffer.from('PACK')), 'response carries a pack');
    // A corrupt gzip body is not a 500.
    const bad = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-upload-pack`, payload: Buffer.from('not gzip'), headers: { ...auth, 'content-encoding': 'gzip' } });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.body, /could not be read/);
    const garbage = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-upload-pack`, payload: 'garbage', headers: auth });
    assert.equal(garbage.statusCode, 400);
    const wrongType = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-upload-pack`, payload: 'x', headers: { authorization: auth.authorization, 'content-type': 'text/plain' } });
    assert.equal(wrongType.statusCode, 415);

    // Many branches make git's upload-pack request exceed 1 KiB, so the client gzips it.
    const p = await t.createProject({ group });
    const fp = await fullPathOf(p);
    const repo = dir('many');
    await ok(['clone', '-q', url(fp, { password: dev.token }), repo]);
    await commitFile(repo, 'base.txt', 'base\n');
    for (let i = 0; i < 40; i++) {
      await ok(['checkout', '-q', '-B', `feature/branch-number-${i}`, 'main'], { cwd: repo });
      await commitFile(repo, `f${i}.txt`, `${i}\n`);
    }
    await ok(['checkout', '-q', 'main'], { cwd: repo });
    await ok(['push', '-q', 'origin', '--all'], { cwd: repo });
    const clone = await git(['clone', '--mirror', url(fp, { password: dev.token }), dir('many-clone')], { env: { GIT_TRACE_CURL: '1', GIT_TRACE_CURL_NO_DATA: '1' } });
    assert.equal(clone.code, 0, clone.stderr.slice(-2000));
    assert.match(clone.stderr, /Content-Encoding: gzip/i);
    const refs = await ok(['ls-remote', '--heads', url(fp, { password: dev.token })]);
    assert.equal(refs.split('\n').length, 41);
  });

  it('refuses deleting the default branch with a report git shows, and moves no ref', async () => {
    const repo = dir('delete');
    await ok(['clone', '-q', url(projectPath, { password: dev.token }), repo]);
    const main = await ok(['rev-parse', 'HEAD'], { cwd: repo });
    await ok(['push', '-q', 'origin', 'main:refs/heads/topic'], { cwd: repo });
    const before = events.length;
    const res = await git(['push', 'origin', ':main', ':topic'], { cwd: repo });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /The default branch of a project cannot be deleted/);
    assert.match(res.stderr, /\[remote rejected\] main/);
    assert.equal(events.length, before);
    const remote = await ok(['ls-remote', url(projectPath, { password: dev.token })]);
    assert.match(remote, new RegExp(`${main}\trefs/heads/main`));
    assert.match(remote, /refs\/heads\/topic/);
    // Deleting another branch works and is reported to the hooks.
    await ok(['push', '-q', 'origin', ':topic'], { cwd: repo });
    assert.deepEqual(events.at(-1)!.changes, [{ ref: 'refs/heads/topic', oldSha: main, newSha: ZERO }]);
  });

  it('enforces protected branches: push rights, and force pushes inside receive-pack', async () => {
    const p = await t.createProject({ group });
    const fp = await fullPathOf(p);
    const repo = dir('protected');
    await ok(['clone', '-q', url(fp, { password: dev.token }), repo]);
    const first = await commitFile(repo, 'a.txt', '1\n');
    await ok(['push', '-q', 'origin', 'main', 'main:release'], { cwd: repo });
    const protect = async (name: string, pushLevel: number) => {
      const row = await t.db.insertInto('protected_branches').values({ project_id: p.id, name }).returningAll().executeTakeFirstOrThrow();
      await t.db.insertInto('protected_branch_access_levels').values({ protected_branch_id: row.id, kind: 'push', access_level: pushLevel }).execute();
    };
    await protect('main', 30);
    await protect('release', 40);

    // Fast-forward to main is fine; a force push is refused by the hook and main stays.
    const second = await commitFile(repo, 'a.txt', '2\n');
    await ok(['push', '-q', 'origin', 'main'], { cwd: repo });
    await ok(['reset', '-q', '--hard', first], { cwd: repo });
    const third = await commitFile(repo, 'b.txt', 'diverged\n');
    const before = events.length;
    const force = await git(['push', '--force', 'origin', 'main'], { cwd: repo });
    assert.notEqual(force.code, 0);
    assert.match(force.stderr, /not allowed to force push code to a protected branch/);
    assert.equal(events.length, before);
    assert.match(await ok(['ls-remote', url(fp, { password: dev.token }), 'refs/heads/main']), new RegExp(second));

    // Maintainers-only branch: the developer is refused before anything is received.
    const rel = await git(['push', '--force', 'origin', `${third}:refs/heads/release`], { cwd: repo });
    assert.notEqual(rel.code, 0);
    assert.match(rel.stderr, /not allowed to push code to protected branches/);
    // An unprotected branch takes force pushes.
    await ok(['push', '-q', 'origin', `${second}:refs/heads/free`], { cwd: repo });
    await ok(['push', '-q', '--force', 'origin', `${third}:refs/heads/free`], { cwd: repo });
  });

  it('refuses pushes to read-only repositories and archived projects', async () => {
    const p = await t.createProject({ group });
    const fp = await fullPathOf(p);
    const repo = dir('ro');
    await ok(['clone', '-q', url(fp, { password: dev.token }), repo]);
    await commitFile(repo, 'a.txt', '1\n');
    await t.db.updateTable('projects').set({ repository_read_only: true }).where('id', '=', p.id).execute();
    const res = await git(['push', 'origin', 'main'], { cwd: repo });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /temporarily read-only/);
    await t.db.updateTable('projects').set({ repository_read_only: false, archived: true }).where('id', '=', p.id).execute();
    const archived = await git(['push', 'origin', 'main'], { cwd: repo });
    assert.notEqual(archived.code, 0);
    assert.match(archived.stderr, /archived project/);
    // Reading still works.
    await ok(['ls-remote', url(fp, { password: dev.token })]);
  });

  it('takes a first push of 10,000 commits with default git settings (probe, then a chunked body)', async () => {
    const p = await t.createProject({ group });
    const fp = await fullPathOf(p);
    const source = path.join(work, `generated-${++dirSeq}.git`);
    const tip = generateHistory(source, { commits: 10_000 });
    const packBytes = fs.readdirSync(path.join(source, 'objects/pack')).reduce((n, f) => n + fs.statSync(path.join(source, 'objects/pack', f)).size, 0);
    assert.ok(packBytes > 4 * 1024 * 1024, `the generated pack is ${packBytes} bytes`);
    const before = events.length;
    // The pack is larger than http.postBuffer (1 MiB by default): git probes with a bare flush-pkt first.
    const push = await git(['push', url(fp, { password: dev.token }), 'main'], { cwd: source, env: { GIT_TRACE_CURL: '1', GIT_TRACE_CURL_NO_DATA: '1' } });
    assert.equal(push.code, 0, push.stderr.slice(-2000));
    assert.match(push.stderr, /Transfer-Encoding: chunked/i, 'the pack went as a chunked body after the probe');
    assert.equal(events.length, before + 1);
    assert.deepEqual(events.at(-1)!.changes, [{ ref: 'refs/heads/main', oldSha: ZERO, newSha: tip }]);
    const row = await projectRow(p.id);
    assert.equal(row.empty_repo, false);
    assert.equal(row.default_branch, 'main');
    // Everything arrived: a full clone has the same history, and fsck finds nothing wrong.
    const clone = dir('generated-clone');
    await ok(['clone', '-q', '--bare', url(fp, { password: dev.token }), clone]);
    assert.equal(await ok(['rev-list', '--count', 'main'], { cwd: clone }), '10000');
    await ok(['fsck', '--no-progress'], { cwd: clone });

    // Shallow and partial clones of the same repository.
    const shallow = dir('shallow');
    await ok(['clone', '-q', '--depth', '3', url(fp, { password: dev.token }), shallow]);
    assert.equal(await ok(['rev-list', '--count', 'HEAD'], { cwd: shallow }), '3');
    await ok(['fetch', '-q', '--deepen', '10'], { cwd: shallow });
    assert.equal(await ok(['rev-list', '--count', 'HEAD'], { cwd: shallow }), '13');
    const partial = dir('partial');
    await ok(['clone', '-q', '--filter=blob:none', '--no-checkout', url(fp, { password: dev.token }), partial]);
    const missing = await ok(['rev-list', '--objects', '--missing=print', 'HEAD'], { cwd: partial });
    assert.ok(missing.split('\n').filter((l) => l.startsWith('?')).length > 5000, 'blobs were left out of the partial clone');
    // An old revision's file is fetched lazily, by object id.
    const old = await ok(['show', 'HEAD~9000:src/dir0/file0.ts'], { cwd: partial });
    assert.match(old, /export const value0 = /);
  });

  it('answers git\'s push probe and 100-continue bodies like git http-backend', async () => {
    const headers = { authorization: basic('oauth2', dev.token), 'content-type': 'application/x-git-receive-pack-request' };
    const probe = await fetch(`http://${base}/${projectPath}.git/git-receive-pack`, { method: 'POST', headers, body: '0000' });
    assert.equal(probe.status, 200);
    assert.equal(probe.headers.get('content-type'), 'application/x-git-receive-pack-result');
    assert.equal((await probe.arrayBuffer()).byteLength, 0);
    // A client that waits for 100 Continue before sending its (chunked) body.
    const net = await import('node:net');
    const [host, port] = base.split(':');
    const answer = await new Promise<string>((resolve, reject) => {
      let text = '';
      const socket = net.connect(Number(port), host, () => {
        socket.write(
          `POST /${projectPath}.git/git-receive-pack HTTP/1.1\r\nHost: ${base}\r\nAuthorization: ${headers.authorization}\r\n` +
            `Content-Type: ${headers['content-type']}\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
        );
      });
      socket.on('data', (b) => {
        const before = text;
        text += b.toString('latin1');
        if (!before.includes('100 Continue') && text.includes('100 Continue')) socket.write('4\r\n0000\r\n0\r\n\r\n');
      });
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(answer, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/);
  });

  it('atomic pushes move every ref or none; push options reach the post-receive hooks', async () => {
    const p = await t.createProject({ group });
    const fp = await fullPathOf(p);
    const repo = dir('atomic');
    await ok(['clone', '-q', url(fp, { password: dev.token }), repo]);
    const first = await commitFile(repo, 'a.txt', '1\n');
    await ok(['push', '-q', 'origin', 'main', 'main:release'], { cwd: repo });
    const row = await t.db.insertInto('protected_branches').values({ project_id: p.id, name: 'release' }).returningAll().executeTakeFirstOrThrow();
    await t.db.insertInto('protected_branch_access_levels').values({ protected_branch_id: row.id, kind: 'push', access_level: 40 }).execute();
    const second = await commitFile(repo, 'a.txt', '2\n');
    const before = events.length;
    const refused = await git(['push', '--atomic', 'origin', 'main', 'main:release', 'main:refs/heads/other'], { cwd: repo });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /not allowed to push code to protected branches/);
    assert.equal(events.length, before);
    const remote = await ok(['ls-remote', url(fp, { password: dev.token })]);
    assert.match(remote, new RegExp(`${first}\trefs/heads/main`));
    assert.doesNotMatch(remote, /refs\/heads\/other/);

    await ok(['push', '-q', '--atomic', '-o', 'ci.skip', '-o', 'ci.variable=FOO=bar', 'origin', 'main', 'main:refs/heads/other'], { cwd: repo });
    const event = events.at(-1)!;
    assert.deepEqual(event.pushOptions, ['ci.skip', 'ci.variable=FOO=bar']);
    assert.deepEqual(event.changes.map((c) => [c.ref, c.newSha]).sort(), [
      ['refs/heads/main', second],
      ['refs/heads/other', second],
    ]);
  });

  it('rejects malformed push requests with 400', async () => {
    const headers = { authorization: basic('oauth2', dev.token), 'content-type': 'application/x-git-receive-pack-request' };
    const res = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-receive-pack`, payload: pkt('garbage\n') + '0000', headers });
    assert.equal(res.statusCode, 400);
    const truncated = await t.app.inject({ method: 'POST', url: `/${projectPath}.git/git-receive-pack`, payload: '00', headers });
    assert.equal(truncated.statusCode, 400);
  });
});
