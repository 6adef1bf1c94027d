import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chooseObjectStrategy, FULL_REPACK_COOLDOWN_MS, LOOSE_OBJECT_LIMIT, objectDatabaseStats, runHousekeeping, type ObjectDatabaseStats } from '../../src/git/housekeeping.js';

const run = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, { cwd, env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_AUTHOR_NAME: 'a', GIT_AUTHOR_EMAIL: 'a@b', GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@b' } }).toString();

/** `count` commits touching 50 files, made with fast-import (one process, real size in well under a second). */
function commits(work: string, from: number, count: number, branch = 'main') {
  let stream = '';
  for (let i = from; i < from + count; i++) {
    const body = `line ${i}\n`;
    stream += `commit refs/heads/${branch}\nmark :${i + 1}\ncommitter a <a@b> ${1_700_000_000 + i} +0000\ndata ${`c${i}`.length}\nc${i}\n`;
    if (i === from && from > 0) stream += `from refs/heads/${branch}^0\n`;
    stream += `M 100644 inline f${i % 50}.txt\ndata ${body.length}\n${body}\n`;
  }
  execFileSync('git', ['fast-import', '--quiet'], { cwd: work, input: stream });
}

const base: ObjectDatabaseStats = { looseObjects: 0, packs: 1, cruftPacks: 0, packBytes: 1000, hasBitmap: true, packsNewerThanBitmap: 0, lastFullRepackAt: new Date() };

describe('housekeeping heuristics', () => {
  it('chooses the work the object database needs', () => {
    const now = Date.now();
    assert.equal(chooseObjectStrategy({ ...base, packs: 0 }, 'incremental', now), 'none');
    assert.equal(chooseObjectStrategy({ ...base, hasBitmap: false }, 'incremental', now), 'full', 'a pack without a bitmap: full repack');
    assert.equal(chooseObjectStrategy(base, 'incremental', now), 'none', 'all packed and covered');
    assert.equal(chooseObjectStrategy({ ...base, packs: 2, packsNewerThanBitmap: 1 }, 'incremental', now), 'geometric');
    assert.equal(chooseObjectStrategy({ ...base, looseObjects: LOOSE_OBJECT_LIMIT }, 'incremental', now), 'none');
    assert.equal(chooseObjectStrategy({ ...base, looseObjects: LOOSE_OBJECT_LIMIT + 256 }, 'incremental', now), 'geometric');
    const old = new Date(now - FULL_REPACK_COOLDOWN_MS - 1);
    assert.equal(chooseObjectStrategy({ ...base, packs: 2, packsNewerThanBitmap: 1, lastFullRepackAt: old }, 'incremental', now), 'full');
    assert.equal(chooseObjectStrategy(base, 'eager', now), 'full');
    assert.equal(chooseObjectStrategy({ ...base, packs: 0 }, 'prune', now), 'none');
  });
});

describe('housekeeping on a real repository', () => {
  let tmp: string;
  let bare: string;
  let work: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-hk-'));
    bare = path.join(tmp, 'r.git');
    work = path.join(tmp, 'w.git');
    run(tmp, 'init', '-q', '--initial-branch=main', '--bare', bare);
    run(tmp, 'init', '-q', '--bare', work);
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a fresh push of 3,000 commits gets a bitmap; a later pushed pack is rolled up geometrically; clones stay whole', async () => {
    commits(work, 0, 3000);
    run(work, 'push', '-q', bare, 'main');
    let stats = await objectDatabaseStats(bare);
    assert.equal(stats.hasBitmap, false);
    assert.equal(stats.packs, 1, 'a big push arrives as a pack');

    assert.deepEqual(await runHousekeeping(bare), { objects: 'full', packedRefs: true });
    stats = await objectDatabaseStats(bare);
    assert.equal(stats.hasBitmap, true);
    assert.ok(fs.existsSync(path.join(bare, 'objects/pack/multi-pack-index')));
    assert.ok(fs.existsSync(path.join(bare, 'cairn-full-repack')));
    assert.equal((await runHousekeeping(bare)).objects, 'none', 'nothing left to do');

    // More than receive.unpackLimit (100) objects: a second pack the bitmap does not cover.
    await new Promise((r) => setTimeout(r, 20));
    commits(work, 3000, 200);
    run(work, 'push', '-q', bare, 'main');
    stats = await objectDatabaseStats(bare);
    assert.equal(stats.packsNewerThanBitmap, 1);
    assert.equal((await runHousekeeping(bare)).objects, 'geometric');
    stats = await objectDatabaseStats(bare);
    assert.equal(stats.packsNewerThanBitmap, 0);

    // Unreachable objects survive a full repack (a push in flight may not have updated its ref yet).
    const blob = run(bare, 'hash-object', '-w', '--stdin').trim();
    assert.equal((await runHousekeeping(bare, 'eager')).objects, 'full');
    assert.equal(run(bare, 'cat-file', '-t', blob).trim(), 'blob');

    const clone = path.join(tmp, 'clone');
    run(tmp, 'clone', '-q', '--bare', `file://${bare}`, clone);
    assert.equal(run(clone, 'rev-list', '--count', 'main').trim(), '3200');
    run(bare, 'fsck', '--no-progress', '--no-dangling');
  });

  it('an empty repository: eager housekeeping does nothing harmful', async () => {
    const empty = path.join(tmp, 'e.git');
    run(tmp, 'init', '-q', '--bare', empty);
    assert.equal((await runHousekeeping(empty, 'eager')).objects, 'full');
    assert.equal((await runHousekeeping(empty)).objects, 'none');
  });
});
