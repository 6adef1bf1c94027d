import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, User } from '../db/schema/core.js';
import type { BillableMembershipView, MembershipType } from '../presenters/members.js';
import { userSearch } from './members.js';
import { MEMBER } from '../policies/rules.js';

export const BILLABLE_SORTS = [
  'access_level_asc', 'access_level_desc', 'last_joined', 'name_asc', 'name_desc', 'oldest_joined',
  'oldest_sign_in', 'recent_sign_in', 'last_activity_on_asc', 'last_activity_on_desc',
] as const;
export type BillableSort = (typeof BILLABLE_SORTS)[number] | 'id_asc';

const KINDS: MembershipType[] = ['group_member', 'project_member', 'group_invite', 'project_invite'];

// Which memberships and shares count: the access rules' own conditions (migration 0700_access_rules).
const activeRow = sql`membership_active(m)`;
const linkActive = sql`share_active(l.expires_at)`;

/**
 * Every (user, kind, level) that takes a seat in the hierarchy under `rootId`: members of its
 * groups and projects, direct members of groups shared with its groups, and members of groups
 * (or their ancestors) its projects are shared with. Only active memberships of guest or above.
 */
function seatRows(rootId: number): RawBuilder<unknown> {
  return sql`
    select m.user_id, 1 as kind, m.access_level as level from members m
      join namespaces n on n.id = m.source_id
     where m.source_type = 'Namespace' and n.traversal_ids @> array[${rootId}::int] and ${MEMBER.level(sql`m.access_level`)} and ${activeRow}
    union all
    select m.user_id, 2, m.access_level from members m
      join projects p on p.id = m.source_id join namespaces n on n.id = p.namespace_id
     where m.source_type = 'Project' and n.traversal_ids @> array[${rootId}::int] and ${MEMBER.level(sql`m.access_level`)} and ${activeRow}
    union all
    select m.user_id, 3, least(l.group_access, m.access_level) from group_group_links l
      join namespaces s on s.id = l.shared_group_id
      join members m on m.source_type = 'Namespace' and m.source_id = l.shared_with_group_id
     where s.traversal_ids @> array[${rootId}::int] and ${linkActive} and ${MEMBER.level(sql`m.access_level`)} and ${activeRow}
    union all
    select m.user_id, 4, least(l.group_access, m.access_level) from project_group_links l
      join projects p on p.id = l.project_id join namespaces n on n.id = p.namespace_id
      join namespaces ig on ig.id = l.group_id
      join members m on m.source_type = 'Namespace' and m.source_id = any(ig.traversal_ids)
     where n.traversal_ids @> array[${rootId}::int] and ${linkActive} and ${MEMBER.level(sql`m.access_level`)} and ${activeRow}`;
}

function billableQuery(rootId: number) {
  return sql`
    select s.user_id, min(s.kind) as kind, max(s.level) as level from (${seatRows(rootId)}) s
      join users u on u.id = s.user_id
     where u.state = 'active' and u.user_type = 'human'
     group by s.user_id`;
}

/** Ids of the users who take a seat in the namespace tree under `rootId`. */
export async function billableUserIds(db: Database, rootId: number): Promise<Set<number>> {
  const rows = await sql<{ user_id: number }>`select user_id from (${billableQuery(rootId)}) b`.execute(db);
  return new Set(rows.rows.map((r) => r.user_id));
}

/** ORDER BY for the listing (rows aliased `x`: user columns plus billable_level). */
function orderBy(sort: BillableSort) {
  switch (sort) {
    case 'access_level_asc': return sql`x.billable_level asc, x.id asc`;
    case 'access_level_desc': return sql`x.billable_level desc, x.id asc`;
    case 'last_joined': return sql`x.created_at desc, x.id desc`;
    case 'oldest_joined': return sql`x.created_at asc, x.id asc`;
    case 'name_asc': return sql`lower(x.name) asc, x.id asc`;
    case 'name_desc': return sql`lower(x.name) desc, x.id asc`;
    case 'recent_sign_in': return sql`x.last_sign_in_at desc nulls last, x.id asc`;
    case 'oldest_sign_in': return sql`x.last_sign_in_at asc nulls last, x.id asc`;
    case 'last_activity_on_asc': return sql`x.last_activity_on asc nulls last, x.id asc`;
    case 'last_activity_on_desc': return sql`x.last_activity_on desc nulls last, x.id asc`;
    default: return sql`x.id asc`;
  }
}

export interface BillableRow {
  user: User;
  membership_type: MembershipType;
}

/** A page of billable users of a top-level group, searched and sorted, and the total. */
export async function listBillableMembers(
  db: Database,
  root: Namespace,
  opts: { search?: string; sort: BillableSort; limit: number; offset: number },
): Promise<{ rows: BillableRow[]; total: number }> {
  const search = opts.search ? userSearch(opts.search) : sql<boolean>`true`;
  const base = sql`select u.*, b.kind as billable_kind, b.level as billable_level from (${billableQuery(root.id)}) b
                     join users u on u.id = b.user_id where ${search}`;
  const [page, count] = await Promise.all([
    sql<User & { billable_kind: number; billable_level: number }>`select * from (${base}) x
      order by ${orderBy(opts.sort)} limit ${opts.limit} offset ${opts.offset}`.execute(db),
    sql<{ n: number }>`select count(*)::int as n from (${base}) x`.execute(db),
  ]);
  return {
    rows: page.rows.map(({ billable_kind, billable_level: _level, ...user }) => ({
      user: user as User,
      membership_type: KINDS[billable_kind - 1]!,
    })),
    total: count.rows[0]?.n ?? 0,
  };
}

/** A user's direct memberships (not requests) of groups and projects in the tree under `root`. */
export async function listBillableMemberships(db: Database, root: Namespace, userId: number, limit: number, offset: number) {
  const base = sql`
    select m.id, m.source_id, m.source_type, m.created_at, m.expires_at, m.access_level,
           coalesce(g.full_name, pn.full_name || ' / ' || p.name) as source_full_name,
           coalesce(g.full_path, pn.full_path || '/' || p.path) as source_full_path
      from members m
      left join namespaces g on m.source_type = 'Namespace' and g.id = m.source_id
      left join projects p on m.source_type = 'Project' and p.id = m.source_id
      left join namespaces pn on pn.id = p.namespace_id
     where m.user_id = ${userId} and m.requested_at is null
       and ((m.source_type = 'Namespace' and g.traversal_ids @> array[${root.id}::int])
         or (m.source_type = 'Project' and pn.traversal_ids @> array[${root.id}::int]))`;
  const [page, count] = await Promise.all([
    sql<BillableMembershipView>`select * from (${base}) x order by x.id limit ${limit} offset ${offset}`.execute(db),
    sql<{ n: number }>`select count(*)::int as n from (${base}) x`.execute(db),
  ]);
  return { memberships: page.rows, total: count.rows[0]?.n ?? 0 };
}
