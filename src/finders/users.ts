import { sql, type ExpressionBuilder, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { DB } from '../db/types.js';
import type { User, UsersTable } from '../db/schema/core.js';
import type { Page } from '../plugins/pagination.js';
import type { CustomAttributeRow, IdentityRow } from '../presenters/users.js';
import { rowId } from '../lib/ids.js';
import { pageWithTotal, totalCount } from './paging.js';

/** User types GitLab creates for itself; `exclude_internal` and `active` leave them out. */
export const INTERNAL_USER_TYPES = [
  'ghost', 'alert_bot', 'support_bot', 'visual_review_bot', 'migration_bot', 'security_bot', 'automation_bot',
  'security_policy_bot', 'admin_bot', 'suggested_reviewers_bot', 'llm_bot', 'duo_code_review_bot',
];

/** States only administrators see in lists. */
const FORBIDDEN_STATES = ['blocked_pending_approval', 'banned'];

export const USER_ORDER_FIELDS = ['id', 'name', 'username', 'created_at', 'updated_at'] as const;
export type UserOrderField = (typeof USER_ORDER_FIELDS)[number];

export interface UserListParams {
  username?: string;
  search?: string;
  active?: boolean;
  blocked?: boolean;
  external?: boolean;
  exclude_external?: boolean;
  exclude_internal?: boolean;
  humans?: boolean;
  exclude_humans?: boolean;
  exclude_active?: boolean;
  without_project_bots?: boolean;
  extern_uid?: string;
  provider?: string;
  created_before?: Date;
  created_after?: Date;
  /** Admin only from here on. */
  custom_attributes?: Record<string, string>;
  order_by?: UserOrderField;
  sort?: 'asc' | 'desc';
  two_factor?: string;
  without_projects?: boolean;
  admins?: boolean;
  saml_provider_id?: number;
}

type UDB = DB & { u: UsersTable };
type Q = SelectQueryBuilder<UDB, 'u', {}>;

/** The contract lists created_before/created_after for every caller; these are its admin-only ones (custom attributes are admin data). */
const ADMIN_ONLY: (keyof UserListParams)[] = [
  'custom_attributes', 'order_by', 'sort', 'two_factor', 'without_projects', 'admins', 'saml_provider_id',
];

/** The filters the viewer may use: administrators all, others not the admin-only ones. */
function allowedParams(viewer: User | null, params: UserListParams): UserListParams {
  if (viewer?.admin) return params;
  const copy = { ...params };
  for (const key of ADMIN_ONLY) delete copy[key];
  return copy;
}

function visibleTo(q: Q, viewer: User | null): Q {
  return viewer?.admin ? q : q.where('u.state', 'not in', FORBIDDEN_STATES);
}

const byUsername = (q: Q, p: UserListParams) => (p.username === undefined ? q : q.where(sql`lower(u.username)`, '=', p.username.toLowerCase()));

/**
 * GitLab's User.search: exact (case-insensitive) public email, or name/username containing the
 * term; terms shorter than 3 characters match name or username exactly. Administrators also
 * match the primary email exactly.
 */
function bySearch(q: Q, p: UserListParams, viewer: User | null): Q {
  const term = p.search?.trim().replace(/^@/, '');
  if (!term) return q;
  const lower = term.toLowerCase();
  const pattern = term.length >= 3 ? `%${escapeLike(term)}%` : escapeLike(term);
  return q.where((eb) =>
    eb.or([
      eb(sql`lower(u.public_email)`, '=', lower),
      ...(viewer?.admin ? [eb(sql`lower(u.email)`, '=', lower)] : []),
      eb('u.name', 'ilike', pattern),
      eb('u.username', 'ilike', pattern),
    ]),
  );
}

const byBlocked = (q: Q, p: UserListParams) => (p.blocked ? q.where('u.state', 'in', ['blocked', 'ldap_blocked']) : q);
const byActive = (q: Q, p: UserListParams) => (p.active ? q.where('u.state', '=', 'active').where('u.user_type', 'not in', INTERNAL_USER_TYPES) : q);
const byWithoutActive = (q: Q, p: UserListParams) => (p.exclude_active ? q.where('u.state', '!=', 'active') : q);
const byHumans = (q: Q, p: UserListParams) => (p.humans ? q.where('u.user_type', '=', 'human') : q);
const byWithoutHumans = (q: Q, p: UserListParams) => (p.exclude_humans ? q.where('u.user_type', '!=', 'human') : q);
const byExternal = (q: Q, p: UserListParams) => (p.external ? q.where('u.external', '=', true) : q);
const byNonExternal = (q: Q, p: UserListParams) => (p.exclude_external ? q.where('u.external', '=', false) : q);
const byNonInternal = (q: Q, p: UserListParams) => (p.exclude_internal ? q.where('u.user_type', 'not in', INTERNAL_USER_TYPES) : q);
const byWithoutProjectBots = (q: Q, p: UserListParams) => (p.without_project_bots ? q.where('u.user_type', '!=', 'project_bot') : q);
const byAdmins = (q: Q, p: UserListParams) => (p.admins ? q.where('u.admin', '=', true) : q);
/** Both bounds are inclusive, as GitLab's created-at filter is. */
const byCreatedBefore = (q: Q, p: UserListParams) => (p.created_before ? q.where('u.created_at', '<=', p.created_before) : q);
const byCreatedAfter = (q: Q, p: UserListParams) => (p.created_after ? q.where('u.created_at', '>=', p.created_after) : q);

function byTwoFactor(q: Q, p: UserListParams): Q {
  if (p.two_factor === 'enabled') return q.where('u.two_factor_enabled', '=', true);
  if (p.two_factor === 'disabled') return q.where('u.two_factor_enabled', '=', false);
  return q;
}

function byExternalIdentity(q: Q, p: UserListParams): Q {
  if (!p.extern_uid || !p.provider) return q;
  const { provider, extern_uid } = p;
  return q.where((eb) =>
    eb.exists(
      eb.selectFrom('identities as i').select('i.id').whereRef('i.user_id', '=', 'u.id')
        .where('i.provider', '=', provider).where(sql`lower(i.extern_uid)`, '=', extern_uid.toLowerCase()),
    ),
  );
}

function bySamlProvider(q: Q, p: UserListParams): Q {
  if (p.saml_provider_id === undefined) return q;
  const id = p.saml_provider_id;
  return q.where((eb) => eb.exists(eb.selectFrom('identities as i').select('i.id').whereRef('i.user_id', '=', 'u.id').where('i.saml_provider_id', '=', id)));
}

// On the view itself rather than project_authorizations(u.id): one anti-join over the grants,
// not a function call (computing all of a user's projects) per user.
function byWithoutProjects(q: Q, p: UserListParams): Q {
  return p.without_projects ? q.where(sql<boolean>`not exists (select 1 from project_access_grants a where a.user_id = u.id)`) : q;
}

/** Every given key with its value: one count per user whatever their number (an EXISTS each grew faster than the list). */
function byCustomAttributes(q: Q, p: UserListParams): Q {
  const entries = Object.entries(p.custom_attributes ?? {});
  if (!entries.length) return q;
  const keys = entries.map(([k]) => k);
  const values = entries.map(([, v]) => String(v));
  return q.where(sql<boolean>`(select count(distinct ca.key) from user_custom_attributes ca
    join unnest(${keys}::text[], ${values}::text[]) as w(key, value) on w.key = ca.key and w.value = ca.value
    where ca.user_id = u.id) = ${entries.length}`);
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => '\\' + c);
}

