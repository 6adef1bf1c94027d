import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { PostReceiveEvent } from '../../src/context.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { decryptSecret, tokenDigest } from '../../src/lib/secrets.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';

interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

describe('deploy tokens', () => {
  let t: TestContext;
  let base: string;
  let home: string;
  let work: string;
  let group: Namespace;
  let subgroup: Namespace;
  let project: Project;
  let subProject: Project;
  let otherProject: Project;
  let maintainer: TestUser;
  let developer: TestUser;
  let outsider: TestUser;
  let groupMaintainer: TestUser;
  let dirSeq = 0;
  const events: PostReceiveEvent[] = [];

  const P = () => `/api/v4/projects/${project.id}/deploy_tokens`;
  const G = () => `/api/v4/groups/${group.id}/deploy_tokens`;
  const fullPathOf = async (p: Project) => {
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', p.namespace_id).executeTakeFirstOrThrow();
    return `${ns.full_path}/${p.path}`;
  };
  const git = (args: string[], cwd = work): Promise<GitRun> =>
    new Promise((resolve) => {
      execFile(
        'git',
        ['-c', 'user.name=Deployer', '-c', 'user.email=deployer@example.com', '-c', 'init.defaultBranch=main', ...args],
        { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'), GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' } },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
    });
  const url = (fullPath: string, user: string, password: string) => `http://${encodeURIComponent(user)}:${encodeURIComponent(password)}@${base}/${fullPath}.git`;
  const dir = (name: string) => path.join(work, `${name}-${++dirSeq}`);
  const basic = (user: string, password: string) => 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
  const create = async (where: string, body: Record<string, unknown>, token?: string) => {
    const res = await t.post(where, body, token ? { token } : {});
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body as { id: number; username: string; token: string; name: string };
  };

  before(async () => {
    t = await createTestContext({ defaultBranchProtection: 0 });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-dt-home-'));
    fs.writeFileSync(path.join(home, '.gitconfig'), '');
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-dt-work-'));
    t.app.cairn.postReceiveHooks.push(async (e) => {
      events.push(e);
    });
    maintainer = await t.createUser();
    developer = await t.createUser();
    outsider = await t.createUser();
    groupMaintainer = await t.createUser();
    group = await t.createGroup();
    subgroup = await t.createGroup({ parent: group });
    project = await t.createProject({ group });
    subProject = await t.createProject({ group: subgroup });
    otherProject = await t.createProject();
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, developer.user, 30);
    await t.addMember(group, groupMaintainer.user, 40);
    for (const p of [project, subProject, otherProject]) await commitFiles(t, p, { 'README.md': `# ${p.path}\n` });
  });

  after(async () => {
    await t.close();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('creates, shows, lists and deletes project deploy tokens in GitLab\'s shapes (python-gitlab\'s functional test)', async () => {
    const today = new Date().toISOString().slice(0, 10);
    const created = await t.post(P(), { name: 'foo', username: 'bar', expires_at: today, scopes: ['read_registry'] }, { token: maintainer.token });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const { id, token } = created.body;
    assert.match(token, /^gldt-[A-Za-z0-9]{20}$/);
    assert.deepEqual(created.body, { id, name: 'foo', username: 'bar', expires_at: `${today}T00:00:00.000Z`, scopes: ['read_registry'], revoked: false, expired: true, token });
    // Only the digest is kept; no encrypted copy for an ordinary name.
    const row = await t.db.selectFrom('deploy_tokens').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.token_digest, tokenDigest(token));
    assert.equal(row.token_encrypted, null);
    assert.equal(row.creator_id, maintainer.user.id);
    assert.ok(!JSON.stringify(row).includes(token));

    const shown = { id, name: 'foo', username: 'bar', expires_at: `${today}T00:00:00.000Z`, scopes: ['read_registry'], revoked: false, expired: true };
    const list = await t.get(P(), { token: maintainer.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, [shown]);
    assert.equal(list.headers['x-total'], '1');
    const one = await t.get(`${P()}/${id}`, { token: maintainer.token });
    assert.deepEqual(one.body, shown);
    const all = await t.get('/api/v4/deploy_tokens');
    assert.equal(all.status, 200);
    assert.ok(all.body.some((d: any) => d.id === id && d.token === undefined));

    assert.equal((await t.delete(`${P()}/${id}`, { token: maintainer.token })).status, 204);
    const gone = await t.get(`${P()}/${id}`, { token: maintainer.token });
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.body, { message: '404 Not found' });
    assert.equal((await t.delete(`${P()}/${id}`, { token: maintainer.token })).status, 404);
  });

  it('group deploy tokens: default user name, no expiry, scopes in GitLab\'s order, the instance list and the active filter', async () => {
    const created = await create(G(), { name: 'foo', scopes: 'write_registry,read_repository' }, groupMaintainer.token);
    assert.equal(created.username, `gitlab+deploy-token-${created.id}`);
    const one = await t.get(`${G()}/${created.id}`, { token: groupMaintainer.token });
    assert.deepEqual(one.body, { id: created.id, name: 'foo', username: `gitlab+deploy-token-${created.id}`, expires_at: null, scopes: ['read_repository', 'write_registry'], revoked: false, expired: false });
    // A project's list shows only its own tokens; the group's its own.
    assert.ok(!(await t.get(P(), { token: maintainer.token })).body.some((d: any) => d.id === created.id));
    assert.ok((await t.get(G(), { token: groupMaintainer.token })).body.some((d: any) => d.id === created.id));

    const expired = await create(G(), { name: 'old', scopes: ['read_repository'], expires_at: '2020-01-01T00:00:00Z' });
    const revoked = await create(G(), { name: 'revoked', scopes: ['read_repository'] });
    await t.db.updateTable('deploy_tokens').set({ revoked: true }).where('id', '=', revoked.id).execute();
    const ids = (res: any) => res.body.map((d: any) => d.id);
    assert.deepEqual(ids(await t.get(G(), { query: { active: true } })), [created.id]);
    assert.deepEqual(ids(await t.get(G())), [created.id, expired.id, revoked.id]);
    const everyActive = ids(await t.get('/api/v4/deploy_tokens', { query: { active: true } }));
    assert.ok(everyActive.includes(created.id) && !everyActive.includes(expired.id) && !everyActive.includes(revoked.id));
    const shownRevoked = (await t.get(`${G()}/${revoked.id}`)).body;
    assert.equal(shownRevoked.revoked, true);
    assert.equal((await t.get(`${G()}/${expired.id}`)).body.expired, true);
    // Pagination.
    const page = await t.get(G(), { query: { per_page: 1, page: 2 } });
    assert.deepEqual(ids(page), [expired.id]);
    assert.equal(page.headers['x-total'], '3');
    // A project's token id is not found under the group.
    const projectToken = await create(P(), { name: 'p', scopes: ['read_repository'] });
    assert.equal((await t.get(`${G()}/${projectToken.id}`)).status, 404);
    assert.equal((await t.delete(`${G()}/${projectToken.id}`)).status, 404);
    assert.equal((await t.get(`${P()}/${projectToken.id}`)).status, 200);
  });

  it('who may call what: administrators list the instance, maintainers manage; outsiders get 404 on private projects, developers 403', async () => {
    assert.equal((await t.get('/api/v4/deploy_tokens', { token: maintainer.token })).status, 403);
    assert.equal((await t.get('/api/v4/deploy_tokens', { token: null })).status, 401);
    for (const [who, status] of [[outsider, 404], [developer, 403]] as const) {
      assert.equal((await t.get(P(), { token: who.token })).status, status, `list as ${status}`);
      assert.equal((await t.post(P(), { name: 'x', scopes: ['read_repository'] }, { token: who.token })).status, status);
    }
    const mine = await create(P(), { name: 'x', scopes: ['read_repository'] }, maintainer.token);
    assert.equal((await t.get(`${P()}/${mine.id}`, { token: developer.token })).status, 403);
    assert.equal((await t.delete(`${P()}/${mine.id}`, { token: developer.token })).status, 403);
    assert.equal((await t.delete(`${P()}/${mine.id}`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(P(), { token: null })).status, 401);
    // Group: a maintainer of the group manages its tokens, a developer of one of its projects does not see them.
    assert.equal((await t.get(G(), { token: groupMaintainer.token })).status, 200);
    assert.equal((await t.get(G(), { token: outsider.token })).status, 404);
    const groupDev = await t.createUser();
    await t.addMember(group, groupDev.user, 30);
    assert.equal((await t.get(G(), { token: groupDev.token })).status, 403);
    assert.equal((await t.post(G(), { name: 'x', scopes: ['read_repository'] }, { token: groupDev.token })).status, 403);
    // Maintainers of the group also manage the deploy tokens of its projects.
    assert.equal((await t.get(P(), { token: groupMaintainer.token })).status, 200);
    // A read_api token reads but does not create.
    const readApi = await t.createUser({ scopes: ['read_api'] });
    await t.addMember(project, readApi.user, 40);
    assert.equal((await t.get(P(), { token: readApi.token })).status, 200);
    assert.equal((await t.post(P(), { name: 'x', scopes: ['read_repository'] }, { token: readApi.token })).status, 403);
  });

  it('refuses bad input with GitLab\'s bodies', async () => {
    const cases: [Record<string, unknown>, unknown][] = [
      [{ scopes: ['read_repository'] }, { error: 'name is missing' }],
      [{ name: 'x' }, { error: 'scopes is missing' }],
      [{ name: 'x', scopes: ['read_repository', 'api'] }, { error: 'scopes does not have a valid value' }],
      [{ name: 'x', scopes: 'sudo' }, { error: 'scopes does not have a valid value' }],
      [{ name: 'x', scopes: [] }, { message: "Scopes can't be blank" }],
      [{ name: ' ', scopes: ['read_repository'] }, { message: "Name can't be blank" }],
      [{ name: 'x', scopes: ['read_repository'], username: 'has space' }, { message: "Username can contain only letters, digits, '_', '-', '+', and '.'" }],
      [{ name: 'x', scopes: [], username: 'a/b' }, { message: "Username can contain only letters, digits, '_', '-', '+', and '.' and Scopes can't be blank" }],
      [{ name: 'x', scopes: ['read_repository'], username: 'u'.repeat(256) }, { message: 'Username is too long (maximum is 255 characters)' }],
      [{ name: 'x', scopes: ['read_repository'], expires_at: 'tomorrow' }, { error: 'expires_at is invalid' }],
    ];
    for (const [body, expected] of cases) {
      const res = await t.post(P(), body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, expected, JSON.stringify(body));
    }
    assert.equal((await t.get(`${P()}/abc`)).status, 400);
    assert.equal((await t.get(P(), { query: { active: 'maybe' } })).status, 400);
  });

  it('is a git over HTTP password: read_repository clones, write_repository pushes, for its own project only', async () => {
    const fp = await fullPathOf(project);
    const reader = await create(P(), { name: 'reader', scopes: ['read_repository'] }, maintainer.token);
    const writer = await create(P(), { name: 'writer', username: 'ci-writer', scopes: ['write_repository'] }, maintainer.token);

    const clone = dir('reader');
    const res = await git(['clone', '-q', url(fp, reader.username, reader.token), clone]);
    assert.equal(res.code, 0, res.stderr);
    assert.equal(fs.readFileSync(path.join(clone, 'README.md'), 'utf8'), `# ${project.path}\n`);
    fs.writeFileSync(path.join(clone, 'new.txt'), 'new\n');
    assert.equal((await git(['add', 'new.txt'], clone)).code, 0);
    assert.equal((await git(['commit', '-q', '-m', 'new'], clone)).code, 0);
    const refused = await git(['push', 'origin', 'main'], clone);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /You are not allowed to upload code/);

    // The writer pushes the same commit.
    const pushed = await git(['push', url(fp, writer.username, writer.token), 'main'], clone);
    assert.equal(pushed.code, 0, pushed.stderr);
    const head = (await git(['rev-parse', 'HEAD'], clone)).stdout.trim();
    const branch = await t.get(`/api/v4/projects/${project.id}/repository/branches/main`);
    assert.equal(branch.body.commit.id, head);
    // Recorded in the name of the token's creator.
    const event = events.find((e) => e.projectId === project.id && e.changes.some((c) => c.newSha === head));
    assert.equal(event?.userId, maintainer.user.id);

    // Another project, even a public one, does not exist for it.
    const other = await git(['ls-remote', url(await fullPathOf(otherProject), reader.username, reader.token)]);
    assert.notEqual(other.code, 0);
    assert.match(other.stderr, /could not be found/);
    const sub = await git(['ls-remote', url(await fullPathOf(subProject), reader.username, reader.token)]);
    assert.notEqual(sub.code, 0);

    // The user name must be the token's.
    const wrongUser = await t.get(`/${fp}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic('someone', reader.token) } });
    assert.equal(wrongUser.status, 401);
    // Not an API credential.
    assert.equal((await t.get(`/api/v4/projects/${project.id}`, { token: null, headers: { 'private-token': reader.token } })).status, 401);
    assert.equal((await t.get(`/api/v4/projects/${project.id}`, { token: null, headers: { authorization: `Bearer ${reader.token}` } })).status, 401);
  });

  it('a group token reaches the group\'s projects and its subgroups\' projects, nothing else', async () => {
    const token = await create(G(), { name: 'group reader', scopes: ['read_repository'] }, groupMaintainer.token);
    for (const p of [project, subProject]) {
      const res = await git(['ls-remote', url(await fullPathOf(p), token.username, token.token)]);
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, /refs\/heads\/main/);
    }
    const res = await git(['ls-remote', url(await fullPathOf(otherProject), token.username, token.token)]);
    assert.notEqual(res.code, 0);
    // A subgroup's token does not reach its parent's projects.
    const subToken = await create(`/api/v4/groups/${subgroup.id}/deploy_tokens`, { name: 'sub', scopes: ['read_repository'] });
    assert.equal((await git(['ls-remote', url(await fullPathOf(subProject), subToken.username, subToken.token)])).code, 0);
    const up = await t.get(`/${await fullPathOf(project)}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic(subToken.username, subToken.token) } });
    assert.equal(up.status, 404);
  });

  it('respects scopes and refuses expired and revoked tokens like a wrong password', async () => {
    const fp = await fullPathOf(project);
    const registry = await create(P(), { name: 'registry', scopes: ['read_registry', 'read_package_registry'] });
    const noDownload = await t.get(`/${fp}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic(registry.username, registry.token) } });
    assert.equal(noDownload.status, 403);
    assert.match(noDownload.text, /You are not allowed to download code/);
    assert.notEqual((await git(['ls-remote', url(fp, registry.username, registry.token)])).code, 0);

    const expiring = await create(P(), { name: 'expiring', scopes: ['read_repository'], expires_at: new Date(Date.now() + 3600_000).toISOString() });
    const revoking = await create(P(), { name: 'revoking', scopes: ['read_repository'] });
    for (const tok of [expiring, revoking]) assert.equal((await git(['ls-remote', url(fp, tok.username, tok.token)])).code, 0);
    await t.db.updateTable('deploy_tokens').set({ expires_at: new Date(Date.now() - 1000) }).where('id', '=', expiring.id).execute();
    await t.db.updateTable('deploy_tokens').set({ revoked: true }).where('id', '=', revoking.id).execute();
    for (const tok of [expiring, revoking]) {
      const res = await t.get(`/${fp}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic(tok.username, tok.token) } });
      assert.equal(res.status, 401);
      assert.match(res.text, /HTTP Basic: Access denied/);
      const cli = await git(['ls-remote', url(fp, tok.username, tok.token)]);
      assert.notEqual(cli.code, 0);
      assert.match(cli.stderr, /Access denied|Authentication failed/);
    }
    // A deleted token is gone.
    const deleted = await create(P(), { name: 'deleted', scopes: ['read_repository'] });
    assert.equal((await t.delete(`${P()}/${deleted.id}`)).status, 204);
    const res = await t.get(`/${fp}.git/info/refs?service=git-upload-pack`, { token: null, headers: { authorization: basic(deleted.username, deleted.token) } });
    assert.equal(res.status, 401);
  });

  it('Git LFS takes the same check: its project only, uploads with write_repository', async () => {
    const LFS_TYPE = 'application/vnd.git-lfs+json';
    const oid = 'a'.repeat(64);
    const batch = (fullPath: string, operation: string, auth: string) =>
      t.app.inject({
        method: 'POST',
        url: `/${fullPath}.git/info/lfs/objects/batch`,
        headers: { 'content-type': LFS_TYPE, accept: LFS_TYPE, authorization: auth },
        payload: JSON.stringify({ operation, objects: [{ oid, size: 1 }] }),
      });
    const reader = await create(P(), { name: 'lfs-reader', scopes: ['read_repository'] });
    const writer = await create(P(), { name: 'lfs-writer', scopes: ['write_repository'] });
    const fp = await fullPathOf(project);
    assert.equal((await batch(fp, 'download', basic(reader.username, reader.token))).statusCode, 200);
    const upload = await batch(fp, 'upload', basic(reader.username, reader.token));
    assert.equal(upload.statusCode, 403, upload.body);
    assert.match(JSON.parse(upload.body).message, /not allowed to upload/);
    const allowed = await batch(fp, 'upload', basic(writer.username, writer.token));
    assert.equal(allowed.statusCode, 200, allowed.body);
    assert.ok(JSON.parse(allowed.body).objects[0].actions.upload);
    assert.equal((await batch(await fullPathOf(otherProject), 'download', basic(reader.username, reader.token))).statusCode, 404);
    // Locks are not the token's to force: its creator's rights do not come with it.
    const locks = await t.app.inject({ method: 'GET', url: `/${fp}.git/info/lfs/locks`, headers: { accept: LFS_TYPE, authorization: basic(reader.username, reader.token) } });
    assert.equal(locks.statusCode, 200, locks.body);
  });

  it('a write_repository token does not move protected branches', async () => {
    const fp = await fullPathOf(project);
    const writer = await create(P(), { name: 'protected-writer', scopes: ['read_repository', 'write_repository'] });
    assert.equal((await t.post(`/api/v4/projects/${project.id}/protected_branches`, { name: 'release' })).status, 201);
    const clone = dir('protected');
    assert.equal((await git(['clone', '-q', url(fp, writer.username, writer.token), clone])).code, 0);
    assert.equal((await git(['checkout', '-q', '-b', 'release'], clone)).code, 0);
    fs.writeFileSync(path.join(clone, 'r.txt'), 'r\n');
    await git(['add', 'r.txt'], clone);
    await git(['commit', '-q', '-m', 'r'], clone);
    const res = await git(['push', 'origin', 'release'], clone);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /protected/i);
    assert.equal((await git(['push', 'origin', 'release:feature-x'], clone)).code, 0);
  });

  it('gives CI jobs CI_DEPLOY_USER and CI_DEPLOY_PASSWORD for a token named gitlab-deploy-token (the project\'s, else its group\'s)', async () => {
    const runner = await ProtocolRunner.register(t);
    const takeFor = async (p: Project) => {
      for (let i = 0; i < 20; i++) {
        const job = await runner.takeJob();
        assert.ok(job, 'a pending job');
        if (job.payload.job_info.project_id === p.id) return job;
        await runner.finish(job);
      }
      throw new Error('no job of the project');
    };
    const vars = (job: { payload: any }) => Object.fromEntries(job.payload.variables.map((v: any) => [v.key, v]));
    const yml = { '.gitlab-ci.yml': 'deploy:\n  script: [echo deploy]\n' };

    // No such token yet: no variables.
    await commitFiles(t, subProject, yml);
    const before = await takeFor(subProject);
    assert.equal(vars(before).CI_DEPLOY_USER, undefined);
    assert.equal(vars(before).CI_DEPLOY_PASSWORD, undefined);
    await runner.finish(before);

    // The subproject's group's token.
    const groupToken = await create(`/api/v4/groups/${subgroup.id}/deploy_tokens`, { name: 'gitlab-deploy-token', scopes: ['read_repository'] });
    const row = await t.db.selectFrom('deploy_tokens').selectAll().where('id', '=', groupToken.id).executeTakeFirstOrThrow();
    assert.ok(row.token_encrypted && !row.token_encrypted.includes(groupToken.token));
    assert.equal(decryptSecret(t.app.cairn.config, row.token_encrypted), groupToken.token);
    await commitFiles(t, subProject, { 'x.txt': 'x\n' });
    const fromGroup = await takeFor(subProject);
    assert.deepEqual(vars(fromGroup).CI_DEPLOY_USER, { key: 'CI_DEPLOY_USER', value: groupToken.username, public: true, masked: false, file: false, raw: false });
    assert.deepEqual(vars(fromGroup).CI_DEPLOY_PASSWORD, { key: 'CI_DEPLOY_PASSWORD', value: groupToken.token, public: false, masked: true, file: false, raw: false });
    await runner.finish(fromGroup);

    // The project's own wins over the group's, and the credentials clone the project.
    const own = await create(`/api/v4/projects/${subProject.id}/deploy_tokens`, { name: 'gitlab-deploy-token', username: 'ci-deployer', scopes: ['read_repository'] });
    await commitFiles(t, subProject, { 'y.txt': 'y\n' });
    const fromProject = await takeFor(subProject);
    const v = vars(fromProject);
    assert.equal(v.CI_DEPLOY_USER.value, 'ci-deployer');
    assert.equal(v.CI_DEPLOY_PASSWORD.value, own.token);
    const res = await git(['ls-remote', url(await fullPathOf(subProject), v.CI_DEPLOY_USER.value, v.CI_DEPLOY_PASSWORD.value)]);
    assert.equal(res.code, 0, res.stderr);
    await runner.finish(fromProject);

    // Revoked and expired tokens give nothing (the group's is then used, then none).
    await t.db.updateTable('deploy_tokens').set({ revoked: true }).where('id', '=', own.id).execute();
    await t.db.updateTable('deploy_tokens').set({ expires_at: new Date(Date.now() - 1000) }).where('id', '=', groupToken.id).execute();
    await commitFiles(t, subProject, { 'z.txt': 'z\n' });
    const none = await takeFor(subProject);
    assert.equal(vars(none).CI_DEPLOY_PASSWORD, undefined);
    await runner.finish(none);
  });
});
