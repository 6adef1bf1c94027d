import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { ProtectedBranch, ProtectedBranchAccessLevel } from '../db/schema/branches.js';
import type { User } from '../db/schema/core.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { apiError, conflict, forbidden, invalidParam, missingParam, notFound } from '../plugins/errors.js';
import { admitted } from '../policies/branches.js';
import type { AccessLevelNames } from '../presenters/access_levels.js';

/** Roles a protected branch level may name: no one, developers, maintainers, admins. */
export const PROTECTED_LEVELS = [0, 30, 40, 60];
type Kind = 'push' | 'merge' | 'unprotect';

export interface AccessGrant {
  id?: number;
  access_level?: number;
  user_id?: number;
  group_id?: number;
  _destroy?: boolean;
}

export interface ProtectParams {
  name?: string;
  push_access_level?: number;
  merge_access_level?: number;
  unprotect_access_level?: number;
  allow_force_push?: boolean;
  code_owner_approval_required?: boolean;
  allowed_to_push?: AccessGrant[];
  allowed_to_merge?: AccessGrant[];
  allowed_to_unprotect?: AccessGrant[];
}

export interface RuleWithLevels {
  rule: ProtectedBranch;
  levels: ProtectedBranchAccessLevel[];
}

export async function listProtectedBranches(cairn: Cairn, projectId: number, search?: string): Promise<RuleWithLevels[]> {
  let q = cairn.db.selectFrom('protected_branches').selectAll().where('project_id', '=', projectId);
  if (search) q = q.where(sql<boolean>`position(lower(${search}) in lower(name)) > 0`);
  const rules = await q.orderBy('name').orderBy('id').execute();
  return withLevels(cairn, rules);
}

async function withLevels(cairn: Cairn, rules: ProtectedBranch[]): Promise<RuleWithLevels[]> {
  if (!rules.length) return [];
  const levels = await cairn.db
    .selectFrom('protected_branch_access_levels')
    .selectAll()
    .where('protected_branch_id', 'in', rules.map((r) => r.id))
    .orderBy('id')
    .execute();
  return rules.map((rule) => ({ rule, levels: levels.filter((l) => l.protected_branch_id === rule.id) }));
}

export async function findProtectedBranch(cairn: Cairn, projectId: number, name: string): Promise<RuleWithLevels> {
  const rule = await cairn.db.selectFrom('protected_branches').selectAll().where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst();
  if (!rule) throw notFound('Protected Branch');
  return (await withLevels(cairn, [rule]))[0];
}

/** Names shown in access_level_description for user and group grants (one query each). */
export async function accessLevelNames(cairn: Cairn, levels: ProtectedBranchAccessLevel[]): Promise<AccessLevelNames> {
  const userIds = [...new Set(levels.map((l) => l.user_id).filter((x): x is number => x !== null))];
  const groupIds = [...new Set(levels.map((l) => l.group_id).filter((x): x is number => x !== null))];
  const users = userIds.length ? await cairn.db.selectFrom('users').select(['id', 'name']).where('id', 'in', userIds).execute() : [];
  const groups = groupIds.length ? await cairn.db.selectFrom('namespaces').select(['id', 'name']).where('id', 'in', groupIds).execute() : [];
  return { users: new Map(users.map((u) => [u.id, u.name])), groups: new Map(groups.map((g) => [g.id, g.name])) };
}

function checkLevel(value: number | undefined, param: string) {
  if (value !== undefined && !PROTECTED_LEVELS.includes(value)) throw invalidParam(param, 'does not have a valid value');
}

/** Validates the grants of one parameter; the users and groups they name are looked up in one query each. */
async function checkGrants(cairn: Cairn, grants: AccessGrant[] | undefined, param: string) {
  const live = (grants ?? []).filter((g) => !g._destroy);
  for (const g of live) {
    const given = [g.access_level, g.user_id, g.group_id].filter((x) => x !== undefined && x !== null).length;
    if (g.id === undefined && given !== 1) throw invalidParam(param, 'is invalid');
    checkLevel(g.access_level, `${param}[access_level]`);
  }
  const userIds = [...new Set(live.flatMap((g) => (g.user_id !== undefined ? [g.user_id] : [])))];
  const groupIds = [...new Set(live.flatMap((g) => (g.group_id !== undefined ? [g.group_id] : [])))];
  if (userIds.length) {
    const found = await cairn.db.selectFrom('users').select('id').where('id', 'in', userIds).execute();
    if (found.length < userIds.length) throw apiError(422, { [`${param}`]: ['user does not exist'] });
  }
  if (groupIds.length) {
    const found = await cairn.db.selectFrom('namespaces').select('id').where('id', 'in', groupIds).where('type', '=', 'Group').execute();
    if (found.length < groupIds.length) throw apiError(422, { [`${param}`]: ['group does not exist'] });
  }
}