/** Search results come best match first unless an order was asked for; otherwise by field, id breaking ties. */
function ordered(q: Q, p: UserListParams): Q {
  const term = p.search?.trim().replace(/^@/, '').toLowerCase();
  if (term && !p.order_by && !p.sort) {
    return q
      .orderBy(sql`case when lower(u.public_email) = ${term} then 0 when lower(u.username) = ${term} then 1 when lower(u.name) = ${term} then 2 else 3 end`)
      .orderBy('u.name', 'asc')
      .orderBy('u.id', 'desc');
  }
  const field = p.order_by ?? 'id';
  const dir = p.sort ?? 'desc';
  q = q.orderBy(`u.${field}` as const, dir);
  return field === 'id' ? q : q.orderBy('u.id', dir);
}

function filtered(db: Database, viewer: User | null, raw: UserListParams): { query: Q; params: UserListParams } {
  const p = allowedParams(viewer, raw);
  let q: Q = visibleTo(db.selectFrom('users as u') as unknown as Q, viewer);
  q = byUsername(q, p);
  q = byAdmins(q, p);
  q = byHumans(q, p);
  q = byWithoutHumans(q, p);
  q = bySearch(q, p, viewer);
  q = byBlocked(q, p);
  q = byActive(q, p);
  q = byWithoutActive(q, p);
  q = byExternalIdentity(q, p);
  q = byExternal(q, p);
  q = byNonExternal(q, p);
  q = byTwoFactor(q, p);
  q = byCreatedBefore(q, p);
  q = byCreatedAfter(q, p);
  q = byWithoutProjects(q, p);
  q = byCustomAttributes(q, p);
  q = byNonInternal(q, p);
  q = byWithoutProjectBots(q, p);
  q = bySamlProvider(q, p);
  return { query: q, params: p };
}

