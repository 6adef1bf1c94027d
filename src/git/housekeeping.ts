import fs from 'node:fs/promises';
import path from 'node:path';
import { git } from './command.js';
import { commitGraphHasBloomFilters } from './repository.js';

/**
 * Repository housekeeping by heuristics, as Gitaly's OptimizeRepository does it (behaviour learnt
 * from its documentation and source, not copied): look at the repository's object database first,
 * then do only the work it needs.
 *
 * Objects:
 *  - `full`: one pack of everything reachable, unreachable objects in a cruft pack (so an object a
 *    push in flight has written but not yet referenced is kept; cruft objects older than two weeks
 *    are dropped), a multi-pack-index with a reachability bitmap. Chosen when the repository has
 *    objects but no bitmap (a fresh push: clones would have to walk every object), when an admin
 *    asks (`eager`), or when a geometric repack is due and the last full one is older than
 *    FULL_REPACK_COOLDOWN_MS.
 *  - `geometric`: packs rolled up so each is at least twice the size of the ones after it
 *    (`--geometric=2`, loose objects included), and the multi-pack-index and its bitmap rewritten
 *    over all packs. Chosen when a pack is newer than the bitmap (a push of more than git's
 *    `receive.unpackLimit` objects arrives as a pack the bitmap does not cover) or when there are
 *    more than LOOSE_OBJECT_LIMIT loose objects (estimated from one of the 256 fan-out folders).
 *  - `none` otherwise.
 * References are packed when loose ones exist; the commit-graph is always brought up to date (a
 * new layer of the split graph, with changed-path Bloom filters).
 */

export type HousekeepingTask = 'incremental' | 'eager' | 'prune';
export type ObjectStrategy = 'none' | 'geometric' | 'full';

export const LOOSE_OBJECT_LIMIT = 1024;
export const FULL_REPACK_COOLDOWN_MS = 5 * 24 * 3600_000;
const FULL_REPACK_MARKER = 'cairn-full-repack';
const CRUFT_EXPIRATION = '2.weeks.ago';

export interface ObjectDatabaseStats {
  /** Loose objects, estimated as Gitaly does: the count in `objects/17` times 256. */
  looseObjects: number;
  /** Packs that are not cruft packs. */
  packs: number;
  cruftPacks: number;
  /** Bytes of all packs. */
  packBytes: number;
  /** A bitmap exists (of a pack or of the multi-pack-index). */
  hasBitmap: boolean;
  /** Packs written after the newest bitmap: their objects are not in it. */
  packsNewerThanBitmap: number;
  lastFullRepackAt: Date | null;
}

async function entries(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
}

const mtime = async (file: string) => (await fs.stat(file).catch(() => null))?.mtimeMs ?? null;

export async function objectDatabaseStats(dir: string): Promise<ObjectDatabaseStats> {
  const packDir = path.join(dir, 'objects', 'pack');
  const names = await entries(packDir);
  const set = new Set(names);
  let packs = 0;
  let cruftPacks = 0;
  let packBytes = 0;
  let newestBitmap: number | null = null;
  const packTimes: number[] = [];
  for (const name of names) {
    if (name.endsWith('.bitmap')) {
      const t = await mtime(path.join(packDir, name));
      if (t !== null && (newestBitmap === null || t > newestBitmap)) newestBitmap = t;
      continue;
    }
    if (!name.endsWith('.pack')) continue;
    const stat = await fs.stat(path.join(packDir, name)).catch(() => null);
    if (!stat) continue;
    packBytes += stat.size;
    if (set.has(name.replace(/\.pack$/, '.mtimes'))) cruftPacks++;
    else {
      packs++;
      packTimes.push(stat.mtimeMs);
    }
  }
  const looseObjects = (await entries(path.join(dir, 'objects', '17'))).filter((n) => /^[0-9a-f]{38,62}$/.test(n)).length * 256;
  const full = await mtime(path.join(dir, FULL_REPACK_MARKER));
  return {
    looseObjects,
    packs,
    cruftPacks,
    packBytes,
    hasBitmap: newestBitmap !== null,
    packsNewerThanBitmap: newestBitmap === null ? packs : packTimes.filter((t) => t > newestBitmap!).length,
    lastFullRepackAt: full === null ? null : new Date(full),
  };
}

/** What to do with the objects; see the module comment. */
export function chooseObjectStrategy(stats: ObjectDatabaseStats, task: HousekeepingTask, now = Date.now()): ObjectStrategy {
  const hasObjects = stats.packs + stats.cruftPacks > 0 || stats.looseObjects > 0;
  if (task === 'eager') return 'full';
  if (!hasObjects) return 'none';
  if (!stats.hasBitmap && stats.packs > 0) return 'full';
  const due = stats.packsNewerThanBitmap > 0 || stats.looseObjects > LOOSE_OBJECT_LIMIT;
  if (!due) return 'none';
  const lastFull = stats.lastFullRepackAt?.getTime() ?? 0;
  return now - lastFull > FULL_REPACK_COOLDOWN_MS ? 'full' : 'geometric';
}

async function hasLooseRefs(dir: string): Promise<boolean> {
  const walk = async (d: string): Promise<boolean> => {
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isFile()) return true;
      if (e.isDirectory() && (await walk(path.join(d, e.name)))) return true;
    }
    return false;
  };
  return walk(path.join(dir, 'refs'));
}

export interface HousekeepingResult {
  objects: ObjectStrategy;
  packedRefs: boolean;
}

/**
 * Keeps a repository fast to read (see the module comment): objects by heuristics, packed refs,
 * and a commit-graph with changed-path Bloom filters (history walks, `rev-list --count` and
 * path-limited walks), written as a chain of layers so that after a push only the new commits
 * are added; a graph some layer of which lacks the filters is rewritten whole once. `prune` also
 * removes loose unreachable objects older than two weeks.
 */
export async function runHousekeeping(dir: string, task: HousekeepingTask = 'incremental'): Promise<HousekeepingResult> {
  const opts = { gitDir: dir, timeoutMs: 30 * 60_000 };
  const objects = chooseObjectStrategy(await objectDatabaseStats(dir), task);
  if (objects === 'full') {
    await git(['repack', '-d', '-q', '--cruft', `--cruft-expiration=${CRUFT_EXPIRATION}`, '--write-midx', '--write-bitmap-index'], opts);
    const marker = path.join(dir, FULL_REPACK_MARKER);
    await fs.writeFile(marker, '');
    const now = new Date();
    await fs.utimes(marker, now, now);
  } else if (objects === 'geometric') {
    await git(['repack', '-d', '-q', '--geometric=2', '--write-midx', '--write-bitmap-index'], opts);
  }
  if (task === 'prune') await git(['prune', `--expire=${CRUFT_EXPIRATION}`], opts);
  const packedRefs = task !== 'incremental' || (await hasLooseRefs(dir));
  if (packedRefs) await git(['pack-refs', '--all'], opts);
  const split = (await commitGraphHasBloomFilters(dir)) === false ? '--split=replace' : '--split';
  await git(['commit-graph', 'write', '--reachable', '--changed-paths', split, '--size-multiple=4'], opts);
  return { objects, packedRefs };
}
