import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { DeployAccessLevel, ProtectedEnvironment } from '../db/schema/environments.js';
import { apiError, conflict, invalidParam, missingParam, notFound } from '../plugins/errors.js';
import type { AccessLevelNames } from '../presenters/access_levels.js';

/** Roles a deploy access level may name (GitLab's DeployAccessLevel::ALLOWED_ACCESS_LEVELS): developers, maintainers, admins. */
export const DEPLOY_ACCESS_LEVELS = [30, 40, 60];
/** GitLab's bound on required_approval_count. */
export const MAX_REQUIRED_APPROVALS = 5;

export interface DeployGrant {
  access_level?: number;
  user_id?: number;
  group_id?: number;
  group_inheritance_type?: number;
}

export interface ProtectEnvironmentParams {
  name?: string;
  deploy_access_levels?: DeployGrant[];
  required_approval_count?: number;
}

export interface EnvironmentWithLevels {
  environment: ProtectedEnvironment;
  levels: DeployAccessLevel[];
}

async function withLevels(cairn: Cairn, envs: ProtectedEnvironment[]): Promise<EnvironmentWithLevels[]> {
  if (!envs.length) return [];
  const levels = await cairn.db
    .selectFrom('protected_environment_deploy_access_levels')
    .selectAll()
    .where('protected_environment_id', 'in', envs.map((e) => e.id))
    .orderBy('id')
    .execute();
  return envs.map((environment) => ({ environment, levels: levels.filter((l) => l.protected_environment_id === environment.id) }));
}

/** One page of the project's protected environments (by name), with their levels, and the total. */
export async function listProtectedEnvironments(cairn: Cairn, projectId: number, page: { limit: number; offset: number }) {
  const base = cairn.db.selectFrom('protected_environments').where('project_id', '=', projectId);
  const [rows, total] = await Promise.all([
    base.selectAll().orderBy('name').orderBy('id').limit(page.limit).offset(page.offset).execute(),
    base.select(sql<number>`count(*)::int`.as('n')).executeTakeFirstOrThrow(),
  ]);
  return { items: await withLevels(cairn, rows), total: total.n };
}

export async function findProtectedEnvironment(cairn: Cairn, projectId: number, name: string): Promise<EnvironmentWithLevels> {
  const env = await cairn.db.selectFrom('protected_environments').selectAll().where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst();
  if (!env) throw notFound();
  return (await withLevels(cairn, [env]))[0];
}

/** Names shown in access_level_description for user and group levels (one query each). */
export async function deployLevelNames(cairn: Cairn, levels: DeployAccessLevel[]): Promise<AccessLevelNames> {
  const userIds = [...new Set(levels.flatMap((l) => (l.user_id !== null ? [l.user_id] : [])))];
  const groupIds = [...new Set(levels.flatMap((l) => (l.group_id !== null ? [l.group_id] : [])))];
  const users = userIds.length ? await cairn.db.selectFrom('users').select(['id', 'name']).where('id', 'in', userIds).execute() : [];
  const groups = groupIds.length ? await cairn.db.selectFrom('namespaces').select(['id', 'name']).where('id', 'in', groupIds).execute() : [];
  return { users: new Map(users.map((u) => [u.id, u.name])), groups: new Map(groups.map((g) => [g.id, g.name])) };
}

const PARAM = 'deploy_access_levels';
const ONE_OF = `${PARAM}[access_level], ${PARAM}[user_id], ${PARAM}[group_id]`;

/** The parameter rules (Grape's): each level is exactly one of access_level, user_id, group_id. */
function checkShape(grants: DeployGrant[]) {
  for (const g of grants) {
    const given = [g.access_level, g.user_id, g.group_id].filter((x) => x !== undefined).length;
    if (given === 0) throw invalidParam(ONE_OF, 'are missing, exactly one parameter must be provided');
    if (given > 1) throw invalidParam(ONE_OF, 'are mutually exclusive');
    if (g.access_level !== undefined && !DEPLOY_ACCESS_LEVELS.includes(g.access_level)) throw invalidParam(`${PARAM}[access_level]`, 'does not have a valid value');
    if (g.group_inheritance_type !== undefined && g.group_inheritance_type !== 0 && g.group_inheritance_type !== 1) {
      throw invalidParam(`${PARAM}[group_inheritance_type]`, 'does not have a valid value');
    }
  }
}

