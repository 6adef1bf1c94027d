import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { Issue } from '../db/schema/work_items.js';
import { confidentialIssue, MEMBER, readsConfidentialIssues } from '../policies/rules.js';
import type { IssueExtras } from '../presenters/issues.js';
import { presentLabelBasic } from '../presenters/labels.js';
import type { LabelDetail } from '../presenters/merge_requests.js';
import type { MilestoneView } from '../presenters/milestones.js';
import { pageWithTotal, totalCount } from './paging.js';
import { findUsersByIds } from './users.js';
import { labelMatchCondition, labelRowsOf, milestonesByIds, voteCountsOf, type LabelMatch } from './work_item_extras.js';
import { ISSUE_STATE } from '../db/work_item_states.js';

/** A user filter as GitLab takes it: an id, or None (nobody) / Any (somebody). */
export type UserMatch = number | 'none' | 'any';

/** One side of the filters (the plain ones, or the `not[...]` ones). */
export interface IssueMatch {
  labels?: LabelMatch;
  milestone?: string | 'none' | 'any';
  /** GitLab's milestone_id: None, Any, Upcoming (the next active milestone to come due), Started (active and started). */
  milestoneId?: 'none' | 'any' | 'upcoming' | 'started';
  authorId?: number;
  authorUsername?: string;
  assigneeId?: UserMatch;
  /** Every one of them is an assignee. */
  assigneeUsernames?: string[];
  myReactionEmoji?: string | 'none' | 'any';
  iids?: number[];
  issueType?: string[];
}

export interface IssueFilters extends IssueMatch {
  /** Project lists: that project (its access was checked by the route). */
  projectId?: number;
  /** Project lists: the caller sees every confidential issue of the project (read_confidential_issues). */
  allConfidential?: boolean;
  /** Group lists: projects under these namespaces. */
  namespaceIds?: number[];
  /** Milestone lists: issues of this milestone. */
  milestoneRowId?: number;
  /** Issues by id (closes_issues): still filtered by visibility. */
  ids?: number[];
  state?: 'opened' | 'closed' | 'all';
  scope?: 'created_by_me' | 'assigned_to_me' | 'all';
  search?: string;
  searchIn?: ('title' | 'description')[];
  confidential?: boolean;
  createdAfter?: Date;
  createdBefore?: Date;
  updatedAfter?: Date;
  updatedBefore?: Date;
  /** GitLab's due_date filter: 0 (none), any, today, tomorrow, overdue, week, month, next_month_and_previous_two_weeks. */
  dueDate?: string;
  /** Leave out archived projects (group and global lists; GitLab's non_archived, default true there). */
  nonArchived?: boolean;
  not?: IssueMatch;
  orderBy?: IssueOrder;
  sort?: 'asc' | 'desc';
}

export const ISSUE_ORDERS = [
  'created_at', 'updated_at', 'due_date', 'label_priority', 'milestone_due', 'popularity', 'priority', 'relative_position', 'title',
] as const;
export type IssueOrder = (typeof ISSUE_ORDERS)[number];


/**
 * SQL condition: the actor may read the issue aliased `i` of the project aliased `p` (the
 * project visible, the issues feature on — "private" for members — and a confidential issue
 * only for its author, its assignees, reporters and up, and administrators). Mirrors read_issue
 * and the confidential rule of policies for whole lists.
 */
export function readableIssues(actor: User | null): RawBuilder<boolean> {
  const level = sql`coalesce(p.settings->>'issues_access_level', 'enabled')`;
  const live = sql<boolean>`not p.pending_delete`;
  if (actor?.admin) return sql<boolean>`(${live} and ${level} <> 'disabled')`;
  if (!actor) return sql<boolean>`(${live} and p.visibility_level = 20 and ${level} in ('enabled', 'public') and not i.confidential)`;
  const minVisibility = actor.external ? 20 : 10;
  const member = sql<boolean>`p.id in ${MEMBER.projectIds(actor.id)}`;
  return sql<boolean>`(${live} and ${level} <> 'disabled'
    and ((p.visibility_level >= ${minVisibility} and ${level} in ('enabled', 'public')) or ${member})
    and ${confidentialIssue.where(actor)})`;
}

