import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, Project } from '../db/schema/core.js';
import { rowId } from '../lib/ids.js';
import type { User } from '../db/schema/core.js';
import { activeMembership, projectVisibleTo, VISIBILITY_LEVELS } from '../policies/access.js';
import type { ProjectExtras, ProjectRow } from '../presenters/projects.js';
import type { SharedGroupLink } from '../presenters/groups.js';

export type ProjectWithNamespace = Project & { namespace: Namespace };

/**
 * `:id` as GitLab takes it: an integer id or a (URL-decoded) full path like `group/sub/project`.
 * One query; the namespace comes along because nearly every caller needs it.
 */
export async function findProject(db: Database, idOrPath: string | number): Promise<ProjectWithNamespace | undefined> {
  const key = String(idOrPath);
  let q = db
    .selectFrom('projects as p')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .selectAll('p')
    .select(sql<Namespace>`to_jsonb(n)`.as('namespace_json'));
  if (/^\d+$/.test(key)) {
    const id = rowId(key);
    if (id === undefined) return undefined;
    q = q.where('p.id', '=', id);
  } else {
    const slash = key.lastIndexOf('/');
    if (slash <= 0) return undefined;
    q = q
      .where(sql`lower(n.full_path)`, '=', key.slice(0, slash).toLowerCase())
      .where(sql`lower(p.path)`, '=', key.slice(slash + 1).toLowerCase());
  }
  const row = await q.where('p.pending_delete', '=', false).executeTakeFirst();
  if (!row) return undefined;
  const { namespace_json, ...project } = row as any;
  return { ...(project as Project), namespace: reviveNamespace(namespace_json) };
}

/** to_jsonb turns timestamps into strings; give them back their Date type. */
export function reviveNamespace(json: any): Namespace {
  return { ...json, created_at: new Date(json.created_at), updated_at: new Date(json.updated_at) };
}

export function projectFullPath(p: ProjectWithNamespace): string {
  return `${p.namespace.full_path}/${p.path}`;
}

export function projectFullName(p: ProjectWithNamespace): string {
  return `${p.namespace.full_name} / ${p.name}`;
}

// ---------------------------------------------------------------------------------------------
// Lists: visibility first, then one step per filter; one builder for the page and the total.

export type ProjectOrder = 'id' | 'name' | 'path' | 'created_at' | 'updated_at' | 'last_activity_at' | 'similarity' | 'star_count';

export interface ProjectFilters {
  archived?: boolean;
  visibility?: string;
  search?: string;
  searchNamespaces?: boolean;
  owned?: boolean;
  membership?: boolean;
  starred?: boolean;
  minAccessLevel?: number;
  idAfter?: number;
  idBefore?: number;
  lastActivityAfter?: Date;
  lastActivityBefore?: Date;
  createdAfter?: Date;
  createdBefore?: Date;
  updatedAfter?: Date;
  updatedBefore?: Date;
  /** Administrators only; the route drops it for others. */
  repositoryStorage?: string;
  withIssuesEnabled?: boolean;
  withMergeRequestsEnabled?: boolean;
  /** Every topic must be present. */
  topics?: string[];
  /** Projects directly in one of these namespaces. */
  namespaceIds?: number[];
  /** Projects shared with this group (project_group_links). */
  sharedWithGroupId?: number;
  /** Projects in these namespaces or shared with this group (a group's project list). */
  groupScope?: { namespaceIds: number[]; sharedWithGroupId?: number };
  /** Projects starred by this user. */
  starredBy?: number;
  orderBy?: ProjectOrder;
  sort?: 'asc' | 'desc';
}

/** Turns to_jsonb() timestamps back into Dates. */
function reviveTimestamps<T>(json: any): T {
  if (!json) return json;
  const out: any = { ...json };
  for (const [k, v] of Object.entries(out)) if (k.endsWith('_at') && typeof v === 'string') out[k] = new Date(v);
  return out as T;
}

function projectRowsQuery(db: Database) {
  return db
    .selectFrom('projects as p')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .leftJoin('users as o', 'o.id', 'n.owner_id')
    .where('p.pending_delete', '=', false);
}

function toProjectRow(row: any): ProjectRow {
  const { namespace_json, owner_json, ...project } = row;
  return { ...(project as Project), namespace: { ...reviveNamespace(namespace_json), owner: owner_json ? reviveTimestamps<User>(owner_json) : null } };
}

const withRowJson = sql<Namespace>`to_jsonb(n)`.as('namespace_json');
const withOwnerJson = sql<User | null>`case when o.id is null then null else to_jsonb(o) end`.as('owner_json');

