import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { MergeRequest } from '../db/schema/work_items.js';
import { projectVisibleTo } from '../policies/access.js';
import { REPORTER } from '../policies/rules.js';
import type { LabelDetail, MergeRequestExtras } from '../presenters/merge_requests.js';
import { findUsersByIds } from './users.js';
import { presentLabelBasic } from '../presenters/labels.js';
import type { MilestoneView } from '../presenters/milestones.js';
import { labelMatchCondition, labelRowsOf, milestonesByIds, voteCountsOf, type LabelMatch } from './work_item_extras.js';
import { MR_STATE } from '../db/work_item_states.js';

/** A user filter as GitLab takes it: an id, or None (nobody) / Any (somebody). */
export type UserMatch = number | 'none' | 'any';

/** One side of the filters (the plain ones, or the `not[...]` ones). */
export interface MergeRequestMatch {
  labels?: LabelMatch;
  milestone?: string | 'none' | 'any';
  authorId?: number;
  authorUsername?: string;
  assigneeId?: UserMatch;
  assigneeUsername?: string;
  reviewerId?: UserMatch;
  reviewerUsername?: string;
  myReactionEmoji?: string | 'none' | 'any';
}

export interface MergeRequestFilters extends MergeRequestMatch {
  /** Project lists: the target project. */
  projectId?: number;
  /** Group lists: target projects under these namespaces. */
  namespaceIds?: number[];
  iids?: number[];
  state?: 'opened' | 'closed' | 'merged' | 'locked' | 'all';
  scope?: 'created_by_me' | 'assigned_to_me' | 'reviews_for_me' | 'all';
  sourceBranch?: string;
  targetBranch?: string;
  search?: string;
  searchIn?: ('title' | 'description')[];
  wip?: 'yes' | 'no';
  createdAfter?: Date;
  createdBefore?: Date;
  updatedAfter?: Date;
  updatedBefore?: Date;
  approvedByIds?: number[] | 'none' | 'any';
  approverIds?: number[] | 'none' | 'any';
  sourceProjectId?: number;
  /** environment / deployed_before / deployed_after: merge requests deployed there (none are recorded until CI deploys). */
  deployment?: { environment?: string; before?: Date; after?: Date };
  not?: MergeRequestMatch;
  orderBy?: 'created_at' | 'updated_at' | 'title' | 'merged_at';
  sort?: 'asc' | 'desc';
}

const DRAFT_SQL = sql<boolean>`(mr.title ~* '^\\s*(\\[draft\\]|\\(draft\\)|draft:)')`;

/** Conditions of one side of the filters; `negate` turns each into its opposite (GitLab's not[...]). */
function matchConditions(m: MergeRequestMatch, actor: User | null, negate: boolean): RawBuilder<boolean>[] {
  const out: RawBuilder<boolean>[] = [];
  const add = (c: RawBuilder<boolean>) => out.push(negate ? sql<boolean>`not (${c})` : c);
  const userLink = (table: string, match: UserMatch) => {
    const t = sql.raw(table);
    if (match === 'none') return sql<boolean>`not exists (select 1 from ${t} x where x.merge_request_id = mr.id)`;
    if (match === 'any') return sql<boolean>`exists (select 1 from ${t} x where x.merge_request_id = mr.id)`;
    return sql<boolean>`exists (select 1 from ${t} x where x.merge_request_id = mr.id and x.user_id = ${match})`;
  };
  const userLinkByName = (table: string, username: string) =>
    sql<boolean>`exists (select 1 from ${sql.raw(table)} x join users u on u.id = x.user_id where x.merge_request_id = mr.id and lower(u.username) = lower(${username}))`;

  // Every label must be on it (names case-insensitive); under not[], none of them may be.
  if (m.labels === 'none' || m.labels === 'any' || m.labels?.length) out.push(labelMatchCondition('MergeRequest', sql`mr.id`, m.labels, negate));
  if (m.milestone === 'none') add(sql`mr.milestone_id is null`);
  else if (m.milestone === 'any') add(sql`mr.milestone_id is not null`);
  else if (m.milestone !== undefined) add(sql`exists (select 1 from milestones ms where ms.id = mr.milestone_id and ms.title = ${m.milestone})`);
  if (m.authorId !== undefined) add(sql`mr.author_id = ${m.authorId}`);
  if (m.authorUsername !== undefined) add(sql`exists (select 1 from users u where u.id = mr.author_id and lower(u.username) = lower(${m.authorUsername}))`);
  if (m.assigneeId !== undefined) add(userLink('merge_request_assignees', m.assigneeId));
  if (m.assigneeUsername !== undefined) add(userLinkByName('merge_request_assignees', m.assigneeUsername));
  if (m.reviewerId !== undefined) add(userLink('merge_request_reviewers', m.reviewerId));
  if (m.reviewerUsername !== undefined) add(userLinkByName('merge_request_reviewers', m.reviewerUsername));
  if (m.myReactionEmoji !== undefined && actor) {
    const mine = sql`select 1 from award_emoji ae where ae.awardable_type = 'MergeRequest' and ae.awardable_id = mr.id and ae.user_id = ${actor.id}`;
    if (m.myReactionEmoji === 'none') add(sql`not exists (${mine})`);
    else if (m.myReactionEmoji === 'any') add(sql`exists (${mine})`);
    else add(sql`exists (${mine} and ae.name = ${m.myReactionEmoji})`);
  }
  return out;
}

