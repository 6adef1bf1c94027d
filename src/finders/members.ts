import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, User } from '../db/schema/core.js';
import type { MemberView } from '../presenters/members.js';
import { MEMBER } from '../policies/rules.js';
import type { ProjectWithNamespace } from './projects.js';
import { findUsersByIds } from './users.js';
import { pageWithTotal } from './paging.js';

/** What members belong to: a project or a group. */
export type MemberSource = { type: 'Project'; project: ProjectWithNamespace } | { type: 'Namespace'; group: Namespace };

export function sourceId(source: MemberSource): number {
  return source.type === 'Project' ? source.project.id : source.group.id;
}

/** The level the owner of a personal namespace is shown with: GitLab shows Maintainer, not Owner. */
export const PERSONAL_OWNER_SHOWN_LEVEL = 40;

export interface MemberListFilters {
  query?: string;
  userIds?: number[];
  skipUserIds?: number[];
  /** 'active' or 'awaiting' (membership state). */
  state?: 'active' | 'awaiting';
}

/** Who is asking: decides which invited groups' members /members/all may show. */
export interface MemberViewer {
  userId: number | null;
  admin: boolean;
}

function likePattern(q: string): string {
  return `%${q.replace(/[\\%_]/g, (c) => '\\' + c)}%`;
}

/** SQL condition on users aliased `u`: GitLab's user search (name, username, exact e-mail). */
export function userSearch(q: string): RawBuilder<boolean> {
  const pattern = likePattern(q);
  return sql<boolean>`(u.name ilike ${pattern} or u.username ilike ${pattern} or lower(u.email) = lower(${q}) or lower(u.public_email) = lower(${q}))`;
}

/** SQL condition: the invited group aliased `ig` may have its members shown to the viewer. */
function invitedGroupShown(viewer: MemberViewer): RawBuilder<boolean> {
  if (viewer.admin) return sql<boolean>`true`;
  if (viewer.userId === null) return sql<boolean>`ig.visibility_level = 20`;
  return sql<boolean>`(ig.visibility_level = 20 or ig.id in (select group_id from group_authorizations(${viewer.userId})))`;
}

/** SQL condition: the share aliased `l` has not expired (SQL share_active, migration 0700_access_rules). */
const linkActive = sql`share_active(l.expires_at)`;
const memberColumns = sql`m.id, m.user_id, m.expires_at, m.created_at, m.created_by_id, m.state, m.override`;

/**
 * Candidate membership rows of a source: (id, user_id, access_level, expires_at, created_at,
 * created_by_id, state, override, priority). Direct rows always; with `deep`, the rows that
 * give access from elsewhere (ancestor groups, groups shared into the tree, groups the project
 * is shared with), each capped by the share that carries it. Minimal access (5) is never listed.
 */
