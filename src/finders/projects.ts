import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, Project } from '../db/schema/core.js';
import { rowId } from '../lib/ids.js';
import type { User } from '../db/schema/core.js';
import { activeMembership, projectVisibleTo, VISIBILITY_LEVELS } from '../policies/access.js';
import { atLeast, OWNER } from '../policies/rules.js';
import type { ProjectExtras, ProjectRow } from '../presenters/projects.js';
import type { SharedGroupLink } from '../presenters/groups.js';
import { pageWithTotal, totalCount } from './paging.js';
import { openIssueCounts } from './issues.js';

export type ProjectWithNamespace = Project & { namespace: Namespace };

/** A project as looked up for a request: with the caller's raw access level when a user was given. */
export type FoundProject = ProjectRow & { callerAccessLevel?: number };

/**
 * `:id` as GitLab takes it: an integer id or a (URL-decoded) full path like `group/sub/project`.
 * One query brings the namespace, its owner and, given a user, that user's access level.
 */
export async function findProject(db: Database, idOrPath: string | number, userId?: number): Promise<FoundProject | undefined> {
  return findProjectRow(db, idOrPath, userId);
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
  /** Direct forks of this project (GET /projects/:id/forks). */
  forkedFromProjectId?: number;
  /** Only these projects. */
  ids?: number[];
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
  const { namespace_json, owner_json, caller_access_level: _level, ...project } = row;
  return { ...(project as Project), namespace: { ...reviveNamespace(namespace_json), owner: owner_json ? reviveTimestamps<User>(owner_json) : null } };
}

const withRowJson = sql<Namespace>`to_jsonb(n)`.as('namespace_json');
const withOwnerJson = sql<User | null>`case when o.id is null then null else to_jsonb(o) end`.as('owner_json');

/** One project (id or full path) with its namespace, the namespace owner and, given a user, their level. */
export async function findProjectRow(db: Database, idOrPath: string | number, userId?: number): Promise<FoundProject | undefined> {
  const key = String(idOrPath);
  let q = projectRowsQuery(db).selectAll('p').select([withRowJson, withOwnerJson]);
  if (userId !== undefined) q = q.select(sql<number>`project_access_level(${userId}, p.id)`.as('caller_access_level'));
  if (/^\d+$/.test(key)) {
    const id = rowId(key);
    if (id === undefined) return undefined;
    q = q.where('p.id', '=', id);
  } else {
    const slash = key.lastIndexOf('/');
    if (slash <= 0) return undefined;
    q = q.where(sql`lower(n.full_path)`, '=', key.slice(0, slash).toLowerCase()).where(sql`lower(p.path)`, '=', key.slice(slash + 1).toLowerCase());
  }
  const row = await q.executeTakeFirst();
  if (!row) return undefined;
  return { ...toProjectRow(row), callerAccessLevel: (row as { caller_access_level?: number }).caller_access_level };
}

/** Projects by id, as findProjectRow gives them, in one statement; ids that name none are left out. */
export async function findProjectRowsByIds(db: Database, ids: number[], userId?: number): Promise<Map<number, FoundProject>> {
  const unique = [...new Set(ids)];
  if (!unique.length) return new Map();
  let q = projectRowsQuery(db).selectAll('p').select([withRowJson, withOwnerJson]).where('p.id', 'in', unique);
  if (userId !== undefined) q = q.select(sql<number>`project_access_level(${userId}, p.id)`.as('caller_access_level'));
  const rows = await q.execute();
  return new Map(rows.map((row) => [row.id, { ...toProjectRow(row), callerAccessLevel: (row as { caller_access_level?: number }).caller_access_level }]));
}

function likePattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
}

