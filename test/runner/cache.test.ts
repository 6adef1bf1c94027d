// `cache:` end to end: a listening Cairn server, its built-in runner (bubblewrap when it works
// here), pushed .gitlab-ci.yml files. A cache made by one pipeline is restored by the next;
// key:files follows the file; policies, `when`, untracked files, two caches in one job,
// fallback keys, CACHE_FALLBACK_KEY, protected and unprotected refs kept apart; a hostile cache
// archive (uploaded with a job's token, as a job could) and links a job plants in its cached
// paths reach nothing outside the job. Plus the runner's key normalisation, unit by unit.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { registrationToken } from '../../src/ci/runners.js';
import type { CiBuild } from '../../src/db/schema/ci.js';
import type { Project } from '../../src/db/schema/core.js';
import { startWorker } from '../../src/jobs/queue.js';
import { collectArtifactFiles, untrackedFiles } from '../../src/runner/artifacts.js';
import { expandValue, sanitizeCacheKey } from '../../src/runner/cache.js';
import { startBuiltinRunner, type BuiltinRunner } from '../../src/runner/runner.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { artifactStore } from '../../src/storage/index.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';
import { freePort } from '../helpers/serve.js';
import { until } from '../helpers/until.js';

const sandbox = detectSandbox();
const WAIT = 240_000;

describe('runner cache keys (units)', () => {
  test('sanitizeCacheKey normalises as gitlab-runner does', () => {
    assert.equal(sanitizeCacheKey('main-protected'), 'main-protected');
    assert.equal(sanitizeCacheKey('feature/x-non_protected'), 'feature/x-non_protected');
    assert.equal(sanitizeCacheKey('../../etc/passwd'), 'etc/passwd');
    assert.equal(sanitizeCacheKey('a/./b/../c'), 'a/c');
    assert.equal(sanitizeCacheKey('a%2F..%2f..%2Fb'), 'b');
    assert.equal(sanitizeCacheKey('a\\b'), 'a/b');
    assert.equal(sanitizeCacheKey('key  /  '), 'key');
    assert.equal(sanitizeCacheKey('..'), null);
    assert.equal(sanitizeCacheKey('%2e%2E'), null);
    assert.equal(sanitizeCacheKey(''), null);
  });

  test('untracked files: git runs with no hook or fsmonitor command, finds no repository above the build directory', () => {
    const outer = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-untracked-'));
    try {
      const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'init.defaultBranch=main', ...args], { cwd, env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } });
      // A repository around the build directory: what a build directory without its .git must not use.
      git(outer, 'init', '-q');
      const build = path.join(outer, 'job', 'build');
      fs.mkdirSync(build, { recursive: true });
      fs.writeFileSync(path.join(build, 'loose.txt'), 'x');
      const none = untrackedFiles(build);
      assert.deepEqual(none.files, []);
      assert.match(none.warning ?? '', /git ls-files failed/);

      git(build, 'init', '-q');
      fs.writeFileSync(path.join(build, 'tracked.txt'), 't');
      git(build, 'add', 'tracked.txt');
      const marker = path.join(outer, 'FSMONITOR-RAN');
      fs.appendFileSync(path.join(build, '.git', 'config'), `[core]\n\tfsmonitor = "touch ${marker}"\n[alias]\n\tls-files = "!touch ${marker}"\n`);
      fs.mkdirSync(path.join(build, 'dir'));
      fs.writeFileSync(path.join(build, 'dir', 'a[1]*.txt'), 'glob characters in a name');
      fs.writeFileSync(path.join(build, '.gitignore'), 'ignored.log\n');
      fs.writeFileSync(path.join(build, 'ignored.log'), 'ignored files are untracked too');
      const r = untrackedFiles(build);
      assert.equal(r.warning, null);
      assert.deepEqual(r.files.sort(), ['.gitignore', 'dir/a[1]*.txt', 'ignored.log', 'loose.txt']);
      assert.ok(!fs.existsSync(marker), 'the repository configuration ran a command');
      // Collected as literal names, not globs.
      const c = collectArtifactFiles(build, [], [], undefined, r.files);
      assert.deepEqual(c.files, ['.gitignore', 'dir/a[1]*.txt', 'ignored.log', 'loose.txt']);
    } finally {
      fs.rmSync(outer, { recursive: true, force: true });
    }
  });

  test('expandValue expands the job variables, unknown ones to nothing', () => {
    const vars = new Map([['CI_COMMIT_REF_SLUG', { key: 'CI_COMMIT_REF_SLUG', value: 'main' }], ['X', { key: 'X', value: 'y' }]]);
    assert.equal(expandValue('$CI_COMMIT_REF_SLUG-protected', vars), 'main-protected');
    assert.equal(expandValue('${X}-$NOPE-$$X', vars), 'y--$X');
  });
});