function candidates(source: MemberSource, deep: boolean, viewer: MemberViewer): RawBuilder<unknown> {
  const parts: RawBuilder<unknown>[] = [];
  if (source.type === 'Project') {
    const p = source.project;
    const ns = p.namespace;
    const ownerId = ns.type === 'User' ? ns.owner_id : null;
    parts.push(sql`
      select ${memberColumns},
             case when m.user_id = ${ownerId} then least(m.access_level, ${PERSONAL_OWNER_SHOWN_LEVEL}) else m.access_level end as access_level,
             1 as priority
        from members m
       where m.source_type = 'Project' and m.source_id = ${p.id} and m.requested_at is null`);
    if (ownerId !== null) {
      // The owner of a personal namespace is a member of its projects without a row of their own.
      parts.push(sql`
        select null::int, ${ownerId}::int, null::date, ${p.created_at}::timestamptz, null::int, 0, false,
               ${PERSONAL_OWNER_SHOWN_LEVEL}, 0
         where not exists (select 1 from members m where m.source_type = 'Project' and m.source_id = ${p.id}
                             and m.user_id = ${ownerId} and m.requested_at is null)`);
    }
    if (deep && ns.type === 'Group') {
      parts.push(sql`
        select ${memberColumns}, m.access_level, 2 from members m
         where m.source_type = 'Namespace' and m.source_id = any(${ns.traversal_ids}::int[])
           and m.requested_at is null and ${MEMBER.level(sql`m.access_level`)}`);
      parts.push(sql`
        select ${memberColumns}, least(l.group_access, m.access_level), 3 from group_group_links l
          join namespaces ig on ig.id = l.shared_with_group_id
          join members m on m.source_type = 'Namespace' and m.source_id = l.shared_with_group_id
         where l.shared_group_id = any(${ns.traversal_ids}::int[]) and ${linkActive}
           and m.requested_at is null and ${MEMBER.level(sql`m.access_level`)} and ${invitedGroupShown(viewer)}`);
    }
    if (deep && ns.settings?.share_with_group_lock !== true) {
      parts.push(sql`
        select ${memberColumns}, least(l.group_access, m.access_level), 3 from project_group_links l
          join namespaces ig on ig.id = l.group_id
          join members m on m.source_type = 'Namespace' and m.source_id = any(ig.traversal_ids)
         where l.project_id = ${p.id} and ${linkActive}
           and m.requested_at is null and ${MEMBER.level(sql`m.access_level`)} and ${invitedGroupShown(viewer)}`);
      parts.push(sql`
        select ${memberColumns}, least(l.group_access, gl.group_access, m.access_level), 3 from project_group_links l
          join namespaces lg on lg.id = l.group_id
          join group_group_links gl on gl.shared_group_id = any(lg.traversal_ids)
                                   and share_active(gl.expires_at)
          join namespaces ig on ig.id = gl.shared_with_group_id
          join members m on m.source_type = 'Namespace' and m.source_id = gl.shared_with_group_id
         where l.project_id = ${p.id} and ${linkActive}
           and m.requested_at is null and ${MEMBER.level(sql`m.access_level`)} and ${invitedGroupShown(viewer)}`);
    }
  } else {
    const g = source.group;
    const tree = deep ? g.traversal_ids : [g.id];
    parts.push(sql`
      select ${memberColumns}, m.access_level, case when m.source_id = ${g.id} then 1 else 2 end from members m
       where m.source_type = 'Namespace' and m.source_id = any(${tree}::int[])
         and m.requested_at is null and m.access_level > 5`);
    if (deep) {
      parts.push(sql`
        select ${memberColumns}, least(l.group_access, m.access_level), 3 from group_group_links l
          join namespaces ig on ig.id = l.shared_with_group_id
          join members m on m.source_type = 'Namespace' and m.source_id = l.shared_with_group_id
         where l.shared_group_id = any(${g.traversal_ids}::int[]) and ${linkActive}
           and m.requested_at is null and ${MEMBER.level(sql`m.access_level`)} and ${invitedGroupShown(viewer)}`);
    }
  }
  return sql.join(parts, sql` union all `);
}

function filterConditions(f: MemberListFilters): RawBuilder<boolean> {
  const conds: RawBuilder<boolean>[] = [sql<boolean>`true`];
  if (f.query) conds.push(userSearch(f.query));
  if (f.userIds) conds.push(f.userIds.length ? sql<boolean>`r.user_id = any(${f.userIds}::int[])` : sql<boolean>`false`);
  if (f.skipUserIds?.length) conds.push(sql<boolean>`r.user_id <> all(${f.skipUserIds}::int[])`);
  if (f.state) conds.push(sql<boolean>`r.state = ${f.state === 'awaiting' ? 1 : 0}`);
  return sql.join(conds, sql` and `) as RawBuilder<boolean>;
}

interface RankedRow {
  id: number | null;
  user_id: number;
  access_level: number;
  expires_at: string | null;
  created_at: Date | string;
  created_by_id: number | null;
  state: number;
  override: boolean;
}

/**
 * One row per user: the membership that counts (an active one before an expired or awaiting
 * one, then the highest level, then the closest source), filtered, ordered by membership id.
 */
function rankedQuery(source: MemberSource, deep: boolean, viewer: MemberViewer, f: MemberListFilters) {
  return sql`
    with cand(id, user_id, expires_at, created_at, created_by_id, state, override, access_level, priority) as (
      ${candidates(source, deep, viewer)}
    ),
    ranked as (
      select distinct on (c.user_id) c.* from cand c
       order by c.user_id,
                (c.state = 0 and (c.expires_at is null or c.expires_at > current_date)) desc,
                c.access_level desc, c.priority, c.id
    )
    select r.* from ranked r join users u on u.id = r.user_id where ${filterConditions(f)}`;
}

