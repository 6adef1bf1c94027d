import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, User } from '../db/schema/core.js';
import type { Label, ResourceLabelEventsTable } from '../db/schema/work_items.js';
import type { Selectable } from 'kysely';
import { groupVisibleTo, projectVisibleTo } from '../policies/access.js';
import { confidentialIssue } from '../policies/rules.js';
import type { LabelCounts } from '../presenters/labels.js';
import type { ProjectRow } from '../presenters/projects.js';
import { pageWithTotal, totalCount } from './paging.js';

/**
 * Labels as GitLab's LabelsFinder sees them. A project sees its own labels and those of its group
 * (and, with `include_ancestor_groups`, of every group above); a group sees its labels, optionally
 * its ancestors' and descendants', and optionally the project labels of its projects. Lists are
 * ordered by title, as GitLab orders them. A project's readers may read every group above it (a
 * project is never more visible than its group, and its members see the groups above), so the
 * groups of a project's scope need no check of their own.
 */

/** A label with its priority in the project it is seen from (null when unprioritized or seen from a group). */
export type LabelRow = Label & { priority: number | null };

export interface LabelPage {
  limit: number;
  offset: number;
}

function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
}

/** The groups whose labels a project sees: its own group, or that group and every group above it. */
export function projectLabelGroupIds(project: ProjectRow, includeAncestorGroups: boolean): number[] {
  const ns = project.namespace;
  if (ns.type !== 'Group') return [];
  return includeAncestorGroups ? [...ns.traversal_ids] : [ns.id];
}

export interface GroupLabelScope {
  includeAncestorGroups: boolean;
  includeDescendantGroups: boolean;
  /** false: also the labels of the projects directly in the group (and in its subgroups with includeDescendantGroups). */
  onlyGroupLabels: boolean;
}

/** SQL condition on `l`: the label belongs to one of the projects or groups in scope. */
function projectScope(project: ProjectRow, includeAncestorGroups: boolean): RawBuilder<boolean> {
  const groupIds = projectLabelGroupIds(project, includeAncestorGroups);
  return sql<boolean>`(l.project_id = ${project.id} or l.group_id = any(${groupIds}::int[]))`;
}

function groupScope(user: User | null, group: Namespace, s: GroupLabelScope): RawBuilder<boolean> {
  const ancestors = s.includeAncestorGroups ? [...group.traversal_ids] : [group.id];
  const descendants = s.includeDescendantGroups
    ? sql<boolean>`or l.group_id in (select g.id from namespaces g where g.type = 'Group' and g.traversal_ids @> array[${group.id}::int] and ${groupVisibleTo(user)})`
    : sql<boolean>``;
  const namespaces = s.includeDescendantGroups
    ? sql`(select n.id from namespaces n where n.traversal_ids @> array[${group.id}::int])`
    : sql`(${group.id})`;
  // GitLab takes these from its projects finder with non_archived: archived projects' labels stay out.
  const projects = s.onlyGroupLabels
    ? sql<boolean>``
    : sql<boolean>`or l.project_id in (select p.id from projects p where p.namespace_id in ${namespaces}
        and not p.archived and not p.pending_delete and ${projectVisibleTo(user)})`;
  return sql<boolean>`(l.group_id = any(${ancestors}::int[]) ${descendants} ${projects})`;
}

function bySearch(search: string | undefined): RawBuilder<boolean> {
  if (!search) return sql<boolean>`true`;
  const pattern = likePattern(search);
  return sql<boolean>`(l.title ilike ${pattern} or l.description ilike ${pattern})`;
}

async function labelPage(db: Database, scope: RawBuilder<boolean>, priorityProjectId: number | null, search: string | undefined, page: LabelPage) {
  const base = db
    .selectFrom('labels as l')
    .leftJoin('label_priorities as lp', (join) => join.onRef('lp.label_id', '=', 'l.id').on('lp.project_id', '=', priorityProjectId ?? 0))
    .where(scope)
    .where(bySearch(search));
  const rows = await base.selectAll('l').select(['lp.priority', totalCount]).orderBy('l.title').orderBy('l.id').limit(page.limit).offset(page.offset).execute();
  return pageWithTotal(rows as (LabelRow & { total_count: number })[], page.offset, async () =>
    Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n),
  );
}

