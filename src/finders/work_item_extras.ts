import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { MilestoneView } from '../presenters/milestones.js';
import type { WorkItemType } from '../services/work_items.js';

/**
 * What issues, merge requests and epics preload for a page of rows alike: their labels, their
 * milestones, their thumbs up and down. One statement each for the whole page.
 */

/** The labels on the page's items, with the item's id as target_id, by title. */
export function labelRowsOf(db: Database, type: WorkItemType, ids: number[]) {
  return db.selectFrom('label_links as ll').innerJoin('labels as l', 'l.id', 'll.label_id')
    .select('ll.target_id').selectAll('l')
    .where('ll.target_type', '=', type).where('ll.target_id', 'in', ids)
    .orderBy('l.title').execute();
}

/** Milestones by id, with the paths their presenter needs. */
export async function milestonesByIds(db: Database, ids: number[]): Promise<MilestoneView[]> {
  if (!ids.length) return [];
  const result = await sql<MilestoneView>`
    select m.*, (select n.full_path || '/' || p.path from projects p join namespaces n on n.id = p.namespace_id where p.id = m.project_id) as project_full_path,
           (select g.full_path from namespaces g where g.id = m.group_id) as group_full_path
      from milestones m where m.id = any(${ids}::int[])`.execute(db);
  return result.rows;
}

/** Upvotes (thumbsup) and downvotes (thumbsdown) of each item that has any. */
export async function voteCountsOf(db: Database, type: WorkItemType, ids: number[]): Promise<Map<number, { up: number; down: number }>> {
  const result = await sql<{ awardable_id: number; up: number; down: number }>`
    select awardable_id, count(*) filter (where name = 'thumbsup')::int as up, count(*) filter (where name = 'thumbsdown')::int as down
      from award_emoji where awardable_type = ${type} and awardable_id = any(${ids}::int[])
     group by awardable_id`.execute(db);
  return new Map(result.rows.map((r) => [r.awardable_id, r]));
}

/** The labels filter of issues, merge requests and epics: names (every one of them), or None / Any. */
export type LabelMatch = string[] | 'none' | 'any';

/**
 * SQL condition for a labels filter on the item whose id is `itemId`: every one of the names is on
 * it (names compare case-insensitively, a name given twice counts once), or with `negate` none of
 * them is (GitLab's not[labels]); None / Any: no label / some label. Whatever the number of names,
 * this is one subquery per item: the names' label ids are looked up once (an InitPlan), then each
 * item is one probe of label_links' key and one count. (One EXISTS per name made the planner's
 * work and memory grow faster than the list: 160 names took 11 s, 500 exhausted PGlite.)
 */
export function labelMatchCondition(type: WorkItemType, itemId: RawBuilder<number>, match: LabelMatch, negate = false): RawBuilder<boolean> {
  const links = sql`from label_links ll where ll.target_type = ${type} and ll.target_id = ${itemId}`;
  if (match === 'none' || match === 'any') {
    const has = sql<boolean>`exists (select 1 ${links})`;
    return (match === 'any') !== negate ? has : sql<boolean>`not ${has}`;
  }
  const names = [...new Set(match.map((n) => n.toLowerCase()))];
  const matching = sql`from label_links ll join labels l on l.id = ll.label_id
    where ll.target_type = ${type} and ll.target_id = ${itemId}
      and ll.label_id = any(array(select x.id from labels x where lower(x.title) = any(${names}::text[])))`;
  if (negate) return sql<boolean>`not exists (select 1 ${matching})`;
  return sql<boolean>`(select count(distinct lower(l.title)) ${matching}) = ${names.length}`;
}
