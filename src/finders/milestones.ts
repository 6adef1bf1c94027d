import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, User } from '../db/schema/core.js';
import type { Milestone } from '../db/schema/work_items.js';
import { groupVisibleTo, projectVisibleTo } from '../policies/access.js';
import type { ProjectRow } from '../presenters/projects.js';
import { pageWithTotal, totalCount } from './paging.js';

/** A milestone with the full path of its project or group (for its web_url). */
export type MilestoneRow = Milestone & { project_full_path: string | null; group_full_path: string | null };

/** Whose milestones a list shows: some projects' and some groups'. */
export interface MilestoneScope {
  projectIds: RawBuilder<number[]> | number[];
  groupIds: RawBuilder<number[]> | number[];
}

export interface MilestoneFilters {
  state?: 'active' | 'closed' | 'all';
  /** Ignored with ancestors included, as GitLab ignores it. */
  iids?: number[];
  title?: string;
  /** Title or description contains it. */
  search?: string;
  updatedBefore?: Date;
  updatedAfter?: Date;
}

/**
 * GitLab's project milestone scope: the project's, and with `include_ancestors` those of its group
 * and every group above (a project's readers may read those groups).
 */
export function projectMilestoneScope(project: ProjectRow, includeAncestors: boolean): MilestoneScope {
  const ns = project.namespace;
  return { projectIds: [project.id], groupIds: includeAncestors && ns.type === 'Group' ? [...ns.traversal_ids] : [] };
}

/**
 * GitLab's group milestone scope: the group's; with `include_ancestors` the groups above; with
 * `include_descendants` the subgroups and the projects of the whole tree, as far as the caller
 * may see them.
 */
export function groupMilestoneScope(user: User | null, group: Namespace, includeAncestors: boolean, includeDescendants: boolean): MilestoneScope {
  if (!includeAncestors && !includeDescendants) return { projectIds: [], groupIds: [group.id] };
  const ancestors = includeAncestors ? [...group.traversal_ids] : [group.id];
  const tree = includeDescendants ? sql<boolean>`or g.traversal_ids @> array[${group.id}::int]` : sql<boolean>``;
  return {
    groupIds: sql<number[]>`(select g.id from namespaces g where g.type = 'Group' and (g.id = any(${ancestors}::int[]) ${tree}) and ${groupVisibleTo(user)})`,
    projectIds: includeDescendants
      ? sql<number[]>`(select p.id from projects p join namespaces pn on pn.id = p.namespace_id
          where pn.traversal_ids @> array[${group.id}::int] and not p.pending_delete and ${projectVisibleTo(user)})`
      : [],
  };
}

function inList(column: RawBuilder<unknown>, ids: RawBuilder<number[]> | number[]): RawBuilder<boolean> {
  if (Array.isArray(ids)) return ids.length ? sql<boolean>`${column} = any(${ids}::int[])` : sql<boolean>`false`;
  return sql<boolean>`${column} in ${ids}`;
}

function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
}

function milestoneRows(db: Database) {
  return db
    .selectFrom('milestones as m')
    .leftJoin('projects as mp', 'mp.id', 'm.project_id')
    .leftJoin('namespaces as mpn', 'mpn.id', 'mp.namespace_id')
    .leftJoin('namespaces as mg', 'mg.id', 'm.group_id');
}

const fullPaths = [
  sql<string | null>`case when mp.id is null then null else mpn.full_path || '/' || mp.path end`.as('project_full_path'),
  sql<string | null>`mg.full_path`.as('group_full_path'),
];

/** A page of milestones: scope first, then one step per filter; GitLab's order (due date first, undated last, newest first). */
export async function listMilestones(db: Database, scope: MilestoneScope, f: MilestoneFilters, page: { limit: number; offset: number }) {
  let q = milestoneRows(db).where((eb) => eb.or([inList(sql`m.project_id`, scope.projectIds), inList(sql`m.group_id`, scope.groupIds)]));
  if (f.state === 'active' || f.state === 'closed') q = q.where('m.state', '=', f.state);
  if (f.iids?.length) q = q.where('m.iid', 'in', f.iids);
  if (f.title !== undefined) q = q.where('m.title', '=', f.title);
  if (f.search) {
    const pattern = likePattern(f.search);
    q = q.where(sql<boolean>`(m.title ilike ${pattern} or m.description ilike ${pattern})`);
  }
  if (f.updatedBefore) q = q.where('m.updated_at', '<', f.updatedBefore);
  if (f.updatedAfter) q = q.where('m.updated_at', '>', f.updatedAfter);
  const rows = await q
    .selectAll('m')
    .select([...fullPaths, totalCount])
    .orderBy(sql`m.due_date asc nulls last`)
    .orderBy('m.id', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return pageWithTotal(rows as (MilestoneRow & { total_count: number })[], page.offset, async () =>
    Number((await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n),
  );
}

/** One milestone of a project or group by id (GitLab looks milestones up by id, not iid, in its API). */
export async function findMilestone(db: Database, parent: { projectId: number } | { groupId: number }, id: number): Promise<MilestoneRow | undefined> {
  const q = milestoneRows(db).selectAll('m').select(fullPaths).where('m.id', '=', id);
  const row = await ('projectId' in parent ? q.where('m.project_id', '=', parent.projectId) : q.where('m.group_id', '=', parent.groupId)).executeTakeFirst();
  return row as MilestoneRow | undefined;
}

/** Milestones of a scope by title (a release names its milestones by title), with their paths. */
export async function milestonesByTitle(db: Database, scope: MilestoneScope, titles: string[]): Promise<MilestoneRow[]> {
  if (!titles.length) return [];
  const rows = await milestoneRows(db)
    .selectAll('m')
    .select(fullPaths)
    .where((eb) => eb.or([inList(sql`m.project_id`, scope.projectIds), inList(sql`m.group_id`, scope.groupIds)]))
    .where('m.title', 'in', titles)
    .orderBy('m.id')
    .execute();
  return rows as MilestoneRow[];
}

/** Milestones by id with their paths, in any project or group (the caller has scoped the ids). */
export async function milestonesByIds(db: Database, ids: number[]): Promise<MilestoneRow[]> {
  if (!ids.length) return [];
  const rows = await milestoneRows(db).selectAll('m').select(fullPaths).where('m.id', 'in', ids).orderBy('m.id').execute();
  return rows as MilestoneRow[];
}
