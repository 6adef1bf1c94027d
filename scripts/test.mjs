// `npm test`: builds the template database once, then runs every test file with node's test runner.
// `npm run test:soak` runs test/reliability with CAIRN_SOAK=1: the long forms of the permission
// matrix, fuzzing and crash tests (their short forms run in `npm test`).
//
// The test files run compiled (scripts/test-build.mjs: one esbuild build into .cache/test-build/,
// with source maps, so stack traces name the .ts files); TEST_TSX=1 runs the TypeScript through
// tsx instead. TEST_CONCURRENCY sets how many test files run at once (2 by default).
// TEST_TIMINGS_DIR=<dir> records each test file's wall and CPU time there
// (scripts/test-cpu-probe.mjs); `node scripts/test-timings.mjs <dir>` lists them.
// scripts/test-watch-reporter.mjs says on stderr which tests run for long (TEST_SLOW_MINUTES) and
// keeps TEST_PROGRESS_FILE, when set, listing the tests running now.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildTests } from './test-build.mjs';

const root = path.resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);

function findTests(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'helpers' ? [] : findTests(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

// Arguments are test files or folders of them; none means every test under test/.
const files = (args.length ? args : [path.join(root, 'test')]).flatMap((a) => {
  if (!fs.existsSync(a)) {
    console.error(`no such test file or folder: ${a}`);
    process.exit(2);
  }
  return fs.statSync(a).isDirectory() ? findTests(path.resolve(a)).sort() : [path.resolve(a)];
});

const concurrency = process.env.TEST_CONCURRENCY ?? '2';
if (!/^[1-9][0-9]*$/.test(concurrency)) {
  console.error(`TEST_CONCURRENCY must be a whole number of 1 or more, not ${JSON.stringify(concurrency)}`);
  process.exit(2);
}
const useTsx = /^(1|true|yes|on)$/i.test(process.env.TEST_TSX ?? '');
const started = Date.now();
const timingsDir = process.env.TEST_TIMINGS_DIR ? path.resolve(process.env.TEST_TIMINGS_DIR) : null;
if (timingsDir) fs.mkdirSync(timingsDir, { recursive: true });
const probe = timingsDir ? ['--import', path.join(root, 'scripts/test-cpu-probe.mjs')] : [];

// The template database and the compiled tests do not depend on each other: made side by side.
const prepare = new Promise((resolve) => {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'test/helpers/prepare.ts')], { stdio: 'inherit', cwd: root });
  child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
});

// Each run builds into its own folder (two runs, such as the PGlite and PostgreSQL passes of
// .ci/run, may share a checkout) and removes it when done; folders of runs that died are swept.
const buildRoot = path.join(root, '.cache', 'test-build');
const buildDir = path.join(buildRoot, String(process.pid));
function sweepStaleBuilds() {
  for (const name of fs.existsSync(buildRoot) ? fs.readdirSync(buildRoot) : []) {
    const dir = path.join(buildRoot, name);
    let alive = true;
    try {
      process.kill(Number(name), 0);
      alive = Date.now() - fs.statSync(dir).mtimeMs < 86_400_000; // a day old: the pid was reused
    } catch (err) {
      alive = err.code === 'EPERM';
    }
    if (!alive) fs.rmSync(dir, { recursive: true, force: true });
  }
}
let runFiles = files;
// What the runner calls a failed file (its source, through the source maps) -> the file to run.
const toRun = new Map(files.map((f) => [f, f]));
if (!useTsx) {
  sweepStaleBuilds();
  try {
    const built = await buildTests(root, files, buildDir);
    runFiles = built.files;
    files.forEach((f, i) => { toRun.set(f, built.files[i]); toRun.set(built.files[i], built.files[i]); });
    // TEST_DATABASE_ONLY=1: only the files that use the database (.ci/run's second database pass:
    // the others would run the same code twice).
    if (/^(1|true|yes|on)$/i.test(process.env.TEST_DATABASE_ONLY ?? '')) {
      runFiles = runFiles.filter((_, i) => built.usesDatabase[i]);
      const left = files.filter((_, i) => !built.usesDatabase[i]).map((f) => path.relative(root, f));
      console.log(`TEST_DATABASE_ONLY: ${left.length} test files that do not use the database are left out: ${left.join(', ')}`);
    }
  } catch (err) {
    console.error(`compiling the tests failed: ${err.message ?? err}`);
    process.exit(1);
  }
}
const prepStatus = await prepare;
if (prepStatus !== 0) {
  fs.rmSync(buildDir, { recursive: true, force: true });
  process.exit(prepStatus);
}
const prepareMs = Date.now() - started;

const loader = useTsx ? ['--import', 'tsx'] : ['--enable-source-maps'];
const limit = ['--import', path.join(root, 'scripts/test-file-limit.mjs')];
const failedList = path.join(os.tmpdir(), `cairn-test-failed-${process.pid}`);
function runTests(list) {
  fs.rmSync(failedList, { force: true });
  const run = spawnSync(
    process.execPath,
    [
      ...loader, ...limit, ...probe, '--test', `--test-concurrency=${concurrency}`,
      '--test-reporter=spec', '--test-reporter-destination=stdout',
      `--test-reporter=${path.join(root, 'scripts/test-watch-reporter.mjs')}`, '--test-reporter-destination=stderr',
      ...list,
    ],
    { stdio: 'inherit', cwd: root, env: { ...process.env, NODE_ENV: 'test', TEST_FAILED_FILE: failedList } },
  );
  const failed = fs.existsSync(failedList) ? fs.readFileSync(failedList, 'utf8').split('\n').filter(Boolean) : [];
  fs.rmSync(failedList, { force: true });
  return { status: run.status ?? 1, failed: [...new Set(failed)] };
}
let { status, failed } = runTests(runFiles);
// The test files that failed run once more, after the others, when at most TEST_RETRIES_MAX (3)
// did: a pass then is reported as flaky, loudly, and the run passes. TEST_RETRIES_MAX=0: no retry.
const retriesMax = Number(process.env.TEST_RETRIES_MAX ?? 3);
const rel = (f) => path.relative(root, f).replace(/^\.cache\/test-build\/\d+\//, '').replace(/\.mjs$/, '.ts');
if (status !== 0 && failed.length > 0 && failed.length <= retriesMax && failed.every((f) => toRun.has(f))) {
  console.log(`\n=== ${failed.length} test file(s) failed; running them once more: ${failed.map(rel).join(', ')}`);
  const again = runTests(failed.map((f) => toRun.get(f)));
  if (again.status === 0) {
    console.log(`\n=== FLAKY: failed, then passed when run again (the run passes; look into them): ${failed.map(rel).join(', ')}`);
    status = 0;
  } else {
    console.log(`\n=== failed again: ${(again.failed.length ? again.failed : failed).map(rel).join(', ')}`);
  }
}
fs.rmSync(buildDir, { recursive: true, force: true });
if (timingsDir) {
  const record = { wall_ms: Date.now() - started, prepare_ms: prepareMs, concurrency, loadavg: os.loadavg().map((l) => l.toFixed(2)) };
  fs.writeFileSync(path.join(timingsDir, 'run.json'), JSON.stringify(record) + '\n');
}
process.exit(status);
