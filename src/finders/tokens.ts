import { sql, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../db/index.js';
import type { DB } from '../db/types.js';
import type { PersonalAccessToken } from '../db/schema/core.js';
import type { Page } from '../plugins/pagination.js';

export interface TokenFilters {
  userId?: number;
  /** Tokens of the bot users of one project or group (project and group access tokens). */
  resource?: { type: 'Project' | 'Namespace'; id: number };
  impersonation?: boolean;
  revoked?: boolean;
  state?: 'active' | 'inactive' | 'all';
  createdBefore?: Date;
  createdAfter?: Date;
  lastUsedBefore?: Date;
  lastUsedAfter?: Date;
  expiresBefore?: string;
  expiresAfter?: string;
  search?: string;
  sort?: string;
}

type TokenQuery = SelectQueryBuilder<DB, 'personal_access_tokens', {}>;

const SORTS: Record<string, [string, 'asc' | 'desc'][]> = {
  created_asc: [['created_at', 'asc'], ['id', 'asc']],
  created_desc: [['created_at', 'desc'], ['id', 'desc']],
  updated_asc: [['updated_at', 'asc'], ['id', 'asc']],
  updated_desc: [['updated_at', 'desc'], ['id', 'desc']],
  id_asc: [['id', 'asc']],
  id_desc: [['id', 'desc']],
  name_asc: [['name', 'asc'], ['id', 'asc']],
  name_desc: [['name', 'desc'], ['id', 'desc']],
  expires_asc: [['expires_at', 'asc'], ['id', 'desc']],
  expires_at_asc_id_desc: [['expires_at', 'asc'], ['id', 'desc']],
  expires_desc: [['expires_at', 'desc'], ['id', 'desc']],
  last_used_asc: [['last_used_at', 'asc'], ['id', 'asc']],
  last_used_desc: [['last_used_at', 'desc'], ['id', 'desc']],
};

function filtered(db: Database, f: TokenFilters): TokenQuery {
  let q: TokenQuery = db.selectFrom('personal_access_tokens');
  if (f.userId !== undefined) q = q.where('user_id', '=', f.userId);
  if (f.resource) {
    const { type, id } = f.resource;
    q = q.where('user_id', 'in', (eb) => eb.selectFrom('resource_bots').select('user_id').where('source_type', '=', type).where('source_id', '=', id));
  }
  if (f.impersonation !== undefined) q = q.where('impersonation', '=', f.impersonation);
  if (f.revoked !== undefined) q = q.where('revoked', '=', f.revoked);
  if (f.state === 'active') {
    q = q.where('revoked', '=', false).where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<string>`current_date`)]));
  } else if (f.state === 'inactive') {
    q = q.where((eb) => eb.or([eb('revoked', '=', true), eb('expires_at', '<=', sql<string>`current_date`)]));
  }
  if (f.createdBefore) q = q.where('created_at', '<', f.createdBefore);
  if (f.createdAfter) q = q.where('created_at', '>', f.createdAfter);
  if (f.lastUsedBefore) q = q.where('last_used_at', '<=', f.lastUsedBefore);
  if (f.lastUsedAfter) q = q.where('last_used_at', '>=', f.lastUsedAfter);
  if (f.expiresBefore) q = q.where('expires_at', '<', f.expiresBefore);
  if (f.expiresAfter) q = q.where('expires_at', '>=', f.expiresAfter);
  if (f.search) q = q.where(sql`name`, 'ilike', `%${f.search.replace(/[\\%_]/g, (c) => '\\' + c)}%`);
  return q;
}

/** A page of tokens matching the filters, and the total. */
export async function findTokens(db: Database, f: TokenFilters, page: Page): Promise<{ rows: PersonalAccessToken[]; total: number }> {
  const base = filtered(db, f);
  let rows = base.selectAll();
  for (const [col, dir] of SORTS[f.sort ?? ''] ?? [['id', 'asc']]) {
    rows = rows.orderBy(sql`${sql.ref(col)} ${sql.raw(dir === 'asc' ? 'asc nulls last' : 'desc nulls last')}`);
  }
  const [list, count] = await Promise.all([
    rows.limit(page.perPage).offset(page.offset).execute(),
    base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows: list, total: Number(count.n) };
}

export async function findToken(db: Database, id: number): Promise<PersonalAccessToken | undefined> {
  return db.selectFrom('personal_access_tokens').selectAll().where('id', '=', id).executeTakeFirst();
}

/** A project or group access token: its bot's token and the bot's access level there (null once the membership is gone). */
export type ResourceToken = PersonalAccessToken & { access_level: number | null };

async function withAccessLevels(db: Database, resource: { type: 'Project' | 'Namespace'; id: number }, rows: PersonalAccessToken[]): Promise<ResourceToken[]> {
  const userIds = [...new Set(rows.map((r) => r.user_id))];
  const levels = userIds.length === 0 ? [] : await db
    .selectFrom('members')
    .select(['user_id', 'access_level'])
    .where('source_type', '=', resource.type)
    .where('source_id', '=', resource.id)
    .where('requested_at', 'is', null)
    .where(sql<boolean>`user_id = any(${userIds}::int[])`)
    .execute();
  const byUser = new Map(levels.map((l) => [l.user_id, l.access_level]));
  return rows.map((r) => ({ ...r, access_level: byUser.get(r.user_id) ?? null }));
}

/** A page of a project's or group's access tokens (never impersonation tokens), with their access levels. */
export async function findResourceTokens(
  db: Database,
  resource: { type: 'Project' | 'Namespace'; id: number },
  f: Omit<TokenFilters, 'resource' | 'userId' | 'impersonation'>,
  page: Page,
): Promise<{ rows: ResourceToken[]; total: number }> {
  const { rows, total } = await findTokens(db, { ...f, resource, impersonation: false }, page);
  return { rows: await withAccessLevels(db, resource, rows), total };
}

/** One access token of a project or group by id; undefined when it is not one of its bots'. */
export async function findResourceToken(db: Database, resource: { type: 'Project' | 'Namespace'; id: number }, tokenId: number): Promise<ResourceToken | undefined> {
  const row = await filtered(db, { resource, impersonation: false }).selectAll().where('id', '=', tokenId).executeTakeFirst();
  return row ? (await withAccessLevels(db, resource, [row]))[0] : undefined;
}
