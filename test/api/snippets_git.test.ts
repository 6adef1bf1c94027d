import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Snippets' repositories with the real git client over HTTP: clone, commit, push, then read through the API. */
describe('snippets over git HTTP', () => {
  let t: TestContext;
  let host: string;
  let home: string;
  let work: string;
  let alice: TestUser;
  let bob: TestUser;
  let maintainer: TestUser;
  let developer: TestUser;
  let project: Project;
  let projectPath: string;
  let seq = 0;

  const git = (args: string[], cwd = work): Promise<GitRun> =>
    new Promise((resolve) => {
      execFile(
        'git',
        ['-c', 'user.name=Snippet Pusher', '-c', 'user.email=pusher@example.com', ...args],
        {
          cwd,
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' },
        },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
    });
  const ok = async (args: string[], cwd?: string) => {
    const res = await git(args, cwd);
    assert.equal(res.code, 0, `git ${args.join(' ')}: ${res.stderr}`);
    return res.stdout.trim();
  };
  const url = (repoPath: string, user?: TestUser) => `http://${user ? `oauth2:${user.token}@` : ''}${host}/${repoPath}.git`;
  const dir = () => path.join(work, `clone-${++seq}`);
  const writeAndCommit = async (repo: string, file: string, content: string) => {
    fs.mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
    fs.writeFileSync(path.join(repo, file), content);
    await ok(['add', '-A'], repo);
    await ok(['commit', '-q', '-m', `edit ${file}`], repo);
  };

  before(async () => {
    t = await createTestContext();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    host = `127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-snippet-home-'));
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-snippet-work-'));
    alice = await t.createUser();
    bob = await t.createUser();
    maintainer = await t.createUser();
    developer = await t.createUser();
    const group = await t.createGroup({ visibility: 20 });
    project = await t.createProject({ group, visibility: 20 });
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, developer.user, 30);
    projectPath = (await t.get(`/api/v4/projects/${project.id}`)).body.path_with_namespace;
  });

  after(async () => {
    await t.close();
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('clones a personal snippet, pushes a commit, and the API shows the new files', async () => {
    const created = await t.post('/api/v4/snippets', { title: 'cloned', visibility: 'private', files: [{ file_path: 'a.txt', content: 'first\n' }] }, { token: alice.token });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id;
    assert.equal(created.body.http_url_to_repo, `${t.config.externalUrl}/snippets/${id}.git`);

    const clone = dir();
    await ok(['clone', '-q', url(`snippets/${id}`, alice), clone]);
    assert.equal(fs.readFileSync(path.join(clone, 'a.txt'), 'utf8'), 'first\n');
    assert.equal(await ok(['rev-parse', '--abbrev-ref', 'HEAD'], clone), 'main');

    await writeAndCommit(clone, 'a.txt', 'second\n');
    await writeAndCommit(clone, 'docs/b.md', '# b\n');
    await ok(['push', '-q', 'origin', 'main'], clone);
    const head = await ok(['rev-parse', 'HEAD'], clone);

    const shown = await t.get(`/api/v4/snippets/${id}`, { token: alice.token });
    assert.deepEqual(shown.body.files.map((f: any) => f.path), ['a.txt', 'docs/b.md']);
    assert.equal((await t.get(`/api/v4/snippets/${id}/raw`, { token: alice.token })).text, 'second\n');
    assert.equal((await t.get(`/api/v4/snippets/${id}/files/${head}/docs%2Fb.md/raw`, { token: alice.token })).text, '# b\n');
    assert.ok(new Date(shown.body.updated_at) >= new Date(created.body.updated_at));

    // An API update lands on top of the pushed history, and a fetch brings it back.
    const upd = await t.put(`/api/v4/snippets/${id}`, { files: [{ action: 'delete', file_path: 'docs/b.md' }] }, { token: alice.token });
    assert.equal(upd.status, 200, upd.text);
    await ok(['pull', '-q', '--ff-only'], clone);
    assert.ok(!fs.existsSync(path.join(clone, 'docs/b.md')));
    assert.equal(await ok(['log', '-1', '--format=%s'], clone), 'Update snippet');

    // Someone else cannot even see the private snippet's repository.
    const other = await git(['clone', '-q', url(`snippets/${id}`, bob), dir()]);
    assert.notEqual(other.code, 0);
    assert.match(other.stderr, /could not be found|not found/i);
    const anon = await git(['clone', '-q', url(`snippets/${id}`), dir()]);
    assert.notEqual(anon.code, 0);
  });

  it('lets anyone clone a public snippet, but only the author push; branches cannot be created or deleted', async () => {
    const created = await t.post('/api/v4/snippets', { title: 'public', visibility: 'public', files: [{ file_path: 'p.txt', content: 'p\n' }] }, { token: alice.token });
    const id = created.body.id;
    const anonClone = dir();
    await ok(['clone', '-q', url(`snippets/${id}`), anonClone]);
    assert.equal(fs.readFileSync(path.join(anonClone, 'p.txt'), 'utf8'), 'p\n');

    const bobClone = dir();
    await ok(['clone', '-q', url(`snippets/${id}`, bob), bobClone]);
    await writeAndCommit(bobClone, 'p.txt', 'bob was here\n');
    const refused = await git(['push', '-q', 'origin', 'main'], bobClone);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /You are not allowed to update this snippet/);

    const aliceClone = dir();
    await ok(['clone', '-q', url(`snippets/${id}`, alice), aliceClone]);
    await writeAndCommit(aliceClone, 'q.txt', 'q\n');
    const branch = await git(['push', 'origin', 'HEAD:refs/heads/feature'], aliceClone);
    assert.notEqual(branch.code, 0);
    assert.match(branch.stderr, /You can not create or delete branches/);
    const tag = await git(['push', 'origin', 'HEAD:refs/tags/v1'], aliceClone);
    assert.notEqual(tag.code, 0);
    const deletion = await git(['push', 'origin', ':main'], aliceClone);
    assert.notEqual(deletion.code, 0);
    assert.deepEqual((await t.get(`/api/v4/snippets/${id}`, { token: alice.token })).body.files.map((f: any) => f.path), ['p.txt']);
    await ok(['push', '-q', 'origin', 'main'], aliceClone);
    assert.deepEqual((await t.get(`/api/v4/snippets/${id}`, { token: alice.token })).body.files.map((f: any) => f.path), ['p.txt', 'q.txt']);
  });

  it('serves project snippets at <project>/snippets/<id>.git: clone for readers, push for the author and maintainers', async () => {
    const created = await t.post(`/api/v4/projects/${project.id}/snippets`, { title: 'ps', visibility: 'public', files: [{ file_path: 'ps.txt', content: 'ps\n' }] }, { token: developer.token });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id;
    const repoPath = `${projectPath}/snippets/${id}`;
    assert.equal(created.body.http_url_to_repo, `${t.config.externalUrl}/${repoPath}.git`);

    const readerClone = dir();
    await ok(['clone', '-q', url(repoPath, bob), readerClone]);
    await writeAndCommit(readerClone, 'ps.txt', 'not yours\n');
    assert.notEqual((await git(['push', '-q', 'origin', 'main'], readerClone)).code, 0);

    const maintainerClone = dir();
    await ok(['clone', '-q', url(repoPath, maintainer), maintainerClone]);
    await writeAndCommit(maintainerClone, 'ps.txt', 'maintained\n');
    await ok(['push', '-q', 'origin', 'main'], maintainerClone);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/snippets/${id}/raw`, { token: null })).text, 'maintained\n');

    // The snippet is only reachable under its own project, and a personal path does not reach it.
    assert.notEqual((await git(['ls-remote', url(`snippets/${id}`, developer)])).code, 0);
    const otherProject = await t.createProject({ group: await t.createGroup({ visibility: 20 }), visibility: 20 });
    const otherPath = (await t.get(`/api/v4/projects/${otherProject.id}`)).body.path_with_namespace;
    assert.notEqual((await git(['ls-remote', url(`${otherPath}/snippets/${id}`, developer)])).code, 0);
    // A snippet that does not exist.
    const missing = await git(['ls-remote', url(`${projectPath}/snippets/999999`, developer)]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /could not be found/);
  });

  it('answers the ref advertisement with git\'s status codes', async () => {
    const created = await t.post('/api/v4/snippets', { title: 'adv', visibility: 'private', files: [{ file_path: 'a', content: 'b' }] }, { token: alice.token });
    const id = created.body.id;
    const base = `http://${host}/snippets/${id}.git/info/refs`;
    // Every body is read to its end, so no response is left open when the server closes.
    const fetch = async (u: string, init?: RequestInit) => {
      const res = await globalThis.fetch(u, init);
      await res.arrayBuffer();
      return res;
    };
    const anon = await fetch(`${base}?service=git-upload-pack`);
    assert.equal(anon.status, 401);
    assert.match(anon.headers.get('www-authenticate') ?? '', /Basic/);
    const auth = (u: TestUser) => ({ authorization: 'Basic ' + Buffer.from(`oauth2:${u.token}`).toString('base64') });
    assert.equal((await fetch(`${base}?service=git-upload-pack`, { headers: auth(bob) })).status, 404);
    const owner = await fetch(`${base}?service=git-upload-pack`, { headers: auth(alice) });
    assert.equal(owner.status, 200);
    assert.equal(owner.headers.get('content-type'), 'application/x-git-upload-pack-advertisement');
    assert.equal((await fetch(`${base}?service=git-receive-pack`, { headers: auth(alice) })).status, 200);
    // A read-only token cannot push.
    const readOnly = await t.createUser({ scopes: ['read_repository'] });
    await t.db.updateTable('snippets').set({ author_id: readOnly.user.id }).where('id', '=', id).execute();
    assert.equal((await fetch(`${base}?service=git-receive-pack`, { headers: auth(readOnly) })).status, 403);
    assert.equal((await fetch(`${base}?service=git-upload-pack`, { headers: auth(readOnly) })).status, 200);
  });
});
