import type { Namespace } from '../db/schema/core.js';
import { VISIBILITY_NAMES } from '../policies/access.js';
import { groupAvatarUrl, groupWebUrl } from './namespaces.js';
import { iso, type PresentContext } from './users.js';

/**
 * Group settings without behaviour in Cairn live in namespaces.settings; these are the values a
 * group has until someone changes them (GitLab's defaults).
 */
export const GROUP_SETTING_DEFAULTS = {
  share_with_group_lock: false,
  require_two_factor_authentication: false,
  two_factor_grace_period: 48,
  auto_devops_enabled: null as boolean | null,
  emails_enabled: true,
  show_diff_preview_in_email: true,
  mentions_disabled: null as boolean | null,
  lfs_enabled: true,
  math_rendering_limits_enabled: true,
  lock_math_rendering_limits_enabled: false,
  default_branch_protection: 2,
  shared_runners_setting: 'enabled',
  max_artifacts_size: null as number | null,
  ldap_cn: null as string | null,
  ldap_access: null as number | null,
  wiki_access_level: 'enabled',
  prevent_sharing_groups_outside_hierarchy: false,
  membership_lock: false,
  prevent_forking_outside_group: false,
  file_template_project_id: null as number | null,
  extra_shared_runners_minutes_limit: null as number | null,
  shared_runners_minutes_limit: null as number | null,
  enabled_git_access_protocol: 'all',
  duo_features_enabled: false,
  lock_duo_features_enabled: false,
};
export type GroupSettings = typeof GROUP_SETTING_DEFAULTS;

/** Cairn has no organizations; everything belongs to GitLab's default one. */
export const DEFAULT_ORGANIZATION_ID = 1;

export const SUBGROUP_CREATION_LEVELS = ['owner', 'maintainer'] as const;
export const PROJECT_CREATION_LEVELS = ['noone', 'maintainer', 'developer'] as const;

export function groupSettings(g: Namespace): GroupSettings {
  return { ...GROUP_SETTING_DEFAULTS, ...(g.settings as Partial<GroupSettings>) };
}

function branchProtectionDefaults(level: number) {
  // GitLab's mapping from the legacy integer to the structured form.
  const developers = [{ access_level: 30 }];
  const maintainers = [{ access_level: 40 }];
  switch (level) {
    case 0:
      return { allowed_to_push: developers, allow_force_push: true, allowed_to_merge: developers, developer_can_initial_push: false };
    case 1:
      return { allowed_to_push: developers, allow_force_push: false, allowed_to_merge: maintainers, developer_can_initial_push: false };
    case 3:
      return { allowed_to_push: maintainers, allow_force_push: false, allowed_to_merge: developers, developer_can_initial_push: false };
    case 4:
      return { allowed_to_push: maintainers, allow_force_push: false, allowed_to_merge: maintainers, developer_can_initial_push: true };
    default:
      return { allowed_to_push: maintainers, allow_force_push: false, allowed_to_merge: maintainers, developer_can_initial_push: false };
  }
}

/** GitLab's Group entity: list items and the base of the detail form. */
export function presentGroup(ctx: PresentContext, g: Namespace) {
  const s = groupSettings(g);
  return {
    id: g.id,
    web_url: groupWebUrl(ctx, g.full_path),
    name: g.name,
    path: g.path,
    description: g.description,
    visibility: VISIBILITY_NAMES[g.visibility_level] ?? 'private',
    share_with_group_lock: s.share_with_group_lock,
    require_two_factor_authentication: s.require_two_factor_authentication,
    two_factor_grace_period: s.two_factor_grace_period,
    project_creation_level: PROJECT_CREATION_LEVELS[g.project_creation_level] ?? 'developer',
    auto_devops_enabled: s.auto_devops_enabled,
    subgroup_creation_level: SUBGROUP_CREATION_LEVELS[g.subgroup_creation_level] ?? 'maintainer',
    emails_disabled: !s.emails_enabled,
    emails_enabled: s.emails_enabled,
    show_diff_preview_in_email: s.show_diff_preview_in_email,
    mentions_disabled: s.mentions_disabled,
    lfs_enabled: s.lfs_enabled,
    archived: false,
    math_rendering_limits_enabled: s.math_rendering_limits_enabled,
    lock_math_rendering_limits_enabled: s.lock_math_rendering_limits_enabled,
    default_branch: g.default_branch_name,
    default_branch_protection: s.default_branch_protection,
    default_branch_protection_defaults: branchProtectionDefaults(s.default_branch_protection),
    avatar_url: groupAvatarUrl(ctx, g),
    request_access_enabled: g.request_access_enabled,
    full_name: g.full_name,
    full_path: g.full_path,
    created_at: iso(g.created_at),
    parent_id: g.parent_id,
    organization_id: DEFAULT_ORGANIZATION_ID,
    shared_runners_setting: s.shared_runners_setting,
    max_artifacts_size: s.max_artifacts_size,
    ldap_cn: s.ldap_cn,
    ldap_access: s.ldap_access,
    wiki_access_level: s.wiki_access_level,
    duo_features_enabled: s.duo_features_enabled,
    lock_duo_features_enabled: s.lock_duo_features_enabled,
    file_template_project_id: s.file_template_project_id,
    marked_for_deletion_on: null,
  };
}

export interface SharedGroupLink {
  group_id: number;
  group_name: string;
  group_full_path: string;
  group_access: number;
  expires_at: string | null;
}

export function presentSharedGroup(link: SharedGroupLink) {
  return {
    group_id: link.group_id,
    group_name: link.group_name,
    group_full_path: link.group_full_path,
    group_access_level: link.group_access,
    expires_at: link.expires_at,
  };
}

export interface GroupDetailExtras {
  /** Groups this group is shared with, already filtered to those the caller may see. */
  sharedWithGroups: SharedGroupLink[];
  /** Owners (and admins) see the runner registration token. */
  canAdmin: boolean;
  /** That token, decrypted (loaded only when canAdmin). */
  runnersToken?: string;
  /** Pre-presented project lists when with_projects is on. */
  projects?: unknown[];
  sharedProjects?: unknown[];
}

/** GitLab's GroupDetail: single reads, create, update. */
export function presentGroupDetail(ctx: PresentContext, g: Namespace, extras: GroupDetailExtras) {
  const s = groupSettings(g);
  return {
    ...presentGroup(ctx, g),
    shared_with_groups: extras.sharedWithGroups.map(presentSharedGroup),
    ...(extras.canAdmin && extras.runnersToken !== undefined ? { runners_token: extras.runnersToken } : {}),
    ...(g.parent_id === null ? { prevent_sharing_groups_outside_hierarchy: s.prevent_sharing_groups_outside_hierarchy } : {}),
    membership_lock: s.membership_lock,
    prevent_forking_outside_group: s.prevent_forking_outside_group,
    shared_runners_minutes_limit: s.shared_runners_minutes_limit,
    extra_shared_runners_minutes_limit: s.extra_shared_runners_minutes_limit,
    ...(extras.projects ? { projects: extras.projects } : {}),
    ...(extras.sharedProjects ? { shared_projects: extras.sharedProjects } : {}),
  };
}
