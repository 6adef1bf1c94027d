import os from 'node:os';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import { ApiError } from '../plugins/errors.js';

/**
 * Write leases: GitLab's reference counter, in PostgreSQL so every process sees it. A git write
 * (a push, an API commit, a merge) holds a lease on its container from before it touches the
 * repository until it is done; a lease is only granted while the container is not read-only, and
 * a storage move first makes the container read-only, then waits until no lease is left. So no
 * write can land in the source repository after the move has started copying it.
 *
 * The grant reads the container's row FOR SHARE and the move's read-only UPDATE takes the row
 * lock: whichever comes second waits for the other's statement, so either the lease exists before
 * the move looks for leases or the grant sees the container read-only.
 */

/** The containers that have repositories, with the table that holds their read-only flag. */
export type LeaseContainer = { type: 'Project' | 'Group' | 'Snippet'; id: number };

export const LEASE_HOLDER = `${os.hostname()}:${process.pid}`;
/** A holder that died without letting go on another host is ignored after this long. */
const LEASE_TTL = '10 minutes';

export const READ_ONLY_MESSAGE = 'The repository is temporarily read-only. Please try again later.';

const TABLES: Record<LeaseContainer['type'], string> = { Project: 'projects', Group: 'namespaces', Snippet: 'snippets' };

export interface WriteLease {
  id: number;
  /**
   * The container's storage when the lease was granted: where the write must go. A row read
   * before (from the cache, at authorization) may predate a move that has just finished.
   */
  storage: string;
}

/** Takes a lease; null when the container is read-only (or gone). */
export async function acquireWriteLease(db: Database, c: LeaseContainer): Promise<WriteLease | null> {
  const table = sql.table(TABLES[c.type]);
  const row = await sql<{ id: number; storage: string }>`
    with granted as (
      select c.id, c.repository_storage from ${table} c where c.id = ${c.id} and not c.repository_read_only for share of c
    ), lease as (
      insert into repository_write_leases (container_type, container_id, holder, expires_at)
      select ${c.type}, g.id, ${LEASE_HOLDER}, now() + ${LEASE_TTL}::interval from granted g
      returning id
    )
    select lease.id, granted.repository_storage as storage from lease, granted`.execute(db);
  const r = row.rows[0];
  return r ? { id: Number(r.id), storage: r.storage } : null;
}

export async function releaseWriteLease(db: Database, leaseId: number): Promise<void> {
  await db.deleteFrom('repository_write_leases').where('id', '=', leaseId).execute();
}

/** The read-only refusal of the API (403, GitLab's words). */
export function readOnlyError(): ApiError {
  return new ApiError(403, { message: `403 Forbidden - ${READ_ONLY_MESSAGE}` });
}

/** Runs `work` holding a lease on the container; 403 read-only when none is granted. */
export async function withWriteLease<T>(db: Database, c: LeaseContainer, work: (lease: WriteLease) => Promise<T>): Promise<T> {
  const lease = await acquireWriteLease(db, c);
  if (lease === null) throw readOnlyError();
  try {
    return await work(lease);
  } finally {
    await releaseWriteLease(db, lease.id).catch(() => {});
  }
}

function holderIsDeadHere(holder: string): boolean {
  const i = holder.lastIndexOf(':');
  if (holder.slice(0, i) !== os.hostname()) return false;
  const pid = Number(holder.slice(i + 1));
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Leases on the container still held: expired ones and those of processes on this host that no
 * longer exist (killed mid-push) are dropped, not counted.
 */
export async function liveWriteLeases(db: Database, c: LeaseContainer): Promise<number> {
  await db.deleteFrom('repository_write_leases').where('container_type', '=', c.type).where('container_id', '=', c.id).where('expires_at', '<=', sql<Date>`now()`).execute();
  const rows = await db.selectFrom('repository_write_leases').select(['id', 'holder']).where('container_type', '=', c.type).where('container_id', '=', c.id).execute();
  const dead = rows.filter((r) => holderIsDeadHere(r.holder)).map((r) => r.id);
  if (dead.length) await db.deleteFrom('repository_write_leases').where('id', 'in', dead).execute();
  return rows.length - dead.length;
}

/** Waits until no write holds the container (polling, up to `timeoutMs`); false on timeout. */
export async function waitForWrites(db: Database, c: LeaseContainer, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (let delay = 20; ; delay = Math.min(delay * 2, 1000)) {
    if ((await liveWriteLeases(db, c)) === 0) return true;
    if (Date.now() >= until) return false;
    await new Promise((r) => setTimeout(r, delay));
  }
}

export { holderIsDeadHere };
