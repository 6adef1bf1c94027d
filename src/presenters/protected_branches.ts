import type { ProtectedBranch, ProtectedBranchAccessLevel } from '../db/schema/branches.js';

const ROLE_DESCRIPTIONS: Record<number, string> = {
  0: 'No one',
  30: 'Developers + Maintainers',
  40: 'Maintainers',
  60: 'Administrators',
};

export interface AccessLevelNames {
  users: Map<number, string>;
  groups: Map<number, string>;
}

export function presentAccessLevel(l: ProtectedBranchAccessLevel, names: AccessLevelNames) {
  const description =
    l.user_id !== null ? (names.users.get(l.user_id) ?? '') : l.group_id !== null ? (names.groups.get(l.group_id) ?? '') : (ROLE_DESCRIPTIONS[l.access_level ?? 40] ?? String(l.access_level));
  return {
    id: l.id,
    access_level: l.access_level ?? 40,
    access_level_description: description,
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
