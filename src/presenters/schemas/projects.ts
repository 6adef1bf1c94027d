import { Type } from 'typebox';
import { DateOnly, Nullable, Timestamp, strict } from './common.js';
import { NamespaceBasicSchema } from './namespaces.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of src/presenters/projects.ts; contract tests check real responses against them. */
const FEATURES = [
  'issues', 'repository', 'merge_requests', 'forking', 'wiki', 'builds', 'snippets', 'pages', 'operations', 'analytics',
  'container_registry', 'security_and_compliance', 'releases', 'environments', 'feature_flags', 'infrastructure',
  'monitor', 'model_experiments', 'model_registry', 'requirements',
] as const;
const FeatureAccess = Type.Union([Type.Literal('disabled'), Type.Literal('private'), Type.Literal('enabled'), Type.Literal('public')]);
const featureAccessProps = Object.fromEntries(FEATURES.map((f) => [`${f}_access_level`, FeatureAccess])) as Record<`${(typeof FEATURES)[number]}_access_level`, typeof FeatureAccess>;

const identityProps = {
  id: Type.Integer(),
  description: Nullable(Type.String()),
  name: Type.String(),
  name_with_namespace: Type.String(),
  path: Type.String(),
  path_with_namespace: Type.String(),
  created_at: Timestamp,
};
/** GitLab's ProjectIdentity. */
export const ProjectIdentitySchema = Type.Object(identityProps, strict);

const simpleProps = {
  ...identityProps,
  /** Only for callers who may read the code (default_branch, readme_url, forks_count). */
  default_branch: Type.Optional(Type.String()),
  tag_list: Type.Array(Type.String()),
  topics: Type.Array(Type.String()),
  ssh_url_to_repo: Type.String(),
  http_url_to_repo: Type.String(),
  web_url: Type.String(),
  readme_url: Type.Optional(Nullable(Type.String())),
  forks_count: Type.Optional(Type.Integer()),
  avatar_url: Nullable(Type.String()),
  star_count: Type.Integer(),
  last_activity_at: Timestamp,
  namespace: NamespaceBasicSchema,
};
/** GitLab's BasicProjectDetails (`simple=true` and anonymous lists). */
export const ProjectSimpleSchema = Type.Object(simpleProps, strict);

export const SharedWithGroupSchema = Type.Object(
  {
    group_id: Type.Integer(),
    group_name: Type.String(),
    group_full_path: Type.String(),
    group_access_level: Type.Integer(),
    expires_at: Nullable(DateOnly),
  },
  strict,
);

