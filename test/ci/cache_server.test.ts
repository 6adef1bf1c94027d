// CI caches on the server: the keys a job payload carries (as GitLab computes them) and the
// cache archive endpoints Cairn's runner uses (GET / PUT /api/v4/jobs/:id/cache?key=...), on
// local disk and on S3 (s3rver).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { registrationToken } from '../../src/ci/runners.js';
import type { Project } from '../../src/db/schema/core.js';
import { clearProjectCaches, destroyExpiredCaches } from '../../src/services/ci_caches.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles } from '../helpers/ci.js';
import { startS3 } from '../helpers/s3.js';

const sha1 = (s: string | Buffer) => crypto.createHash('sha1').update(s).digest('hex');
const blobId = (content: string) => sha1(Buffer.concat([Buffer.from(`blob ${Buffer.byteLength(content)}\0`), Buffer.from(content)]));

interface Payload {
  id: number;
  job_info: { name: string };
  token: string;
  git_info: { protected: boolean; sha: string };
  cache: Array<{ key: string; fallback_keys: string[]; policy: string; when: string; paths: string[]; untracked: boolean; unprotect: boolean }>;
}

/** A runner of the instance that takes jobs over the protocol (as gitlab-runner does). */
async function protocolRunner(t: TestContext) {
  const reg = await registrationToken(t.app.cairn, { type: 'instance_type' });
  const res = await t.app.inject({ method: 'POST', url: '/api/v4/runners', payload: { token: reg, run_untagged: true } });
  assert.equal(res.statusCode, 201, res.body);
  const token = JSON.parse(res.body).token as string;
  return {
    async take(): Promise<Payload> {
      const r = await t.app.inject({ method: 'POST', url: '/api/v4/jobs/request', payload: { token, info: { features: { cache: true } } } });
      assert.equal(r.statusCode, 201, r.body);
      return JSON.parse(r.body) as Payload;
    },
    /** The two jobs of the pipeline just pushed, by name, both finished. */
    async takePair(): Promise<{ build: Payload; other: Payload }> {
      const a = await this.take();
      const b = await this.take();
      await this.finish(a);
      await this.finish(b);
      return (a.job_info.name === 'build' ? { build: a, other: b } : { build: b, other: a });
    },
    async finish(job: Payload) {
      const r = await t.app.inject({ method: 'PUT', url: `/api/v4/jobs/${job.id}`, payload: { token: job.token, state: 'success' } });
      assert.equal(r.statusCode, 200, r.body);
    },
  };
}

const CI = `
build:
  script: [make]
  cache:
    - key: $CI_COMMIT_REF_SLUG
      paths: [vendor/]
      fallback_keys: [main-fallback]
    - key: { files: [package-lock.json, 'sub/*.lock'] }
      paths: [node_modules/]
    - key: { files_commits: [package-lock.json], prefix: npm }
      paths: [.npm/]
      policy: pull
      when: always
    - key: { files: [missing.txt] }
      paths: [x/]
other:
  script: [make]
  cache:
    - key: shared
      unprotect: true
      untracked: true
`;

