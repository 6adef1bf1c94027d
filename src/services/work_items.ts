import { sql } from 'kysely';
import type { Database } from '../db/index.js';

/** What issues, merge requests, epics (and snippets, which share the dependents) are called in the polymorphic tables (label_links, notes, award_emoji...). */
export type WorkItemType = 'Issue' | 'MergeRequest' | 'Epic' | 'Snippet';

/**
 * Deletes what hangs off a work item in the polymorphic tables, which no foreign key cascades:
 * its label links and label events, its awards and those on its notes, its subscriptions and
 * its notes. Run it in the transaction that deletes the item's own row.
 */
export async function deleteWorkItemDependents(trx: Database, type: WorkItemType, id: number): Promise<void> {
  await sql`delete from award_emoji where awardable_type = 'Note' and awardable_id in
    (select id from notes where noteable_type = ${type} and noteable_id = ${id})`.execute(trx);
  for (const [table, prefix] of [['label_links', 'target'], ['resource_label_events', 'target'], ['award_emoji', 'awardable'], ['subscriptions', 'subscribable']] as const) {
    await sql`delete from ${sql.table(table)} where ${sql.ref(`${prefix}_type`)} = ${type} and ${sql.ref(`${prefix}_id`)} = ${id}`.execute(trx);
  }
  await trx.deleteFrom('notes').where('noteable_type', '=', type).where('noteable_id', '=', id).execute();
}