/** A page of the labels a project sees (GET /projects/:id/labels). */
export function listProjectLabels(db: Database, project: ProjectRow, f: { includeAncestorGroups: boolean; search?: string }, page: LabelPage) {
  return labelPage(db, projectScope(project, f.includeAncestorGroups), project.id, f.search, page);
}

/** A page of the labels a group sees (GET /groups/:id/labels). */
export function listGroupLabels(db: Database, user: User | null, group: Namespace, f: GroupLabelScope & { search?: string }, page: LabelPage) {
  return labelPage(db, groupScope(user, group, f), null, f.search, page);
}

/**
 * GitLab's find_label: a label in scope whose id is `idOrTitle`, else one whose title is. When a
 * title names several labels (a project label and a group label), the project's own wins, then
 * the nearest group's.
 */
async function findInScope(db: Database, scope: RawBuilder<boolean>, priorityProjectId: number | null, idOrTitle: string, groupOrder: number[]): Promise<LabelRow | undefined> {
  const id = /^\d+$/.test(idOrTitle) && Number(idOrTitle) <= 2147483647 ? Number(idOrTitle) : null;
  const rows = (await db
    .selectFrom('labels as l')
    .leftJoin('label_priorities as lp', (join) => join.onRef('lp.label_id', '=', 'l.id').on('lp.project_id', '=', priorityProjectId ?? 0))
    .where(scope)
    .where(id === null ? sql<boolean>`l.title = ${idOrTitle}` : sql<boolean>`(l.id = ${id} or l.title = ${idOrTitle})`)
    .selectAll('l')
    .select('lp.priority')
    .execute()) as LabelRow[];
  const byId = rows.find((r) => r.id === id);
  if (byId) return byId;
  const rank = (r: LabelRow) => (r.project_id !== null ? -1 : -groupOrder.indexOf(r.group_id!));
  return rows.filter((r) => r.title === idOrTitle).sort((a, b) => rank(a) - rank(b) || a.id - b.id)[0];
}

export function findProjectLabel(db: Database, project: ProjectRow, idOrTitle: string, includeAncestorGroups = true) {
  return findInScope(db, projectScope(project, includeAncestorGroups), project.id, idOrTitle, projectLabelGroupIds(project, true));
}

export function findGroupLabel(db: Database, user: User | null, group: Namespace, idOrTitle: string, scope: GroupLabelScope) {
  return findInScope(db, groupScope(user, group, scope), null, idOrTitle, [...group.traversal_ids]);
}

/** Is `title` taken among the labels a project or group sees (GitLab's "Label already exists")? */
export async function labelTitleTaken(db: Database, parent: { project: ProjectRow } | { group: Namespace }, title: string): Promise<boolean> {
  const scope = 'project' in parent ? projectScope(parent.project, true) : groupScope(null, parent.group, { includeAncestorGroups: true, includeDescendantGroups: false, onlyGroupLabels: true });
  const row = await db.selectFrom('labels as l').select('l.id').where(scope).where('l.title', '=', title).executeTakeFirst();
  return !!row;
}

/**
 * Issue and merge request counts of a page of labels, in one statement: the issues and merge
 * requests the caller may see (projects visible to them; a confidential issue only for its author,
 * its assignees and the project's reporters and up, as GitLab's IssuesFinder counts them).
 */