function matchConditions(m: IssueMatch, actor: User | null, negate: boolean): RawBuilder<boolean>[] {
  const out: RawBuilder<boolean>[] = [];
  const add = (c: RawBuilder<boolean>) => out.push(negate ? sql<boolean>`not (${c})` : c);
  // Every label must be on it; under not[], none of them may be (GitLab's negated labels).
  if (m.labels === 'none' || m.labels === 'any' || m.labels?.length) out.push(labelMatchCondition('Issue', sql`i.id`, m.labels, negate));
  if (m.milestone === 'none') add(sql`i.milestone_id is null`);
  else if (m.milestone === 'any') add(sql`i.milestone_id is not null`);
  else if (m.milestone !== undefined) add(sql`exists (select 1 from milestones ms where ms.id = i.milestone_id and ms.title = ${m.milestone})`);
  if (m.milestoneId === 'none') add(sql`i.milestone_id is null`);
  else if (m.milestoneId === 'any') add(sql`i.milestone_id is not null`);
  else if (m.milestoneId === 'started') {
    add(sql`exists (select 1 from milestones ms where ms.id = i.milestone_id and ms.state = 'active' and ms.start_date <= current_date)`);
  } else if (m.milestoneId === 'upcoming') {
    // The active milestone of the issue's project (or its groups) that comes due next.
    add(sql`i.milestone_id = (select ms.id from milestones ms join namespaces n on n.id = p.namespace_id
                               where ms.state = 'active' and ms.due_date > current_date
                                 and (ms.project_id = p.id or ms.group_id = any(n.traversal_ids))
                               order by ms.due_date, ms.id limit 1)`);
  }
  if (m.authorId !== undefined) add(sql`i.author_id = ${m.authorId}`);
  if (m.authorUsername !== undefined) add(sql`exists (select 1 from users u where u.id = i.author_id and lower(u.username) = lower(${m.authorUsername}))`);
  if (m.assigneeId === 'none') add(sql`not exists (select 1 from issue_assignees x where x.issue_id = i.id)`);
  else if (m.assigneeId === 'any') add(sql`exists (select 1 from issue_assignees x where x.issue_id = i.id)`);
  else if (m.assigneeId !== undefined) add(sql`exists (select 1 from issue_assignees x where x.issue_id = i.id and x.user_id = ${m.assigneeId})`);
  if (m.assigneeUsernames?.length) {
    // Every one of them is an assignee (under not[], none of them is): one count whatever their number.
    const names = [...new Set(m.assigneeUsernames.map((n) => n.toLowerCase()))];
    const matching = sql`from issue_assignees x join users u on u.id = x.user_id where x.issue_id = i.id and lower(u.username) = any(${names}::text[])`;
    out.push(negate ? sql<boolean>`not exists (select 1 ${matching})` : sql<boolean>`(select count(distinct x.user_id) ${matching}) = ${names.length}`);
  }
  if (m.myReactionEmoji !== undefined && actor) {
    const mine = sql`select 1 from award_emoji ae where ae.awardable_type = 'Issue' and ae.awardable_id = i.id and ae.user_id = ${actor.id}`;
    if (m.myReactionEmoji === 'none') add(sql`not exists (${mine})`);
    else if (m.myReactionEmoji === 'any') add(sql`exists (${mine})`);
    else add(sql`exists (${mine} and ae.name = ${m.myReactionEmoji})`);
  }
  if (m.iids?.length) add(sql`i.iid = any(${m.iids}::int[])`);
  if (m.issueType?.length) add(sql`i.issue_type = any(${m.issueType}::text[])`);
  return out;
}

/** GitLab's due_date filter values as conditions on i.due_date. */
function dueDateCondition(value: string): RawBuilder<boolean> {
  switch (value) {
    case '0': return sql`i.due_date is null`;
    case 'any': return sql`i.due_date is not null`;
    case 'today': return sql`i.due_date = current_date`;
    case 'tomorrow': return sql`i.due_date = current_date + 1`;
    case 'overdue': return sql`i.due_date < current_date`;
    case 'week': return sql`i.due_date between current_date and current_date + 7`;
    case 'month': return sql`i.due_date between current_date and current_date + 30`;
    default: return sql`i.due_date between current_date - 14 and (date_trunc('month', current_date) + interval '2 months - 1 day')::date`;
  }
}

