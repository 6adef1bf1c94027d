import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { Epic, Label } from '../db/schema/work_items.js';
import type { EpicExtras } from '../presenters/epics.js';
import { pageWithTotal, totalCount } from './paging.js';
import { findUsersByIds } from './users.js';
import { labelMatchCondition, labelRowsOf, voteCountsOf, type LabelMatch } from './work_item_extras.js';
import { EPIC_STATE } from '../db/work_item_states.js';

/** Epic list filters (GitLab's Epics API, the common ones); confidential epics only for callers who may see them. */
export interface EpicFilters {
  /** The caller may see confidential epics (read_confidential_epic). */
  includeConfidential: boolean;
  state?: 'opened' | 'closed' | 'all';
  authorId?: number;
  /** Every label must be on the epic (names case-insensitive); None / Any. */
  labels?: LabelMatch;
  search?: string;
  confidential?: boolean;
  createdAfter?: Date;
  createdBefore?: Date;
  updatedAfter?: Date;
  updatedBefore?: Date;
  orderBy?: 'created_at' | 'updated_at' | 'title';
  sort?: 'asc' | 'desc';
}

function conditions(groupId: number, f: EpicFilters): RawBuilder<boolean> {
  const conds: RawBuilder<boolean>[] = [sql`e.group_id = ${groupId}`];
  if (!f.includeConfidential) conds.push(sql`not e.confidential`);
  if (f.state === 'opened') conds.push(sql`e.state_id = ${EPIC_STATE.opened}`);
  if (f.state === 'closed') conds.push(sql`e.state_id = ${EPIC_STATE.closed}`);
  if (f.authorId !== undefined) conds.push(sql`e.author_id = ${f.authorId}`);
  if (f.confidential !== undefined) conds.push(sql`e.confidential = ${f.confidential}`);
  if (f.labels === 'none' || f.labels === 'any' || f.labels?.length) conds.push(labelMatchCondition('Epic', sql`e.id`, f.labels));
  if (f.search) {
    const like = `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    conds.push(sql`(e.title ilike ${like} or e.description ilike ${like})`);
  }
  if (f.createdAfter) conds.push(sql`e.created_at >= ${f.createdAfter}`);
  if (f.createdBefore) conds.push(sql`e.created_at <= ${f.createdBefore}`);
  if (f.updatedAfter) conds.push(sql`e.updated_at >= ${f.updatedAfter}`);
  if (f.updatedBefore) conds.push(sql`e.updated_at <= ${f.updatedBefore}`);
  return sql.join(conds, sql` and `) as RawBuilder<boolean>;
}

/** A page of a group's epics and their number, one statement. */
export async function listEpics(db: Database, groupId: number, f: EpicFilters, page: { limit: number; offset: number }): Promise<{ rows: Epic[]; total: number }> {
  const column = f.orderBy === 'updated_at' ? 'e.updated_at' : f.orderBy === 'title' ? 'e.title' : 'e.created_at';
  const dir = f.sort === 'asc' ? 'asc' : 'desc';
  const where = conditions(groupId, f);
  const rows = await db
    .selectFrom('epics as e')
    .selectAll('e')
    .select(totalCount)
    .where(where)
    // `column` and `dir` come from the fixed lists above.
    .orderBy(sql.raw(`${column} ${dir}`))
    .orderBy('e.id', dir)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return pageWithTotal(rows as (Epic & { total_count: number })[], page.offset, async () =>
    Number((await db.selectFrom('epics as e').select(sql<number>`count(*)::int`.as('n')).where(where).executeTakeFirstOrThrow()).n));
}

/** The epic `iid` (or, with `byId`, the epic whose id is `key`: the discussions API names epics by id) of a group. */
export async function findEpic(db: Database, groupId: number, key: number, byId = false): Promise<Epic | undefined> {
  return db.selectFrom('epics').selectAll().where('group_id', '=', groupId).where(byId ? 'id' : 'iid', '=', key).executeTakeFirst();
}

/** Authors, labels, award counts and the group path of a page of epics, in a fixed number of statements. */
export async function loadEpicExtras(db: Database, epics: Epic[]): Promise<Map<number, EpicExtras>> {
  const out = new Map<number, EpicExtras>();
  if (!epics.length) return out;
  const ids = epics.map((e) => e.id);
  const groupIds = [...new Set(epics.map((e) => e.group_id))];
  const [labels, awardsOf, groups, users] = await Promise.all([
    labelRowsOf(db, 'Epic', ids),
    voteCountsOf(db, 'Epic', ids),
    db.selectFrom('namespaces').select(['id', 'full_path']).where('id', 'in', groupIds).execute(),
    findUsersByIds(db, epics.map((e) => e.author_id).filter((id): id is number => id !== null)),
  ]);
  const pathOf = new Map(groups.map((g) => [g.id, g.full_path]));
  for (const e of epics) {
    out.set(e.id, {
      groupFullPath: pathOf.get(e.group_id) ?? '',
      author: e.author_id !== null ? users.get(e.author_id) ?? null : null,
      labels: labels.filter((l) => l.target_id === e.id).map(({ target_id: _t, ...l }) => l as Label),
      upvotes: awardsOf.get(e.id)?.up ?? 0,
      downvotes: awardsOf.get(e.id)?.down ?? 0,
    });
  }
  return out;
}
