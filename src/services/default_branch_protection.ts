import type { Cairn, PostReceiveEvent } from '../context.js';
import type { Database } from '../db/index.js';
import { AccessLevel } from '../policies/access.js';
import { branchMatches } from '../policies/branches.js';

/**
 * GitLab's default branch protection (Gitlab::Access's PROTECTION_* levels): how a project's
 * default branch is protected when it appears (the first push, or the initial README commit).
 * The level is the project's group's default_branch_protection, else the instance's
 * (CAIRN_DEFAULT_BRANCH_PROTECTION).
 */
export const BranchProtectionLevel = {
  NONE: 0,
  DEV_CAN_PUSH: 1,
  FULL: 2,
  DEV_CAN_MERGE: 3,
  DEV_CAN_INITIAL_PUSH: 4,
} as const;

/** Who pushes and who merges to a default branch protected at `level` (null: not protected). */
export function defaultBranchAccess(level: number): { push: number; merge: number } | null {
  switch (level) {
    case BranchProtectionLevel.NONE:
      return null;
    case BranchProtectionLevel.DEV_CAN_PUSH:
      return { push: AccessLevel.DEVELOPER, merge: AccessLevel.MAINTAINER };
    case BranchProtectionLevel.DEV_CAN_MERGE:
      return { push: AccessLevel.MAINTAINER, merge: AccessLevel.DEVELOPER };
    default:
      return { push: AccessLevel.MAINTAINER, merge: AccessLevel.MAINTAINER };
  }
}

/** The default branch protection that applies to projects in this namespace. */
export async function defaultBranchProtectionOf(cairn: Pick<Cairn, 'db' | 'config'>, namespaceId: number): Promise<number> {
  const ns = await cairn.db.selectFrom('namespaces').select(['type', 'settings']).where('id', '=', namespaceId).executeTakeFirst();
  const own = ns?.type === 'Group' ? (ns.settings as { default_branch_protection?: unknown } | null)?.default_branch_protection : undefined;
  return typeof own === 'number' && own >= 0 && own <= 4 ? own : cairn.config.defaultBranchProtection;
}

/**
 * Protects the project's default branch as its namespace's level says, unless a rule already
 * matches it (GitLab's Projects::ProtectDefaultBranchService). Two writers at once: the unique
 * (project, name) index keeps one rule.
 */
export async function protectDefaultBranch(cairn: Pick<Cairn, 'db' | 'config'>, projectId: number): Promise<void> {
  const project = await cairn.db.selectFrom('projects').select(['id', 'namespace_id', 'default_branch']).where('id', '=', projectId).executeTakeFirst();
  if (!project?.default_branch) return;
  const access = defaultBranchAccess(await defaultBranchProtectionOf(cairn, project.namespace_id));
  if (!access) return;
  await insertProtection(cairn.db, project.id, project.default_branch, access);
}

async function insertProtection(db: Database, projectId: number, branch: string, access: { push: number; merge: number }) {
  await db.transaction().execute(async (trx) => {
    const rules = await trx.selectFrom('protected_branches').select('name').where('project_id', '=', projectId).execute();
    if (rules.some((r) => branchMatches(r.name, branch))) return;
    const rule = await trx
      .insertInto('protected_branches')
      .values({ project_id: projectId, name: branch, allow_force_push: false, code_owner_approval_required: false })
      .onConflict((oc) => oc.columns(['project_id', 'name']).doNothing())
      .returning('id')
      .executeTakeFirst();
    if (!rule) return;
    await trx
      .insertInto('protected_branch_access_levels')
      .values([
        { protected_branch_id: rule.id, kind: 'push', access_level: access.push, user_id: null, group_id: null },
        { protected_branch_id: rule.id, kind: 'merge', access_level: access.merge, user_id: null, group_id: null },
        { protected_branch_id: rule.id, kind: 'unprotect', access_level: AccessLevel.MAINTAINER, user_id: null, group_id: null },
      ])
      .execute();
  });
}

/**
 * After refs moved: when the change created the project's default branch (the first push to an
 * empty project, or its first commit through the API), protect it. Runs before the other
 * post-receive hooks, so the first pipeline already runs on a protected ref.
 */
export async function protectCreatedDefaultBranch(cairn: Pick<Cairn, 'db' | 'config'>, event: PostReceiveEvent): Promise<void> {
  const created = event.changes.filter((c) => c.ref.startsWith('refs/heads/') && /^0+$/.test(c.oldSha) && !/^0+$/.test(c.newSha));
  if (!created.length) return;
  const project = await cairn.db.selectFrom('projects').select('default_branch').where('id', '=', event.projectId).executeTakeFirst();
  if (!project?.default_branch || !created.some((c) => c.ref === `refs/heads/${project.default_branch}`)) return;
  await protectDefaultBranch(cairn, event.projectId);
}
