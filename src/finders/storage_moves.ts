import type { Database } from '../db/index.js';
import type { StorageMoveContainerType } from '../db/schema/storage_moves.js';
import { pageWithTotal, totalCount } from './paging.js';

/** Storage moves of a kind (and of one container), newest first, with the total for the page headers. */
export async function listStorageMoves(db: Database, type: StorageMoveContainerType, containerId: number | null, page: { limit: number; offset: number }) {
  let q = db.selectFrom('repository_storage_moves').selectAll().select(totalCount).where('container_type', '=', type);
  if (containerId !== null) q = q.where('container_id', '=', containerId);
  const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(page.limit).offset(page.offset).execute();
  return pageWithTotal(rows, page.offset, () => countStorageMoves(db, type, containerId));
}

async function countStorageMoves(db: Database, type: StorageMoveContainerType, containerId: number | null): Promise<number> {
  let q = db.selectFrom('repository_storage_moves').select((eb) => eb.fn.countAll<number>().as('n')).where('container_type', '=', type);
  if (containerId !== null) q = q.where('container_id', '=', containerId);
  return Number((await q.executeTakeFirstOrThrow()).n);
}

export async function findStorageMove(db: Database, type: StorageMoveContainerType, id: number, containerId: number | null) {
  let q = db.selectFrom('repository_storage_moves').selectAll().where('container_type', '=', type).where('id', '=', id);
  if (containerId !== null) q = q.where('container_id', '=', containerId);
  return q.executeTakeFirst();
}