/** GET /users: one filtered builder gives the page and the total, in one statement. */
export async function findUsers(db: Database, viewer: User | null, raw: UserListParams, page: Page): Promise<{ rows: User[]; total: number }> {
  const { query, params } = filtered(db, viewer, raw);
  // `ordered` takes and gives the bare builder type; the rows are users with their total.
  const rows = (await ordered(query.selectAll('u').select(totalCount) as unknown as Q, params).limit(page.perPage).offset(page.offset).execute()) as unknown as (User & { total_count: number })[];
  return pageWithTotal(rows, page.offset, async () => Number((await query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n));
}

export async function findUserById(db: Database, id: number | string): Promise<User | undefined> {
  const n = rowId(id);
  if (n === undefined) return undefined;
  return db.selectFrom('users').selectAll().where('id', '=', n).executeTakeFirst();
}

/** The users with these ids, by id; ids that name no user are left out. */
export async function findUsersByIds(db: Database, ids: number[]): Promise<Map<number, User>> {
  const unique = [...new Set(ids)];
  if (!unique.length) return new Map();
  const users = await db.selectFrom('users').selectAll().where('id', 'in', unique).execute();
  return new Map(users.map((u) => [u.id, u]));
}

/** The users with these ids, in id order; ids that name no user are left out. */
export async function listUsersByIds(db: Database, ids: number[]): Promise<User[]> {
  return [...(await findUsersByIds(db, ids)).values()].sort((a, b) => a.id - b.id);
}

/** `:id_or_username` as GitLab's find_user takes it. */
export async function findUserByIdOrUsername(db: Database, key: string): Promise<User | undefined> {
  if (/^\d+$/.test(key)) return findUserById(db, key);
  return db.selectFrom('users').selectAll().where(sql`lower(username)`, '=', key.toLowerCase()).executeTakeFirst();
}

export interface UserExtras {
  identities: Map<number, IdentityRow[]>;
  followers: Map<number, number>;
  following: Map<number, number>;
  followedByViewer: Set<number>;
  namespaceIds: Map<number, number>;
  customAttributes: Map<number, CustomAttributeRow[]>;
}

/** Everything the richer forms show beyond the row, for many users in one statement. */
export async function loadUserExtras(
  db: Database,
  userIds: number[],
  opts: { viewerId?: number | null; customAttributes?: boolean } = {},
): Promise<UserExtras> {
  const extras: UserExtras = {
    identities: new Map(), followers: new Map(), following: new Map(), followedByViewer: new Set(), namespaceIds: new Map(), customAttributes: new Map(),
  };
  if (userIds.length === 0) return extras;
  const attributes = opts.customAttributes
    ? sql`coalesce((select json_agg(json_build_object('key', a.key, 'value', a.value) order by a.key)
                      from user_custom_attributes a where a.user_id = u.id), '[]'::json)`
    : sql`'[]'::json`;
  const { rows } = await sql<{
    id: number;
    identities: IdentityRow[];
    followers: number;
    following: number;
    followed: boolean;
    namespace_id: number | null;
    custom_attributes: CustomAttributeRow[];
  }>`
    select u.id,
      coalesce((select json_agg(json_build_object('provider', i.provider, 'extern_uid', i.extern_uid, 'saml_provider_id', i.saml_provider_id) order by i.id)
                  from identities i where i.user_id = u.id), '[]'::json) as identities,
      (select count(*)::int from user_follow_users f where f.followee_id = u.id) as followers,
      (select count(*)::int from user_follow_users f where f.follower_id = u.id) as following,
      exists (select 1 from user_follow_users f where f.follower_id = ${opts.viewerId ?? null}::int and f.followee_id = u.id) as followed,
      (select n.id from namespaces n where n.type = 'User' and n.owner_id = u.id order by n.id limit 1) as namespace_id,
      ${attributes} as custom_attributes
    from unnest(${[...new Set(userIds)]}::int[]) as u(id)`.execute(db);
  for (const r of rows) {
    if (r.identities.length) extras.identities.set(r.id, r.identities);
    if (r.followers) extras.followers.set(r.id, r.followers);
    if (r.following) extras.following.set(r.id, r.following);
    if (r.followed) extras.followedByViewer.add(r.id);
    if (r.namespace_id !== null) extras.namespaceIds.set(r.id, r.namespace_id);
    if (r.custom_attributes.length) extras.customAttributes.set(r.id, r.custom_attributes);
  }
  return extras;
}

/** Followers (`direction` 'followers') or followees of a user, newest follow first. */
export async function findFollowUsers(db: Database, userId: number, direction: 'followers' | 'following', page: Page) {
  const base = direction === 'followers'
    ? db.selectFrom('user_follow_users as f').innerJoin('users as u', 'u.id', 'f.follower_id').where('f.followee_id', '=', userId)
    : db.selectFrom('user_follow_users as f').innerJoin('users as u', 'u.id', 'f.followee_id').where('f.follower_id', '=', userId);
  const [rows, count] = await Promise.all([
    base.selectAll('u').orderBy('f.created_at', 'desc').orderBy('u.id', 'desc').limit(page.perPage).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows: rows as User[], total: Number(count.n) };
}

export async function findUserStatus(db: Database, userId: number) {
  return db.selectFrom('user_statuses').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

export async function findCustomAttributes(db: Database, userId: number) {
  return db.selectFrom('user_custom_attributes').selectAll().where('user_id', '=', userId).orderBy('key').execute();
}

export async function findCustomAttribute(db: Database, userId: number, key: string) {
  return db.selectFrom('user_custom_attributes').selectAll().where('user_id', '=', userId).where('key', '=', key).executeTakeFirst();
}