function listQuery(db: Database, actor: User | null, f: IssueFilters) {
  const conds: RawBuilder<boolean>[] = [];
  if (f.projectId !== undefined) {
    conds.push(sql`i.project_id = ${f.projectId}`);
    if (!f.allConfidential) conds.push(confidentialIssue.where(actor));
  } else {
    conds.push(readableIssues(actor));
  }
  if (f.namespaceIds) conds.push(sql`p.namespace_id = any(${f.namespaceIds}::int[])`);
  if (f.milestoneRowId !== undefined) conds.push(sql`i.milestone_id = ${f.milestoneRowId}`);
  if (f.ids) conds.push(f.ids.length ? sql`i.id = any(${f.ids}::int[])` : sql`false`);
  if (f.nonArchived) conds.push(sql`not p.archived`);
  if (f.state && f.state !== 'all') conds.push(sql`i.state_id = ${ISSUE_STATE[f.state]}`);
  if (f.scope === 'created_by_me') conds.push(actor ? sql`i.author_id = ${actor.id}` : sql`false`);
  if (f.scope === 'assigned_to_me') conds.push(actor ? sql`exists (select 1 from issue_assignees x where x.issue_id = i.id and x.user_id = ${actor.id})` : sql`false`);
  if (f.search) {
    const pattern = `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const fields = f.searchIn?.length ? f.searchIn : ['title', 'description'];
    const parts = fields.map((field) => (field === 'title' ? sql`i.title ilike ${pattern}` : sql`i.description ilike ${pattern}`));
    conds.push(sql`(${sql.join(parts, sql` or `)})`);
  }
  if (f.confidential !== undefined) conds.push(sql`i.confidential = ${f.confidential}`);
  if (f.createdAfter) conds.push(sql`i.created_at >= ${f.createdAfter}`);
  if (f.createdBefore) conds.push(sql`i.created_at <= ${f.createdBefore}`);
  if (f.updatedAfter) conds.push(sql`i.updated_at >= ${f.updatedAfter}`);
  if (f.updatedBefore) conds.push(sql`i.updated_at <= ${f.updatedBefore}`);
  if (f.dueDate !== undefined) conds.push(dueDateCondition(f.dueDate));
  conds.push(...matchConditions(f, actor, false));
  if (f.not) conds.push(...matchConditions(f.not, actor, true));
  return db
    .selectFrom('issues as i')
    .innerJoin('projects as p', 'p.id', 'i.project_id')
    .where(sql.join(conds, sql` and `) as any);
}

/** The ORDER BY of a list: the chosen key in the chosen direction, nulls last where GitLab puts them there, id last. */
function ordering(f: IssueFilters): RawBuilder<unknown> {
  const dir = sql.raw(f.sort === 'asc' ? 'asc' : 'desc');
  const labelPriority = sql`(select min(lp.priority) from label_links ll join label_priorities lp on lp.label_id = ll.label_id and lp.project_id = i.project_id
                              where ll.target_type = 'Issue' and ll.target_id = i.id)`;
  const milestoneDue = sql`(select ms.due_date from milestones ms where ms.id = i.milestone_id)`;
  switch (f.orderBy) {
    case 'updated_at': return sql`i.updated_at ${dir}, i.id ${dir}`;
    case 'title': return sql`i.title ${dir}, i.id ${dir}`;
    case 'due_date': return sql`i.due_date ${dir} nulls last, i.id ${dir}`;
    case 'milestone_due': return sql`${milestoneDue} ${dir} nulls last, i.id ${dir}`;
    case 'label_priority': return sql`${labelPriority} ${dir} nulls last, i.id ${dir}`;
    case 'priority': return sql`${milestoneDue} ${dir} nulls last, ${labelPriority} ${dir} nulls last, i.id ${dir}`;
    case 'popularity':
      return sql`(select count(*) from award_emoji ae where ae.awardable_type = 'Issue' and ae.awardable_id = i.id and ae.name = 'thumbsup') ${dir}, i.id ${dir}`;
    // No manual ordering is kept: the order issues were made in.
    case 'relative_position': return sql`i.id ${dir}`;
    default: return sql`i.created_at ${dir}, i.id ${dir}`;
  }
}

/** A page of issues for the actor, with X-Total from the same statement. */
export async function listIssues(db: Database, actor: User | null, f: IssueFilters, page: { limit: number; offset: number }) {
  const rows = await listQuery(db, actor, f)
    .selectAll('i')
    .select(totalCount)
    .orderBy(ordering(f) as any)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return pageWithTotal(rows as (Issue & { total_count: number })[], page.offset, async () =>
    Number((await listQuery(db, actor, f).select(sql<number>`count(*)::int`.as('n')).executeTakeFirst())?.n ?? 0));
}

export async function findIssue(db: Database, projectId: number, iid: number): Promise<Issue | undefined> {
  return db.selectFrom('issues').selectAll().where('project_id', '=', projectId).where('iid', '=', iid).executeTakeFirst();
}

export async function findIssueById(db: Database, id: number): Promise<Issue | undefined> {
  return db.selectFrom('issues').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function issueAssigneeIds(db: Database, issueId: number): Promise<number[]> {
  return (await db.selectFrom('issue_assignees').select('user_id').where('issue_id', '=', issueId).execute()).map((r) => r.user_id);
}

/**
 * What the presenters show beyond each row, for a whole page in a fixed number of statements:
 * users, labels, milestones, note and award counts, merge requests that close it, project paths.
 */
export async function loadIssueExtras(
  db: Database,
  rows: Issue[],
  presentMilestone: (m: MilestoneView) => unknown,
): Promise<Map<number, IssueExtras>> {
  const out = new Map<number, IssueExtras>();
  if (!rows.length) return out;
  const ids = rows.map((r) => r.id);
  const projectIds = [...new Set(rows.map((r) => r.project_id))];
  const milestoneIds = [...new Set(rows.map((r) => r.milestone_id).filter((x): x is number => x !== null))];
  const [assignees, labels, milestones, notes, awardCounts, paths, closing] = await Promise.all([
    sql<{ issue_id: number; user_id: number }>`select issue_id, user_id from issue_assignees where issue_id = any(${ids}::int[])`.execute(db),
    labelRowsOf(db, 'Issue', ids),
    milestonesByIds(db, milestoneIds),
    sql<{ noteable_id: number; user_notes: number }>`
      select noteable_id, count(*) filter (where not system)::int as user_notes
        from notes where noteable_type = 'Issue' and noteable_id = any(${ids}::int[])
       group by noteable_id`.execute(db),
    voteCountsOf(db, 'Issue', ids),
    sql<{ id: number; full_path: string; path: string; namespace_id: number }>`
      select p.id, n.full_path || '/' || p.path as full_path, p.path, p.namespace_id from projects p join namespaces n on n.id = p.namespace_id
       where p.id = any(${projectIds}::int[])`.execute(db),
    sql<{ issue_id: number; n: number }>`
      select issue_id, count(*)::int as n from merge_requests_closing_issues where issue_id = any(${ids}::int[]) group by issue_id`.execute(db),
  ]);
  const userIds = [
    ...assignees.rows.map((a) => a.user_id),
    ...rows.flatMap((r) => [r.author_id, r.closed_by_id]).filter((x): x is number => x !== null),
  ];
  const users = await findUsersByIds(db, userIds);
  const projectOf = new Map(paths.rows.map((r) => [r.id, r]));
  const milestoneOf = new Map(milestones.map((m) => [m.id, m]));
  const noteCounts = new Map(notes.rows.map((r) => [r.noteable_id, r.user_notes]));
  const closingCounts = new Map(closing.rows.map((r) => [r.issue_id, r.n]));
  for (const r of rows) {
    const labelRows: LabelDetail[] = labels.filter((l) => l.target_id === r.id).map((l) => presentLabelBasic(l));
    const milestone = r.milestone_id !== null ? milestoneOf.get(r.milestone_id) : undefined;
    const project = projectOf.get(r.project_id);
    out.set(r.id, {
      author: r.author_id !== null ? users.get(r.author_id) ?? null : null,
      // GitLab lists assignees in the order they were added; the link table keeps no time, so by id.
      assignees: assignees.rows.filter((a) => a.issue_id === r.id).map((a) => users.get(a.user_id)).filter((u): u is User => !!u).sort((a, b) => a.id - b.id),
      closedBy: r.closed_by_id !== null ? users.get(r.closed_by_id) ?? null : null,
      labels: labelRows,
      milestone: milestone ? presentMilestone(milestone) : null,
      userNotesCount: noteCounts.get(r.id) ?? 0,
      upvotes: awardCounts.get(r.id)?.up ?? 0,
      downvotes: awardCounts.get(r.id)?.down ?? 0,
      mergeRequestsCount: closingCounts.get(r.id) ?? 0,
      projectFullPath: project?.full_path ?? '',
      projectPath: project?.path ?? '',
      namespaceId: project?.namespace_id ?? 0,
    });
  }
  return out;
}

/**
 * Open issues of projects as their project entity counts them (open_issues_count, GitLab's
 * OpenIssuesCountService): confidential ones too for reporters and up and administrators.
 */
export async function openIssueCounts(db: Database, user: User | null, projectIds: number[]): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  if (!projectIds.length) return counts;
  const confidential = readsConfidentialIssues.where(user, sql`i.project_id`);
  const rows = await sql<{ project_id: number; n: number }>`
    select i.project_id, count(*)::int as n from issues i
     where i.project_id = any(${projectIds}::int[]) and i.state_id = 1 and (not i.confidential or ${confidential})
     group by i.project_id`.execute(db);
  for (const r of rows.rows) counts.set(r.project_id, r.n);
  return counts;
}