function grantRow(ruleId: number, kind: Kind, g: AccessGrant) {
  return {
    protected_branch_id: ruleId,
    kind,
    access_level: g.user_id !== undefined || g.group_id !== undefined ? null : (g.access_level ?? 40),
    user_id: g.user_id ?? null,
    group_id: g.group_id ?? null,
  };
}

const KINDS: { kind: Kind; level: keyof ProtectParams; grants: keyof ProtectParams }[] = [
  { kind: 'push', level: 'push_access_level', grants: 'allowed_to_push' },
  { kind: 'merge', level: 'merge_access_level', grants: 'allowed_to_merge' },
  { kind: 'unprotect', level: 'unprotect_access_level', grants: 'allowed_to_unprotect' },
];

export async function protectBranch(cairn: Cairn, projectId: number, p: ProtectParams): Promise<RuleWithLevels> {
  if (!p.name) throw missingParam('name');
  if (/[\x00-\x1f\x7f]/.test(p.name) || p.name.length > 255) throw invalidParam('name');
  for (const k of KINDS) {
    checkLevel(p[k.level] as number | undefined, k.level);
    await checkGrants(cairn, p[k.grants] as AccessGrant[] | undefined, k.grants);
  }
  const exists = await cairn.db.selectFrom('protected_branches').select('id').where('project_id', '=', projectId).where('name', '=', p.name).executeTakeFirst();
  if (exists) throw conflict(`Protected branch '${p.name}' already exists`);
  const rule = await cairn.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('protected_branches')
      .values({
        project_id: projectId,
        name: p.name!,
        allow_force_push: p.allow_force_push ?? false,
        code_owner_approval_required: p.code_owner_approval_required ?? false,
      })
      .onConflict((oc) => oc.columns(['project_id', 'name']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!inserted) throw conflict(`Protected branch '${p.name}' already exists`);
    const rows = [];
    for (const k of KINDS) {
      const grants = ((p[k.grants] as AccessGrant[] | undefined) ?? []).filter((g) => !g._destroy);
      const level = p[k.level] as number | undefined;
      // The role level applies when given, or when no explicit grants replace it.
      if (level !== undefined || !grants.length) rows.push(grantRow(inserted.id, k.kind, { access_level: level ?? 40 }));
      for (const g of grants) rows.push(grantRow(inserted.id, k.kind, g));
    }
    await trx.insertInto('protected_branch_access_levels').values(rows).execute();
    return inserted;
  });
  return (await withLevels(cairn, [rule]))[0];
}

export async function updateProtectedBranch(cairn: Cairn, projectId: number, name: string, p: ProtectParams): Promise<RuleWithLevels> {
  const current = await findProtectedBranch(cairn, projectId, name);
  for (const k of KINDS) await checkGrants(cairn, p[k.grants] as AccessGrant[] | undefined, k.grants);
  await cairn.db.transaction().execute(async (trx) => {
    const set: Record<string, unknown> = { updated_at: new Date() };
    if (p.allow_force_push !== undefined) set.allow_force_push = p.allow_force_push;
    if (p.code_owner_approval_required !== undefined) set.code_owner_approval_required = p.code_owner_approval_required;
    await trx.updateTable('protected_branches').set(set).where('id', '=', current.rule.id).execute();
    for (const k of KINDS) {
      for (const g of (p[k.grants] as AccessGrant[] | undefined) ?? []) {
        const own = g.id !== undefined ? current.levels.find((l) => l.id === g.id && l.kind === k.kind) : undefined;
        if (g.id !== undefined && !own) throw notFound(`${k.kind === 'push' ? 'Push' : k.kind === 'merge' ? 'Merge' : 'Unprotect'} access level`);
        if (own && g._destroy) {
          await trx.deleteFrom('protected_branch_access_levels').where('id', '=', own.id).execute();
        } else if (own) {
          await trx.updateTable('protected_branch_access_levels').set(grantRow(current.rule.id, k.kind, g)).where('id', '=', own.id).execute();
        } else if (!g._destroy) {
          await trx.insertInto('protected_branch_access_levels').values(grantRow(current.rule.id, k.kind, g)).execute();
        }
      }
    }
  });
  return findProtectedBranch(cairn, projectId, name);
}

/** Unprotecting needs the rule's unprotect level when it has one (maintainers otherwise). */
export async function unprotectBranch(cairn: Cairn, projectId: number, name: string, user: User, accessLevel: number): Promise<void> {
  const current = await findProtectedBranch(cairn, projectId, name);
  const unprotect = current.levels.filter((l) => l.kind === 'unprotect');
  if (unprotect.length && !user.admin && !(await admitted(cairn.db, unprotect, 'unprotect', user, accessLevel))) throw forbidden();
  await cairn.db.deleteFrom('protected_branches').where('id', '=', current.rule.id).execute();
}