function filteredProjects(db: Database, user: User | null, f: ProjectFilters) {
  let q = projectRowsQuery(db).where(projectVisibleTo(user));
  const needsUser = f.owned || f.membership || f.starred || f.minAccessLevel !== undefined;
  if (needsUser && !user) return q.where(sql<boolean>`false`);
  if (user && f.owned) q = q.where(sql<boolean>`p.id in ${OWNER.projectIds(user.id)}`);
  if (user && f.membership) q = q.where(sql<boolean>`p.id in (select project_id from project_authorizations(${user.id}))`);
  if (user && f.minAccessLevel !== undefined) {
    q = q.where(sql<boolean>`p.id in ${atLeast(f.minAccessLevel).projectIds(user.id)}`);
  }
  if (user && f.starred) q = q.where(sql<boolean>`p.id in (select project_id from users_star_projects where user_id = ${user.id})`);
  if (f.starredBy !== undefined) q = q.where(sql<boolean>`p.id in (select project_id from users_star_projects where user_id = ${f.starredBy})`);
  if (f.forkedFromProjectId !== undefined) {
    q = q.where(sql<boolean>`p.id in (select project_id from fork_network_members where forked_from_project_id = ${f.forkedFromProjectId})`);
  }
  if (f.ids) q = q.where('p.id', 'in', f.ids.length ? f.ids : [-1]);
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
                  and share_active(expires_at)))`);
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

/** A page of projects visible to `user`, with the total for the pagination headers (one statement). */
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
  if (page.withTotal === false) return { rows: (await q.limit(page.limit).offset(page.offset).execute()).map(toProjectRow), total: 0 };
  const counted = await q.select(totalCount).limit(page.limit).offset(page.offset).execute();
  const { rows, total } = await pageWithTotal(counted, page.offset, async () => (await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n);
  return { rows: rows.map(toProjectRow), total };
}

/**
 * Everything the project presenters need beyond the rows, for a whole page in ONE query: the
 * caller's levels, membership levels (permissions), star counts and group shares. A single
 * read passes the level it already computed (`knownAccessLevel`, admin-adjusted).
 */
export async function loadProjectExtras(
  db: Database,
  user: User | null,
  rows: ProjectRow[],
  knownAccessLevel?: number,
): Promise<Map<number, Omit<ProjectExtras, 'readmePath'>>> {
  const ids = rows.map((r) => r.id);
  const result = new Map<number, Omit<ProjectExtras, 'readmePath'>>();
  if (ids.length === 0) return result;
  const uid = user?.id ?? 0;
  const levelJoin =
    user && knownAccessLevel === undefined
      ? sql`left join (select project_id, max(access_level)::int as level from project_authorizations(${uid}) group by project_id) a on a.project_id = p.id`
      : sql`left join (select null::int as project_id, null::int as level) a on false`;
  const found = await sql<{
    id: number;
    level: number | null;
    project_member: number | null;
    group_member: number | null;
    stars: number;
    forks: number;
    forked_from: number | null;
    links: (SharedGroupLink & { project_id?: number })[];
  }>`
    select p.id, a.level,
      (select max(m.access_level)::int from members m
        where m.user_id = ${uid} and m.source_type = 'Project' and m.source_id = p.id and ${activeMembership}) as project_member,
      (select max(m.access_level)::int from members m
        where n.type = 'Group' and m.user_id = ${uid} and m.source_type = 'Namespace'
          and m.source_id = any(n.traversal_ids) and ${activeMembership}) as group_member,
      (select count(*)::int from users_star_projects s where s.project_id = p.id) as stars,
      (select count(*)::int from fork_network_members f where f.forked_from_project_id = p.id) as forks,
      (select f.forked_from_project_id from fork_network_members f where f.project_id = p.id) as forked_from,
      coalesce((select json_agg(json_build_object(
                  'group_id', g.id, 'group_name', g.name, 'group_full_path', g.full_path,
                  'group_access', l.group_access, 'expires_at', to_char(l.expires_at, 'YYYY-MM-DD')) order by l.id)
                from project_group_links l join namespaces g on g.id = l.group_id where l.project_id = p.id), '[]'::json) as links
    from projects p join namespaces n on n.id = p.namespace_id
    ${levelJoin}
    where p.id = any(${ids}::int[])`.execute(db);
  const byId = new Map(found.rows.map((r) => [r.id, r]));
  const openIssues = await openIssueCounts(db, user, ids);
  for (const r of rows) {
    const x = byId.get(r.id);
    const level = knownAccessLevel ?? (user?.admin ? Math.max(x?.level ?? 0, 50) : (x?.level ?? 0));
    const ownsPersonal = user && r.namespace.type === 'User' && r.namespace.owner_id === user.id;
    result.set(r.id, {
      accessLevel: level,
      admin: !!user?.admin,
      starCount: x?.stars ?? 0,
      forksCount: x?.forks ?? 0,
      forkedFromId: x?.forked_from ?? null,
      openIssuesCount: openIssues.get(r.id) ?? 0,
      sharedWithGroups: x?.links ?? [],
      projectAccess: ownsPersonal ? 50 : (user ? (x?.project_member ?? null) : null),
      groupAccess: user ? (x?.group_member || null) : null,
    });
  }
  return result;
}

/** Is the project in the group or one of its subgroups? */
export async function projectInGroupTree(db: Database, projectId: number, groupId: number): Promise<boolean> {
  const found = await db
    .selectFrom('projects as p')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .select('p.id')
    .where('p.id', '=', projectId)
    .where((eb) => eb(eb.ref('n.traversal_ids'), '@>', eb.val([groupId]) as any))
    .executeTakeFirst();
  return !!found;
}

/** Who starred a project, newest first; private profiles only to themselves and administrators. */
export async function listStarrers(db: Database, projectId: number, viewer: User | null, search: string | undefined, page: { perPage: number; offset: number }) {
  let base = db.selectFrom('users_star_projects as s').innerJoin('users as u', 'u.id', 's.user_id').where('s.project_id', '=', projectId);
  if (search) base = base.where((eb) => eb.or([eb('u.name', 'ilike', likePattern(search)), eb('u.username', 'ilike', likePattern(search))]));
  if (!viewer?.admin) base = base.where((eb) => eb.or([eb('u.private_profile', '=', false), eb('u.id', '=', viewer?.id ?? -1)]));
  const rows = await base.selectAll('u').select('s.created_at as starred_since').orderBy('s.id', 'desc').limit(page.perPage).offset(page.offset).execute();
  const total = await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
  return { rows: rows.map(({ starred_since, ...u }) => ({ starredSince: starred_since, user: u as unknown as User })), total: Number(total.n) };
}

/**
 * Active users with access to a project (GET /projects/:id/users): everyone the access rules
 * give a level on it (SQL project_authorized_users, migration 0700_access_rules).
 */
export async function listProjectUsers(
  db: Database,
  project: ProjectRow,
  opts: { search?: string; skip: number[] },
  page: { perPage: number; offset: number },
) {
  let base = db
    .selectFrom('users as u')
    .where('u.state', '=', 'active')
    .where(sql<boolean>`u.id in (select user_id from project_authorized_users(${project.id}))`);
  if (opts.search) base = base.where((eb) => eb.or([eb('u.name', 'ilike', likePattern(opts.search!)), eb('u.username', 'ilike', likePattern(opts.search!))]));
  if (opts.skip.length) base = base.where('u.id', 'not in', opts.skip);
  const rows = await base.selectAll('u').orderBy('u.id').limit(page.perPage).offset(page.offset).execute();
  const total = await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
  return { rows, total: Number(total.n) };
}