const fullProps = {
  ...simpleProps,
  updated_at: Timestamp,
  /** A fork's source, for callers who may read it (GitLab's BasicProjectDetails). */
  forked_from_project: Type.Optional(ProjectSimpleSchema),
  container_registry_image_prefix: Type.String(),
  _links: Type.Object(
    {
      self: Type.String(),
      issues: Type.Optional(Type.String()),
      merge_requests: Type.Optional(Type.String()),
      repo_branches: Type.String(),
      labels: Type.String(),
      events: Type.String(),
      members: Type.String(),
      cluster_agents: Type.String(),
    },
    strict,
  ),
  packages_enabled: Type.Boolean(),
  empty_repo: Type.Boolean(),
  archived: Type.Boolean(),
  visibility: Type.Union([Type.Literal('private'), Type.Literal('internal'), Type.Literal('public')]),
  /** Projects in a personal namespace. */
  owner: Type.Optional(UserBasicSchema),
  resolve_outdated_diff_discussions: Type.Boolean(),
  container_expiration_policy: Type.Object(
    {
      cadence: Type.String(),
      enabled: Type.Boolean(),
      keep_n: Nullable(Type.Integer()),
      older_than: Nullable(Type.String()),
      name_regex: Nullable(Type.String()),
      name_regex_keep: Nullable(Type.String()),
      next_run_at: Nullable(Timestamp),
    },
    strict,
  ),
  repository_object_format: Type.String(),
  issues_enabled: Type.Boolean(),
  merge_requests_enabled: Type.Boolean(),
  wiki_enabled: Type.Boolean(),
  jobs_enabled: Type.Boolean(),
  snippets_enabled: Type.Boolean(),
  container_registry_enabled: Type.Boolean(),
  service_desk_enabled: Type.Boolean(),
  service_desk_address: Nullable(Type.String()),
  can_create_merge_request_in: Type.Boolean(),
  ...featureAccessProps,
  emails_disabled: Type.Boolean(),
  emails_enabled: Type.Boolean(),
  show_diff_preview_in_email: Type.Boolean(),
  shared_runners_enabled: Type.Boolean(),
  group_runners_enabled: Type.Boolean(),
  lfs_enabled: Type.Boolean(),
  /** null when the creator was deleted or the project was made by the system. */
  creator_id: Nullable(Type.Integer()),
  import_url: Nullable(Type.String()),
  import_type: Nullable(Type.String()),
  import_status: Type.String(),
  /** Maintainers only. */
  import_error: Type.Optional(Nullable(Type.String())),
  /** When issues are available to the caller. */
  open_issues_count: Type.Optional(Type.Integer()),
  /** GitLab sends the rendered Markdown here; Cairn has no Markdown renderer yet and sends null. */
  description_html: Nullable(Type.String()),
  ci_default_git_depth: Nullable(Type.Integer()),
  ci_forward_deployment_enabled: Type.Boolean(),
  ci_forward_deployment_rollback_allowed: Type.Boolean(),
  ci_job_token_scope_enabled: Type.Boolean(),
  ci_separated_caches: Type.Boolean(),
  ci_allow_fork_pipelines_to_run_in_parent_project: Type.Boolean(),
  /** Maintainers only. */
  build_git_strategy: Type.Optional(Type.String()),
  keep_latest_artifact: Type.Boolean(),
  restrict_user_defined_variables: Type.Boolean(),
  ci_pipeline_variables_minimum_override_role: Type.String(),
  /** Maintainers only. */
  runners_token: Type.Optional(Type.String()),
  runner_token_expiration_interval: Nullable(Type.Integer()),
  auto_cancel_pending_pipelines: Type.String(),
  build_timeout: Type.Integer(),
  auto_devops_enabled: Type.Boolean(),
  auto_devops_deploy_strategy: Type.String(),
  /** Callers who may read the code. */
  ci_config_path: Type.Optional(Nullable(Type.String())),
  public_jobs: Type.Boolean(),
  shared_with_groups: Type.Array(SharedWithGroupSchema),
  only_allow_merge_if_pipeline_succeeds: Type.Boolean(),
  allow_merge_on_skipped_pipeline: Nullable(Type.Boolean()),
  request_access_enabled: Type.Boolean(),
  only_allow_merge_if_all_discussions_are_resolved: Type.Boolean(),
  remove_source_branch_after_merge: Type.Boolean(),
  printing_merge_request_link_enabled: Type.Boolean(),
  merge_method: Type.String(),
  squash_option: Type.String(),
  enforce_auth_checks_on_uploads: Type.Boolean(),
  suggestion_commit_message: Nullable(Type.String()),
  merge_commit_template: Nullable(Type.String()),
  squash_commit_template: Nullable(Type.String()),
  issue_branch_template: Nullable(Type.String()),
  warn_about_potentially_unwanted_characters: Type.Boolean(),
  autoclose_referenced_issues: Type.Boolean(),
  max_artifacts_size: Nullable(Type.Integer()),
  mr_default_target_self: Type.Boolean(),
  allow_pipeline_trigger_approve_deployment: Type.Boolean(),
  /** Administrators only. */
  repository_storage: Type.Optional(Type.String()),
};
/** GitLab's Project entity (single reads, create, update). */
export const ProjectSchema = Type.Object(fullProps, strict);

const MemberAccess = Nullable(Type.Object({ access_level: Type.Integer(), notification_level: Type.Integer() }, strict));
/** GitLab's ProjectWithAccess (signed-in lists and single reads). */
export const ProjectWithAccessSchema = Type.Object(
  { ...fullProps, permissions: Type.Object({ project_access: MemberAccess, group_access: MemberAccess }, strict) },
  strict,
);

export const StarrerSchema = Type.Object({ starred_since: Timestamp, user: UserBasicSchema }, strict);

/** `{"message":"202 Accepted"}`: a deletion GitLab queues (projects, groups). */
export const AcceptedSchema = Type.Object({ message: Type.Literal('202 Accepted') }, strict);
