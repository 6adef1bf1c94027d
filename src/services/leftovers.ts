import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import { defineRecurring } from '../jobs/queue.js';
import { packObjectsCacheDir } from '../git/http.js';
import { artifactStore } from '../storage/index.js';

/**
 * What a killed process leaves on disk, removed once it is old enough that no live operation in
 * any process can still own it (Gitaly's housekeeping works the same way, by age):
 *  - in each repository: git's quarantine directories of pushes (`objects/incoming-*`,
 *    `objects/tmp_objdir-incoming-*`), stale lock files (`*.lock` at the top, under refs/ and in
 *    objects/info/), temporary pack files (`objects/pack/tmp_*`, `.tmp-*`) and the `.keep` files
 *    receive-pack holds its pack with until the push is done;
 *  - copies of storage moves (`<repository>.moving`) when no move to that storage is running;
 *  - Cairn's temporary index directories (`cairn-index-*` in the temporary directory);
 *  - half-written objects of the artifacts store (`*.tmp`), and half-written cached archives;
 *  - packs of the pack-objects cache past their age (`CAIRN_PACK_OBJECTS_CACHE_MAX_AGE`; a fetch
 *    still sending one holds it open), and the locks and partial packs of writers that died.
 * Loose temporary objects (`objects/xx/tmp_obj_*`) are left to `git prune` (the prune
 * housekeeping task), which removes them by age: looking for them here would read every loose
 * object directory of every repository.
 */
export const LEFTOVERS_JOB = 'housekeeping.leftovers';
const EVERY_SECONDS = 3600;
/** Older than this, nothing in progress owns a leftover (the longest git write Cairn allows is 30 minutes). */
export const LEFTOVER_AGE_MS = 60 * 60_000;
/** A ref lock (held for one ref transaction, seconds at most) older than this is stale. */
export const REF_LOCK_AGE_MS = 10 * 60_000;

export interface LeftoverReport {
  quarantines: number;
  locks: number;
  packTemps: number;
  movingCopies: number;
  tempIndexes: number;
  storeTemps: number;
  archiveTemps: number;
  packCache: number;
  repositories: number;
}

const emptyReport = (): LeftoverReport => ({ quarantines: 0, locks: 0, packTemps: 0, movingCopies: 0, tempIndexes: 0, storeTemps: 0, archiveTemps: 0, packCache: 0, repositories: 0 });

async function entries(dir: string) {
  return fs.readdir(dir, { withFileTypes: true }).catch(() => [] as import('node:fs').Dirent[]);
}

/** Removes `p` when it was last modified before `cutoff`; true when removed. */
async function removeIfOld(p: string, cutoff: number): Promise<boolean> {
  const stat = await fs.lstat(p).catch(() => null);
  if (!stat || stat.mtimeMs >= cutoff) return false;
  await fs.rm(p, { recursive: true, force: true });
  return true;
}

const isQuarantine = (name: string) => name.startsWith('incoming-') || name.startsWith('tmp_objdir-incoming-');
const isPackTemp = (name: string) => name.startsWith('tmp_') || name.startsWith('.tmp-');

/**
 * Stale lock files anywhere under `dir` (refs/: loose refs are few once packed; nothing else is
 * stat'ed). git holds a ref's lock for the length of one ref transaction, so a ref lock goes
 * sooner than other leftovers: until it goes, the branch cannot be written.
 */
async function sweepLocks(dir: string, cutoff: number, report: LeftoverReport, depth = 0): Promise<void> {
  if (depth > 32) return;
  for (const e of await entries(dir)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await sweepLocks(p, cutoff, report, depth + 1);
    else if (e.name.endsWith('.lock') && (await removeIfOld(p, cutoff))) report.locks++;
  }
}

/** One repository's leftovers: a handful of readdirs, stat only of candidates. */
export async function sweepRepository(dir: string, cutoff: number, report: LeftoverReport = emptyReport(), refLockCutoff = cutoff): Promise<LeftoverReport> {
  report.repositories++;
  for (const e of await entries(dir)) {
    // HEAD.lock, config.lock, packed-refs.lock, index.lock, shallow.lock...
    if (e.isFile() && e.name.endsWith('.lock') && (await removeIfOld(path.join(dir, e.name), cutoff))) report.locks++;
  }
  await sweepLocks(path.join(dir, 'refs'), refLockCutoff, report);
  const objects = path.join(dir, 'objects');
  for (const e of await entries(objects)) {
    if (e.isDirectory() && isQuarantine(e.name) && (await removeIfOld(path.join(objects, e.name), cutoff))) report.quarantines++;
  }
  const pack = path.join(objects, 'pack');
  for (const e of await entries(pack)) {
    const p = path.join(pack, e.name);
    if (isPackTemp(e.name) || e.name.endsWith('.lock')) {
      if (await removeIfOld(p, cutoff)) report.packTemps++;
    } else if (e.name.endsWith('.keep')) {
      // Only receive-pack's own keep files (a push that never finished); an operator's stay.
      const text = await fs.readFile(p, 'latin1').catch(() => '');
      if (text.startsWith('receive-pack ') && (await removeIfOld(p, cutoff))) report.packTemps++;
    }
  }
  const info = path.join(objects, 'info');
  for (const sub of [info, path.join(info, 'commit-graphs')]) {
    for (const e of await entries(sub)) {
      if (e.isFile() && (e.name.endsWith('.lock') || e.name.startsWith('tmp_')) && (await removeIfOld(path.join(sub, e.name), cutoff))) report.locks++;
    }
  }
  return report;
}