describe('CI cache keys in the job payload', () => {
  let t: TestContext;
  let project: Project;
  let runner: Awaited<ReturnType<typeof protocolRunner>>;

  before(async () => {
    t = await createTestContext({ runnerPollTimeout: 1 });
    project = await t.createProject();
    runner = await protocolRunner(t);
  });
  after(async () => t?.close());

  test('string keys as written, key:files from blob ids, key:files_commits from commits, index prefix, suffixes', async () => {
    const lock = '{"lockfileVersion": 3}\n';
    const sub = 'sub lock 1\n';
    const first = await commitFiles(t, project, { 'package-lock.json': lock, 'sub/a.lock': sub, 'README.md': 'one\n', '.gitlab-ci.yml': CI });
    const pipeline = await t.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', project.id).executeTakeFirstOrThrow();
    assert.equal(pipeline.yaml_errors, null);
    const { build: job, other } = await runner.takePair();
    assert.equal(job.git_info.sha, first);
    assert.equal(job.git_info.protected, true, 'main is protected by default');
    const keys = job.cache.map((c) => c.key);
    assert.equal(keys[0], '$CI_COMMIT_REF_SLUG-protected');
    assert.deepEqual(job.cache[0].fallback_keys, ['main-fallback-protected']);
    const filesKey = `1-${sha1([blobId(lock), blobId(sub)].sort().join('-'))}-protected`;
    assert.equal(keys[1], filesKey);
    assert.equal(keys[2], `npm-${sha1(first)}-protected`);
    assert.equal(keys[3], '3-default-protected');
    assert.deepEqual(
      { ...job.cache[2], key: undefined },
      { key: undefined, paths: ['.npm/'], policy: 'pull', when: 'always', untracked: false, unprotect: false, fallback_keys: [] },
    );
    // unprotect: a protected ref shares the unprotected refs' cache.
    assert.equal(other.cache[0].key, 'shared-non_protected');
    assert.equal(other.cache[0].untracked, true);

    // Another file changes: both file keys stay.
    const second = await commitFiles(t, project, { 'README.md': 'two\n' });
    let next = await runner.takePair();
    assert.equal(next.build.git_info.sha, second);
    assert.equal(next.build.cache[1].key, filesKey);
    assert.equal(next.build.cache[2].key, `npm-${sha1(first)}-protected`);

    // The lock file changes: both change.
    const lock2 = '{"lockfileVersion": 3, "x": 1}\n';
    const third = await commitFiles(t, project, { 'package-lock.json': lock2 });
    next = await runner.takePair();
    assert.equal(next.build.cache[1].key, `1-${sha1([blobId(lock2), blobId(sub)].sort().join('-'))}-protected`);
    assert.equal(next.build.cache[2].key, `npm-${sha1(third)}-protected`);

    // An unprotected branch: -non_protected everywhere.
    await commitFiles(t, project, { 'README.md': 'branch\n' }, { branch: 'feature', startBranch: 'main' });
    next = await runner.takePair();
    assert.equal(next.build.git_info.protected, false);
    assert.equal(next.build.cache[0].key, '$CI_COMMIT_REF_SLUG-non_protected');
    assert.deepEqual(next.build.cache[0].fallback_keys, ['main-fallback-non_protected']);
    assert.equal(next.other.cache[0].key, 'shared-non_protected');

    // Clearing the runner caches: -1 before the type suffix, fallback keys too; again: -2.
    assert.equal(await clearProjectCaches(t.app.cairn, project.id), 1);
    await commitFiles(t, project, { 'README.md': 'after clear\n' });
    next = await runner.takePair();
    assert.equal(next.build.cache[0].key, '$CI_COMMIT_REF_SLUG-1-protected');
    assert.deepEqual(next.build.cache[0].fallback_keys, ['main-fallback-1-protected']);
    assert.equal(await clearProjectCaches(t.app.cairn, project.id), 2);

    // Separated caches off: no type suffix.
    const off = await t.put(`/api/v4/projects/${project.id}`, { ci_separated_caches: false });
    assert.equal(off.status, 200, JSON.stringify(off.body));
    await commitFiles(t, project, { 'README.md': 'not separated\n' });
    next = await runner.takePair();
    assert.equal(next.build.cache[0].key, '$CI_COMMIT_REF_SLUG-2');
    assert.equal(next.other.cache[0].key, 'shared-2');
  });
});

/** A zip-like body (the server does not look inside). */
const archive = (n: number, seed = 1) => Buffer.alloc(n, seed);