function zipEntries(buf: Buffer): Promise<Map<string, { data: Buffer; mode: number }>> {
  return new Promise((resolve, reject) => {
    const out = new Map<string, { data: Buffer; mode: number }>();
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      zip!.on('entry', (e: yauzl.Entry) =>
        zip!.openReadStream(e, (err2, s) => {
          if (err2) return reject(err2);
          const chunks: Buffer[] = [];
          s!.on('data', (c: Buffer) => chunks.push(c));
          s!.on('end', () => {
            out.set(e.fileName, { data: Buffer.concat(chunks), mode: (e.externalFileAttributes >>> 16) & 0xffff });
            zip!.readEntry();
          });
        }),
      );
      zip!.on('end', () => resolve(out));
      zip!.on('error', reject);
      zip!.readEntry();
    });
  });
}

describe('cache: through the built-in runner', () => {
  let t: TestContext;
  let url: string;
  let runner: BuiltinRunner | null = null;
  let stopWorker: (() => Promise<void>) | null = null;
  let buildsDir: string;
  let hostDir: string;
  const log: string[] = [];

  before(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url, maxCacheSize: 1024 * 1024 });
    await t.app.listen({ host: '127.0.0.1', port });
    stopWorker = startWorker(t.app.cairn, { idleMs: 100 });
    hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-host-'));
    fs.chmodSync(hostDir, 0o755);
    buildsDir = path.join(t.tmpDir, 'builds');
    runner = await startBuiltinRunner({
      url,
      registrationToken: await registrationToken(t.app.cairn, { type: 'instance_type' }),
      dataDir: t.tmpDir,
      buildsDir,
      concurrent: 2,
      allowUnisolated: !sandbox.available,
      log: (m) => log.push(m),
      executor: { allowFileUrls: true },
    });
    assert.ok(runner, log.join('\n'));
  });

  after(async () => {
    await runner?.stop();
    await stopWorker?.();
    await t?.close();
    if (hostDir) fs.rmSync(hostDir, { recursive: true, force: true });
  });

  const trace = async (projectId: number, jobId: number) => (await t.get(`/api/v4/projects/${projectId}/jobs/${jobId}/trace`)).text;

  /** Waits for the pipeline of `sha` to finish; its jobs by name, with their logs. */
  async function finished(project: Project, sha: string): Promise<Record<string, CiBuild & { log: string }>> {
    const pipeline = await until('the pipeline', () => t.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', project.id).where('sha', '=', sha).executeTakeFirst(), WAIT);
    await until(
      'the pipeline to finish',
      async () => {
        const p = await t.db.selectFrom('ci_pipelines').select('status').where('id', '=', pipeline.id).executeTakeFirstOrThrow();
        return ['success', 'failed', 'canceled'].includes(p.status) ? p : null;
      },
      WAIT,
    );
    const jobs = await jobsByName(t, pipeline.id);
    const out: Record<string, CiBuild & { log: string }> = {};
    for (const [name, j] of Object.entries(jobs)) out[name] = { ...j, log: await trace(project.id, j.id) };
    return out;
  }

  const succeeded = (j: CiBuild & { log: string }) => assert.equal(j.status, 'success', `${j.name}:\n${j.log}\n${log.join('\n')}`);

  async function cacheObject(projectId: number, key: string): Promise<Buffer | null> {
    const row = await t.db.selectFrom('ci_caches').selectAll().where('project_id', '=', projectId).where('key', '=', key).executeTakeFirst();
    if (!row) return null;
    const s = await artifactStore(t.app.cairn.config).get(row.store_key);
    assert.ok(s);
    const chunks: Buffer[] = [];
    for await (const c of s) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  test('the next pipeline restores what the first cached ($CI_COMMIT_REF_SLUG), key:files follows its file', async () => {
    const project = await t.createProject();
    const ci = [
      'build:',
      '  script:',
      '    - if [ -f vendor/x ]; then echo "restored $(cat vendor/x)"; else mkdir -p vendor && echo "from-$CI_PIPELINE_ID" > vendor/x; fi',
      '    - if [ -f files-cache/y ]; then echo "files restored $(cat files-cache/y)"; else mkdir -p files-cache && echo "y-$CI_PIPELINE_ID" > files-cache/y; fi',
      '  cache:',
      '    - key: $CI_COMMIT_REF_SLUG',
      '      paths: [vendor/]',
      '    - key: { files: [lock.txt] }',
      '      paths: [files-cache/]',
      '',
    ].join('\n');
    const first = await commitFiles(t, project, { '.gitlab-ci.yml': ci, 'lock.txt': 'v1\n' });
    const p1 = (await finished(project, first)).build;
    succeeded(p1);
    assert.match(p1.log, /Checking cache for main-protected\.\.\./);
    assert.match(p1.log, /no cache for main-protected yet/);
    assert.match(p1.log, /Creating cache main-protected\.\.\./);
    assert.match(p1.log, /Created cache/);
    const filesKey = /Creating cache (1-[0-9a-f]{40}-protected)\.\.\./.exec(p1.log)?.[1];
    assert.ok(filesKey, p1.log);

    const second = await commitFiles(t, project, { 'README.md': 'two\n' });
    const p2 = (await finished(project, second)).build;
    succeeded(p2);
    assert.match(p2.log, /Successfully extracted cache/);
    assert.match(p2.log, new RegExp(`^restored from-${p1.pipeline_id}$`, 'm'));
    assert.match(p2.log, new RegExp(`^files restored y-${p1.pipeline_id}$`, 'm'));

    // The file changes: a new key, a miss, a new cache; the ref's cache is still there.
    const third = await commitFiles(t, project, { 'lock.txt': 'v2\n' });
    const p3 = (await finished(project, third)).build;
    succeeded(p3);
    assert.match(p3.log, new RegExp(`^restored from-${p1.pipeline_id}$`, 'm'));
    assert.doesNotMatch(p3.log, /^files restored/m);
    const newKey = /Creating cache (1-[0-9a-f]{40}-protected)\.\.\./.exec(p3.log)?.[1];
    assert.ok(newKey && newKey !== filesKey, p3.log);
  });

  test('policies, when, untracked, two caches in one job, fallback keys', async () => {
    const project = await t.createProject();
    const ci = [
      'stages: [one, two, three]',
      'seed:',
      '  stage: one',
      '  script:',
      '    - mkdir -p vendor second && echo main-v1 > vendor/x && echo two > second/y',
      '    - echo loose > loose.txt',
      '    - git status --short',
      '  cache:',
      '    - key: $CI_COMMIT_REF_SLUG',
      '      paths: [vendor/]',
      '    - key: second',
      '      paths: [second/]',
      '      untracked: true',
      'pull-only:',
      '  stage: one',
      '  script: [mkdir -p pulled && echo p > pulled/p]',
      '  cache: { key: pull-only, paths: [pulled/], policy: pull }',
      'failing:',
      '  stage: one',
      '  allow_failure: true',
      '  script: [mkdir -p fail && echo failed-run > fail/f, exit 3]',
      '  cache:',
      '    - { key: on-failure, paths: [fail/], when: on_failure }',
      '    - { key: on-success, paths: [fail/] }',
      'too-big:',
      '  stage: one',
      '  script: [mkdir -p big && head -c 2000000 /dev/urandom > big/blob]',
      '  cache: { key: too-big, paths: [big/] }',
      'use:',
      '  stage: two',
      '  script: [cat vendor/x, cat second/y, cat loose.txt, test ! -e pulled/p, cat fail/f]',
      '  cache:',
      '    - { key: $CI_COMMIT_REF_SLUG, paths: [vendor/], policy: pull }',
      '    - { key: second, paths: [second/], untracked: true, policy: pull }',
      '    - { key: pull-only, paths: [pulled/], policy: pull }',
      '    - { key: on-failure, paths: [fail/], policy: $FAIL_POLICY }',
      '  variables: { FAIL_POLICY: pull }',
      'fallback:',
      '  stage: two',
      '  script: [cat vendor/x]',
      '  cache: { key: no-such-key, fallback_keys: [also-missing, $CI_COMMIT_REF_SLUG], paths: [vendor/], policy: pull }',
      'pusher:',
      '  stage: three',
      '  script: [test ! -e fail/f, mkdir -p fail, echo pushed > fail/f]',
      '  cache: { key: on-failure, paths: [fail/], policy: push }',
      '',
    ].join('\n');
    const sha = await commitFiles(t, project, { '.gitlab-ci.yml': ci });
    const jobs = await finished(project, sha);
    succeeded(jobs.seed);
    succeeded(jobs['pull-only']);
    assert.equal(jobs.failing.status, 'failed');
    succeeded(jobs.use);
    succeeded(jobs.fallback);
    succeeded(jobs.pusher);
    // A refused upload is a warning, not the job's failure.
    succeeded(jobs['too-big']);
    assert.match(jobs['too-big'].log, /uploading cache too-big-protected failed: 413 the archive is larger than the server accepts/);
    assert.match(jobs['too-big'].log, /Failed to create cache/);
    assert.equal(await cacheObject(project.id, 'too-big-protected'), null);

    assert.match(jobs['pull-only'].log, /Not uploading cache pull-only-protected due to policy/);
    assert.equal(await cacheObject(project.id, 'pull-only-protected'), null);
    assert.match(jobs.failing.log, /Saving cache for failed job/);
    assert.equal(await cacheObject(project.id, 'on-success-protected'), null);
    assert.ok(await cacheObject(project.id, 'on-failure-protected'));

    // Untracked files are cached with the paths (loose.txt is in no path).
    const second = await zipEntries((await cacheObject(project.id, 'second-protected'))!);
    assert.ok(second.has('loose.txt') && second.has('second/y') && second.has('vendor/x'), [...second.keys()].join(', '));
    assert.match(jobs.use.log, /^main-v1$/m);
    assert.match(jobs.use.log, /^loose$/m);
    assert.match(jobs.use.log, /^failed-run$/m);
    assert.match(jobs.use.log, /no cache for pull-only-protected yet/);

    assert.match(jobs.fallback.log, /Checking cache for no-such-key-protected\.\.\.[\s\S]*Checking cache for also-missing-protected\.\.\.[\s\S]*Checking cache for main-protected\.\.\./);
    assert.match(jobs.fallback.log, /^main-v1$/m);

    assert.match(jobs.pusher.log, /Not downloading cache on-failure-protected due to policy/);
    const pushed = await zipEntries((await cacheObject(project.id, 'on-failure-protected'))!);
    assert.equal(pushed.get('fail/f')?.data.toString(), 'pushed\n');
  });

  test('protected and unprotected refs keep apart; CACHE_FALLBACK_KEY ending in -protected is refused', async () => {
    const project = await t.createProject();
    const ci = [
      'variables: { CACHE_FALLBACK_KEY: main-protected }',
      'job:',
      '  script:',
      '    - if [ -f vendor/x ]; then echo "saw $(cat vendor/x)"; else echo "no cache"; fi',
      '    - mkdir -p vendor && echo "$CI_COMMIT_REF_NAME" > vendor/x',
      '  cache: { key: $CI_COMMIT_REF_SLUG, fallback_keys: [main], paths: [vendor/] }',
      '',
    ].join('\n');
    const main = (await finished(project, await commitFiles(t, project, { '.gitlab-ci.yml': ci }))).job;
    succeeded(main);
    const feature = (await finished(project, await commitFiles(t, project, { 'README.md': 'f\n' }, { branch: 'feature', startBranch: 'main' }))).job;
    succeeded(feature);
    assert.match(feature.log, /Checking cache for feature-non_protected\.\.\./);
    assert.match(feature.log, /Checking cache for main-non_protected\.\.\./);
    assert.match(feature.log, /CACHE_FALLBACK_KEY "main-protected" not allowed to end in "-protected"/);
    assert.doesNotMatch(feature.log, /Checking cache for main-protected/);
    assert.match(feature.log, /^no cache$/m);
    assert.ok(await cacheObject(project.id, 'feature-non_protected'));
    // And the protected ref does not take the unprotected one's.
    const again = (await finished(project, await commitFiles(t, project, { 'README.md': 'm\n' }))).job;
    succeeded(again);
    assert.match(again.log, /^saw main$/m);
  });

  test('a hostile cache archive and links planted in cached paths reach nothing outside the job', async () => {
    const project = await t.createProject();
    const marker = path.join(hostDir, `PROOF-${crypto.randomBytes(4).toString('hex')}.txt`);
    const secret = `HOST-SECRET-${crypto.randomBytes(8).toString('hex')}`;
    const hostFile = path.join(hostDir, 'host-secret.txt');
    fs.writeFileSync(hostFile, secret, { mode: 0o644 });
    const DEEP = 'vendor/deep/a/b/c/d/e/f/g/h';
    const Z = '../'.repeat(10);
    const Y = `z${'/..'.repeat(10)}`;
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from(Y), `${DEEP}/y`, { mode: 0o120777 });
    zip.addBuffer(Buffer.from(Z), `${DEEP}/z`, { mode: 0o120777 });
    zip.addBuffer(Buffer.from('written by a cache\n'), `${DEEP}/y/${marker.slice(1)}`);
    // yazl refuses a `..` name: written with a stand-in of the same length, patched in below.
    const climbing = `../../../../../../../..${marker}`;
    const standIn = climbing.replace(/\.\./g, 'XX');
    zip.addBuffer(Buffer.from('written by a cache\n'), standIn);
    zip.addBuffer(Buffer.from('/etc/passwd'), 'vendor/abs', { mode: 0o120777 });
    zip.addBuffer(Buffer.from('fine\n'), 'vendor/ok.txt');
    zip.end();
    const chunks: Buffer[] = [];
    for await (const c of zip.outputStream) chunks.push(c as Buffer);
    const evil = Buffer.concat(chunks);
    for (let at = evil.indexOf(standIn); at >= 0; at = evil.indexOf(standIn, at + 1)) Buffer.from(climbing).copy(evil, at);

    const ci = [
      'stages: [one, two, three]',
      'plant:',
      '  stage: one',
      '  script:',
      '    - printf %s "$CI_JOB_TOKEN" > token.txt',
      '    - for i in $(seq 1 1200); do [ -e uploaded ] && break; sleep 0.1; done',
      'use:',
      '  stage: two',
      '  script:',
      '    - cat vendor/ok.txt',
      `    - ls -la ${DEEP}`,
      // Links planted in the cached paths: to a host file, through chains, to the parent of the build dir.
      `    - ln -s ${hostFile} vendor/host-link`,
      `    - mkdir -p vendor/chain && ln -s ../../${'../'.repeat(8)} vendor/chain/z && ln -s z${'/..'.repeat(8)} vendor/chain/y`,
      '    - ln -s /etc vendor/etc-link',
      '  cache:',
      '    - { key: evil, paths: [vendor/, "vendor/chain/y/etc/shadow", "vendor/host-link"] }',
      '    - { key: junk, paths: [junk/], policy: pull }',
      'reuse:',
      '  stage: three',
      '  script: [ls -la vendor, cat vendor/ok.txt]',
      '  cache: { key: evil, paths: [vendor/], policy: pull }',
      '',
    ].join('\n');
    const sha = await commitFiles(t, project, { '.gitlab-ci.yml': ci });
    const pipeline = await until('the pipeline', () => latestPipeline(t, project.id).catch(() => null), WAIT);
    const plant = (await jobsByName(t, pipeline.id)).plant;
    const build = await until(
      'the plant job to run',
      () => {
        if (!fs.existsSync(buildsDir)) return null;
        const dir = fs.readdirSync(buildsDir).find((d) => d.startsWith(`job-${plant.id}-`));
        const b = dir && path.join(buildsDir, dir, 'build');
        return b && fs.existsSync(path.join(b, 'token.txt')) ? b : null;
      },
      WAIT,
    );
    // What a job could do with curl and its token: store a crafted archive under a key.
    const up = await fetch(`${url}/api/v4/jobs/${plant.id}/cache?key=evil-protected`, {
      method: 'PUT',
      headers: { 'JOB-TOKEN': fs.readFileSync(path.join(build, 'token.txt'), 'utf8'), 'content-type': 'application/zip' },
      body: evil,
    });
    assert.equal(up.status, 201, await up.text());
    // And one that is no zip at all.
    const junk = await fetch(`${url}/api/v4/jobs/${plant.id}/cache?key=junk-protected`, {
      method: 'PUT',
      headers: { 'JOB-TOKEN': fs.readFileSync(path.join(build, 'token.txt'), 'utf8'), 'content-type': 'application/zip' },
      body: crypto.randomBytes(5000),
    });
    assert.equal(junk.status, 201, await junk.text());
    fs.writeFileSync(path.join(build, 'uploaded'), '');

    const jobs = await finished(project, sha);
    succeeded(jobs.plant);
    succeeded(jobs.use);
    succeeded(jobs.reuse);
    assert.ok(!fs.existsSync(marker), `the host file was written:\n${jobs.use.log}`);
    assert.deepEqual(fs.readdirSync(hostDir).sort(), ['host-secret.txt']);
    assert.match(jobs.use.log, /^fine$/m);
    assert.match(jobs.use.log, new RegExp(`${DEEP}/y is a symlink: entry not extracted through it`));
    assert.match(jobs.use.log, /entry would be extracted outside the build directory, skipped/);
    assert.match(jobs.use.log, /vendor\/abs: symlink pointing outside the build directory, skipped/);
    // A broken archive is a warning.
    assert.match(jobs.use.log, /Checking cache for junk-protected\.\.\.[^\n]*\n[^\n]*\n[^\n]*not a zip file[\s\S]*?Failed to extract cache/);

    // The cache the job saved holds links as links (those leading out left out), never host bytes.
    const saved = await zipEntries((await cacheObject(project.id, 'evil-protected'))!);
    for (const [name, e] of saved) {
      assert.ok(!e.data.toString().includes(secret), `${name} holds the host file`);
      assert.ok(!e.data.toString().includes('root:'), `${name} holds /etc/shadow or /etc/passwd`);
    }
    assert.ok(!saved.has('vendor/host-link') && !saved.has('vendor/etc-link'), [...saved.keys()].join(', '));
    assert.match(jobs.use.log, /vendor\/chain\/y\/etc\/shadow: vendor\/chain\/y is a symlink, skipped/);
    assert.match(jobs.use.log, /vendor\/host-link: symlink pointing outside the build directory, skipped/);
    assert.match(jobs.reuse.log, /^fine$/m);
    assert.ok(!fs.existsSync(marker));
  });
});
