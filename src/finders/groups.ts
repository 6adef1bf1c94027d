import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace } from '../db/schema/core.js';
import { rowId } from '../lib/ids.js';

/** `:id` of /groups/:id: an integer id or a URL-decoded full path. Groups only (not user namespaces). */
export async function findGroup(db: Database, idOrPath: string | number): Promise<Namespace | undefined> {
  const key = String(idOrPath);
  const q = db.selectFrom('namespaces').selectAll().where('type', '=', 'Group');
  if (/^\d+$/.test(key)) {
    const id = rowId(key);
    return id === undefined ? undefined : q.where('id', '=', id).executeTakeFirst();
  }
  return q.where(sql`lower(full_path)`, '=', key.toLowerCase()).executeTakeFirst();
}
