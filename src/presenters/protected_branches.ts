import type { ProtectedBranch, ProtectedBranchAccessLevel } from '../db/schema/branches.js';
import { accessLevelDescription, type AccessLevelNames } from './access_levels.js';

/** A push, merge or unprotect access level of a protected branch. */
export function presentAccessLevel(l: ProtectedBranchAccessLevel, names: AccessLevelNames) {
  return {
    id: l.id,
    access_level: l.access_level ?? 40,
    access_level_description: accessLevelDescription(l, names),
    user_id: l.user_id,
    group_id: l.group_id,
  };
}

export function presentProtectedBranch(rule: ProtectedBranch, levels: ProtectedBranchAccessLevel[], names: AccessLevelNames) {
  const of = (kind: string) => levels.filter((l) => l.protected_branch_id === rule.id && l.kind === kind).map((l) => presentAccessLevel(l, names));
  return {
    id: rule.id,
    name: rule.name,
    push_access_levels: of('push'),
    merge_access_levels: of('merge'),
    unprotect_access_levels: of('unprotect'),
    allow_force_push: rule.allow_force_push,
    code_owner_approval_required: rule.code_owner_approval_required,
  };
}
