import type { Database } from '../db/index.js';
import type { LfsFileLock } from '../db/schema/lfs.js';
import { LfsError } from './objects.js';

/**
 * Git LFS file locks (GitLab's LfsFileLock): one lock per (project, path), owned by the user who
 * made it. Only its owner unlocks it, or a maintainer with `force`. The unique key decides
 * between two processes creating the same lock at once.
 */

export interface LockWithOwner extends LfsFileLock {
  owner_name: string;
}

export interface PresentedLock {
  id: string;
  path: string;
  locked_at: string;
  owner: { name: string };
}

export function presentLock(lock: LockWithOwner): PresentedLock {
  return { id: String(lock.id), path: lock.path, locked_at: new Date(lock.created_at).toISOString(), owner: { name: lock.owner_name } };
}

function locksQuery(db: Database, projectId: number) {
  return db
    .selectFrom('lfs_file_locks as l')
    .innerJoin('users as u', 'u.id', 'l.user_id')
    .selectAll('l')
    .select('u.name as owner_name')
    .where('l.project_id', '=', projectId);
}

const MAX_PATH = 4096;

/** Creates a lock; LfsError(409) with the existing lock when the path is locked already. */
export async function createLock(db: Database, projectId: number, userId: number, path: unknown): Promise<LockWithOwner> {
  if (typeof path !== 'string' || !path || path.length > MAX_PATH || path.includes('\0')) throw new LfsError(422, 'The path of the lock is missing or invalid.');
  const inserted = await db
    .insertInto('lfs_file_locks')
    .values({ project_id: projectId, user_id: userId, path })
    .onConflict((oc) => oc.columns(['project_id', 'path']).doNothing())
    .returning('id')
    .executeTakeFirst();
  const lock = await locksQuery(db, projectId).where('l.path', '=', path).executeTakeFirst();
  if (!lock) throw new LfsError(409, 'The lock could not be created; please retry.');
  if (!inserted || Number(inserted.id) !== Number(lock.id)) throw new LockExistsError(lock);
  return lock;
}

export class LockExistsError extends LfsError {
  constructor(readonly lock: LockWithOwner) {
    super(409, 'already created lock');
  }
}

export interface LockFilter {
  id?: string;
  path?: string;
  cursor?: string;
  limit?: number;
}

/** A page of the project's locks by id, and the cursor of the next page (the id to start from). */
export async function listLocks(db: Database, projectId: number, filter: LockFilter): Promise<{ locks: LockWithOwner[]; nextCursor?: string }> {
  const limit = Math.min(Math.max(filter.limit ?? 100, 1), 100);
  let q = locksQuery(db, projectId);
  if (filter.id !== undefined) {
    if (!/^\d{1,18}$/.test(filter.id)) return { locks: [] };
    q = q.where('l.id', '=', Number(filter.id));
  }
  if (filter.path !== undefined) q = q.where('l.path', '=', filter.path);
  if (filter.cursor !== undefined && filter.cursor !== '') {
    if (!/^\d{1,18}$/.test(filter.cursor)) throw new LfsError(422, 'The cursor is invalid.');
    q = q.where('l.id', '>=', Number(filter.cursor));
  }
  const rows = await q.orderBy('l.id').limit(limit + 1).execute();
  const more = rows.length > limit;
  return { locks: rows.slice(0, limit), nextCursor: more ? String(rows[limit].id) : undefined };
}

/**
 * Deletes a lock: its owner may, others only with `force` and `mayForce` (maintainers).
 * LfsError 404 for an unknown lock, 403 when the caller may not.
 */
export async function deleteLock(db: Database, projectId: number, userId: number, id: string, force: boolean, mayForce: boolean): Promise<LockWithOwner> {
  if (!/^\d{1,18}$/.test(id)) throw new LfsError(404, 'Lock not found');
  const lock = await locksQuery(db, projectId).where('l.id', '=', Number(id)).executeTakeFirst();
  if (!lock) throw new LfsError(404, 'Lock not found');
  if (lock.user_id !== userId) {
    if (!force) throw new LfsError(403, `${lock.path} is locked by GitLab User ${lock.owner_name}`);
    if (!mayForce) throw new LfsError(403, 'You must have maintainer access to force delete a lock');
  }
  await db.deleteFrom('lfs_file_locks').where('id', '=', lock.id).where('project_id', '=', projectId).execute();
  return lock;
}