/**
 * Walks a storage: directories named `*.git` are repositories (not descended into further),
 * `*.git.moving` are copies of storage moves; anything else is descended into (`@hashed/ab/cd/`).
 */
async function sweepStorage(root: string, cutoff: number, refLockCutoff: number, movesRunning: boolean, report: LeftoverReport, depth = 0): Promise<void> {
  if (depth > 8) return;
  for (const e of await entries(root)) {
    if (!e.isDirectory()) continue;
    const p = path.join(root, e.name);
    if (e.name.endsWith('.git')) await sweepRepository(p, cutoff, report, refLockCutoff);
    else if (e.name.endsWith('.moving')) {
      // A move running now (in any process) may be building it, however long that takes.
      if (!movesRunning && (await removeIfOld(p, cutoff))) report.movingCopies++;
    } else await sweepStorage(p, cutoff, refLockCutoff, movesRunning, report, depth + 1);
  }
}

/** Files ending `.tmp` under the local artifacts store (put writes `<key>.<random>.tmp`, then renames). */
async function sweepLocalStore(dir: string, cutoff: number, report: LeftoverReport, depth = 0): Promise<void> {
  if (depth > 16) return;
  for (const e of await entries(dir)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await sweepLocalStore(p, cutoff, report, depth + 1);
    else if (e.name.endsWith('.tmp') && (await removeIfOld(p, cutoff))) report.storeTemps++;
  }
}

/** Removes every leftover older than `ageMs`; returns what was removed. */
export async function sweepLeftovers(cairn: Cairn, opts: { ageMs?: number; now?: number } = {}): Promise<LeftoverReport> {
  const now = opts.now ?? Date.now();
  const cutoff = now - (opts.ageMs ?? LEFTOVER_AGE_MS);
  const refLockCutoff = now - Math.min(REF_LOCK_AGE_MS, opts.ageMs ?? LEFTOVER_AGE_MS);
  const report = emptyReport();
  const running = await cairn.db
    .selectFrom('repository_storage_moves')
    .select('destination_storage_name')
    .where('state', 'in', ['initial', 'scheduled', 'started'])
    .groupBy('destination_storage_name')
    .execute();
  const busy = new Set(running.map((r) => r.destination_storage_name));
  // Two storage names may share a directory: each directory once.
  const roots = new Map<string, boolean>();
  for (const [name, root] of Object.entries(cairn.config.storages)) roots.set(root, (roots.get(root) ?? false) || busy.has(name));
  for (const [root, movesRunning] of roots) await sweepStorage(root, cutoff, refLockCutoff, movesRunning, report);

  for (const e of await entries(os.tmpdir())) {
    if (e.isDirectory() && e.name.startsWith('cairn-index-') && (await removeIfOld(path.join(os.tmpdir(), e.name), cutoff))) report.tempIndexes++;
  }

  const store = artifactStore(cairn.config) as { root?: string; abandonUploads?: (before: Date) => Promise<number> };
  if (typeof store.root === 'string') await sweepLocalStore(store.root, cutoff, report);
  if (typeof store.abandonUploads === 'function') report.storeTemps += await store.abandonUploads(new Date(cutoff));

  const archives = path.join(cairn.config.dataDir, 'cache', 'archives');
  for (const sub of await entries(archives)) {
    if (!sub.isDirectory()) continue;
    for (const e of await entries(path.join(archives, sub.name))) {
      if (e.name.includes('.tmp-') && (await removeIfOld(path.join(archives, sub.name, e.name), cutoff))) report.archiveTemps++;
    }
  }

  const packs = packObjectsCacheDir(cairn.config.dataDir);
  const packCutoff = now - cairn.config.packObjectsCacheMaxAge * 1000;
  for (const sub of await entries(packs)) {
    if (!sub.isDirectory()) {
      // A request's input, kept while its fetch runs.
      if (sub.name.startsWith('input.') && (await removeIfOld(path.join(packs, sub.name), cutoff))) report.packCache++;
      continue;
    }
    for (const e of await entries(path.join(packs, sub.name))) {
      const old = e.name.endsWith('.pack') ? packCutoff : cutoff;
      if (await removeIfOld(path.join(packs, sub.name, e.name), old)) report.packCache++;
    }
  }
  return report;
}

defineRecurring(LEFTOVERS_JOB, EVERY_SECONDS, async (cairn) => {
  const report = await sweepLeftovers(cairn);
  const removed = Object.entries(report).filter(([k, v]) => k !== 'repositories' && v > 0);
  if (removed.length) console.log(`housekeeping: removed leftovers ${removed.map(([k, v]) => `${k}=${v}`).join(' ')} in ${report.repositories} repositories`);
});

/**
 * At start (after a crash, say) the sweep runs at once instead of within the hour: the pending
 * recurring run is moved to now. Another process may run it too; the sweep is idempotent.
 */
export async function sweepLeftoversSoon(cairn: Cairn): Promise<void> {
  await sql`update background_jobs set run_at = now() where kind = ${LEFTOVERS_JOB} and recurring and state = 'pending'`.execute(cairn.db);
}
