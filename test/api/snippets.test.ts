import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { snippetRepoPath } from '../../src/services/snippets.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

const PUBLIC = 20;
const PRIVATE = 0;

describe('snippets API', () => {
  let t: TestContext;
  let alice: TestUser;
  let bob: TestUser;
  let external: TestUser;
  let admin: TestUser;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser();
    bob = await t.createUser();
    external = await t.createUser({ external: true });
    admin = await t.createUser({ admin: true });
  });
  after(() => t.close());

  const create = (user: TestUser, body: Record<string, unknown>, headers?: Record<string, string>) => t.post('/api/v4/snippets', body, { token: user.token, headers });
  const snippetRow = (id: number) => t.db.selectFrom('snippets').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const repoOf = async (id: number) => snippetRepoPath(t.app.cairn, await snippetRow(id));

  describe('personal snippets', () => {
    it('creates a snippet with files[] backed by its own repository, and shows it', async () => {
      const res = await create(alice, {
        title: 'Hello',
        description: 'two files',
        visibility: 'private',
        files: [
          { file_path: 'hello.rb', content: 'puts "hello"\n' },
          { file_path: 'lib/util.rb', content: 'module Util; end\n' },
        ],
      }, { 'user-agent': 'snippet-test/1.0' });
      assert.equal(res.status, 201, res.text);
      const s = res.body;
      assert.equal(s.title, 'Hello');
      assert.equal(s.description, 'two files');
      assert.equal(s.visibility, 'private');
      assert.equal(s.project_id, null);
      assert.equal(s.author.id, alice.user.id);
      assert.equal(s.author.username, alice.user.username);
      assert.equal(s.file_name, 'hello.rb');
      assert.deepEqual(s.files.map((f: any) => f.path), ['hello.rb', 'lib/util.rb']);
      const base = t.config.externalUrl;
      assert.equal(s.web_url, `${base}/-/snippets/${s.id}`);
      assert.equal(s.raw_url, `${base}/-/snippets/${s.id}/raw`);
      assert.equal(s.files[1].raw_url, `${base}/-/snippets/${s.id}/raw/main/lib/util.rb`);
      assert.equal(s.http_url_to_repo, `${base}/snippets/${s.id}.git`);
      assert.equal(s.ssh_url_to_repo, `ssh://git@${new URL(base).hostname}:${t.config.sshPort}/snippets/${s.id}.git`);
      assert.equal(s.expires_at, null);

      const row = await snippetRow(s.id);
      assert.equal(row.repository_storage, 'default');
      assert.match(row.disk_path, /^@snippets\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f]{64}\.git$/);
      const repo = snippetRepoPath(t.app.cairn, row);
      assert.ok(repo.startsWith(t.config.storages.default));
      const log = execFileSync('git', ['--git-dir', repo, 'log', '--format=%s|%an', 'main'], { encoding: 'utf8' }).trim();
      assert.equal(log, `Initial commit|${alice.user.name}`);

      const got = await t.get(`/api/v4/snippets/${s.id}`, { token: alice.token });
      assert.equal(got.status, 200);
      assert.deepEqual(got.body, s);
    });

    it('creates with the deprecated file_name and content, internal by default', async () => {
      const res = await create(alice, { title: 'Old style', file_name: 'old.txt', content: 'legacy content' });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.visibility, 'internal');
      assert.equal(res.body.file_name, 'old.txt');
      const raw = await t.get(`/api/v4/snippets/${res.body.id}/raw`, { token: bob.token });
      assert.equal(raw.text, 'legacy content');
      // An empty file name gets GitLab's generated one.
      const unnamed = await create(alice, { title: 'No name', file_name: '', content: 'x' });
      assert.equal(unnamed.status, 201, unnamed.text);
      assert.equal(unnamed.body.file_name, 'snippetfile1.txt');
    });

    it('refuses bad input in Grape\'s words', async () => {
      const cases: [Record<string, unknown>, number, unknown][] = [
        [{ files: [{ file_path: 'a', content: 'b' }] }, 400, { error: 'title is missing' }],
        [{ title: '  ', files: [{ file_path: 'a', content: 'b' }] }, 400, { error: 'title is empty' }],
        [{ title: 'x' }, 400, { error: 'files, content are missing, exactly one parameter must be provided' }],
        [{ title: 'x', content: 'c', file_name: 'f', files: [{ file_path: 'a', content: 'b' }] }, 400, { error: 'files, content are mutually exclusive' }],
        [{ title: 'x', content: 'c' }, 400, { error: 'file_name is missing' }],
        [{ title: 'x', files: [] }, 400, { error: 'files is empty' }],
        [{ title: 'x', files: [{ content: 'b' }] }, 400, { error: 'files[0][file_path] is missing' }],
        [{ title: 'x', files: [{ file_path: 'a', content: '' }] }, 400, { error: 'files[0][content] is empty' }],
        [{ title: 'x', files: [{ file_path: '../etc/passwd', content: 'b' }] }, 400, { error: 'files[0][file_path] should be a valid file path' }],
        [{ title: 'x', files: [{ file_path: '.git/config', content: 'b' }] }, 400, { error: 'files[0][file_path] should be a valid file path' }],
        [{ title: 'x', visibility: 'secret', files: [{ file_path: 'a', content: 'b' }] }, 400, { error: 'visibility does not have a valid value' }],
        [{ title: 'x', files: [{ file_path: 'a', content: 'b' }, { file_path: 'a', content: 'c' }] }, 400, { message: { error: 'Error creating the snippet - A file with this name already exists' } }],
        [{ title: 'x', files: Array.from({ length: 11 }, (_, i) => ({ file_path: `f${i}`, content: 'c' })) }, 400, { message: { error: "Error creating the snippet - Snippets can't contain more than 10 files" } }],
      ];
      const before = await t.db.selectFrom('snippets').select(t.db.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      for (const [body, status, expected] of cases) {
        const res = await create(alice, body);
        assert.equal(res.status, status, `${JSON.stringify(body)} -> ${res.text}`);
        assert.deepEqual(res.body, expected, JSON.stringify(body));
      }
      // Nothing was left behind by the refused creations.
      const after = await t.db.selectFrom('snippets').select(t.db.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      assert.equal(Number(after.n), Number(before.n));
    });

    it('needs a signed-in user who is not external to create', async () => {
      const body = { title: 'x', files: [{ file_path: 'a', content: 'b' }] };
      assert.equal((await t.post('/api/v4/snippets', body, { token: null })).status, 401);
      assert.equal((await create(external, body)).status, 403);
    });

    it('applies visibility: private for the author, internal for signed-in non-external users, public for anyone; admins see all', async () => {
      const ids: Record<string, number> = {};
      for (const v of ['private', 'internal', 'public']) {
        const res = await create(alice, { title: `vis ${v}`, visibility: v, files: [{ file_path: 'f.txt', content: v }] });
        assert.equal(res.status, 201, res.text);
        ids[v] = res.body.id;
      }
      const expect: [string, TestUser | null, Record<string, number>][] = [
        ['author', alice, { private: 200, internal: 200, public: 200 }],
        ['other user', bob, { private: 404, internal: 200, public: 200 }],
        ['external user', external, { private: 404, internal: 404, public: 200 }],
        ['anonymous', null, { private: 404, internal: 404, public: 200 }],
        ['admin', admin, { private: 200, internal: 200, public: 200 }],
      ];
      for (const [who, user, statuses] of expect) {
        for (const [v, status] of Object.entries(statuses)) {
          const token = user ? user.token : null;
          const res = await t.get(`/api/v4/snippets/${ids[v]}`, { token });
          assert.equal(res.status, status, `${who} reading a ${v} snippet`);
          if (status === 404) assert.deepEqual(res.body, { message: '404 Snippet Not Found' });
          const raw = await t.get(`/api/v4/snippets/${ids[v]}/raw`, { token });
          assert.equal(raw.status, status, `${who} reading a ${v} snippet's raw`);
          if (status === 200) assert.equal(raw.text, v);
          const file = await t.get(`/api/v4/snippets/${ids[v]}/files/main/f.txt/raw`, { token });
          assert.equal(file.status, status, `${who} reading a ${v} snippet's file`);
        }
      }
      // /snippets/all lists what the caller may see.
      const all = await t.get('/api/v4/snippets/all', { token: bob.token, query: { per_page: 100 } });
      const seen = new Set(all.body.map((s: any) => s.id));
      assert.ok(!seen.has(ids.private) && seen.has(ids.internal) && seen.has(ids.public));
      const extAll = await t.get('/api/v4/snippets/all', { token: external.token, query: { per_page: 100 } });
      const extSeen = new Set(extAll.body.map((s: any) => s.id));
      assert.ok(!extSeen.has(ids.private) && !extSeen.has(ids.internal) && extSeen.has(ids.public));
      assert.equal((await t.get('/api/v4/snippets/all', { token: null })).status, 401);
    });

    it('lists the current user\'s snippets, and public personal snippets with paging', async () => {
      const carol = await t.createUser();
      const mine: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await create(carol, { title: `carol ${i}`, visibility: i === 0 ? 'private' : 'public', files: [{ file_path: 'c.txt', content: String(i) }] });
        mine.push(res.body.id);
      }
      const own = await t.get('/api/v4/snippets', { token: carol.token });
      assert.equal(own.status, 200);
      assert.deepEqual(own.body.map((s: any) => s.id), [...mine].reverse());
      assert.equal(own.headers['x-total'], '3');
      assert.equal((await t.get('/api/v4/snippets', { token: null })).status, 401);
      // Only personal snippets that are public, newest first, paged.
      const total = Number((await t.get('/api/v4/snippets/public', { token: bob.token })).headers['x-total']);
      assert.ok(total >= 2);
      const p1 = await t.get('/api/v4/snippets/public', { token: bob.token, query: { per_page: 1, page: 1 } });
      const p2 = await t.get('/api/v4/snippets/public', { token: bob.token, query: { per_page: 1, page: 2 } });
      assert.equal(p1.status, 200);
      assert.equal(p1.body.length, 1);
      assert.equal(p1.headers['x-per-page'], '1');
      assert.equal(p1.headers['x-next-page'], '2');
      assert.equal(p1.headers['x-total-pages'], String(total));
      assert.deepEqual([p1.body[0].id, p2.body[0].id], [mine[2], mine[1]]);
      const all = await t.get('/api/v4/snippets/public', { token: bob.token, query: { per_page: 100 } });
      assert.ok(all.body.every((s: any) => s.visibility === 'public' && s.project_id === null));
      assert.ok(!all.body.some((s: any) => s.id === mine[0]));
      // created_after / created_before filter.
      const future = await t.get('/api/v4/snippets', { token: carol.token, query: { created_after: '2999-01-01T00:00:00Z' } });
      assert.deepEqual(future.body, []);
      assert.equal((await t.get('/api/v4/snippets', { token: carol.token, query: { created_after: 'yesterday-ish' } })).status, 400);
    });

    it('serves raw files as text that browsers do not render', async () => {
      const res = await create(alice, {
        title: 'html',
        visibility: 'public',
        files: [{ file_path: 'page.html', content: '<html><script>alert(1)</script></html>' }, { file_path: 'z.txt', content: 'plain' }],
      });
      const raw = await t.get(`/api/v4/snippets/${res.body.id}/raw`, { token: null });
      assert.equal(raw.status, 200);
      assert.equal(raw.headers['content-type'], 'text/plain; charset=utf-8');
      assert.equal(raw.headers['x-content-type-options'], 'nosniff');
      assert.match(raw.headers['content-disposition'], /^attachment; filename="page.html"/);
      const txt = await t.get(`/api/v4/snippets/${res.body.id}/files/main/z.txt/raw`, { token: null });
      assert.equal(txt.text, 'plain');
      assert.match(txt.headers['content-disposition'], /^inline; filename="z.txt"/);
      assert.equal(txt.headers['x-content-type-options'], 'nosniff');
    });

    it('reads files at a branch, a tag or a commit, with URL-encoded paths; 404 for what is not there', async () => {
      const res = await create(alice, { title: 'refs', visibility: 'public', files: [{ file_path: 'dir/sub/a.txt', content: 'v1' }] });
      const id = res.body.id;
      const repo = await repoOf(id);
      const first = execFileSync('git', ['--git-dir', repo, 'rev-parse', 'main'], { encoding: 'utf8' }).trim();
      execFileSync('git', ['--git-dir', repo, 'tag', 'v1', first]);
      const upd = await t.put(`/api/v4/snippets/${id}`, { files: [{ action: 'update', file_path: 'dir/sub/a.txt', content: 'v2' }] }, { token: alice.token });
      assert.equal(upd.status, 200, upd.text);
      const read = (ref: string, path = 'dir%2Fsub%2Fa.txt') => t.get(`/api/v4/snippets/${id}/files/${ref}/${path}/raw`, { token: null });
      assert.equal((await read('main')).text, 'v2');
      assert.equal((await read('v1')).text, 'v1');
      assert.equal((await read(first)).text, 'v1');
      assert.equal((await read(first.slice(0, 10))).text, 'v1');
      const noRef = await read('nope');
      assert.equal(noRef.status, 404);
      assert.deepEqual(noRef.body, { message: '404 Reference Not Found' });
      assert.deepEqual((await read('--output=x')).body, { message: '404 Reference Not Found' });
      const noFile = await read('main', 'missing.txt');
      assert.deepEqual(noFile.body, { message: '404 File Not Found' });
      assert.equal((await read('main', 'dir%2Fsub')).status, 404);
      assert.equal((await read('main', '..%2F..%2Fetc%2Fpasswd')).status, 400);
      assert.equal((await t.get(`/api/v4/snippets/999999/files/main/a/raw`, { token: null })).status, 404);
    });

    it('records the user agent and address for administrators', async () => {
      const res = await create(alice, { title: 'ua', files: [{ file_path: 'a', content: 'b' }] }, { 'user-agent': 'curl/8.1' });
      const id = res.body.id;
      const detail = await t.get(`/api/v4/snippets/${id}/user_agent_detail`, { token: admin.token });
      assert.equal(detail.status, 200, detail.text);
      assert.equal(detail.body.user_agent, 'curl/8.1');
      assert.equal(detail.body.ip_address, '127.0.0.1');
      assert.equal(detail.body.spamcheck_submitted, false);
      assert.equal((await t.get(`/api/v4/snippets/${id}/user_agent_detail`, { token: alice.token })).status, 403);
      assert.equal((await t.get(`/api/v4/snippets/${id}/user_agent_detail`, { token: null })).status, 401);
      assert.deepEqual((await t.get(`/api/v4/snippets/999999/user_agent_detail`, { token: admin.token })).body, { message: '404 Snippet Not Found' });
    });

    it('updates title, visibility and files with create, update, delete and move actions', async () => {
      const res = await create(alice, { title: 'edit me', visibility: 'private', files: [{ file_path: 'a.txt', content: 'A' }, { file_path: 'b.txt', content: 'B' }] });
      const id = res.body.id;
      const put = (body: Record<string, unknown>, user = alice) => t.put(`/api/v4/snippets/${id}`, body, { token: user.token });
      const upd = await put({
        title: 'edited',
        description: 'now public',
        visibility: 'public',
        files: [
          { action: 'create', file_path: 'c.txt', content: 'C' },
          { action: 'update', file_path: 'a.txt', content: 'A2' },
          { action: 'delete', file_path: 'b.txt' },
          { action: 'move', previous_path: 'c.txt', file_path: 'moved/c.txt' },
        ],
      });
      assert.equal(upd.status, 200, upd.text);
      assert.equal(upd.body.title, 'edited');
      assert.equal(upd.body.description, 'now public');
      assert.equal(upd.body.visibility, 'public');
      assert.deepEqual(upd.body.files.map((f: any) => f.path), ['a.txt', 'moved/c.txt']);
      assert.equal((await t.get(`/api/v4/snippets/${id}/files/main/moved%2Fc.txt/raw`, { token: null })).text, 'C');
      assert.equal((await t.get(`/api/v4/snippets/${id}/raw`, { token: null })).text, 'A2');
      const repo = await repoOf(id);
      const log = execFileSync('git', ['--git-dir', repo, 'log', '--format=%s', 'main'], { encoding: 'utf8' }).trim().split('\n');
      assert.deepEqual(log, ['Update snippet', 'Initial commit']);

      // A title-only change makes no commit.
      assert.equal((await put({ title: 'retitled' })).body.title, 'retitled');
      assert.equal(execFileSync('git', ['--git-dir', repo, 'rev-list', '--count', 'main'], { encoding: 'utf8' }).trim(), '2');

      // The deprecated single-file parameters refuse a snippet with several files.
      assert.deepEqual((await put({ content: 'x' })).body, { message: { error: 'To update Snippets with multiple files, you must use the `files` parameter' } });
      const bad: [Record<string, unknown>, number, unknown][] = [
        [{}, 400, { error: 'content, description, files, file_name, title, visibility are missing, at least one parameter must be provided' }],
        [{ files: [{ file_path: 'a.txt' }] }, 400, { error: 'files[0][action] is missing' }],
        [{ files: [{ action: 'chmod', file_path: 'a.txt' }] }, 400, { error: 'files[0][action] does not have a valid value' }],
        [{ files: [{ action: 'update', file_path: 'a.txt' }] }, 422, { message: { error: 'Snippet actions have invalid data' } }],
        [{ files: [{ action: 'move', file_path: 'x.txt' }] }, 422, { message: { error: 'Snippet actions have invalid data' } }],
        [{ files: [{ action: 'delete', file_path: 'nope.txt' }] }, 400, { message: { error: "Error updating the snippet - A file with this name doesn't exist" } }],
        [{ files: [{ action: 'delete', file_path: 'a.txt' }, { action: 'delete', file_path: 'moved/c.txt' }] }, 400, { message: { error: "Error updating the snippet - Snippets can't be empty" } }],
        [{ files: [{ action: 'create', file_path: '../x', content: 'y' }] }, 400, { error: 'files[0][file_path] should be a valid file path' }],
        [{ files: [], content: 'x' }, 400, { error: 'files, content are mutually exclusive' }],
        [{ title: '' }, 400, { error: 'title is empty' }],
        [{ visibility: 'everyone' }, 400, { error: 'visibility does not have a valid value' }],
      ];
      for (const [body, status, expected] of bad) {
        const r = await put(body);
        assert.equal(r.status, status, `${JSON.stringify(body)} -> ${r.text}`);
        assert.deepEqual(r.body, expected, JSON.stringify(body));
      }
      // Someone else's snippet is not the caller's to change: 404, even when they can read it.
      assert.equal((await put({ title: 'hijack' }, bob)).status, 404);
      assert.equal((await put({ title: 'admin' }, admin)).status, 404);
      assert.equal((await t.put(`/api/v4/snippets/${id}`, { title: 'anon' }, { token: null })).status, 401);
      assert.equal((await snippetRow(id)).title, 'retitled');
    });

    it('updates a single-file snippet through file_name and content', async () => {
      const res = await create(alice, { title: 'single', files: [{ file_path: 'one.txt', content: '1' }] });
      const id = res.body.id;
      const upd = await t.put(`/api/v4/snippets/${id}`, { file_name: 'renamed.txt', content: 'one' }, { token: alice.token });
      assert.equal(upd.status, 200, upd.text);
      assert.deepEqual(upd.body.files.map((f: any) => f.path), ['renamed.txt']);
      assert.equal((await t.get(`/api/v4/snippets/${id}/raw`, { token: alice.token })).text, 'one');
      const content = await t.put(`/api/v4/snippets/${id}`, { content: 'uno' }, { token: alice.token });
      assert.equal(content.body.file_name, 'renamed.txt');
      assert.equal((await t.get(`/api/v4/snippets/${id}/raw`, { token: alice.token })).text, 'uno');
    });

    it('deletes a snippet (204), its repository after the row; 404 for others and afterwards', async () => {
      const res = await create(alice, { title: 'doomed', visibility: 'public', files: [{ file_path: 'a', content: 'b' }] });
      const id = res.body.id;
      const repo = await repoOf(id);
      assert.ok(fs.existsSync(repo));
      assert.equal((await t.delete(`/api/v4/snippets/${id}`, { token: bob.token })).status, 404);
      assert.equal((await t.delete(`/api/v4/snippets/${id}`, { token: null })).status, 401);
      const del = await t.delete(`/api/v4/snippets/${id}`, { token: alice.token });
      assert.equal(del.status, 204);
      assert.equal((await t.get(`/api/v4/snippets/${id}`, { token: alice.token })).status, 404);
      const again = await t.delete(`/api/v4/snippets/${id}`, { token: alice.token });
      assert.equal(again.status, 404);
      assert.deepEqual(again.body, { message: '404 Snippet Not Found' });
      await drainJobs(t.app.cairn);
      assert.ok(!fs.existsSync(repo));
    });
  });

  describe('project snippets', () => {
    let owner: TestUser;
    let guest: TestUser;
    let reporter: TestUser;
    let developer: TestUser;
    let maintainer: TestUser;
    let outsider: TestUser;
    let project: Project;
    let privateProject: Project;
    const url = (p: Project, rest = '') => `/api/v4/projects/${p.id}/snippets${rest}`;

    before(async () => {
      owner = await t.createUser();
      guest = await t.createUser();
      reporter = await t.createUser();
      developer = await t.createUser();
      maintainer = await t.createUser();
      outsider = await t.createUser();
      const group = await t.createGroup({ visibility: PUBLIC, owner: owner.user });
      project = await t.createProject({ group, visibility: PUBLIC });
      privateProject = await t.createProject({ group, visibility: PRIVATE });
      for (const p of [project, privateProject]) {
        await t.addMember(p, guest.user, 10);
        await t.addMember(p, reporter.user, 20);
        await t.addMember(p, developer.user, 30);
        await t.addMember(p, maintainer.user, 40);
        await t.addMember(p, external.user, 10);
      }
    });

    const createIn = (p: Project, user: TestUser, body: Record<string, unknown> = {}) =>
      t.post(url(p), { title: 'project snippet', visibility: 'public', files: [{ file_path: 'p.txt', content: 'project' }], ...body }, { token: user.token });

    it('lets reporters and up create, within the project\'s visibility', async () => {
      assert.equal((await createIn(project, guest)).status, 403);
      assert.equal((await createIn(project, outsider)).status, 403);
      assert.equal((await t.post(url(project), { title: 'x', visibility: 'public', files: [{ file_path: 'a', content: 'b' }] }, { token: null })).status, 401);
      assert.equal((await createIn(privateProject, outsider)).status, 404);
      const res = await createIn(project, reporter);
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.project_id, project.id);
      const path = (await t.get(`/api/v4/projects/${project.id}`)).body.path_with_namespace;
      const base = t.config.externalUrl;
      assert.equal(res.body.web_url, `${base}/${path}/-/snippets/${res.body.id}`);
      assert.equal(res.body.http_url_to_repo, `${base}/${path}/snippets/${res.body.id}.git`);
      assert.equal(res.body.ssh_url_to_repo, `ssh://git@${new URL(base).hostname}:${t.config.sshPort}/${path}/snippets/${res.body.id}.git`);
      assert.equal(res.body.files[0].raw_url, `${base}/${path}/-/snippets/${res.body.id}/raw/main/p.txt`);
      // visibility is required here, and may not exceed the project's.
      const missing = await t.post(url(project), { title: 'x', files: [{ file_path: 'a', content: 'b' }] }, { token: reporter.token });
      assert.deepEqual(missing.body, { error: 'visibility is missing' });
      const tooOpen = await createIn(privateProject, reporter, { visibility: 'internal' });
      assert.equal(tooOpen.status, 400);
      assert.deepEqual(tooOpen.body, { message: { error: "Visibility level can not be more visible than the project's" } });
      assert.equal((await createIn(privateProject, reporter, { visibility: 'private' })).status, 201);
    });

    it('shows private snippets to members, internal ones to signed-in non-external users, public ones to anyone', async () => {
      const ids: Record<string, number> = {};
      for (const v of ['private', 'internal', 'public']) ids[v] = (await createIn(project, developer, { visibility: v, title: v })).body.id;
      const expect: [string, TestUser | null, Record<string, number>][] = [
        ['guest member', guest, { private: 200, internal: 200, public: 200 }],
        ['non-member', outsider, { private: 404, internal: 200, public: 200 }],
        ['external member', external, { private: 200, internal: 200, public: 200 }],
        ['anonymous', null, { private: 404, internal: 404, public: 200 }],
        ['admin', admin, { private: 200, internal: 200, public: 200 }],
      ];
      for (const [who, user, statuses] of expect) {
        for (const [v, status] of Object.entries(statuses)) {
          const token = user ? user.token : null;
          assert.equal((await t.get(url(project, `/${ids[v]}`), { token })).status, status, `${who} reading a ${v} project snippet`);
          assert.equal((await t.get(url(project, `/${ids[v]}/raw`), { token })).status, status, `${who} raw ${v}`);
          assert.equal((await t.get(url(project, `/${ids[v]}/files/main/p.txt/raw`), { token })).status, status, `${who} file ${v}`);
        }
      }
      // An external user who is not a member sees only public snippets of the public project.
      const ext2 = await t.createUser({ external: true });
      assert.equal((await t.get(url(project, `/${ids.internal}`), { token: ext2.token })).status, 404);
      assert.equal((await t.get(url(project, `/${ids.public}`), { token: ext2.token })).status, 200);
      // Lists need a signed-in caller and hold what they may see.
      assert.equal((await t.get(url(project), { token: null })).status, 401);
      const listed = (await t.get(url(project), { token: outsider.token, query: { per_page: 100 } })).body.map((s: any) => s.id);
      assert.ok(!listed.includes(ids.private) && listed.includes(ids.internal) && listed.includes(ids.public));
      const asGuest = (await t.get(url(project), { token: guest.token, query: { per_page: 100 } })).body.map((s: any) => s.id);
      assert.ok(asGuest.includes(ids.private));
      // The snippet is found only under its own project.
      assert.equal((await t.get(url(privateProject, `/${ids.public}`), { token: admin.token })).status, 404);
      // A private project hides its snippets from outsiders whatever their visibility.
      const hidden = (await createIn(privateProject, developer, { visibility: 'private' })).body.id;
      assert.deepEqual((await t.get(url(privateProject, `/${hidden}`), { token: outsider.token })).body, { message: '404 Project Not Found' });
      assert.equal((await t.get(url(privateProject, `/${hidden}`), { token: guest.token })).status, 200);
      // Personal endpoints read project snippets by the same rules.
      assert.equal((await t.get(`/api/v4/snippets/${ids.private}`, { token: outsider.token })).status, 404);
      const viaPersonal = await t.get(`/api/v4/snippets/${ids.private}`, { token: guest.token });
      assert.equal(viaPersonal.status, 200);
      assert.equal(viaPersonal.body.project_id, project.id);
    });

    it('follows the snippets feature: disabled is 403, private is for members', async () => {
      const p = await t.createProject({ group: await t.createGroup({ visibility: PUBLIC, owner: owner.user }), visibility: PUBLIC });
      await t.addMember(p, developer.user, 30);
      const id = (await createIn(p, developer)).body.id;
      assert.equal((await t.put(`/api/v4/projects/${p.id}`, { snippets_access_level: 'private' }, { token: owner.token })).status, 200);
      assert.equal((await t.get(url(p, `/${id}`), { token: outsider.token })).status, 403);
      assert.equal((await t.get(url(p, `/${id}`), { token: developer.token })).status, 200);
      assert.ok(!(await t.get('/api/v4/snippets/all', { token: outsider.token, query: { per_page: 100 } })).body.some((s: any) => s.id === id));
      assert.equal((await t.get(`/api/v4/snippets/${id}`, { token: outsider.token })).status, 404);
      assert.equal((await t.put(`/api/v4/projects/${p.id}`, { snippets_access_level: 'disabled' }, { token: owner.token })).status, 200);
      assert.deepEqual((await t.get(url(p, `/${id}`), { token: developer.token })).body, { message: '403 Forbidden' });
      assert.equal((await t.get(url(p), { token: developer.token })).status, 403);
      assert.equal((await createIn(p, developer)).status, 403);
    });

    it('lets the author, maintainers and admins update and delete; others get 403', async () => {
      const id = (await createIn(project, developer, { visibility: 'public' })).body.id;
      const put = (user: TestUser | null, title: string) => t.put(url(project, `/${id}`), { title }, { token: user ? user.token : null });
      assert.equal((await put(reporter, 'r')).status, 403);
      assert.equal((await put(outsider, 'o')).status, 403);
      assert.equal((await put(null, 'anon')).status, 401);
      assert.equal((await put(developer, 'by author')).status, 200);
      const byMaintainer = await t.put(url(project, `/${id}`), { title: 'by maintainer', files: [{ action: 'update', file_path: 'p.txt', content: 'maintained' }] }, { token: maintainer.token });
      assert.equal(byMaintainer.status, 200, byMaintainer.text);
      assert.equal((await t.get(url(project, `/${id}/raw`), { token: null })).text, 'maintained');
      assert.equal((await put(admin, 'by admin')).status, 200);
      assert.equal((await t.put(url(project, `/${id}`), { visibility: 'public' }, { token: developer.token })).status, 200);
      const privId = (await createIn(privateProject, developer, { visibility: 'private' })).body.id;
      const tooOpen = await t.put(url(privateProject, `/${privId}`), { visibility: 'public' }, { token: developer.token });
      assert.deepEqual(tooOpen.body, { message: { error: "Visibility level can not be more visible than the project's" } });

      assert.equal((await t.delete(url(project, `/${id}`), { token: reporter.token })).status, 403);
      assert.equal((await t.delete(url(project, `/${id}`), { token: maintainer.token })).status, 204);
      assert.equal((await t.delete(url(project, `/${id}`), { token: maintainer.token })).status, 404);
      assert.equal((await t.delete(url(project, `/999999`), { token: maintainer.token })).status, 404);
    });

    it('answers user_agent_detail for administrators only', async () => {
      const id = (await t.post(url(project), { title: 'ua', visibility: 'public', files: [{ file_path: 'a', content: 'b' }] }, { token: reporter.token, headers: { 'user-agent': 'python-gitlab/4.0' } })).body.id;
      const res = await t.get(url(project, `/${id}/user_agent_detail`), { token: admin.token });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.user_agent, 'python-gitlab/4.0');
      assert.equal((await t.get(url(project, `/${id}/user_agent_detail`), { token: maintainer.token })).status, 403);
      assert.equal((await t.get(url(privateProject, `/${id}/user_agent_detail`), { token: admin.token })).status, 404);
    });

    it('has discussions, notes and award emoji, hidden with the snippet', async () => {
      const pub = (await createIn(project, developer, { visibility: 'public' })).body.id;
      const priv = (await createIn(project, developer, { visibility: 'private' })).body.id;
      const thread = await t.post(url(project, `/${pub}/discussions`), { body: 'Nice snippet' }, { token: outsider.token });
      assert.equal(thread.status, 201, thread.text);
      assert.equal(thread.body.notes[0].noteable_type, 'Snippet');
      assert.equal(thread.body.notes[0].noteable_id, pub);
      assert.equal(thread.body.notes[0].noteable_iid, null);
      const reply = await t.post(url(project, `/${pub}/discussions/${thread.body.id}/notes`), { body: 'Thanks' }, { token: developer.token });
      assert.equal(reply.status, 201, reply.text);
      const list = await t.get(url(project, `/${pub}/discussions`), { token: null });
      assert.equal(list.status, 200);
      assert.deepEqual(list.body[0].notes.map((n: any) => n.body), ['Nice snippet', 'Thanks']);
      const notes = await t.get(url(project, `/${pub}/notes`), { token: guest.token });
      assert.equal(notes.body.length, 2);
      assert.equal((await t.post(url(project, `/${pub}/notes`), { body: 'anon' }, { token: null })).status, 401);
      // The private snippet's discussions are as hidden as the snippet.
      assert.equal((await t.get(url(project, `/${priv}/discussions`), { token: outsider.token })).status, 404);
      assert.equal((await t.post(url(project, `/${priv}/notes`), { body: 'x' }, { token: outsider.token })).status, 404);
      assert.equal((await t.post(url(project, `/${priv}/notes`), { body: 'member' }, { token: guest.token })).status, 201);
      // Award emoji on the snippet and its notes.
      const award = await t.post(url(project, `/${pub}/award_emoji`), { name: 'thumbsup' }, { token: outsider.token });
      assert.equal(award.status, 201, award.text);
      assert.equal(award.body.awardable_type, 'Snippet');
      assert.equal((await t.get(url(project, `/${priv}/award_emoji`), { token: outsider.token })).status, 404);
      // Deleting the snippet takes its notes and awards along.
      assert.equal((await t.delete(url(project, `/${pub}`), { token: developer.token })).status, 204);
      const left = await t.db.selectFrom('notes').select('id').where('noteable_type', '=', 'Snippet').where('noteable_id', '=', pub).execute();
      assert.equal(left.length, 0);
      const awards = await t.db.selectFrom('award_emoji').select('id').where('awardable_type', '=', 'Snippet').where('awardable_id', '=', pub).execute();
      assert.equal(awards.length, 0);
    });

    it('goes with its project, and a user\'s snippets go with the user', async () => {
      const group = await t.createGroup({ visibility: PUBLIC, owner: owner.user });
      const p = await t.createProject({ group, visibility: PUBLIC });
      await t.addMember(p, developer.user, 30);
      const inProject = (await createIn(p, developer)).body.id;
      const projectRepo = await repoOf(inProject);
      const del = await t.delete(`/api/v4/projects/${p.id}`, { token: owner.token });
      assert.equal(del.status, 202, del.text);
      assert.equal((await t.db.selectFrom('snippets').select('id').where('id', '=', inProject).execute()).length, 0);

      const dave = await t.createUser();
      await t.addMember(project, dave.user, 30);
      const personal = (await create(dave, { title: 'dave', visibility: 'public', files: [{ file_path: 'a', content: 'b' }] })).body.id;
      const inOther = (await createIn(project, dave)).body.id;
      const repos = [await repoOf(personal), await repoOf(inOther)];
      assert.equal((await t.delete(`/api/v4/users/${dave.user.id}`)).status, 204);
      const rows = await t.db.selectFrom('snippets').select('id').where('id', 'in', [personal, inOther]).execute();
      assert.equal(rows.length, 0);
      await drainJobs(t.app.cairn);
      for (const r of [projectRepo, ...repos]) assert.ok(!fs.existsSync(r), `${r} removed`);
    });
  });

});