/**
 * The model rules: a user level names a user with access to the project, a group level a group
 * the project is shared with (an unexpired project_group_links row). One query each.
 */
async function checkMembership(cairn: Cairn, projectId: number, grants: DeployGrant[]): Promise<string[]> {
  const errors: string[] = [];
  const userIds = [...new Set(grants.flatMap((g) => (g.user_id !== undefined ? [g.user_id] : [])))];
  const groupIds = [...new Set(grants.flatMap((g) => (g.group_id !== undefined ? [g.group_id] : [])))];
  if (userIds.length) {
    const rows = await sql<{ id: number; level: number }>`
      select u.id, project_access_level(u.id, ${projectId}) as level from users u where u.id = any(${userIds}::int[])`.execute(cairn.db);
    const found = new Map(rows.rows.map((r) => [r.id, r.level]));
    for (const id of userIds) {
      if (!found.has(id)) errors.push('Deploy access levels user does not exist');
      else if ((found.get(id) ?? 0) < 10) errors.push('Deploy access levels user must have access to the project');
    }
  }
  if (groupIds.length) {
    const rows = await sql<{ id: number; shared: boolean }>`
      select g.id, exists (select 1 from project_group_links l
                            where l.project_id = ${projectId} and l.group_id = g.id
                              and (l.expires_at is null or l.expires_at > current_date)) as shared
        from namespaces g where g.id = any(${groupIds}::int[]) and g.type = 'Group'`.execute(cairn.db);
    const found = new Map(rows.rows.map((r) => [r.id, r.shared]));
    for (const id of groupIds) {
      if (!found.has(id)) errors.push('Deploy access levels group does not exist');
      else if (!found.get(id)) errors.push('Deploy access levels group must have the project shared with it');
    }
  }
  return [...new Set(errors)];
}

export async function protectEnvironment(cairn: Cairn, projectId: number, p: ProtectEnvironmentParams): Promise<EnvironmentWithLevels> {
  if (p.name === undefined) throw missingParam('name');
  if (p.deploy_access_levels === undefined) throw missingParam(PARAM);
  const name = p.name;
  if (!name.trim()) throw invalidParam('name', 'is empty');
  if (name.length > 255 || /[\x00-\x1f\x7f]/.test(name)) throw invalidParam('name');
  const grants = p.deploy_access_levels;
  checkShape(grants);
  const errors: string[] = [];
  if (!grants.length) errors.push('Deploy access levels is too short (minimum is 1 character)');
  const approvals = p.required_approval_count ?? 0;
  if (approvals < 0) errors.push('Required approval count must be greater than or equal to 0');
  if (approvals > MAX_REQUIRED_APPROVALS) errors.push(`Required approval count must be less than or equal to ${MAX_REQUIRED_APPROVALS}`);
  errors.push(...(await checkMembership(cairn, projectId, grants)));
  const exists = await cairn.db.selectFrom('protected_environments').select('id').where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst();
  if (exists) throw conflict(`Protected environment '${name}' already exists`);
  if (errors.length) throw apiError(422, errors);
  const env = await cairn.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('protected_environments')
      .values({ project_id: projectId, name, required_approval_count: approvals })
      .onConflict((oc) => oc.columns(['project_id', 'name']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!inserted) throw conflict(`Protected environment '${name}' already exists`);
    await trx
      .insertInto('protected_environment_deploy_access_levels')
      .values(grants.map((g) => ({
        protected_environment_id: inserted.id,
        access_level: g.access_level ?? null,
        user_id: g.user_id ?? null,
        group_id: g.group_id ?? null,
        group_inheritance_type: g.group_inheritance_type ?? 0,
      })))
      .execute();
    return inserted;
  });
  return (await withLevels(cairn, [env]))[0];
}

export async function unprotectEnvironment(cairn: Cairn, projectId: number, name: string): Promise<void> {
  const deleted = await cairn.db.deleteFrom('protected_environments').where('project_id', '=', projectId).where('name', '=', name).returning('id').executeTakeFirst();
  if (!deleted) throw notFound();
}
