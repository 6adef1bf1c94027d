import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// One Node.js floor, told the same way everywhere: package.json's engines, the README, .ci/run,
// and every package the lock file installs (so `npm ci` on that Node warns of no engine).

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
// semver comes with Fastify (a runtime dependency).
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

const pkg = JSON.parse(read('package.json'));
const floor = /^>=(\d+\.\d+\.\d+)$/.exec(pkg.engines?.node ?? '')?.[1];

describe('the Node.js version', () => {
  it('package.json declares a floor (>=X.Y.Z) that this Node meets', () => {
    assert.ok(floor, `engines.node should read >=X.Y.Z, not ${JSON.stringify(pkg.engines?.node)}`);
    assert.ok(semver.satisfies(process.versions.node, pkg.engines.node), `Node ${process.versions.node} is below ${pkg.engines.node}`);
  });

  it('the README and .ci/run tell the same floor', () => {
    const [major, minor] = floor!.split('.');
    assert.match(read('README.md'), new RegExp(`Needs Node\\.js ${major}\\.${minor}\\+`));
    assert.match(read('.ci/run'), /require\("\.\/package\.json"\)\.engines\.node/, '.ci/run checks the version package.json declares');
  });

  it('every package of the lock file supports the floor and this Node (no EBADENGINE on npm ci)', () => {
    const lock = JSON.parse(read('package-lock.json'));
    assert.equal(lock.packages[''].engines?.node, pkg.engines.node, 'package-lock.json is stale: npm install --package-lock-only');
    const refused: string[] = [];
    for (const [where, entry] of Object.entries<any>(lock.packages)) {
      const range = where && entry.engines?.node;
      if (typeof range !== 'string') continue;
      for (const version of [floor!, process.versions.node]) {
        if (!semver.satisfies(version, range)) refused.push(`${where.replace(/^node_modules\//, '')}@${entry.version} wants node ${range}, not ${version}`);
      }
    }
    assert.deepEqual(refused, [], 'raise engines.node, or pin (package.json overrides) a version that supports it');
  });
});
