import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace } from '../db/schema/core.js';
import { rowId } from '../lib/ids.js';
import type { User } from '../db/schema/core.js';
import { groupVisibleTo, VISIBILITY_LEVELS } from '../policies/access.js';
import { atLeast, OWNER } from '../policies/rules.js';
import type { SharedGroupLink } from '../presenters/groups.js';
import type { GroupShareView } from '../presenters/members.js';
import { pageWithTotal, totalCount } from './paging.js';

/** `:id` of /groups/:id: an integer id or a URL-decoded full path. Groups only (not user namespaces). */
export async function findGroup(db: Database, idOrPath: string | number): Promise<Namespace | undefined> {
  const key = String(idOrPath);
  const q = db.selectFrom('namespaces').selectAll().where('type', '=', 'Group');
  if (/^\d+$/.test(key)) {
    const id = rowId(key);
    return id === undefined ? undefined : q.where('id', '=', id).executeTakeFirst();
  }
  return q.where(sql`lower(full_path)`, '=', key.toLowerCase()).executeTakeFirst();
}

/** The ids of a group and of every group below it. */
export async function groupTreeIds(db: Database, groupId: number): Promise<number[]> {
  const rows = await db.selectFrom('namespaces').select('id').where(sql<boolean>`traversal_ids @> array[${groupId}]::int[]`).execute();
  return rows.map((r) => r.id);
}

// ---------------------------------------------------------------------------------------------
// Lists: visibility first, then one step per filter; one builder for the page and the total.

export interface GroupFilters {
  /** false: only groups the caller belongs to (GitLab's default for signed-in non-admins). */
  allAvailable?: boolean;
  owned?: boolean;
  minAccessLevel?: number;
  topLevelOnly?: boolean;
  skipGroups?: number[];
  search?: string;
  visibility?: string;
  /** Direct children of this group. */
  parentId?: number;
  /** Every descendant of this group. */
  descendantsOf?: number;
  orderBy?: 'name' | 'path' | 'id' | 'similarity';
  sort?: 'asc' | 'desc';
}

/** SQL: the group aliased `g` is one the user belongs to, or an ancestor of one (GitLab's authorized groups). */
function memberOf(user: User) {
  return sql<boolean>`g.id in (
    select unnest(a.traversal_ids) from namespaces a
     where a.id in (select group_id from group_authorizations(${user.id})))`;
}

function filteredGroups(db: Database, user: User | null, f: GroupFilters) {
  let q = db.selectFrom('namespaces as g').where('g.type', '=', 'Group').where(groupVisibleTo(user));
  if ((f.owned || f.minAccessLevel !== undefined) && !user) return q.where(sql<boolean>`false`);
  if (user && f.owned) q = q.where(sql<boolean>`g.id in ${OWNER.groupIds(user.id)}`);
  if (user && f.minAccessLevel !== undefined) {
    q = q.where(sql<boolean>`g.id in ${atLeast(f.minAccessLevel).groupIds(user.id)}`);
  }
  if (user && !user.admin && f.allAvailable === false && !f.owned && f.minAccessLevel === undefined) q = q.where(memberOf(user));
  if (f.topLevelOnly) q = q.where('g.parent_id', 'is', null);
  if (f.parentId !== undefined) q = q.where('g.parent_id', '=', f.parentId);
  if (f.descendantsOf !== undefined) q = q.where(sql<boolean>`g.traversal_ids @> array[${f.descendantsOf}]::int[] and g.id <> ${f.descendantsOf}`);
  if (f.skipGroups?.length) q = q.where('g.id', 'not in', f.skipGroups);
  if (f.visibility) q = q.where('g.visibility_level', '=', VISIBILITY_LEVELS[f.visibility] ?? -1);
  if (f.search) {
    const pattern = `%${f.search.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
    q = q.where((eb) => eb.or([eb('g.name', 'ilike', pattern), eb('g.path', 'ilike', pattern)]));
  }
  return q;
}

/** A page of groups visible to `user` and the total, in one statement. */
export async function listGroups(db: Database, user: User | null, f: GroupFilters, page: { limit: number; offset: number }) {
  const base = filteredGroups(db, user, f);
  const dir = f.sort === 'desc' ? sql`desc` : sql`asc`;
  let q = base.selectAll('g');
  if (f.orderBy === 'similarity' && f.search) {
    const s = f.search.toLowerCase();
    q = q.orderBy(sql`case when lower(g.path) = ${s} or lower(g.name) = ${s} then 0 when lower(g.name) like ${s.replace(/[\\%_]/g, (c) => '\\' + c) + '%'} then 1 else 2 end`).orderBy('g.parent_id', 'desc').orderBy('g.id', 'asc');
  } else {
    const column = f.orderBy === 'path' ? sql`lower(g.path)` : f.orderBy === 'id' ? sql`g.id` : sql`lower(g.name)`;
    q = q.orderBy(sql`${column} ${dir}`).orderBy('g.id', 'asc');
  }
  const counted = await q.select(totalCount).limit(page.limit).offset(page.offset).execute();
  const { rows, total } = await pageWithTotal(counted, page.offset, async () => (await base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow()).n);
  return { rows: rows as Namespace[], total };
}

/** Every group a group is shared with, visible or not, oldest share first (for the group's owner). */
export async function listGroupShares(db: Database, groupId: number): Promise<GroupShareView[]> {
  const rows = await sql<{ id: number; name: string; path: string; full_name: string; full_path: string; group_access: number; expires_at: string | null }>`
    select g.id, g.name, g.path, g.full_name, g.full_path, l.group_access, l.expires_at
      from group_group_links l join namespaces g on g.id = l.shared_with_group_id
     where l.shared_group_id = ${groupId} order by l.id`.execute(db);
  return rows.rows.map((r) => ({ group: r, group_access: r.group_access, expires_at: r.expires_at }));
}

/** The groups a group is shared with, limited to those `user` may see. */
export async function sharedWithGroups(db: Database, user: User | null, groupId: number): Promise<SharedGroupLink[]> {
  const rows = await db
    .selectFrom('group_group_links as l')
    .innerJoin('namespaces as g', 'g.id', 'l.shared_with_group_id')
    .select([
      'g.id as group_id',
      'g.name as group_name',
      'g.full_path as group_full_path',
      'l.group_access',
      sql<string | null>`to_char(l.expires_at, 'YYYY-MM-DD')`.as('expires_at'),
    ])
    .where('l.shared_group_id', '=', groupId)
    .where(groupVisibleTo(user))
    .orderBy('l.id')
    .execute();
  return rows;
}