/** One project (id or full path) with its namespace and the namespace owner. */
export async function findProjectRow(db: Database, idOrPath: string | number): Promise<ProjectRow | undefined> {
  const key = String(idOrPath);
  let q = projectRowsQuery(db).selectAll('p').select([withRowJson, withOwnerJson]);
  if (/^\d+$/.test(key)) q = q.where('p.id', '=', Number(key));
  else {
    const slash = key.lastIndexOf('/');
    if (slash <= 0) return undefined;
    q = q.where(sql`lower(n.full_path)`, '=', key.slice(0, slash).toLowerCase()).where(sql`lower(p.path)`, '=', key.slice(slash + 1).toLowerCase());
  }
  const row = await q.executeTakeFirst();
  return row ? toProjectRow(row) : undefined;
}

function likePattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
}

function filteredProjects(db: Database, user: User | null, f: ProjectFilters) {
  let q = projectRowsQuery(db).where(projectVisibleTo(user));
  const needsUser = f.owned || f.membership || f.starred || f.minAccessLevel !== undefined;
  if (needsUser && !user) return q.where(sql<boolean>`false`);
  if (user && f.owned) q = q.where(sql<boolean>`p.id in (select project_id from project_authorizations(${user.id}) where access_level >= 50)`);
  if (user && f.membership) q = q.where(sql<boolean>`p.id in (select project_id from project_authorizations(${user.id}))`);
  if (user && f.minAccessLevel !== undefined) {
    q = q.where(sql<boolean>`p.id in (select project_id from project_authorizations(${user.id}) where access_level >= ${f.minAccessLevel})`);
  }
  if (user && f.starred) q = q.where(sql<boolean>`p.id in (select project_id from users_star_projects where user_id = ${user.id})`);
  if (f.starredBy !== undefined) q = q.where(sql<boolean>`p.id in (select project_id from users_star_projects where user_id = ${f.starredBy})`);
  if (f.archived !== undefined) q = q.where('p.archived', '=', f.archived);
  if (f.visibility) q = q.where('p.visibility_level', '=', VISIBILITY_LEVELS[f.visibility] ?? -1);
  if (f.search) {
    const pattern = likePattern(f.search);
    q = q.where((eb) =>
      eb.or([
        eb('p.name', 'ilike', pattern),
        eb('p.path', 'ilike', pattern),
        eb('p.description', 'ilike', pattern),
        ...(f.searchNamespaces
          ? [eb(sql`n.full_path || '/' || p.path`, 'ilike', pattern), eb(sql`n.full_name || ' / ' || p.name`, 'ilike', pattern)]
          : []),
      ]),
    );
  }
  if (f.idAfter !== undefined) q = q.where('p.id', '>', f.idAfter);
  if (f.idBefore !== undefined) q = q.where('p.id', '<', f.idBefore);
  if (f.lastActivityAfter) q = q.where('p.last_activity_at', '>', f.lastActivityAfter);
  if (f.lastActivityBefore) q = q.where('p.last_activity_at', '<', f.lastActivityBefore);
  if (f.createdAfter) q = q.where('p.created_at', '>', f.createdAfter);
  if (f.createdBefore) q = q.where('p.created_at', '<', f.createdBefore);
  if (f.updatedAfter) q = q.where('p.updated_at', '>', f.updatedAfter);
  if (f.updatedBefore) q = q.where('p.updated_at', '<', f.updatedBefore);
  if (f.repositoryStorage) q = q.where('p.repository_storage', '=', f.repositoryStorage);
  if (f.withIssuesEnabled) q = q.where(sql<boolean>`coalesce(p.settings->>'issues_access_level', 'enabled') <> 'disabled'`);
  if (f.withMergeRequestsEnabled) q = q.where(sql<boolean>`coalesce(p.settings->>'merge_requests_access_level', 'enabled') <> 'disabled'`);
  if (f.topics?.length) q = q.where(sql<boolean>`p.topics @> ${f.topics}::text[]`);
  if (f.namespaceIds) q = q.where('p.namespace_id', 'in', f.namespaceIds.length ? f.namespaceIds : [-1]);
  if (f.groupScope) {
    const { namespaceIds, sharedWithGroupId } = f.groupScope;
    q = q.where(sql<boolean>`(p.namespace_id = any(${namespaceIds}::int[])
      or p.id in (select project_id from project_group_links where group_id = ${sharedWithGroupId ?? -1}
                  and (expires_at is null or expires_at > current_date)))`);
  }
  if (f.sharedWithGroupId !== undefined) {
    q = q.where(sql<boolean>`p.id in (select project_id from project_group_links where group_id = ${f.sharedWithGroupId})`);
  }
  return q;
}

