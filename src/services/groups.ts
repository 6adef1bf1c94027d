import type { Database } from '../db/index.js';
import type { Namespace } from '../db/schema/core.js';

export interface NewGroup {
  name: string;
  path: string;
  parent?: Namespace | null;
  visibility_level?: number;
  description?: string;
  settings?: Record<string, unknown>;
}

/** Inserts a group namespace with its full path and traversal ids. */
export async function insertGroup(db: Database, attrs: NewGroup): Promise<Namespace> {
  const parent = attrs.parent ?? null;
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('namespaces')
      .values({
        type: 'Group',
        name: attrs.name,
        path: attrs.path,
        full_path: parent ? `${parent.full_path}/${attrs.path}` : attrs.path,
        full_name: parent ? `${parent.full_name} / ${attrs.name}` : attrs.name,
        parent_id: parent?.id ?? null,
        visibility_level: attrs.visibility_level ?? 0,
        description: attrs.description ?? '',
        settings: attrs.settings ?? {},
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return trx
      .updateTable('namespaces')
      .set({ traversal_ids: [...(parent?.traversal_ids ?? []), row.id] })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}