export async function labelCounts(db: Database, user: User | null, labelIds: number[]): Promise<Map<number, LabelCounts>> {
  const counts = new Map<number, LabelCounts>();
  if (labelIds.length === 0) return counts;
  const rows = await sql<{ label_id: number; open_issues: number; closed_issues: number; open_mrs: number }>`
    select ll.label_id,
           (count(*) filter (where ll.target_type = 'Issue' and i.state_id = 1))::int as open_issues,
           (count(*) filter (where ll.target_type = 'Issue' and i.state_id = 2))::int as closed_issues,
           (count(*) filter (where ll.target_type = 'MergeRequest' and mr.state_id = 1))::int as open_mrs
      from label_links ll
      left join issues i on ll.target_type = 'Issue' and i.id = ll.target_id
        and ${confidentialIssue.where(user)}
      left join merge_requests mr on ll.target_type = 'MergeRequest' and mr.id = ll.target_id
      left join projects p on p.id = coalesce(i.project_id, mr.target_project_id)
     where ll.label_id = any(${labelIds}::int[]) and p.id is not null and not p.pending_delete and ${projectVisibleTo(user)}
     group by ll.label_id`.execute(db);
  for (const r of rows.rows) counts.set(r.label_id, { open_issues_count: r.open_issues, closed_issues_count: r.closed_issues, open_merge_requests_count: r.open_mrs });
  return counts;
}

/**
 * The labels of a page the user is subscribed to, as GitLab's `subscribed` field tells it: a
 * subscription without a project counts everywhere, one made through a project only there.
 */
export async function subscribedLabelIds(db: Database, userId: number | undefined, labelIds: number[], projectId: number | null): Promise<Set<number>> {
  if (userId === undefined || labelIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('subscriptions')
    .select('subscribable_id')
    .where('subscribable_type', '=', 'Label')
    .where('user_id', '=', userId)
    .where('subscribable_id', 'in', labelIds)
    .where('subscribed', '=', true)
    .where((eb) => (projectId === null ? eb('project_id', 'is', null) : eb.or([eb('project_id', 'is', null), eb('project_id', '=', projectId)])))
    .execute();
  return new Set(rows.map((r) => r.subscribable_id));
}

export type ResourceLabelEvent = Selectable<ResourceLabelEventsTable>;

/** A label event with what its presenter shows: the label (null once deleted) and the user (null once deleted). */
export interface LabelEventView {
  event: ResourceLabelEvent;
  label: Label | null;
  user: User | null;
}

/**
 * The label events of an issue or merge request, oldest first (GET .../resource_label_events);
 * `page` for one page of them. Three statements whatever the number of events.
 */
export async function labelEventsOf(
  db: Database,
  targetType: 'Issue' | 'MergeRequest' | 'Epic',
  targetId: number,
  page?: LabelPage,
): Promise<{ rows: LabelEventView[]; total: number }> {
  let q = db.selectFrom('resource_label_events').selectAll().select(totalCount).where('target_type', '=', targetType).where('target_id', '=', targetId).orderBy('created_at').orderBy('id');
  if (page) q = q.limit(page.limit).offset(page.offset);
  const { rows: events, total } = await pageWithTotal(await q.execute(), page?.offset ?? 0, async () =>
    Number((await db.selectFrom('resource_label_events').select((eb) => eb.fn.countAll<number>().as('n')).where('target_type', '=', targetType).where('target_id', '=', targetId).executeTakeFirstOrThrow()).n),
  );
  const labelIds = [...new Set(events.map((e) => e.label_id).filter((id): id is number => id !== null))];
  const userIds = [...new Set(events.map((e) => e.user_id).filter((id): id is number => id !== null))];
  const labels = labelIds.length ? await db.selectFrom('labels').selectAll().where('id', 'in', labelIds).execute() : [];
  const users = userIds.length ? await db.selectFrom('users').selectAll().where('id', 'in', userIds).execute() : [];
  const labelById = new Map(labels.map((l) => [l.id, l]));
  const userById = new Map(users.map((u) => [u.id, u as User]));
  return {
    rows: events.map((event) => ({
      event,
      label: event.label_id === null ? null : (labelById.get(event.label_id) ?? null),
      user: event.user_id === null ? null : (userById.get(event.user_id) ?? null),
    })),
    total,
  };
}