function orderExpression(f: ProjectFilters) {
  switch (f.orderBy) {
    case 'id': return sql`p.id`;
    case 'name': return sql`lower(p.name)`;
    case 'path': return sql`lower(p.path)`;
    case 'updated_at': return sql`p.updated_at`;
    case 'last_activity_at': return sql`p.last_activity_at`;
    case 'star_count': return sql`(select count(*) from users_star_projects s where s.project_id = p.id)`;
    default: return sql`p.created_at`;
  }
}

/** A page of projects visible to `user`, with the total for the pagination headers. */
export async function listProjects(db: Database, user: User | null, f: ProjectFilters, page: { limit: number; offset: number; withTotal?: boolean }) {
  const base = filteredProjects(db, user, f);
  const dir = f.sort === 'asc' ? sql`asc` : sql`desc`;
  let q = base.selectAll('p').select([withRowJson, withOwnerJson]);
  if (f.orderBy === 'similarity' && f.search) {
    // Closest names first: exact, then prefix, then anywhere; newest first among equals.
    const s = f.search.toLowerCase();
    q = q.orderBy(sql`case when lower(p.name) = ${s} or lower(p.path) = ${s} then 0 when lower(p.name) like ${s.replace(/[\\%_]/g, (c) => '\\' + c) + '%'} then 1 else 2 end`).orderBy('p.id', 'desc');
  } else {
    q = q.orderBy(sql`${orderExpression(f)} ${dir}`).orderBy(sql`p.id ${dir}`);
  }
  const rows = await q.limit(page.limit).offset(page.offset).execute();
  let total = 0;
  if (page.withTotal !== false) {
    const count = await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
    total = Number(count.n);
  }
  return { rows: rows.map(toProjectRow), total };
}

/**
 * Everything the project presenters need beyond the rows, for a whole page at once: the
 * caller's levels, membership levels (permissions), star counts and group shares.
 */
export async function loadProjectExtras(db: Database, user: User | null, rows: ProjectRow[]): Promise<Map<number, Omit<ProjectExtras, 'readmePath'>>> {
  const ids = rows.map((r) => r.id);
  const result = new Map<number, Omit<ProjectExtras, 'readmePath'>>();
  if (ids.length === 0) return result;
  const levels = new Map<number, number>();
  const projectMember = new Map<number, number>();
  const groupMember = new Map<number, number>();
  if (user) {
    const auth = await sql<{ project_id: number; level: number }>`
      select project_id, max(access_level)::int as level from project_authorizations(${user.id})
       where project_id = any(${ids}::int[]) group by project_id`.execute(db);
    for (const r of auth.rows) levels.set(r.project_id, r.level);
    const nsIds = [...new Set(rows.flatMap((r) => (r.namespace.type === 'Group' ? r.namespace.traversal_ids : [])))];
    const members = await sql<{ source_type: string; source_id: number; access_level: number }>`
      select m.source_type, m.source_id, m.access_level from members m
       where m.user_id = ${user.id} and ${activeMembership}
         and ((m.source_type = 'Project' and m.source_id = any(${ids}::int[]))
           or (m.source_type = 'Namespace' and m.source_id = any(${nsIds}::int[])))`.execute(db);
    for (const m of members.rows) (m.source_type === 'Project' ? projectMember : groupMember).set(m.source_id, m.access_level);
  }
  const stars = await sql<{ project_id: number; n: number }>`
    select project_id, count(*)::int as n from users_star_projects where project_id = any(${ids}::int[]) group by project_id`.execute(db);
  const starCounts = new Map(stars.rows.map((r) => [r.project_id, r.n]));
  const links = await sql<SharedGroupLink & { project_id: number }>`
    select l.project_id, g.id as group_id, g.name as group_name, g.full_path as group_full_path, l.group_access,
           to_char(l.expires_at, 'YYYY-MM-DD') as expires_at
      from project_group_links l join namespaces g on g.id = l.group_id
     where l.project_id = any(${ids}::int[]) order by l.id`.execute(db);
  for (const r of rows) {
    const level = levels.get(r.id) ?? 0;
    const ownsPersonal = user && r.namespace.type === 'User' && r.namespace.owner_id === user.id;
    const groupLevels = r.namespace.type === 'Group' ? r.namespace.traversal_ids.map((id) => groupMember.get(id) ?? 0) : [];
    result.set(r.id, {
      accessLevel: user?.admin ? Math.max(level, 50) : level,
      admin: !!user?.admin,
      starCount: starCounts.get(r.id) ?? 0,
      forksCount: 0,
      openIssuesCount: 0,
      sharedWithGroups: links.rows.filter((l) => l.project_id === r.id).map(({ project_id: _p, ...l }) => l),
      projectAccess: ownsPersonal ? 50 : (projectMember.get(r.id) ?? null),
      groupAccess: groupLevels.length ? Math.max(...groupLevels) || null : null,
    });
  }
  return result;
}
