// `npm test`: builds the template database once, then runs every test file with node's test runner.
// `npm run test:soak` runs test/reliability with CAIRN_SOAK=1: the long forms of the permission
// matrix, fuzzing and crash tests (their short forms run in `npm test`).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

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
const files = (args.length ? args : [path.join(root, 'test')])
  .flatMap((a) => (fs.statSync(a).isDirectory() ? findTests(path.resolve(a)).sort() : [a]));
const prep = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'test/helpers/prepare.ts')], { stdio: 'inherit', cwd: root });
if (prep.status !== 0) process.exit(prep.status ?? 1);

const concurrency = process.env.TEST_CONCURRENCY ?? '2';
const run = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files],
  { stdio: 'inherit', cwd: root, env: { ...process.env, NODE_ENV: 'test' } },
);
process.exit(run.status ?? 1);
