import type { Cairn } from '../context.js';
import type { Project, User } from '../db/schema/core.js';
import type { RefUpdate } from '../git/http.js';
import { isZeroOid } from '../git/validate.js';
import { can, effectiveLevel, type ProjectSubject } from '../policies/abilities.js';
import { projectAccessLevel } from '../finders/access_levels.js';
import { canPushToBranch, protectionFor, type PushProject } from '../policies/branches.js';
import { AccessLevel } from '../policies/access.js';
import { hasNoBranches } from '../git/refs.js';
import { BranchProtectionLevel, defaultBranchProtectionOf } from './default_branch_protection.js';
import { projectRepoPath } from './projects.js';

export interface RefUpdateDecision {
  /** ref -> why it may not be updated; a push with any refusal moves no ref at all. */
  refusals: Map<string, string>;
  /** Refs the push may update only by fast-forward (checked once the pack is in). */
  noForceRefs: string[];
}

export const PUSH_MESSAGES = {
  pushCode: 'You are not allowed to push code to this project.',
  protectedBranches: 'You are not allowed to push code to protected branches on this project.',
  deleteDefaultBranch: 'The default branch of a project cannot be deleted.',
  changeTags: 'You are not allowed to change existing tags on this project.',
} as const;

/**
 * Decides, before receive-pack runs, which ref updates of a push the user may make. Every
 * rule about who may move which ref lives here (git over HTTP calls it with the commands it
 * read from the push; other writers of refs can call it too).
 */
export async function checkRefUpdates(
  cairn: Cairn,
  project: PushProject & Pick<Project, 'namespace_id' | 'default_branch' | 'repository_storage' | 'disk_path'> & ProjectSubject['project'],
  user: User | null,
  updates: RefUpdate[],
  accessLevel?: number,
  /**
   * A deploy key with can_push pushes (git over SSH): it acts in its creator's name as a developer,
   * whatever the creator's own rights, and (there being no deploy key grants on protected branches
   * here) moves no protected branch, as GitLab's deploy keys that no protection names.
   */
  opts: { deployKey?: boolean } = {},
): Promise<RefUpdateDecision> {
  const refusals = new Map<string, string>();
  const noForceRefs: string[] = [];
  if (opts.deployKey && user) user = { ...user, admin: false };
  const level = opts.deployKey ? (user ? AccessLevel.DEVELOPER : 0) : user ? effectiveLevel(user, accessLevel ?? (await projectAccessLevel(cairn.db, user.id, project))) : 0;
  const subject: ProjectSubject = { project, accessLevel: level };
  const mayPush = can(user, 'push_code', subject);
  // GitLab's ProtectedBranch.protected? on an empty repository: while the default branch is to be
  // fully protected (or developers may only merge), every branch of the first push is protected,
  // and only those who administer the project make it (level 4 lets developers push it first).
  // Asked once, and only when the push moves a branch.
  let initialPushRefused: Promise<boolean> | undefined;
  const refusedAsInitialPush = (pusher: User) => (initialPushRefused ??= refusesInitialPush(cairn, project, pusher, level));
  for (const u of updates) {
    if (!user || !mayPush) {
      refusals.set(u.ref, PUSH_MESSAGES.pushCode);
      continue;
    }
    const creation = isZeroOid(u.oldSha);
    const deletion = isZeroOid(u.newSha);
    if (u.ref.startsWith('refs/heads/')) {
      const branch = u.ref.slice('refs/heads/'.length);
      if (deletion && project.default_branch && branch === project.default_branch) {
        refusals.set(u.ref, PUSH_MESSAGES.deleteDefaultBranch);
        continue;
      }
      if (await refusedAsInitialPush(user)) {
        refusals.set(u.ref, PUSH_MESSAGES.protectedBranches);
        continue;
      }
      if (opts.deployKey && (await protectionFor(cairn.db, project.id, branch)).rules.length) {
        refusals.set(u.ref, PUSH_MESSAGES.protectedBranches);
        continue;
      }
      const decision = await canPushToBranch(cairn.db, project, user, level, branch, { deletion });
      if (!decision.allowed) {
        refusals.set(u.ref, decision.message ?? PUSH_MESSAGES.pushCode);
        continue;
      }
      if (!creation && !deletion) {
        const force = await canPushToBranch(cairn.db, project, user, level, branch, { force: true });
        if (!force.allowed) noForceRefs.push(u.ref);
      }
    } else if (u.ref.startsWith('refs/tags/')) {
      if (!creation && !can(user, 'update_tag', subject)) refusals.set(u.ref, PUSH_MESSAGES.changeTags);
    }
  }
  return { refusals, noForceRefs };
}

/**
 * Does the default branch protection keep this user from making the first push to the project
 * (an empty repository, a fully protected default or one where developers only merge, and a user
 * who does not administer the project)? Pushes and commits through the API both ask.
 */
export async function refusesInitialPush(cairn: Cairn, project: Parameters<typeof initialPushProtected>[1] & ProjectSubject['project'], user: User, accessLevel: number): Promise<boolean> {
  if (can(user, 'admin_project', { project, accessLevel })) return false;
  return initialPushProtected(cairn, project);
}

/** Is the project's repository empty while its namespace's default branch protection keeps developers from making the first push? */
async function initialPushProtected(cairn: Cairn, project: Pick<Project, 'id' | 'namespace_id' | 'repository_storage' | 'disk_path'>): Promise<boolean> {
  const level = await defaultBranchProtectionOf(cairn, project.namespace_id);
  if (level !== BranchProtectionLevel.FULL && level !== BranchProtectionLevel.DEV_CAN_MERGE) return false;
  return hasNoBranches(projectRepoPath(cairn, project));
}
