import { sql } from 'kysely';
import type { Database } from '../db/index.js';

/** What an iid counts: issues and merge requests per project, milestones per project or group, epics per group. */
export type InternalIdUsage = 'issues' | 'merge_requests' | 'project_milestones' | 'group_milestones' | 'epics' | 'ci_pipelines' | 'deployments';

/**
 * The next iid of `usage` under `parentId`, in one statement: concurrent callers in any process get
 * distinct values. Call it inside the transaction that inserts the row, so a rolled-back insert
 * gives its number back.
 */
export async function nextInternalId(db: Database, usage: InternalIdUsage, parentId: number): Promise<number> {
  const row = await sql<{ last_value: number }>`
    insert into internal_ids (usage, parent_id, last_value) values (${usage}, ${parentId}, 1)
    on conflict (usage, parent_id) do update set last_value = internal_ids.last_value + 1
    returning last_value`.execute(db);
  return row.rows[0]!.last_value;
}