async function toViews(db: Database, rows: RankedRow[]): Promise<MemberView[]> {
  const users = await findUsersByIds(db, rows.flatMap((r) => (r.created_by_id ? [r.user_id, r.created_by_id] : [r.user_id])));
  return rows.map((r) => ({
    id: r.id,
    user: users.get(r.user_id)!,
    access_level: r.access_level,
    expires_at: r.expires_at,
    created_at: r.created_at,
    created_by: r.created_by_id ? users.get(r.created_by_id) ?? null : null,
    state: r.state,
    override: r.override,
  }));
}

/**
 * A page of a source's members (direct, or with `deep` everyone with access) and the total: one
 * statement ranks the memberships once for both, one more brings the page's users.
 */
export async function listMembers(
  db: Database,
  source: MemberSource,
  opts: { deep: boolean; viewer: MemberViewer; filters: MemberListFilters; limit: number; offset: number },
): Promise<{ members: MemberView[]; total: number }> {
  const base = rankedQuery(source, opts.deep, opts.viewer, opts.filters);
  const counted = await sql<RankedRow & { total_count: number }>`
    select x.*, (count(*) over ())::int as total_count from (${base}) x
     order by x.id asc nulls first, x.user_id limit ${opts.limit} offset ${opts.offset}`.execute(db);
  const { rows, total } = await pageWithTotal(counted.rows, opts.offset, async () =>
    (await sql<{ n: number }>`select count(*)::int as n from (${base}) x`.execute(db)).rows[0]?.n ?? 0,
  );
  return { members: await toViews(db, rows), total };
}

/** One user's membership of a source (direct, or with `deep` the one that counts). */
export async function findMember(db: Database, source: MemberSource, userId: number, deep: boolean, viewer: MemberViewer): Promise<MemberView | undefined> {
  const { members } = await listMembers(db, source, { deep, viewer, filters: { userIds: [userId] }, limit: 1, offset: 0 });
  return members[0];
}

/** A user's stored row on a source: a membership, or with `request` a pending access request. */
function findMemberRow(db: Database, source: MemberSource, userId: number, request: boolean) {
  return db
    .selectFrom('members')
    .selectAll()
    .where('source_type', '=', source.type)
    .where('source_id', '=', sourceId(source))
    .where('user_id', '=', userId)
    .where('requested_at', request ? 'is not' : 'is', null)
    .executeTakeFirst();
}

/** A stored membership or access request by its own id. */
export function findMemberRowById(db: Database, id: number) {
  return db.selectFrom('members').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The stored direct membership row (not a request), for changes. */
export const findDirectMemberRow = (db: Database, source: MemberSource, userId: number) => findMemberRow(db, source, userId, false);

/** A pending access request of a user. */
export const findAccessRequestRow = (db: Database, source: MemberSource, userId: number) => findMemberRow(db, source, userId, true);

/** A page of pending access requests, oldest first. */
export async function listAccessRequests(db: Database, source: MemberSource, limit: number, offset: number) {
  const base = db
    .selectFrom('members')
    .where('source_type', '=', source.type)
    .where('source_id', '=', sourceId(source))
    .where('requested_at', 'is not', null);
  const [rows, count] = await Promise.all([
    base.selectAll().orderBy('id').limit(limit).offset(offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirst(),
  ]);
  const users = await findUsersByIds(db, rows.map((r) => r.user_id));
  const views: MemberView[] = rows.map((r) => ({ ...r, user: users.get(r.user_id)!, created_by: null }));
  return { requests: views, total: Number(count?.n ?? 0) };
}

/** Turns a stored row into a presentable membership. */
export async function memberViewOf(db: Database, row: { user_id: number; created_by_id: number | null } & Omit<MemberView, 'user' | 'created_by'>): Promise<MemberView> {
  const users = await findUsersByIds(db, row.created_by_id ? [row.user_id, row.created_by_id] : [row.user_id]);
  return { ...row, user: users.get(row.user_id)!, created_by: row.created_by_id ? users.get(row.created_by_id) ?? null : null };
}
