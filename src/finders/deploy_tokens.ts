import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { DeployToken } from '../db/schema/deploy_tokens.js';
import type { Page } from '../plugins/pagination.js';

/** Whose deploy tokens: every one (the instance list), a project's or a group's own. */
export type DeployTokenOwner = { all: true } | { projectId: number } | { groupId: number };

/** A page of deploy tokens, oldest first; `active` keeps only those neither revoked nor expired. */
export async function findDeployTokens(db: Database, owner: DeployTokenOwner, filters: { active?: boolean }, page: Page): Promise<{ rows: DeployToken[]; total: number }> {
  let q = db.selectFrom('deploy_tokens');
  if ('projectId' in owner) q = q.where('project_id', '=', owner.projectId);
  if ('groupId' in owner) q = q.where('group_id', '=', owner.groupId);
  if (filters.active) q = q.where('revoked', '=', false).where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]));
  const rows = await q
    .selectAll()
    .select(sql<number>`count(*) over ()`.as('total_count'))
    .orderBy('id')
    .limit(page.perPage)
    .offset(page.offset)
    .execute();
  let total = rows.length ? Number(rows[0].total_count) : 0;
  if (!rows.length && page.offset > 0) {
    const c = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    total = Number(c.n);
  }
  return { rows: rows.map(({ total_count: _t, ...r }) => r as DeployToken), total };
}

/** One of a project's or a group's deploy tokens. */
export async function findDeployToken(db: Database, owner: { projectId: number } | { groupId: number }, id: number): Promise<DeployToken | undefined> {
  const q = db.selectFrom('deploy_tokens').selectAll().where('id', '=', id);
  return ('projectId' in owner ? q.where('project_id', '=', owner.projectId) : q.where('group_id', '=', owner.groupId)).executeTakeFirst();
}

/** The deploy token with this value, whatever its state (the caller checks it). */
export async function findDeployTokenByValue(db: Database, digest: string): Promise<DeployToken | undefined> {
  return db.selectFrom('deploy_tokens').selectAll().where('token_digest', '=', digest).executeTakeFirst();
}