function idsCondition(table: string, ids: number[] | 'none' | 'any'): RawBuilder<boolean> {
  const t = sql.raw(table);
  if (ids === 'none') return sql`not exists (select 1 from ${t} x where x.merge_request_id = mr.id)`;
  if (ids === 'any') return sql`exists (select 1 from ${t} x where x.merge_request_id = mr.id)`;
  // Approved by all of them (GitLab's approved_by_ids is an "and").
  return sql`(select count(distinct x.user_id) from ${t} x where x.merge_request_id = mr.id and x.user_id = any(${ids}::int[])) = ${ids.length}`;
}

/**
 * SQL condition: the actor may read merge requests of the target project aliased `p` (the feature
 * is on, and a private project's merge requests are for reporters and up). Mirrors the
 * read_merge_request ability for whole lists.
 */
function readableTargets(actor: User | null): RawBuilder<boolean> {
  const feature = sql<boolean>`coalesce(p.settings->>'merge_requests_access_level', 'enabled') <> 'disabled'`;
  if (actor?.admin) return feature;
  const visible = projectVisibleTo(actor);
  if (!actor) return sql<boolean>`(${visible} and ${feature} and coalesce(p.settings->>'merge_requests_access_level', 'enabled') <> 'private')`;
  return sql<boolean>`(${visible} and ${feature} and (
    (p.visibility_level > 0 and coalesce(p.settings->>'merge_requests_access_level', 'enabled') <> 'private')
    or p.id in ${REPORTER.projectIds(actor.id)}))`;
}

