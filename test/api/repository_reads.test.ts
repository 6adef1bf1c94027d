import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { commitGraphHasBloomFilters } from '../../src/git/repository.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree, type WorkTree } from '../helpers/repo.js';

/**
 * Reads whose results are kept per object id (last commit of a path, blame, stats, comparisons,
 * merged branches, archives) and refs read from the ref files: every read follows a ref moved by
 * another process (a git push straight into the repository) at once.
 */
describe('repository reads follow pushes at once', () => {
  let t: TestContext;
  let project: Project;
  let w: WorkTree;
  let gitDir: string;
  let guest: TestUser;
  const url = (rest: string) => `/api/v4/projects/${project.id}/repository/${rest}`;
  const file = (p: string, rest = '') => url(`files/${encodeURIComponent(p)}${rest}`);

  before(async () => {
    t = await createTestContext({ archiveRateLimit: 0 });
    project = await t.createProject();
    guest = await t.createUser();
    await t.addMember(project, guest.user, 10);
    gitDir = projectRepoPath(t.app.cairn, project);
    w = workTree(t, project);
    w.write('a.txt', 'one\ntwo\nthree\n');
    w.write('dir/b.txt', 'b\n');
    w.commit('first');
    w.write('dir/b.txt', 'b2\n');
    w.commit('second');
    w.push('--all');
  });
  after(async () => {
    await t.close();
  });

  it('the files API (raw and metadata) and blame follow each push: last commit, content, blame lines', async () => {
    const touching = w.git(['log', '-1', '--format=%H', '--', 'a.txt']);
    for (let i = 0; i < 2; i++) {
      const meta = await t.get(file('a.txt'), { query: { ref: 'main' } });
      assert.equal(meta.body.last_commit_id, touching);
      const raw = await t.get(file('a.txt', '/raw'), { query: { ref: 'main' } });
      assert.equal(raw.headers['x-gitlab-last-commit-id'], touching);
      assert.equal(raw.text, 'one\ntwo\nthree\n');
    }
    const blameBefore = await t.get(file('a.txt', '/blame'), { query: { ref: 'main' } });
    assert.deepEqual(blameBefore.body.map((r: any) => [r.commit.id, r.lines]), [[touching, ['one', 'two', 'three']]]);

    // A push that does not touch the file: the branch moves, the file's last commit does not.
    w.write('dir/b.txt', 'b3\n');
    const other = w.commit('third, elsewhere');
    w.push();
    let meta = await t.get(file('a.txt'), { query: { ref: 'main' } });
    assert.equal(meta.body.commit_id, other);
    assert.equal(meta.body.last_commit_id, touching);
    assert.equal((await t.get(file('dir/b.txt'), { query: { ref: 'main' } })).body.last_commit_id, other);

    // A push that changes the file's second line.
    w.write('a.txt', 'one\nTWO\nthree\n');
    const changed = w.commit('fourth, a.txt');
    w.push();
    meta = await t.get(file('a.txt'), { query: { ref: 'main' } });
    assert.equal(meta.body.last_commit_id, changed);
    assert.equal(Buffer.from(meta.body.content, 'base64').toString(), 'one\nTWO\nthree\n');
    const raw = await t.get(file('a.txt', '/raw'), { query: { ref: 'main' } });
    assert.equal(raw.headers['x-gitlab-last-commit-id'], changed);
    assert.equal(raw.headers['x-gitlab-commit-id'], changed);
    const blame = await t.get(file('a.txt', '/blame'), { query: { ref: 'main' } });
    assert.deepEqual(blame.body.map((r: any) => [r.commit.id, r.lines]), [
      [touching, ['one']],
      [changed, ['TWO']],
      [touching, ['three']],
    ]);
    assert.equal(blame.headers['x-gitlab-last-commit-id'], changed);

    // Moved back by a force push: the older answers again (they were kept under the old ids).
    w.git(['reset', '-q', '--hard', other]);
    w.push();
    assert.equal((await t.get(file('a.txt'), { query: { ref: 'main' } })).body.last_commit_id, touching);
    assert.equal((await t.get(file('a.txt', '/raw'), { query: { ref: other } })).headers['x-gitlab-last-commit-id'], touching);
    w.git(['reset', '-q', '--hard', changed]);
    w.push();
  });

  it('trees, commits and single commits (with stats) follow each push', async () => {
    w.write('dir/new.txt', 'x\ny\n');
    const added = w.commit('add new.txt');
    const names = async () => (await t.get(url('tree'), { query: { path: 'dir' } })).body.map((e: any) => e.name);
    assert.deepEqual(await names(), ['b.txt']);
    w.push();
    assert.deepEqual(await names(), ['b.txt', 'new.txt']);
    const list = await t.get(url('commits'), { query: { per_page: 2, with_stats: true } });
    assert.equal(list.body[0].id, added);
    assert.deepEqual(list.body[0].stats, { additions: 2, deletions: 0, total: 2 });
    for (let i = 0; i < 2; i++) {
      const one = await t.get(url(`commits/${added}`));
      assert.deepEqual(one.body.stats, { additions: 2, deletions: 0, total: 2 });
    }
    assert.equal((await t.get(url('commits/main'))).body.id, added);
  });

  it('compare follows the branches it names; the same pair of ids answers the same', async () => {
    const tip = w.git(['rev-parse', 'HEAD']);
    const first = await t.get(url('compare'), { query: { from: 'main~1', to: 'main' } });
    assert.equal(first.body.commit.id, tip);
    assert.deepEqual(await t.get(url('compare'), { query: { from: 'main~1', to: 'main' } }).then((r) => r.body), first.body);
    w.write('c.txt', 'c\n');
    const next = w.commit('add c');
    w.push();
    const moved = await t.get(url('compare'), { query: { from: 'main~1', to: 'main' } });
    assert.equal(moved.body.commit.id, next);
    assert.deepEqual(moved.body.diffs.map((d: any) => d.new_path), ['c.txt']);
    const same = await t.get(url('compare'), { query: { from: tip, to: tip } });
    assert.equal(same.body.compare_same_ref, true);
  });

  it('branches and tags, created, moved, packed and deleted by another process, are listed at once', async () => {
    const branches = async () => (await t.get(url('branches'))).body.map((b: any) => [b.name, b.commit.id, b.merged]);
    const tip = w.git(['rev-parse', 'HEAD']);
    assert.deepEqual(await branches(), [['main', tip, false]]);

    w.git(['checkout', '-q', '-b', 'feature']);
    w.write('f.txt', 'f\n');
    const feature = w.commit('feature work');
    w.push('feature');
    assert.deepEqual(await branches(), [
      ['feature', feature, false],
      ['main', tip, false],
    ]);
    assert.equal((await t.get(url('branches/feature'))).body.merged, false);
    // Fast-forwarding main to the feature merges it.
    w.push('feature:main');
    assert.deepEqual(await branches(), [
      ['feature', feature, true],
      ['main', feature, false],
    ]);
    assert.equal((await t.get(url('branches/feature'))).body.merged, true);
    w.git(['checkout', '-q', 'main']);
    w.git(['reset', '-q', '--hard', feature]);

    w.git(['tag', 'v1', tip]);
    w.git(['tag', '-a', '-m', 'release two', 'v2', feature]);
    w.push('--tags');
    const tags = async () => (await t.get(url('tags'), { query: { order_by: 'name', sort: 'asc' } })).body.map((x: any) => [x.name, x.commit.id, x.message]);
    assert.deepEqual(await tags(), [
      ['v1', tip, ''],
      ['v2', feature, 'release two'],
    ]);

    // Packed by housekeeping, then changed again loose: the loose value wins.
    assert.equal((await t.post(`/api/v4/projects/${project.id}/housekeeping`, {})).status, 201);
    assert.ok(!fs.existsSync(path.join(gitDir, 'refs/heads/feature')), 'refs are packed');
    assert.deepEqual((await branches()).map((b: string[]) => b[0]), ['feature', 'main']);
    w.git(['checkout', '-q', 'feature']);
    w.write('f.txt', 'f2\n');
    const feature2 = w.commit('more feature work');
    w.push('feature');
    assert.deepEqual(await branches(), [
      ['feature', feature2, false],
      ['main', feature, false],
    ]);
    w.git(['push', '-q', w.bare, ':feature', ':refs/tags/v1']);
    assert.deepEqual(await branches(), [['main', feature, false]]);
    assert.deepEqual((await tags()).map((x: string[]) => x[0]), ['v2']);
    assert.equal((await t.get(url('branches/feature'))).status, 404);
    w.git(['checkout', '-q', 'main']);
  });

  it('archives are kept on disk and served again; a push gives a new one; private projects stay private', async () => {
    const get = (query = '', token = 'root-test-token-0123456789') =>
      t.app.inject({ method: 'GET', url: url(`archive.tar${query}`), headers: token ? { 'private-token': token } : {} });
    const cacheDir = path.join(t.tmpDir, 'cache', 'archives');
    const kept = () =>
      (fs.existsSync(cacheDir) ? fs.readdirSync(cacheDir).flatMap((d) => fs.readdirSync(path.join(cacheDir, d))) : []).filter((f) => !f.includes('.tmp-'));
    const before = kept().length;
    const first = await get();
    assert.equal(first.statusCode, 200);
    // Renamed into place once git has finished; wait for it.
    for (let i = 0; i < 100 && kept().length === before; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(kept().length, before + 1);
    const again = await get();
    assert.equal(again.statusCode, 200);
    assert.deepEqual(again.rawPayload, first.rawPayload);
    assert.equal(again.headers['content-disposition'], first.headers['content-disposition']);

    assert.equal((await get('', guest.token)).statusCode, 403);
    assert.equal((await get('', '')).statusCode, 404);

    w.write('archived-later.txt', 'later\n');
    const next = w.commit('after the archive');
    w.push();
    const moved = await get();
    assert.match(String(moved.headers['content-disposition']), new RegExp(next));
    assert.ok(moved.rawPayload.includes(Buffer.from('archived-later.txt')));
    assert.ok(!first.rawPayload.includes(Buffer.from('archived-later.txt')));
  });

  it('archives beyond the cache size are not kept forever: the least recently used go', async () => {
    // A tar is at least 10 KiB: room for four of these (one may take at most a quarter).
    const small = await createTestContext({ archiveRateLimit: 0, archiveCacheBytes: 48 * 1024 });
    try {
      const p = await small.createProject();
      const pw = workTree(small, p);
      const cacheDir = path.join(small.tmpDir, 'cache', 'archives');
      const total = () =>
        fs.existsSync(cacheDir) ? fs.readdirSync(cacheDir).flatMap((d) => fs.readdirSync(path.join(cacheDir, d)).map((f) => fs.statSync(path.join(cacheDir, d, f)).size)) : [];
      for (let i = 0; i < 6; i++) {
        pw.write(`f${i}.txt`, `${i}\n`);
        const sha = pw.commit(`c${i}`);
        pw.push();
        const res = await small.app.inject({ method: 'GET', url: `/api/v4/projects/${p.id}/repository/archive.tar?sha=${sha}`, headers: { 'private-token': 'root-test-token-0123456789' } });
        assert.equal(res.statusCode, 200);
        await new Promise((r) => setTimeout(r, 100));
      }
      await small.app.cairn.archives.evict();
      const sizes = total();
      assert.ok(sizes.length >= 1 && sizes.length < 6, `kept ${sizes.length}`);
      assert.ok(sizes.reduce((a, b) => a + b, 0) <= 48 * 1024);

      // One over a quarter of the bound is served but not kept.
      pw.write('big.bin', Buffer.alloc(20 * 1024, 7));
      const big = pw.commit('big');
      pw.push();
      const res = await small.app.inject({ method: 'GET', url: `/api/v4/projects/${p.id}/repository/archive.tar?sha=${big}`, headers: { 'private-token': 'root-test-token-0123456789' } });
      assert.equal(res.statusCode, 200);
      assert.ok(res.rawPayload.length > 20 * 1024);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(total().length, sizes.length, 'the big archive is not kept');
    } finally {
      await small.close();
    }
  });

  it('housekeeping writes changed-path Bloom filters, and rewrites a graph written without them', async () => {
    const { execFileSync } = await import('node:child_process');
    const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' };
    fs.rmSync(path.join(gitDir, 'objects/info/commit-graphs'), { recursive: true, force: true });
    fs.rmSync(path.join(gitDir, 'objects/info/commit-graph'), { force: true });
    execFileSync('git', ['--git-dir', gitDir, 'commit-graph', 'write', '--reachable', '--split'], { env });
    assert.equal(await commitGraphHasBloomFilters(gitDir), false);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/housekeeping`, {})).status, 201);
    assert.equal(await commitGraphHasBloomFilters(gitDir), true);
    // After a push the next run adds a layer for the new commits, with filters too.
    w.write('later.txt', 'x\n');
    w.commit('later');
    w.push();
    assert.equal((await t.post(`/api/v4/projects/${project.id}/housekeeping`, {})).status, 201);
    assert.equal(await commitGraphHasBloomFilters(gitDir), true);
    // git uses them for the files API's walk (GIT_LITERAL_PATHSPECS as Cairn runs it).
    const trace = path.join(t.tmpDir, 'trace2.txt');
    execFileSync('git', ['--git-dir', gitDir, 'rev-list', '-1', 'main', '--', 'a.txt'], { env: { ...env, GIT_LITERAL_PATHSPECS: '1', GIT_TRACE2_PERF: trace } });
    const bloom = /statistics:(\{.*\})/.exec(fs.readFileSync(trace, 'utf8'));
    assert.ok(bloom, 'bloom statistics traced');
    assert.equal(JSON.parse(bloom[1]).filter_not_present, 0);
  });
});
