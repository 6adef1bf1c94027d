import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hashedDiskPath } from '../../src/git/repository.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles } from '../helpers/ci.js';

const git = (dir: string, ...args: string[]) => execFileSync('git', ['--git-dir', dir, ...args]).toString('utf8');

describe('repository storage moves', () => {
  let t: TestContext;
  let storageRoot: string;
  let member: TestUser;
  const storages = () => t.config.storages;

  before(async () => {
    storageRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-storages-'));
    t = await createTestContext({ storages: { default: path.join(storageRoot, 'default'), other: path.join(storageRoot, 'other') } });
    member = await t.createUser();
  });
  after(async () => {
    await t.close();
    fs.rmSync(storageRoot, { recursive: true, force: true });
  });

  const moveOf = (id: number) => t.call('GET', `/api/v4/project_repository_storage_moves/${id}`);

  it('are for administrators only: 401 anonymous, 403 for others, on every route', async () => {
    const project = await t.createProject({ owner: member.user });
    await t.addMember(project, member.user, 50);
    const group = await t.createGroup({ owner: member.user });
    const routes: [string, string, unknown?][] = [
      ['GET', '/api/v4/project_repository_storage_moves'],
      ['GET', '/api/v4/project_repository_storage_moves/1'],
      ['POST', '/api/v4/project_repository_storage_moves', { source_storage_name: 'default' }],
      ['GET', `/api/v4/projects/${project.id}/repository_storage_moves`],
      ['GET', `/api/v4/projects/${project.id}/repository_storage_moves/1`],
      ['POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { destination_storage_name: 'other' }],
      ['GET', '/api/v4/group_repository_storage_moves'],
      ['POST', '/api/v4/group_repository_storage_moves', { source_storage_name: 'default' }],
      ['GET', `/api/v4/groups/${group.id}/repository_storage_moves`],
      ['POST', `/api/v4/groups/${group.id}/repository_storage_moves`, {}],
      ['GET', '/api/v4/snippet_repository_storage_moves'],
    ];
    for (const [method, url, body] of routes) {
      assert.equal((await t.call(method, url, { token: null, body })).status, 401, `${method} ${url} anonymous`);
      assert.equal((await t.call(method, url, { token: member.token, body })).status, 403, `${method} ${url} as a project owner`);
    }
    const p = await t.call('GET', '/api/v4/projects', { token: member.token, query: { repository_storage: 'other' } });
    assert.equal(p.status, 200);
    assert.ok(p.body.some((x: { id: number }) => x.id === project.id), 'the storage filter is ignored for non-admins');
    assert.equal(p.body[0].repository_storage, undefined);
  });

  it('moves one project: scheduled, read-only while it moves, then finished on the other storage with the same refs', async () => {
    const project = await t.createProject({ owner: member.user });
    await t.addMember(project, member.user, 40);
    await commitFiles(t, project, { 'README.md': 'hello\n', 'a/b.txt': 'b\n' });
    await t.post(`/api/v4/projects/${project.id}/repository/branches`, {}, { query: { branch: 'feature', ref: 'main' } });
    const sourceDir = projectRepoPath(t.app.cairn, project);
    const refsBefore = git(sourceDir, 'for-each-ref');

    const created = await t.call('POST', `/api/v4/projects/${encodeURIComponent(`${member.user.username}/${project.path}`)}/repository_storage_moves`, { body: { destination_storage_name: 'other' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.state, 'scheduled');
    assert.equal(created.body.source_storage_name, 'default');
    assert.equal(created.body.destination_storage_name, 'other');
    assert.equal(created.body.error_message, null);
    assert.deepEqual(Object.keys(created.body.project).sort(), ['created_at', 'description', 'id', 'name', 'name_with_namespace', 'path', 'path_with_namespace']);
    assert.equal(created.body.project.id, project.id);

    // While it moves: writes refused with GitLab's words, reads keep working.
    const commit = await t.post(`/api/v4/projects/${project.id}/repository/commits`, { branch: 'main', commit_message: 'x', actions: [{ action: 'create', file_path: 'new.txt', content: 'n' }] }, { token: member.token });
    assert.equal(commit.status, 403);
    assert.match(commit.body.message, /The repository is temporarily read-only\. Please try again later\./);
    const file = await t.call('PUT', `/api/v4/projects/${project.id}/repository/files/README.md`, { token: member.token, body: { branch: 'main', content: 'changed', commit_message: 'c' } });
    assert.equal(file.status, 403);
    const branch = await t.post(`/api/v4/projects/${project.id}/repository/branches`, {}, { token: member.token, query: { branch: 'b2', ref: 'main' } });
    assert.equal(branch.status, 403);
    const tag = await t.post(`/api/v4/projects/${project.id}/repository/tags`, {}, { token: member.token, query: { tag_name: 'v1', ref: 'main' } });
    assert.equal(tag.status, 403);
    const read = await t.call('GET', `/api/v4/projects/${project.id}/repository/files/README.md/raw`, { token: member.token, query: { ref: 'main' } });
    assert.equal(read.status, 200);
    assert.equal(read.text, 'hello\n');

    // A second move while one is in progress: 400.
    const again = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'other' } });
    assert.equal(again.status, 400);
    assert.deepEqual(again.body, { message: { project: ['is read-only'] } });

    await drainJobs(t.app.cairn);
    const done = await moveOf(created.body.id);
    assert.equal(done.status, 200);
    assert.equal(done.body.state, 'finished');
    const row = await t.db.selectFrom('projects').select(['repository_storage', 'repository_read_only']).where('id', '=', project.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { repository_storage: 'other', repository_read_only: false });
    const destDir = projectRepoPath(t.app.cairn, { ...project, repository_storage: 'other' });
    assert.equal(git(destDir, 'for-each-ref'), refsBefore);
    git(destDir, 'fsck', '--no-dangling');
    assert.equal(fs.existsSync(sourceDir), false, 'the source copy is removed');

    // Reads and writes work on the new storage.
    assert.equal((await t.call('GET', `/api/v4/projects/${project.id}/repository/files/a%2Fb.txt/raw`, { token: member.token, query: { ref: 'feature' } })).text, 'b\n');
    await commitFiles(t, project, { 'after.txt': 'after move\n' }, { token: member.token });
    assert.match(git(destDir, 'log', '--format=%s', '-1', 'main'), /change/);

    // Admin-only filter of the projects list.
    const onOther = await t.call('GET', '/api/v4/projects', { query: { repository_storage: 'other', per_page: 100 } });
    assert.ok(onOther.body.some((p: { id: number }) => p.id === project.id));
    assert.ok(onOther.body.every((p: { repository_storage: string }) => p.repository_storage === 'other'));
    const onDefault = await t.call('GET', '/api/v4/projects', { query: { repository_storage: 'default', per_page: 100 } });
    assert.ok(!onDefault.body.some((p: { id: number }) => p.id === project.id));

    // The project's moves, and one by id; another project's move is not found under it.
    const list = await t.call('GET', `/api/v4/projects/${project.id}/repository_storage_moves`);
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((m: { id: number }) => m.id), [created.body.id]);
    assert.equal(list.headers['x-total'], '1');
    const one = await t.call('GET', `/api/v4/projects/${project.id}/repository_storage_moves/${created.body.id}`);
    assert.equal(one.body.state, 'finished');
    const other = await t.createProject();
    assert.equal((await t.call('GET', `/api/v4/projects/${other.id}/repository_storage_moves/${created.body.id}`)).status, 404);
    assert.equal((await t.call('GET', '/api/v4/project_repository_storage_moves/999999')).status, 404);
    assert.equal((await t.call('GET', '/api/v4/projects/999999/repository_storage_moves')).status, 404);
  });

  it('keeps the source copy for CAIRN_STORAGE_MOVE_CLEANUP_DELAY after the switch (replicated), and refuses a move back meanwhile', async () => {
    const config = t.app.cairn.config as { storageMoveCleanupDelay: number };
    config.storageMoveCleanupDelay = 3600;
    try {
      const project = await t.createProject();
      await commitFiles(t, project, { 'README.md': 'hello\n' });
      const sourceDir = projectRepoPath(t.app.cairn, project);
      const created = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'other' } });
      assert.equal(created.status, 201);
      await drainJobs(t.app.cairn);
      assert.equal((await moveOf(created.body.id)).body.state, 'replicated');
      const row = await t.db.selectFrom('projects').select(['repository_storage', 'repository_read_only']).where('id', '=', project.id).executeTakeFirstOrThrow();
      assert.deepEqual(row, { repository_storage: 'other', repository_read_only: false });
      // A read that located the project before the switch still finds its repository.
      assert.equal(git(sourceDir, 'show', 'main:README.md'), 'hello\n');
      await commitFiles(t, project, { 'after.txt': 'written on the destination\n' });
      const back = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'default' } });
      assert.equal(back.status, 400);
      assert.deepEqual(back.body, { message: { project: ['is still being moved: its previous storage move is removing the source copy'] } });

      await t.db.updateTable('background_jobs').set({ run_at: new Date() }).where('kind', '=', 'storage_move.cleanup').where('state', '=', 'pending').execute();
      await drainJobs(t.app.cairn);
      assert.equal((await moveOf(created.body.id)).body.state, 'finished');
      assert.equal(fs.existsSync(sourceDir), false);
      const again = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'default' } });
      assert.equal(again.status, 201);
      await drainJobs(t.app.cairn);
      await t.db.updateTable('background_jobs').set({ run_at: new Date() }).where('kind', '=', 'storage_move.cleanup').where('state', '=', 'pending').execute();
      await drainJobs(t.app.cairn);
      assert.equal((await moveOf(again.body.id)).body.state, 'finished');
      assert.equal(git(sourceDir, 'show', 'main:after.txt'), 'written on the destination\n');
    } finally {
      config.storageMoveCleanupDelay = 0;
    }
  });

  it('validates storages: unknown names and the same storage are 400', async () => {
    const project = await t.createProject();
    const unknown = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'nowhere' } });
    assert.equal(unknown.status, 400);
    assert.deepEqual(unknown.body, { message: { destination_storage_name: ['is not included in the list'] } });
    const same = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'default' } });
    assert.equal(same.status, 400);
    assert.deepEqual(same.body, { message: { destination_storage_name: ['must be different from the source storage'] } });
    const bulkUnknown = await t.call('POST', '/api/v4/project_repository_storage_moves', { body: { source_storage_name: 'nowhere', destination_storage_name: 'other' } });
    assert.equal(bulkUnknown.status, 400);
    assert.deepEqual(bulkUnknown.body, { error: 'source_storage_name does not have a valid value' });
    const bulkDest = await t.call('POST', '/api/v4/project_repository_storage_moves', { body: { source_storage_name: 'default', destination_storage_name: 'x' } });
    assert.deepEqual(bulkDest.body, { error: 'destination_storage_name does not have a valid value' });
    const bulkSame = await t.call('POST', '/api/v4/project_repository_storage_moves', { body: { source_storage_name: 'default', destination_storage_name: 'default' } });
    assert.equal(bulkSame.status, 400);
    const missing = await t.call('POST', '/api/v4/project_repository_storage_moves', { body: {} });
    assert.equal(missing.status, 400);
    // No destination: the other storage is picked.
    const picked = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: {} });
    assert.equal(picked.status, 201);
    assert.equal(picked.body.destination_storage_name, 'other');
    await drainJobs(t.app.cairn);
    assert.equal((await moveOf(picked.body.id)).body.state, 'finished');
  });

  it('bulk-moves every project on a storage (202), newest moves first in the list', async () => {
    const projects = [];
    for (let i = 0; i < 3; i++) {
      const p = await t.createProject();
      await commitFiles(t, p, { [`f${i}.txt`]: `${i}\n` });
      projects.push(p);
    }
    const res = await t.call('POST', '/api/v4/project_repository_storage_moves', { body: { source_storage_name: 'default', destination_storage_name: 'other' } });
    assert.equal(res.status, 202);
    assert.deepEqual(res.body, { message: '202 Accepted' });
    await drainJobs(t.app.cairn);
    const left = await t.call('GET', '/api/v4/projects', { query: { repository_storage: 'default', per_page: 100 } });
    assert.deepEqual(left.body, []);
    const list = await t.call('GET', '/api/v4/project_repository_storage_moves', { query: { per_page: 100 } });
    assert.equal(list.status, 200);
    const ids = list.body.map((m: { id: number }) => m.id);
    assert.deepEqual(ids, [...ids].sort((a: number, b: number) => b - a));
    for (const p of projects) {
      const m = list.body.find((x: { project: { id: number } }) => x.project.id === p.id);
      assert.equal(m.state, 'finished');
      git(projectRepoPath(t.app.cairn, { ...p, repository_storage: 'other' }), 'fsck', '--no-dangling');
    }
    const paged = await t.call('GET', '/api/v4/project_repository_storage_moves', { query: { per_page: 1, page: 2 } });
    assert.equal(paged.body.length, 1);
    assert.equal(paged.headers['x-page'], '2');
  });

  it('a failed copy leaves the source untouched and the project writable (state failed)', async () => {
    const project = await t.createProject();
    await commitFiles(t, project, { 'x.txt': 'x\n' });
    const created = await t.call('POST', `/api/v4/projects/${project.id}/repository_storage_moves`, { body: { destination_storage_name: 'other' } });
    // The destination cannot be written: its parent is a file.
    const destDir = projectRepoPath(t.app.cairn, { ...project, repository_storage: 'other' });
    fs.mkdirSync(path.dirname(path.dirname(destDir)), { recursive: true });
    fs.rmSync(path.dirname(destDir), { recursive: true, force: true });
    fs.writeFileSync(path.dirname(destDir), 'in the way');
    try {
      await drainJobs(t.app.cairn);
    } finally {
      fs.rmSync(path.dirname(destDir), { force: true });
    }
    const move = await moveOf(created.body.id);
    assert.equal(move.body.state, 'failed');
    assert.ok(move.body.error_message);
    const row = await t.db.selectFrom('projects').select(['repository_storage', 'repository_read_only']).where('id', '=', project.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { repository_storage: 'default', repository_read_only: false });
    git(projectRepoPath(t.app.cairn, project), 'fsck', '--no-dangling');
    await commitFiles(t, project, { 'y.txt': 'y\n' });
  });

  it('moves groups: the record switches, a repository at the group path is copied', async () => {
    const group = await t.createGroup();
    const res = await t.call('POST', `/api/v4/groups/${group.id}/repository_storage_moves`, { body: { destination_storage_name: 'other' } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(res.body.group, { id: group.id, web_url: `${t.config.externalUrl}/groups/${group.full_path}`, name: group.name });
    assert.equal((await t.call('POST', `/api/v4/groups/${group.full_path}/repository_storage_moves`, { body: { destination_storage_name: 'other' } })).status, 400);
    await drainJobs(t.app.cairn);
    const got = await t.call('GET', `/api/v4/group_repository_storage_moves/${res.body.id}`);
    assert.equal(got.body.state, 'finished');
    const row = await t.db.selectFrom('namespaces').select(['repository_storage', 'repository_read_only']).where('id', '=', group.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { repository_storage: 'other', repository_read_only: false });
    // A repository at the group's path (Cairn has no group wikis; one put there by hand) moves with it.
    const groupRepo = (storage: string) => path.join(storages()[storage], hashedDiskPath('group', group.id));
    execFileSync('git', ['init', '-q', '--bare', groupRepo('other')]);
    const work = fs.mkdtempSync(path.join(t.tmpDir, 'g-'));
    execFileSync('git', ['-C', work, 'init', '-q', '-b', 'main']);
    execFileSync('git', ['-C', work, '-c', 'user.name=a', '-c', 'user.email=a@b.c', 'commit', '-q', '--allow-empty', '-m', 'group repo']);
    execFileSync('git', ['-C', work, 'push', '-q', groupRepo('other'), 'main']);
    const groupRefs = git(groupRepo('other'), 'for-each-ref');
    const bulk = await t.call('POST', '/api/v4/group_repository_storage_moves', { body: { source_storage_name: 'other', destination_storage_name: 'default' } });
    assert.equal(bulk.status, 202);
    await drainJobs(t.app.cairn);
    const back = await t.call('GET', `/api/v4/groups/${group.id}/repository_storage_moves`);
    assert.deepEqual(back.body.map((m: { state: string; destination_storage_name: string }) => [m.state, m.destination_storage_name]), [['finished', 'default'], ['finished', 'other']]);
    assert.equal(git(groupRepo('default'), 'for-each-ref'), groupRefs);
    assert.equal(fs.existsSync(groupRepo('other')), false);
    // A project move id is no group move.
    assert.equal((await t.call('GET', `/api/v4/groups/${group.id}/repository_storage_moves/999999`)).status, 404);
  });

  it('moves snippets: one by id (read-only meanwhile), then in bulk back; files and history intact', async () => {
    const created = await t.post('/api/v4/snippets', { title: 'Moving', visibility: 'private', files: [{ file_path: 'a.txt', content: 'one\n' }, { file_path: 'dir/b.txt', content: 'two\n' }] }, { token: member.token });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id;
    const snippet = await t.db.selectFrom('snippets').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    const repo = (storage: string) => path.join(storages()[storage], snippet.disk_path);
    const refsBefore = git(repo('default'), 'for-each-ref');

    // Administrators only.
    assert.equal((await t.call('POST', `/api/v4/snippets/${id}/repository_storage_moves`, { token: member.token, body: { destination_storage_name: 'other' } })).status, 403);
    const move = await t.call('POST', `/api/v4/snippets/${id}/repository_storage_moves`, { body: { destination_storage_name: 'other' } });
    assert.equal(move.status, 201, JSON.stringify(move.body));
    assert.equal(move.body.state, 'scheduled');
    assert.equal(move.body.snippet.id, id);
    assert.equal(move.body.snippet.title, 'Moving');
    assert.equal(move.body.snippet.project_id, null);
    assert.match(move.body.snippet.http_url_to_repo, new RegExp(`/snippets/${id}\\.git$`));

    // Read-only while it moves: an update is refused, reads work.
    const update = await t.call('PUT', `/api/v4/snippets/${id}`, { token: member.token, body: { files: [{ action: 'update', file_path: 'a.txt', content: 'changed\n' }] } });
    assert.ok(update.status >= 400 && update.status < 500, `update during the move: ${update.status}`);
    assert.equal((await t.call('GET', `/api/v4/snippets/${id}/files/main/a.txt/raw`, { token: member.token })).text, 'one\n');

    await drainJobs(t.app.cairn);
    assert.equal((await t.call('GET', `/api/v4/snippet_repository_storage_moves/${move.body.id}`)).body.state, 'finished');
    assert.deepEqual(await t.db.selectFrom('snippets').select(['repository_storage', 'repository_read_only']).where('id', '=', id).executeTakeFirstOrThrow(), { repository_storage: 'other', repository_read_only: false });
    assert.equal(git(repo('other'), 'for-each-ref'), refsBefore);
    git(repo('other'), 'fsck', '--no-dangling');
    assert.equal(fs.existsSync(repo('default')), false, 'the source copy is removed');
    assert.equal((await t.call('GET', `/api/v4/snippets/${id}/files/main/dir%2Fb.txt/raw`, { token: member.token })).text, 'two\n');
    const edited = await t.call('PUT', `/api/v4/snippets/${id}`, { token: member.token, body: { files: [{ action: 'update', file_path: 'a.txt', content: 'changed\n' }] } });
    assert.equal(edited.status, 200, edited.text);
    assert.equal((await t.call('GET', `/api/v4/snippets/${id}/raw`, { token: member.token })).text, 'changed\n');

    // Bulk: every snippet on `other` back to `default`.
    const bulk = await t.call('POST', '/api/v4/snippet_repository_storage_moves', { body: { source_storage_name: 'other', destination_storage_name: 'default' } });
    assert.equal(bulk.status, 202);
    await drainJobs(t.app.cairn);
    assert.equal((await t.db.selectFrom('snippets').select('repository_storage').where('id', '=', id).executeTakeFirstOrThrow()).repository_storage, 'default');
    assert.equal((await t.call('GET', `/api/v4/snippets/${id}/raw`, { token: member.token })).text, 'changed\n');
    const moves = await t.call('GET', `/api/v4/snippets/${id}/repository_storage_moves`);
    assert.deepEqual(moves.body.map((m: { state: string; destination_storage_name: string }) => [m.state, m.destination_storage_name]), [['finished', 'default'], ['finished', 'other']]);
    assert.equal((await t.call('GET', '/api/v4/snippets/999999/repository_storage_moves')).status, 404);
  });
});
