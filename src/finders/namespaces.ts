import { rowId } from '../lib/ids.js';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { NamespaceCounts, NamespaceWithOwner } from '../presenters/namespaces.js';
import { ANY_ACCESS, OWNER } from '../policies/rules.js';

export interface NamespaceFilters {
  search?: string;
  ownedOnly?: boolean;
  topLevelOnly?: boolean;
}

function withOwner(row: any): NamespaceWithOwner {
  const { owner_json, ...ns } = row;
  return { ...ns, owner: owner_json ? { ...owner_json, created_at: new Date(owner_json.created_at) } : null };
}

function namespacesQuery(db: Database) {
  return db
    .selectFrom('namespaces as n')
    .leftJoin('users as o', 'o.id', 'n.owner_id')
    .selectAll('n')
    .select(sql<any>`case when o.id is null then null else to_jsonb(o) end`.as('owner_json'));
}

/** GET /namespaces: the caller's own namespace and the groups they belong to; everything for admins. */
export async function listNamespaces(db: Database, user: User, f: NamespaceFilters, page: { limit: number; offset: number }) {
  let base = db.selectFrom('namespaces as n');
  if (!user.admin || f.ownedOnly) {
    const groups = f.ownedOnly ? OWNER : ANY_ACCESS;
    base = base.where((eb) =>
      eb.or([
        eb.and([eb('n.type', '=', 'User'), eb('n.owner_id', '=', user.id)]),
        eb(sql`n.id`, 'in', groups.groupIds(user.id)),
      ]),
    );
  }
  if (f.topLevelOnly) base = base.where('n.parent_id', 'is', null);
  if (f.search) {
    const pattern = `%${f.search.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
    base = base.where((eb) => eb.or([eb('n.name', 'ilike', pattern), eb('n.path', 'ilike', pattern), eb('n.full_path', 'ilike', pattern)]));
  }
  const ids = base.select('n.id');
  const rows = await namespacesQuery(db).where('n.id', 'in', ids).orderBy('n.id').limit(page.limit).offset(page.offset).execute();
  const count = await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow();
  return { rows: rows.map(withOwner), total: Number(count.n) };
}

/** A namespace by id or full path (user or group), with its owner. */
export async function findNamespace(db: Database, idOrPath: string | number): Promise<NamespaceWithOwner | undefined> {
  const key = String(idOrPath);
  const q = namespacesQuery(db);
  if (/^\d+$/.test(key)) {
    const id = rowId(key);
    if (id === undefined) return undefined;
    const byId = await q.where('n.id', '=', id).executeTakeFirst();
    return byId ? withOwner(byId) : undefined;
  }
  const row = await q.where(sql`lower(n.full_path)`, '=', key.toLowerCase()).executeTakeFirst();
  return row ? withOwner(row) : undefined;
}

/** Those of `groupIds` in which the user has the Owner role (directly, through an ancestor or a share). */
export async function ownedGroupIds(db: Database, userId: number, groupIds: number[]): Promise<number[]> {
  if (!groupIds.length) return [];
  const rows = await sql<{ group_id: number }>`select group_id from group_authorizations(${userId}) ga where ${OWNER.level(sql`ga.access_level`)} and group_id = any(${groupIds}::int[])`.execute(db);
  return rows.rows.map((r) => r.group_id);
}

/** The full path of the group `id`; undefined when no group has that id. */
export async function findGroupFullPath(db: Database, id: number): Promise<string | undefined> {
  const group = await db.selectFrom('namespaces').select('full_path').where('id', '=', id).where('type', '=', 'Group').executeTakeFirst();
  return group?.full_path;
}

/** Is there a namespace (user or group) at this full path, in any letter case? */
export async function namespacePathTaken(db: Database, fullPath: string): Promise<boolean> {
  const found = await db.selectFrom('namespaces').select('id').where(sql`lower(full_path)`, '=', fullPath.toLowerCase()).executeTakeFirst();
  return !!found;
}

/** A path GitLab would suggest instead of a taken one: the path with the first free number appended. */
export async function suggestNamespacePath(db: Database, parentPrefix: string, path: string): Promise<string> {
  const base = path.toLowerCase().replace(/\d+$/, '');
  const rows = await db
    .selectFrom('namespaces')
    .select(sql<string>`lower(full_path)`.as('p'))
    .where(sql`lower(full_path)`, 'like', `${parentPrefix}${base}%`.toLowerCase())
    .execute();
  const taken = new Set(rows.map((r) => r.p));
  for (let i = 1; ; i++) if (!taken.has(`${parentPrefix}${base}${i}`.toLowerCase())) return `${base}${i}`;
}

/**
 * Counts for a page of namespaces in two queries: direct projects per namespace, and distinct
 * members of each group's subtree for the groups listed in `adminGroupIds`.
 */
export async function namespaceCounts(db: Database, rows: NamespaceWithOwner[], adminGroupIds: Set<number>): Promise<Map<number, NamespaceCounts>> {
  const ids = rows.map((r) => r.id);
  const out = new Map<number, NamespaceCounts>();
  if (!ids.length) return out;
  const projects = await sql<{ namespace_id: number; n: number }>`
    select namespace_id, count(*)::int as n from projects where namespace_id = any(${ids}::int[]) and not pending_delete group by namespace_id`.execute(db);
  const projectCounts = new Map(projects.rows.map((r) => [r.namespace_id, r.n]));
  const adminIds = [...adminGroupIds].filter((id) => ids.includes(id));
  const memberCounts = new Map<number, number>();
  if (adminIds.length) {
    const members = await sql<{ group_id: number; n: number }>`
      select g.id as group_id, count(distinct m.user_id)::int as n
        from namespaces g
        join namespaces d on d.traversal_ids @> array[g.id]
        join members m on m.source_type = 'Namespace' and m.source_id = d.id and m.state = 0 and m.requested_at is null
       where g.id = any(${adminIds}::int[]) group by g.id`.execute(db);
    for (const r of members.rows) memberCounts.set(r.group_id, r.n);
  }
  for (const r of rows) {
    out.set(r.id, {
      projectsCount: projectCounts.get(r.id) ?? 0,
      membersCountWithDescendants: r.type === 'Group' && adminGroupIds.has(r.id) ? (memberCounts.get(r.id) ?? 0) : undefined,
    });
  }
  return out;
}
