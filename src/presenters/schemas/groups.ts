import { Type } from 'typebox';
import { DateOnly, Nullable, Timestamp, strict } from './common.js';
import { ProjectSchema } from './projects.js';

/** Response schemas of src/presenters/groups.ts; contract tests check real responses against them. */
const AccessLevelOnly = Type.Object({ access_level: Type.Integer() }, strict);

export const SharedGroupSchema = Type.Object(
  {
    group_id: Type.Integer(),
    group_name: Type.String(),
    group_full_path: Type.String(),
    group_access_level: Type.Integer(),
    expires_at: Nullable(DateOnly),
  },
  strict,
);

const groupProps = {
  id: Type.Integer(),
  web_url: Type.String(),
  name: Type.String(),
  path: Type.String(),
  description: Type.String(),
  visibility: Type.Union([Type.Literal('private'), Type.Literal('internal'), Type.Literal('public')]),
  share_with_group_lock: Type.Boolean(),
  require_two_factor_authentication: Type.Boolean(),
  two_factor_grace_period: Type.Integer(),
  project_creation_level: Type.Union([Type.Literal('noone'), Type.Literal('maintainer'), Type.Literal('developer')]),
  auto_devops_enabled: Nullable(Type.Boolean()),
  subgroup_creation_level: Type.Union([Type.Literal('owner'), Type.Literal('maintainer')]),
  emails_disabled: Type.Boolean(),
  emails_enabled: Type.Boolean(),
  show_diff_preview_in_email: Type.Boolean(),
  mentions_disabled: Nullable(Type.Boolean()),
  lfs_enabled: Type.Boolean(),
  archived: Type.Boolean(),
  math_rendering_limits_enabled: Type.Boolean(),
  lock_math_rendering_limits_enabled: Type.Boolean(),
  default_branch: Nullable(Type.String()),
  default_branch_protection: Type.Integer(),
  default_branch_protection_defaults: Type.Object(
    {
      allowed_to_push: Type.Array(AccessLevelOnly),
      allow_force_push: Type.Boolean(),
      allowed_to_merge: Type.Array(AccessLevelOnly),
      developer_can_initial_push: Type.Boolean(),
    },
    strict,
  ),
  avatar_url: Nullable(Type.String()),
  request_access_enabled: Type.Boolean(),
  full_name: Type.String(),
  full_path: Type.String(),
  created_at: Timestamp,
  parent_id: Nullable(Type.Integer()),
  organization_id: Type.Integer(),
  shared_runners_setting: Type.String(),
  max_artifacts_size: Nullable(Type.Integer()),
  ldap_cn: Nullable(Type.String()),
  ldap_access: Nullable(Type.Integer()),
  wiki_access_level: Type.String(),
  duo_features_enabled: Type.Boolean(),
  lock_duo_features_enabled: Type.Boolean(),
  file_template_project_id: Nullable(Type.Integer()),
  marked_for_deletion_on: Nullable(DateOnly),
};
/** GitLab's Group entity (lists). */
export const GroupSchema = Type.Object(groupProps, strict);

const detailProps = {
  ...groupProps,
  shared_with_groups: Type.Array(SharedGroupSchema),
  /** Owners and admins only. */
  runners_token: Type.Optional(Type.String()),
  /** Top-level groups only. */
  prevent_sharing_groups_outside_hierarchy: Type.Optional(Type.Boolean()),
  membership_lock: Type.Boolean(),
  prevent_forking_outside_group: Type.Boolean(),
  shared_runners_minutes_limit: Nullable(Type.Integer()),
  extra_shared_runners_minutes_limit: Nullable(Type.Integer()),
};
/** GitLab's GroupDetail without projects (with_projects=false, create, update). */
export const GroupDetailSchema = Type.Object(detailProps, strict);

/** GroupDetail with its projects and shared projects (the default of GET /groups/:id). */
export const GroupDetailWithProjectsSchema = Type.Object(
  {
    ...detailProps,
    projects: Type.Array(ProjectSchema),
    shared_projects: Type.Array(ProjectSchema),
  },
  strict,
);