function endpointCases(name: string, opts: () => Promise<{ overrides: Record<string, unknown>; close?: () => Promise<void>; objects: (t: TestContext) => number }>) {
  describe(`CI cache archives: GET/PUT /jobs/:id/cache (${name})`, () => {
    let t: TestContext;
    let project: Project;
    let runner: Awaited<ReturnType<typeof protocolRunner>>;
    let env: Awaited<ReturnType<typeof opts>>;
    let job: Payload;

    const put = (j: { id: number; token: string }, key: string | undefined, body: Buffer, headers: Record<string, string> = {}) =>
      t.app.inject({
        method: 'PUT',
        url: `/api/v4/jobs/${j.id}/cache${key === undefined ? '' : `?key=${encodeURIComponent(key)}`}`,
        headers: { 'job-token': j.token, 'content-type': 'application/zip', ...headers },
        payload: body,
      });
    const get = (j: { id: number; token: string }, key: string) =>
      t.app.inject({ method: 'GET', url: `/api/v4/jobs/${j.id}/cache?key=${encodeURIComponent(key)}`, headers: { 'job-token': j.token } });

    before(async () => {
      env = await opts();
      t = await createTestContext({ maxCacheSize: 1024 * 1024, runnerPollTimeout: 1, ...env.overrides } as any);
      project = await t.createProject();
      runner = await protocolRunner(t);
      await commitFiles(t, project, { '.gitlab-ci.yml': 'a: { script: [x] }\n' });
      job = await runner.take();
    });
    after(async () => {
      await t?.close();
      await env?.close?.();
    });

    test('a running job stores and reads back its project\'s archives; a miss is 404', async () => {
      const body = crypto.randomBytes(200_000);
      const up = await put(job, 'main-deps-protected', body);
      assert.equal(up.statusCode, 201, up.body);
      assert.deepEqual(JSON.parse(up.body), { message: '201 Created', size: body.length });
      const down = await get(job, 'main-deps-protected');
      assert.equal(down.statusCode, 200, down.body);
      assert.equal(down.headers['content-type'], 'application/zip');
      assert.deepEqual(down.rawPayload, body);
      const miss = await get(job, 'other-protected');
      assert.equal(miss.statusCode, 404);
      assert.equal(JSON.parse(miss.body).message, '404 Cache Not Found');
      // Keys are names, not paths: a key with slashes or dots is just another key.
      for (const key of ['feature/x-non_protected', '../../etc', '..']) {
        const r = await put(job, key, archive(10, 3));
        assert.equal(r.statusCode, 201, `${key}: ${r.body}`);
        assert.deepEqual((await get(job, key)).rawPayload, archive(10, 3));
      }
    });

    test('a second upload replaces the first and its object is deleted; concurrent uploads leave one', async () => {
      const before = env.objects(t);
      assert.equal((await put(job, 'replace-me', archive(1000, 1))).statusCode, 201);
      assert.equal(env.objects(t), before + 1);
      assert.equal((await put(job, 'replace-me', archive(2000, 2))).statusCode, 201);
      assert.equal(env.objects(t), before + 1);
      assert.deepEqual((await get(job, 'replace-me')).rawPayload, archive(2000, 2));
      const all = await Promise.all([1, 2, 3, 4].map((i) => put(job, 'race', archive(5000 + i, i))));
      for (const r of all) assert.equal(r.statusCode, 201, r.body);
      const got = (await get(job, 'race')).rawPayload;
      assert.ok([1, 2, 3, 4].some((i) => got.equals(archive(5000 + i, i))), 'one complete upload');
      assert.equal(env.objects(t), before + 2);
      const rows = await t.db.selectFrom('ci_caches').select('key').where('project_id', '=', project.id).where('key', '=', 'race').execute();
      assert.equal(rows.length, 1);
      assert.equal((await t.db.selectFrom('ci_cache_uploads').select('id').execute()).length, 0);
    });

    test('refusals: no token 403, no key 400, control characters 400, too large 413, unprotected job and -protected key 403', async () => {
      assert.equal((await t.app.inject({ method: 'GET', url: `/api/v4/jobs/${job.id}/cache?key=x` })).statusCode, 403);
      assert.equal((await get({ id: job.id, token: 'wrong' }, 'x')).statusCode, 403);
      assert.equal((await put(job, undefined, archive(10))).statusCode, 400);
      assert.equal((await put(job, 'a\nb', archive(10))).statusCode, 400);
      assert.equal((await put(job, 'k'.repeat(1025), archive(10))).statusCode, 400);
      const before = env.objects(t);
      const big = await put(job, 'big', archive(1024 * 1024 + 1));
      assert.equal(big.statusCode, 413, big.body);
      // Without a Content-Length the limit stops the stream itself; nothing is left behind.
      const { Readable } = await import('node:stream');
      const chunked = await t.app.inject({
        method: 'PUT',
        url: `/api/v4/jobs/${job.id}/cache?key=big`,
        headers: { 'job-token': job.token, 'content-type': 'application/zip' },
        payload: Readable.from((function* () { for (let i = 0; i < 20; i++) yield archive(64 * 1024); })()),
      });
      assert.equal(chunked.statusCode, 413, chunked.body);
      assert.equal(env.objects(t), before);
      assert.equal((await get(job, 'big')).statusCode, 404);
      assert.equal((await t.db.selectFrom('ci_cache_uploads').select('id').execute()).length, 0);

      // A job of an unprotected branch.
      await commitFiles(t, project, { 'README.md': 'b\n' }, { branch: 'feature', startBranch: 'main' });
      const feature = await runner.take();
      assert.equal(feature.git_info.protected, false);
      assert.equal((await put(feature, 'main-deps-protected', archive(10))).statusCode, 403);
      assert.equal((await get(feature, 'main-deps-protected')).statusCode, 403);
      assert.equal((await get(feature, 'main-deps-protected. ')).statusCode, 403);
      assert.equal((await put(feature, 'feature-non_protected', archive(10))).statusCode, 201);
      // The protected job reads it (GitLab lets protected refs use unprotected caches by key).
      assert.equal((await get(job, 'feature-non_protected')).statusCode, 200);
      await runner.finish(feature);
      // A finished job's token is dead.
      assert.equal((await get(feature, 'feature-non_protected')).statusCode, 403);
    });

    test('a refused upload is read and dropped, not cut: the client still writing gets the 413 rather than a reset', async () => {
      const net = await import('node:net');
      const address = await t.app.listen({ host: '127.0.0.1', port: 0 });
      const { port } = new URL(address);
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      let answer = '';
      let ended = false;
      const errors: Error[] = [];
      socket.on('data', (d) => (answer += d));
      socket.on('end', () => (ended = true));
      socket.on('error', (e) => errors.push(e));
      const declared = 4 * 1024 * 1024;
      socket.write(`PUT /api/v4/jobs/${job.id}/cache?key=early HTTP/1.1\r\nHost: x\r\njob-token: ${job.token}\r\ncontent-type: application/zip\r\ncontent-length: ${declared}\r\n\r\n`);
      const chunk = Buffer.alloc(256 * 1024);
      socket.write(chunk);
      for (let i = 0; i < 100 && !answer.includes('\r\n\r\n'); i++) await new Promise((r) => setTimeout(r, 20));
      assert.match(answer, /^HTTP\/1.1 413/);
      // The client goes on sending (as one does that reads the answer only once its body is out):
      // the server keeps reading and dropping, the connection stays open.
      for (let sent = chunk.length; sent < declared; sent += chunk.length) {
        await new Promise<void>((resolve, reject) => socket.write(chunk, (err) => (err ? reject(err) : resolve())));
      }
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(ended, false, 'the server did not close on the client');
      assert.deepEqual(errors, []);
      // The same connection carries the next request.
      answer = '';
      socket.write(`GET /api/v4/jobs/${job.id}/cache?key=early HTTP/1.1\r\nHost: x\r\njob-token: ${job.token}\r\n\r\n`);
      for (let i = 0; i < 100 && !answer.includes('\r\n\r\n'); i++) await new Promise((r) => setTimeout(r, 20));
      assert.match(answer, /^HTTP\/1.1 404/);
      socket.destroy();
      assert.equal((await get(job, 'early')).statusCode, 404);
    });

    test("another project's job does not see this project's caches", async () => {
      const other = await t.createProject();
      await commitFiles(t, other, { '.gitlab-ci.yml': 'a: { script: [x] }\n' });
      const theirs = await runner.take();
      assert.equal((await get(theirs, 'main-deps-protected')).statusCode, 404);
      assert.equal((await put(theirs, 'main-deps-protected', archive(7, 9))).statusCode, 201);
      assert.deepEqual((await get(job, 'main-deps-protected')).rawPayload.length, 200_000);
      await runner.finish(theirs);
    });

    test('the sweep removes unused caches, those of deleted projects and abandoned uploads; clearing removes all', async () => {
      assert.equal((await put(job, 'old', archive(100))).statusCode, 201);
      assert.equal((await put(job, 'fresh', archive(100))).statusCode, 201);
      await t.db.updateTable('ci_caches').set({ last_used_at: new Date(Date.now() - 15 * 24 * 3600_000) }).where('project_id', '=', project.id).where('key', '=', 'old').execute();
      await t.db.insertInto('ci_caches').values({ project_id: 999_999_999, key: 'orphan', store_key: 'ci-caches/999999999/x/y.zip', size: 1 }).execute();
      await t.db.insertInto('ci_cache_uploads').values({ project_id: project.id, store_key: 'ci-caches/1/abandoned/z.zip', created_at: new Date(Date.now() - 2 * 24 * 3600_000) }).execute();
      const before = env.objects(t);
      assert.equal(await destroyExpiredCaches(t.app.cairn), 2);
      assert.equal(env.objects(t), before - 1);
      assert.equal((await get(job, 'old')).statusCode, 404);
      assert.equal((await get(job, 'fresh')).statusCode, 200);
      assert.equal((await t.db.selectFrom('ci_cache_uploads').select('id').execute()).length, 0);

      await clearProjectCaches(t.app.cairn, project.id);
      assert.equal((await get(job, 'fresh')).statusCode, 404);
      assert.equal((await t.db.selectFrom('ci_caches').select('id').where('project_id', '=', project.id).execute()).length, 0);
    });
  });
}

/** Files under a directory, recursively. */
function countFiles(dir: string): number {
  if (!fs.existsSync(dir)) return 0;
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) n += e.isDirectory() ? countFiles(path.join(dir, e.name)) : 1;
  return n;
}

endpointCases('local disk', async () => ({
  overrides: {},
  objects: (t) => countFiles(path.join(t.tmpDir, 'artifacts', 'ci-caches')),
}));

let s3: Awaited<ReturnType<typeof startS3>> | null = null;
endpointCases('S3', async () => {
  s3 = await startS3();
  const dir = s3.dir;
  return {
    overrides: { objectStoreUrl: s3.url },
    close: async () => s3?.close(),
    // s3rver keeps each object as files of its own (content, metadata): count the content files.
    objects: () => countS3Objects(dir),
  };
});

function countS3Objects(dir: string): number {
  let n = 0;
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('._S3rver_object')) n++;
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return n;
}
