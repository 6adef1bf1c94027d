import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';

describe('repository files API', () => {
  let t: TestContext;
  let project: Project;
  let files: string;
  let guest: TestUser, reporter: TestUser, developer: TestUser, outsider: TestUser;

  before(async () => {
    // Developers write to main here (its protection is the test's own): no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    project = await t.createProject({ visibility: 0 });
    files = `/api/v4/projects/${project.id}/repository/files`;
    [guest, reporter, developer, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
  });
  after(async () => {
    await t.close();
  });

  it('creates a file (201 {file_path, branch}) and refuses a second create', async () => {
    const res = await t.post(`${files}/docs%2Freadme.md`, { branch: 'main', commit_message: 'add readme', content: 'line 1\nline 2\nline 3\n', author_name: 'Writer', author_email: 'w@example.com' });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body, { file_path: 'docs/readme.md', branch: 'main' });
    const again = await t.post(`${files}/docs%2Freadme.md`, { branch: 'main', commit_message: 'again', content: 'x' });
    assert.equal(again.status, 400);
    assert.deepEqual(again.body, { message: 'A file with this name already exists' });
    const b64 = await t.post(`${files}/bin%2Ftool`, { branch: 'main', commit_message: 'binary', content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64', execute_filemode: true });
    assert.equal(b64.status, 201, b64.text);
  });

  it('reads a file as JSON with base64 content and X-Gitlab headers; HEAD gives headers only', async () => {
    const res = await t.get(`${files}/docs%2Freadme.md`, { query: { ref: 'main' } });
    assert.equal(res.status, 200, res.text);
    const content = 'line 1\nline 2\nline 3\n';
    const head = (await t.get(`/api/v4/projects/${project.id}/repository/commits/main`)).body.id;
    assert.deepEqual(Object.keys(res.body).sort(), ['blob_id', 'commit_id', 'content', 'content_sha256', 'encoding', 'execute_filemode', 'file_name', 'file_path', 'last_commit_id', 'ref', 'size'].sort());
    assert.equal(res.body.file_name, 'readme.md');
    assert.equal(res.body.file_path, 'docs/readme.md');
    assert.equal(res.body.size, content.length);
    assert.equal(res.body.encoding, 'base64');
    assert.equal(Buffer.from(res.body.content, 'base64').toString(), content);
    assert.equal(res.body.content_sha256, crypto.createHash('sha256').update(content).digest('hex'));
    assert.equal(res.body.ref, 'main');
    assert.equal(res.body.commit_id, head);
    assert.notEqual(res.body.last_commit_id, head, 'last commit is the one that touched the file');
    assert.equal(res.body.execute_filemode, false);
    assert.match(res.body.blob_id, /^[0-9a-f]{40}$/);
    assert.equal(res.headers['x-gitlab-file-path'], 'docs/readme.md');
    assert.equal(res.headers['x-gitlab-last-commit-id'], res.body.last_commit_id);

    const tool = await t.get(`${files}/bin%2Ftool`, { query: { ref: 'main' } });
    assert.equal(tool.body.execute_filemode, true);
    assert.deepEqual([...Buffer.from(tool.body.content, 'base64')], [0, 1, 2, 255]);

    const h = await t.call('HEAD', `${files}/docs%2Freadme.md?ref=main`);
    assert.equal(h.status, 200);
    assert.equal(h.text, '');
    assert.equal(h.headers['x-gitlab-blob-id'], res.body.blob_id);
    assert.equal(h.headers['x-gitlab-size'], String(content.length));

    assert.equal((await t.get(`${files}/docs%2Freadme.md`)).body.error, 'ref is missing');
    assert.deepEqual((await t.get(`${files}/nope.md`, { query: { ref: 'main' } })).body, { message: '404 File Not Found' });
    assert.deepEqual((await t.get(`${files}/docs%2Freadme.md`, { query: { ref: 'nope' } })).body, { message: '404 Commit Not Found' });
    assert.equal((await t.get(`${files}/docs`, { query: { ref: 'main' } })).status, 404, 'a directory is not a file');
  });

  it('raw: default branch when ref is absent, text and binary content types', async () => {
    const raw = await t.get(`${files}/docs%2Freadme.md/raw`);
    assert.equal(raw.status, 200);
    assert.equal(raw.text, 'line 1\nline 2\nline 3\n');
    assert.equal(raw.headers['content-type'], 'text/plain; charset=utf-8');
    assert.match(raw.headers['content-disposition'], /inline; filename="readme.md"/);
    const bin = await t.get(`${files}/bin%2Ftool/raw`, { query: { ref: 'main', lfs: true } });
    assert.equal(bin.headers['content-type'], 'application/octet-stream');
    assert.equal((await t.get(`${files}/nope/raw`)).status, 404);
  });

  it('a ref that is not one revision (object syntax, a range, an option) is 404 Commit Not Found, never 500', async () => {
    const readme = `${files}/docs%2Freadme.md`;
    for (const ref of ['main:../../', 'main:docs/readme.md', 'main:', 'main..main', '-main', '--output=/tmp/x', 'main\\x']) {
      for (const read of [`${readme}/raw`, readme, `${readme}/blame`]) {
        const res = await t.get(read, { query: { ref } });
        assert.equal(res.status, 404, `${read}?ref=${ref}: ${res.text}`);
        assert.deepEqual(res.body, { message: '404 Commit Not Found' }, `${read}?ref=${ref}`);
      }
    }
    // As a client writes it, unencoded.
    const plain = await t.get(`${readme}/raw?ref=main:../../`);
    assert.equal(plain.status, 404, plain.text);
    assert.deepEqual(plain.body, { message: '404 Commit Not Found' });
    // Reads go on working afterwards.
    assert.equal((await t.get(`${readme}/raw`, { query: { ref: 'main' } })).status, 200);
  });

  it('blame, with ranges', async () => {
    await t.put(`${files}/docs%2Freadme.md`, { branch: 'main', commit_message: 'edit line 2', content: 'line 1\nLINE TWO\nline 3\n' });
    const blame = await t.get(`${files}/docs%2Freadme.md/blame`, { query: { ref: 'main' } });
    assert.equal(blame.status, 200, blame.text);
    assert.equal(blame.body.length, 3);
    assert.deepEqual(blame.body.map((r: any) => r.lines), [['line 1'], ['LINE TWO'], ['line 3']]);
    assert.equal(blame.body[1].commit.message, 'edit line 2');
    assert.equal(blame.body[0].commit.author_name, 'Writer');
    assert.deepEqual(Object.keys(blame.body[0].commit).sort(), ['author_email', 'author_name', 'authored_date', 'committed_date', 'committer_email', 'committer_name', 'id', 'message', 'parent_ids'].sort());
    const ranged = await t.get(`${files}/docs%2Freadme.md/blame?ref=main&range[start]=2&range[end]=3`);
    assert.equal(ranged.status, 200, ranged.text);
    assert.deepEqual(ranged.body.map((r: any) => r.lines), [['LINE TWO'], ['line 3']]);
    assert.equal((await t.get(`${files}/docs%2Freadme.md/blame?ref=main&range[start]=3&range[end]=1`)).status, 400);
    assert.equal((await t.get(`${files}/docs%2Freadme.md/blame?ref=main&range[start]=2`)).status, 400);
    assert.equal((await t.get(`${files}/docs%2Freadme.md/blame`)).body.error, 'ref is missing');
  });

  it('updates with last_commit_id checks and GitLab messages', async () => {
    const current = (await t.get(`${files}/docs%2Freadme.md`, { query: { ref: 'main' } })).body.last_commit_id;
    const stale = await t.put(`${files}/docs%2Freadme.md`, { branch: 'main', commit_message: 'stale', content: 'x', last_commit_id: 'a'.repeat(40) });
    assert.equal(stale.status, 400);
    assert.deepEqual(stale.body, { message: 'You are attempting to update a file that has changed since you started editing it.' });
    const ok = await t.put(`${files}/docs%2Freadme.md`, { branch: 'main', commit_message: 'fresh', content: 'fresh\n', last_commit_id: current }, { token: developer.token });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { file_path: 'docs/readme.md', branch: 'main' });
    const missing = await t.put(`${files}/nope.md`, { branch: 'main', commit_message: 'x', content: 'x' });
    assert.deepEqual(missing.body, { message: "A file with this name doesn't exist" });
    assert.equal((await t.put(`${files}/docs%2Freadme.md`, { branch: 'main', commit_message: 'x' })).body.error, 'content is missing');
  });

  it('start_branch creates a new branch; unknown branch without start is refused', async () => {
    const created = await t.post(`${files}/feature.txt`, { branch: 'feat', start_branch: 'main', commit_message: 'feat', content: 'f' });
    assert.equal(created.status, 201, created.text);
    const lost = await t.post(`${files}/x.txt`, { branch: 'ghost', commit_message: 'x', content: 'x' });
    assert.deepEqual(lost.body, { message: 'You can only create or edit files when you are on a branch' });
  });

  it('rejects invalid file paths', async () => {
    for (const p of ['..%2Fsecret', 'a%2F..%2F..%2Fb', '%2Fetc%2Fpasswd', '-rf', 'a%00b']) {
      const res = await t.get(`${files}/${p}`, { query: { ref: 'main' } });
      assert.equal(res.status, 400, p);
      assert.deepEqual(res.body, { error: 'file_path should be a valid file path' });
      assert.equal((await t.post(`${files}/${p}`, { branch: 'main', commit_message: 'x', content: 'x' })).status, 400);
    }
  });

  it('deletes with 204; stale last_commit_id and missing files are refused', async () => {
    const stale = await t.delete(`${files}/feature.txt?branch=feat&commit_message=rm&last_commit_id=${'b'.repeat(40)}`);
    assert.equal(stale.status, 400);
    assert.equal(stale.body.message, 'You are attempting to delete a file that has been previously updated.');
    const res = await t.delete(`${files}/feature.txt?branch=feat&commit_message=rm`);
    assert.equal(res.status, 204);
    assert.equal((await t.get(`${files}/feature.txt`, { query: { ref: 'feat' } })).status, 404);
    const gone = await t.delete(`${files}/feature.txt?branch=feat&commit_message=rm`);
    assert.deepEqual(gone.body, { message: "A file with this name doesn't exist" });
    assert.equal((await t.delete(`${files}/feature.txt?branch=feat`)).body.error, 'commit_message is missing');
  });

  it('permissions: reporters read, developers write, guests/outsiders/anonymous do not; protected branches and read_api', async () => {
    assert.equal((await t.get(`${files}/docs%2Freadme.md`, { query: { ref: 'main' }, token: reporter.token })).status, 200);
    assert.equal((await t.get(`${files}/docs%2Freadme.md`, { query: { ref: 'main' }, token: guest.token })).status, 403);
    assert.equal((await t.get(`${files}/docs%2Freadme.md`, { query: { ref: 'main' }, token: outsider.token })).status, 404);
    assert.equal((await t.get(`${files}/docs%2Freadme.md/raw`, { token: null })).status, 404);
    const body = { branch: 'main', commit_message: 'x', content: 'x' };
    const rep = await t.post(`${files}/r.txt`, body, { token: reporter.token });
    assert.equal(rep.status, 403);
    assert.equal(rep.body.message, '403 Forbidden - You are not allowed to push into this branch');
    assert.equal((await t.post(`${files}/d.txt`, body, { token: developer.token })).status, 201);
    const readApi = await t.createUser({ scopes: ['read_api'] });
    await t.addMember(project, readApi.user, 40);
    assert.equal((await t.post(`${files}/ra.txt`, body, { token: readApi.token })).status, 403);
    assert.equal((await t.get(`${files}/d.txt`, { query: { ref: 'main' }, token: readApi.token })).status, 200);

    const pb = await t.db.insertInto('protected_branches').values({ project_id: project.id, name: 'ma*' }).returning('id').executeTakeFirstOrThrow();
    await t.db.insertInto('protected_branch_access_levels').values({ protected_branch_id: pb.id, kind: 'push', access_level: 40 }).execute();
    assert.equal((await t.post(`${files}/p.txt`, body, { token: developer.token })).status, 403);
    assert.equal((await t.post(`${files}/p.txt`, body)).status, 201, 'root (admin/owner) may push');

    const pub = await t.createProject({ visibility: 20 });
    await t.post(`/api/v4/projects/${pub.id}/repository/files/open.txt`, body);
    const anon = await t.get(`/api/v4/projects/${pub.id}/repository/files/open.txt/raw`, { token: null });
    assert.equal(anon.status, 200);
    assert.equal(anon.text, 'x');
    assert.equal((await t.post(`/api/v4/projects/${pub.id}/repository/files/y.txt`, body, { token: null })).status, 401);
  });
});