function listQuery(db: Database, actor: User | null, f: MergeRequestFilters) {
  const conds: RawBuilder<boolean>[] = [];
  if (f.projectId !== undefined) conds.push(sql`mr.target_project_id = ${f.projectId}`);
  else conds.push(readableTargets(actor));
  if (f.namespaceIds) conds.push(sql`p.namespace_id = any(${f.namespaceIds}::int[])`);
  if (f.iids?.length) conds.push(sql`mr.iid = any(${f.iids}::int[])`);
  if (f.state && f.state !== 'all') conds.push(sql`mr.state_id = ${MR_STATE[f.state]}`);
  if (actor && f.scope === 'created_by_me') conds.push(sql`mr.author_id = ${actor.id}`);
  if (actor && f.scope === 'assigned_to_me') conds.push(sql`exists (select 1 from merge_request_assignees x where x.merge_request_id = mr.id and x.user_id = ${actor.id})`);
  if (actor && f.scope === 'reviews_for_me') conds.push(sql`exists (select 1 from merge_request_reviewers x where x.merge_request_id = mr.id and x.user_id = ${actor.id})`);
  if (f.sourceBranch !== undefined) conds.push(sql`mr.source_branch = ${f.sourceBranch}`);
  if (f.targetBranch !== undefined) conds.push(sql`mr.target_branch = ${f.targetBranch}`);
  if (f.sourceProjectId !== undefined) conds.push(sql`mr.source_project_id = ${f.sourceProjectId}`);
  if (f.search) {
    const pattern = `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const fields = f.searchIn?.length ? f.searchIn : ['title', 'description'];
    const parts = fields.map((field) => (field === 'title' ? sql`mr.title ilike ${pattern}` : sql`mr.description ilike ${pattern}`));
    conds.push(sql`(${sql.join(parts, sql` or `)})`);
  }
  if (f.wip === 'yes') conds.push(DRAFT_SQL);
  if (f.wip === 'no') conds.push(sql`not ${DRAFT_SQL}`);
  if (f.createdAfter) conds.push(sql`mr.created_at >= ${f.createdAfter}`);
  if (f.createdBefore) conds.push(sql`mr.created_at <= ${f.createdBefore}`);
  if (f.updatedAfter) conds.push(sql`mr.updated_at >= ${f.updatedAfter}`);
  if (f.updatedBefore) conds.push(sql`mr.updated_at <= ${f.updatedBefore}`);
  if (f.approvedByIds !== undefined) conds.push(idsCondition('merge_request_approvals', f.approvedByIds));
  // Approval rules are not modelled: the eligible approvers are the project's developers and up.
  if (f.approverIds !== undefined) {
    const ids = f.approverIds;
    if (ids === 'none') conds.push(sql`false`);
    else if (ids !== 'any') {
      // The projects where every one of them is a developer or more: one aggregate, computed once.
      const distinct = [...new Set(ids)];
      conds.push(sql`mr.target_project_id in (select a.project_id from project_access_grants a where a.user_id = any(${distinct}::int[]) and a.access_level >= 30
                                               group by a.project_id having count(distinct a.user_id) = ${distinct.length})`);
    }
  }
  // Deployments are not recorded yet, so no merge request was deployed anywhere.
  if (f.deployment) conds.push(sql`false`);
  conds.push(...matchConditions(f, actor, false));
  if (f.not) conds.push(...matchConditions(f.not, actor, true));
  const where = conds.length ? sql.join(conds, sql` and `) : sql`true`;
  return db
    .selectFrom('merge_requests as mr')
    .innerJoin('projects as p', 'p.id', 'mr.target_project_id')
    .where(where as any);
}

/**
 * GitLab's cap on counting: above this many rows a list sends no X-Total / X-Total-Pages (as
 * GitLab does), so a count never reads more than this many rows.
 */
export const MERGE_REQUEST_COUNT_CAP = 10_000;

/**
 * One page of merge requests for the actor, newest first unless asked otherwise. The page is its
 * own statement (no `count(*) over ()`), so the planner walks an index in the requested order
 * and stops at the page's end (indexes from migration 0720); the total is countMergeRequests.
 */
export async function findMergeRequestPage(db: Database, actor: User | null, f: MergeRequestFilters, page: { limit: number; offset: number }): Promise<MergeRequest[]> {
  const dir = f.sort === 'asc' ? 'asc' : 'desc';
  const column = f.orderBy === 'updated_at' ? 'mr.updated_at' : f.orderBy === 'title' ? 'mr.title' : f.orderBy === 'merged_at' ? 'mr.merged_at' : 'mr.created_at';
  return listQuery(db, actor, f)
    .selectAll('mr')
    // `column` and `dir` come from fixed lists above, never from the request's text.
    .orderBy(sql.raw(`${column} ${dir}${f.orderBy === 'merged_at' ? ' nulls last' : ''}`))
    .orderBy('mr.id', dir)
    .limit(page.limit)
    .offset(page.offset)
    .execute() as Promise<MergeRequest[]>;
}

/**
 * How many merge requests match, reading at most `cap + 1` of them: a result above `cap` means
 * "more than cap". Only the ids are read (index-only where the indexes allow).
 */
export async function countMergeRequests(db: Database, actor: User | null, f: MergeRequestFilters, cap = MERGE_REQUEST_COUNT_CAP): Promise<number> {
  const matching = listQuery(db, actor, f).select(sql<number>`1`.as('one')).limit(cap + 1);
  const row = await db.selectFrom(matching.as('m')).select(sql<number>`count(*)::int`.as('n')).executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** A page of merge requests and their total (null above MERGE_REQUEST_COUNT_CAP). */
export async function listMergeRequests(db: Database, actor: User | null, f: MergeRequestFilters, page: { limit: number; offset: number }) {
  const [rows, n] = await Promise.all([findMergeRequestPage(db, actor, f, page), countMergeRequests(db, actor, f)]);
  return { rows, total: n > MERGE_REQUEST_COUNT_CAP ? null : n };
}

export async function findMergeRequest(db: Database, projectId: number, iid: number): Promise<MergeRequest | undefined> {
  return db.selectFrom('merge_requests').selectAll().where('target_project_id', '=', projectId).where('iid', '=', iid).executeTakeFirst();
}

/**
 * What the presenters show beyond each row, for a whole page in a fixed number of statements:
 * users, labels, milestones, note and award counts, unresolved threads, project paths.
 */
export async function loadMergeRequestExtras(
  db: Database,
  rows: MergeRequest[],
  presentMilestone: (m: MilestoneView) => unknown,
): Promise<Map<number, MergeRequestExtras>> {
  const out = new Map<number, MergeRequestExtras>();
  if (!rows.length) return out;
  const ids = rows.map((r) => r.id);
  const projectIds = [...new Set(rows.flatMap((r) => [r.target_project_id, r.source_project_id ?? r.target_project_id]))];
  const milestoneIds = [...new Set(rows.map((r) => r.milestone_id).filter((x): x is number => x !== null))];
  const [links, labels, milestones, notes, awardCounts, paths] = await Promise.all([
    db.selectFrom('merge_request_assignees').select(['merge_request_id', 'user_id', sql<string>`'assignee'`.as('kind'), 'created_at'])
      .where('merge_request_id', 'in', ids)
      .unionAll(db.selectFrom('merge_request_reviewers').select(['merge_request_id', 'user_id', sql<string>`'reviewer'`.as('kind'), 'created_at']).where('merge_request_id', 'in', ids))
      .execute(),
    labelRowsOf(db, 'MergeRequest', ids),
    milestonesByIds(db, milestoneIds),
    sql<{ noteable_id: number; user_notes: number; unresolved: number }>`
      select noteable_id,
             count(*) filter (where not system)::int as user_notes,
             count(*) filter (where not system and type in ('DiscussionNote', 'DiffNote') and resolved_at is null)::int as unresolved
        from notes where noteable_type = 'MergeRequest' and noteable_id = any(${ids}::int[])
       group by noteable_id`.execute(db),
    voteCountsOf(db, 'MergeRequest', ids),
    sql<{ id: number; full_path: string; threads_block: boolean }>`
      select p.id, n.full_path || '/' || p.path as full_path,
             coalesce(p.settings->>'only_allow_merge_if_all_discussions_are_resolved', 'false') = 'true' as threads_block
        from projects p join namespaces n on n.id = p.namespace_id
       where p.id = any(${projectIds}::int[])`.execute(db),
  ]);
  const userIds = [
    ...links.map((l) => l.user_id),
    ...rows.flatMap((r) => [r.author_id, r.merge_user_id, r.closed_by_id]).filter((x): x is number => x !== null),
  ];
  const users = await findUsersByIds(db, userIds);
  const pathOf = new Map(paths.rows.map((r) => [r.id, r.full_path]));
  const threadsBlock = new Set(paths.rows.filter((r) => r.threads_block).map((r) => r.id));
  const milestoneOf = new Map(milestones.map((m) => [m.id, m]));
  const noteCounts = new Map(notes.rows.map((r) => [r.noteable_id, r]));
  for (const r of rows) {
    const mine = links.filter((l) => l.merge_request_id === r.id).sort((a, b) => +new Date(a.created_at) - +new Date(b.created_at));
    const usersOf = (kind: string) => mine.filter((l) => l.kind === kind).map((l) => users.get(l.user_id)).filter((u): u is User => !!u);
    const labelRows: LabelDetail[] = labels.filter((l) => l.target_id === r.id).map((l) => presentLabelBasic(l));
    const target = pathOf.get(r.target_project_id) ?? '';
    const source = r.source_project_id !== null && r.source_project_id !== r.target_project_id ? pathOf.get(r.source_project_id) ?? null : null;
    const milestone = r.milestone_id !== null ? milestoneOf.get(r.milestone_id) : undefined;
    out.set(r.id, {
      author: r.author_id !== null ? users.get(r.author_id) ?? null : null,
      assignees: usersOf('assignee'),
      reviewers: usersOf('reviewer'),
      mergeUser: r.merge_user_id !== null ? users.get(r.merge_user_id) ?? null : null,
      closedBy: r.closed_by_id !== null ? users.get(r.closed_by_id) ?? null : null,
      labels: labelRows,
      milestone: milestone ? presentMilestone(milestone) : null,
      userNotesCount: noteCounts.get(r.id)?.user_notes ?? 0,
      upvotes: awardCounts.get(r.id)?.up ?? 0,
      downvotes: awardCounts.get(r.id)?.down ?? 0,
      // GitLab's mergeable_discussions_state?: unresolved threads block only where the project says they must be resolved.
      blockingDiscussionsResolved: !threadsBlock.has(r.target_project_id) || (noteCounts.get(r.id)?.unresolved ?? 0) === 0,
      targetProjectFullPath: target,
      sourceProjectFullPath: source,
    });
  }
  return out;
}
