import type { Database } from '../db/index.js';
import type { ProtectedBranch, ProtectedBranchAccessLevel } from '../db/schema/branches.js';
import type { Project, User } from '../db/schema/core.js';
import { sql } from 'kysely';
import { can, type ProjectSubject } from './abilities.js';
import { AccessLevel, activeMembership } from './access.js';

/** GitLab's wildcard protection: `*` matches any run of characters (including '/'). */
export function branchMatches(pattern: string, branch: string): boolean {
  if (!pattern.includes('*')) return pattern === branch;
  const re = new RegExp('^' + pattern.split('*').map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
  return re.test(branch);
}

export interface BranchProtection {
  rules: ProtectedBranch[];
  levels: ProtectedBranchAccessLevel[];
}

/** The protection rules that match a branch, with their access levels (one query each). */
export async function protectionFor(db: Database, projectId: number, branch: string): Promise<BranchProtection> {
  const all = await db.selectFrom('protected_branches').selectAll().where('project_id', '=', projectId).execute();
  const rules = all.filter((r) => branchMatches(r.name, branch));
  if (!rules.length) return { rules, levels: [] };
  const levels = await db
    .selectFrom('protected_branch_access_levels')
    .selectAll()
    .where('protected_branch_id', 'in', rules.map((r) => r.id))
    .execute();
  return { rules, levels };
}

/** Is the user in a group (a member of it or of an ancestor), for protection grants to groups? */
export type GroupGrantCheck = (groupId: number) => Promise<boolean>;

/**
 * A GroupGrantCheck for one user over the groups that `levels` grant to: one statement, run on
 * the first group grant actually checked, answers for all of them (a list of branches asks once).
 */
export function groupGrantCheck(db: Database, userId: number, levels: ProtectedBranchAccessLevel[]): GroupGrantCheck {
  const groupIds = [...new Set(levels.flatMap((l) => (l.group_id !== null ? [l.group_id] : [])))];
  let loaded: Promise<Set<number>> | undefined;
  return async (groupId) => {
    if (!groupIds.includes(groupId)) return (await groupsContaining(db, userId, [groupId])).has(groupId);
    loaded ??= groupsContaining(db, userId, groupIds);
    return (await loaded).has(groupId);
  };
}

/** Those of `groupIds` the user is in: an active member of the group or of one of its ancestors. */
async function groupsContaining(db: Database, userId: number, groupIds: number[]): Promise<Set<number>> {
  const rows = await sql<{ id: number }>`
    select g.id from namespaces g
     where g.id = any(${groupIds}::int[])
       and exists (select 1 from members m
                    where m.user_id = ${userId} and m.source_type = 'Namespace' and m.source_id = any(g.traversal_ids) and ${activeMembership})`.execute(db);
  return new Set(rows.rows.map((r) => r.id));
}

/** Does one of the rule's access levels of `kind` admit this user? */
export async function admitted(
  db: Database,
  levels: ProtectedBranchAccessLevel[],
  kind: string,
  user: User,
  accessLevel: number,
  inGroup: GroupGrantCheck = groupGrantCheck(db, user.id, levels),
): Promise<boolean> {
  for (const l of levels.filter((x) => x.kind === kind)) {
    if (l.access_level !== null) {
      if (l.access_level === AccessLevel.NO_ACCESS) continue;
      if (l.access_level === AccessLevel.ADMIN ? user.admin : accessLevel >= l.access_level) return true;
    } else if (l.user_id !== null && l.user_id === user.id && accessLevel >= AccessLevel.DEVELOPER) {
      return true;
    } else if (l.group_id !== null && (await inGroup(l.group_id))) {
      return true;
    }
  }
  return false;
}

/** Every protection rule of a project with all their levels (two queries), for checking many branches. */
export async function projectProtection(db: Database, projectId: number): Promise<BranchProtection> {
  const rules = await db.selectFrom('protected_branches').selectAll().where('project_id', '=', projectId).orderBy('id').execute();
  if (!rules.length) return { rules, levels: [] };
  const levels = await db
    .selectFrom('protected_branch_access_levels')
    .selectAll()
    .where('protected_branch_id', 'in', rules.map((r) => r.id))
    .orderBy('id')
    .execute();
  return { rules, levels };
}

/** The part of a project's protection that applies to one branch. */
export function protectionOf(all: BranchProtection, branch: string): BranchProtection {
  const rules = all.rules.filter((r) => branchMatches(r.name, branch));
  const ids = new Set(rules.map((r) => r.id));
  return { rules, levels: all.levels.filter((l) => ids.has(l.protected_branch_id)) };
}

/** GitLab's developers_can_push / developers_can_merge: a matching rule grants Developers that right. */
export function developersCan(protection: BranchProtection, kind: 'push' | 'merge'): boolean {
  return protection.levels.some((l) => l.kind === kind && l.access_level === AccessLevel.DEVELOPER);
}

export interface PushDecision {
  allowed: boolean;
  message?: string;
}

/** The project fields the push rules read: its id (protection rules) and what the push_code ability looks at. */
export type PushProject = Pick<Project, 'id'> & ProjectSubject['project'];

/**
 * May `user` (with `accessLevel` on the project) push to `branch`? Whoever may push code pushes
 * to unprotected branches; on a protected branch every matching rule must admit the user, and a
 * force push (non-fast-forward or deletion) needs allow_force_push on all of them.
 */
export async function canPushToBranch(
  db: Database,
  project: PushProject,
  user: User,
  accessLevel: number,
  branch: string,
  opts: { force?: boolean; deletion?: boolean } = {},
): Promise<PushDecision> {
  if (!can(user, 'push_code', { project, accessLevel })) return { allowed: false, message: 'You are not allowed to push code to this project.' };
  return pushDecision(db, await protectionFor(db, project.id, branch), user, { project, accessLevel }, opts);
}

/**
 * canPushToBranch on an already loaded protection (see protectionOf); `subject` is the project and
 * the user's level on it. A list of branches passes one `inGroup` (groupGrantCheck over the whole
 * project's protection), so group grants cost one statement for the list, not one per branch.
 */
export async function pushDecision(
  db: Database,
  protection: BranchProtection,
  user: User,
  subject: ProjectSubject,
  opts: { force?: boolean; deletion?: boolean } = {},
  inGroup: GroupGrantCheck = groupGrantCheck(db, user.id, protection.levels),
): Promise<PushDecision> {
  if (!can(user, 'push_code', subject)) return { allowed: false, message: 'You are not allowed to push code to this project.' };
  const { accessLevel } = subject;
  const { rules, levels } = protection;
  if (!rules.length) return { allowed: true };
  if (opts.deletion) return { allowed: false, message: 'You can only delete protected branches using the web interface.' };
  for (const rule of rules) {
    const ruleLevels = levels.filter((l) => l.protected_branch_id === rule.id);
    if (!(await admitted(db, ruleLevels, 'push', user, accessLevel, inGroup))) {
      return { allowed: false, message: 'You are not allowed to push code to protected branches on this project.' };
    }
    if (opts.force && !rule.allow_force_push) {
      return { allowed: false, message: 'You are not allowed to force push code to a protected branch on this project.' };
    }
  }
  return { allowed: true };
}

/** May `user` merge into `branch` (merge requests, and commits API on protected branches via merge rights)? */
export async function canMergeToBranch(db: Database, project: PushProject, user: User, accessLevel: number, branch: string): Promise<boolean> {
  if (!can(user, 'push_code', { project, accessLevel })) return false;
  const { rules, levels } = await protectionFor(db, project.id, branch);
  const inGroup = groupGrantCheck(db, user.id, levels);
  for (const rule of rules) {
    if (!(await admitted(db, levels.filter((l) => l.protected_branch_id === rule.id), 'merge', user, accessLevel, inGroup))) return false;
  }
  return true;
}

/**
 * GitLab's can_update_branch? (push or merge rights on the branch) and can_create_tag? (no
 * protected tags here, so push rights): may `user` run a pipeline on this ref, or retry, play or
 * cancel its jobs? A pipeline of a protected branch gets the protected variables, so running one
 * takes the rights to change that branch.
 */
export async function canUpdateRef(db: Database, project: PushProject, user: User, accessLevel: number, ref: string, tag: boolean): Promise<boolean> {
  if (!can(user, 'push_code', { project, accessLevel })) return false;
  if (tag) return true;
  const protection = await protectionFor(db, project.id, ref);
  if (!protection.rules.length) return true;
  if ((await pushDecision(db, protection, user, { project, accessLevel })).allowed) return true;
  return canMergeToBranch(db, project, user, accessLevel, ref);
}

/** GitLab's message when a pipeline may not be created on a ref the caller cannot update. */
export function protectedRefPipelineMessage(ref: string): string {
  return `You do not have sufficient permission to run a pipeline on '${ref}'. Please select a different branch or contact your administrator for assistance.`;
}

/** Is this branch protected (a protected-branch rule matches it)? Tags are protected by protected_tags when that exists. */
export async function isProtectedRef(cairn: { db: Database }, projectId: number, ref: string, tag: boolean): Promise<boolean> {
  if (tag) {
    const hasTable = await sql<{ ok: boolean }>`select to_regclass('protected_tags') is not null as ok`.execute(cairn.db);
    if (!hasTable.rows[0]?.ok) return false;
    const rows = await sql<{ name: string }>`select name from protected_tags where project_id = ${projectId}`.execute(cairn.db);
    return rows.rows.some((r) => branchMatches(r.name, ref));
  }
  const rules = await cairn.db.selectFrom('protected_branches').select('name').where('project_id', '=', projectId).execute();
  return rules.some((r) => branchMatches(r.name, ref));
}
