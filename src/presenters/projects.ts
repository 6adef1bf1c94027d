import type { Project } from '../db/schema/core.js';
import { VISIBILITY_NAMES } from '../policies/access.js';
import { can, featureAccessLevel, featureAvailable, type FeatureLevel, type ProjectSubject } from '../policies/abilities.js';
import { presentSharedGroup, type SharedGroupLink } from './groups.js';
import { presentNamespaceBasic, type NamespaceWithOwner } from './namespaces.js';
import { iso, presentUserBasic, sshRepoUrl, type PresentContext } from './users.js';

export type FeatureAccess = FeatureLevel;
export const FEATURE_ACCESS_VALUES: FeatureAccess[] = ['disabled', 'private', 'enabled', 'public'];

/** Project features with an access level (`<feature>_access_level`). */
export const PROJECT_FEATURES = [
  'issues', 'repository', 'merge_requests', 'forking', 'wiki', 'builds', 'snippets', 'pages', 'operations', 'analytics',
  'container_registry', 'security_and_compliance', 'releases', 'environments', 'feature_flags', 'infrastructure',
  'monitor', 'model_experiments', 'model_registry', 'requirements',
] as const;
export type ProjectFeature = (typeof PROJECT_FEATURES)[number];


/**
 * Project settings stored in projects.settings, with GitLab's defaults. Other areas read them
 * from there (merge_method, only_allow_merge_if_pipeline_succeeds, ci_config_path...).
 */
export const PROJECT_SETTING_DEFAULTS = {
  packages_enabled: true,
  resolve_outdated_diff_discussions: false,
  service_desk_enabled: false,
  emails_enabled: true,
  show_diff_preview_in_email: true,
  shared_runners_enabled: true,
  group_runners_enabled: true,
  lfs_enabled: true,
  ci_default_git_depth: 20,
  ci_forward_deployment_enabled: true,
  ci_forward_deployment_rollback_allowed: true,
  ci_job_token_scope_enabled: false,
  ci_separated_caches: true,
  ci_allow_fork_pipelines_to_run_in_parent_project: true,
  build_git_strategy: 'fetch',
  keep_latest_artifact: true,
  restrict_user_defined_variables: false,
  ci_pipeline_variables_minimum_override_role: 'developer',
  runner_token_expiration_interval: null as number | null,
  auto_cancel_pending_pipelines: 'enabled',
  build_timeout: 3600,
  auto_devops_enabled: false,
  auto_devops_deploy_strategy: 'continuous',
  ci_config_path: null as string | null,
  public_jobs: true,
  only_allow_merge_if_pipeline_succeeds: false,
  allow_merge_on_skipped_pipeline: null as boolean | null,
  request_access_enabled: true,
  only_allow_merge_if_all_discussions_are_resolved: false,
  remove_source_branch_after_merge: true,
  printing_merge_request_link_enabled: true,
  merge_method: 'merge',
  squash_option: 'default_off',
  enforce_auth_checks_on_uploads: true,
  suggestion_commit_message: null as string | null,
  merge_commit_template: null as string | null,
  squash_commit_template: null as string | null,
  issue_branch_template: null as string | null,
  warn_about_potentially_unwanted_characters: true,
  autoclose_referenced_issues: true,
  max_artifacts_size: null as number | null,
  mr_default_target_self: false,
  allow_pipeline_trigger_approve_deployment: false,
  container_expiration_policy_enabled: false,
  container_expiration_policy_cadence: '1d',
  container_expiration_policy_keep_n: 10,
  container_expiration_policy_older_than: '90d',
  container_expiration_policy_name_regex: '.*',
  container_expiration_policy_name_regex_keep: null as string | null,
  avatar_path: null as string | null,
  import_url: null as string | null,
  import_type: null as string | null,
  import_status: 'none',
};
export type ProjectSettings = typeof PROJECT_SETTING_DEFAULTS & Partial<Record<`${ProjectFeature}_access_level`, FeatureAccess>>;

export function projectSettings(p: Project): ProjectSettings {
  return { ...PROJECT_SETTING_DEFAULTS, ...(p.settings as Partial<ProjectSettings>) };
}

export type ProjectRow = Project & { namespace: NamespaceWithOwner };

export function projectFullPath(p: ProjectRow): string {
  return `${p.namespace.full_path}/${p.path}`;
}

export function projectWebUrl(ctx: PresentContext, p: ProjectRow): string {
  return `${ctx.baseUrl}/${projectFullPath(p)}`;
}

/** What a presenter needs beyond the row; callers load it for a whole page in a few queries. */
export interface ProjectExtras {
  /** The caller's effective access level (admins count as owners, 0 for outsiders). */
  accessLevel: number;
  /** Whether the caller is an administrator (repository_storage, import_error). */
  admin: boolean;
  readmePath: string | null;
  starCount: number;
  /** Direct forks. */
  forksCount: number;
  /** The project this one was forked from, if any (whether the caller may see it or not). */
  forkedFromId?: number | null;
  /** That project, loaded for callers who may read it: shown as forked_from_project. */
  forkedFrom?: { row: ProjectRow; extras: ProjectExtras };
  openIssuesCount: number;
  sharedWithGroups: SharedGroupLink[];
  /** For the with-access form: the caller's project and group membership levels. */
  projectAccess?: number | null;
  groupAccess?: number | null;
  /** The runner registration token, decrypted for callers who maintain the project (shown as runners_token). */
  runnersToken?: string;
}

function sshUrl(ctx: PresentContext, fullPath: string): string {
  return sshRepoUrl(ctx.baseUrl, ctx.sshPort, fullPath);
}

/** GitLab's ProjectIdentity: the smallest form (runner job lists, agents). */
export function presentProjectIdentity(p: ProjectRow) {
  return {
    id: p.id,
    description: p.description,
    name: p.name,
    name_with_namespace: `${p.namespace.full_name} / ${p.name}`,
    path: p.path,
    path_with_namespace: projectFullPath(p),
    created_at: iso(p.created_at),
  };
}

/** GitLab's BasicProjectDetails: `simple=true` lists and anonymous lists. */
export function presentProjectSimple(ctx: PresentContext, p: ProjectRow, x: ProjectExtras) {
  const webUrl = projectWebUrl(ctx, p);
  const readCode = featureAvailable({ project: p, accessLevel: x.accessLevel }, 'repository');
  const s = projectSettings(p);
  return {
    ...presentProjectIdentity(p),
    ...(readCode ? { default_branch: p.default_branch ?? 'main' } : {}),
    tag_list: [...p.topics].sort(),
    topics: [...p.topics].sort(),
    ssh_url_to_repo: sshUrl(ctx, projectFullPath(p)),
    http_url_to_repo: `${webUrl}.git`,
    web_url: webUrl,
    ...(readCode
      ? { readme_url: x.readmePath ? `${webUrl}/-/blob/${p.default_branch ?? 'main'}/${x.readmePath}` : null, forks_count: x.forksCount }
      : {}),
    avatar_url: s.avatar_path ? `${ctx.baseUrl}/uploads/-/system/project/avatar/${p.id}/${s.avatar_path}` : null,
    star_count: x.starCount,
    last_activity_at: iso(p.last_activity_at),
    namespace: presentNamespaceBasic(ctx, p.namespace),
  };
}

/** GitLab's Project entity: single reads and lists for signed-in callers. */
export function presentProject(ctx: PresentContext, p: ProjectRow, x: ProjectExtras) {
  const s = projectSettings(p);
  const api = `${ctx.baseUrl}/api/v4/projects/${p.id}`;
  const subject: ProjectSubject = { project: p, accessLevel: x.accessLevel };
  const maintainer = can(ctx.viewer ?? null, 'admin_project', subject);
  const available = (f: ProjectFeature) => featureAvailable(subject, f);
  const accessLevels = Object.fromEntries(PROJECT_FEATURES.map((f) => [`${f}_access_level`, featureAccessLevel(p, f)]));
  const host = new URL(ctx.baseUrl).host;
  return {
    ...presentProjectSimple(ctx, p, x),
    updated_at: iso(p.updated_at),
    container_registry_image_prefix: `${host}/${projectFullPath(p)}`.toLowerCase(),
    _links: {
      self: api,
      ...(available('issues') ? { issues: `${api}/issues` } : {}),
      ...(available('merge_requests') ? { merge_requests: `${api}/merge_requests` } : {}),
      repo_branches: `${api}/repository/branches`,
      labels: `${api}/labels`,
      events: `${api}/events`,
      members: `${api}/members`,
      cluster_agents: `${api}/cluster_agents`,
    },
    packages_enabled: s.packages_enabled,
    empty_repo: p.empty_repo,
    archived: p.archived,
    visibility: VISIBILITY_NAMES[p.visibility_level] ?? 'private',
    ...(p.namespace.type === 'User' && p.namespace.owner ? { owner: presentUserBasic(ctx, p.namespace.owner) } : {}),
    resolve_outdated_diff_discussions: s.resolve_outdated_diff_discussions,
    container_expiration_policy: {
      cadence: s.container_expiration_policy_cadence,
      enabled: s.container_expiration_policy_enabled,
      keep_n: s.container_expiration_policy_keep_n,
      older_than: s.container_expiration_policy_older_than,
      name_regex: s.container_expiration_policy_name_regex,
      name_regex_keep: s.container_expiration_policy_name_regex_keep,
      next_run_at: null,
    },
    repository_object_format: 'sha1',
    issues_enabled: available('issues'),
    merge_requests_enabled: available('merge_requests'),
    wiki_enabled: available('wiki'),
    jobs_enabled: available('builds'),
    snippets_enabled: available('snippets'),
    container_registry_enabled: available('container_registry'),
    service_desk_enabled: s.service_desk_enabled,
    service_desk_address: null,
    can_create_merge_request_in: can(ctx.viewer ?? null, 'create_merge_request_in', subject),
    ...accessLevels,
    emails_disabled: !s.emails_enabled,
    emails_enabled: s.emails_enabled,
    show_diff_preview_in_email: s.show_diff_preview_in_email,
    shared_runners_enabled: s.shared_runners_enabled,
    group_runners_enabled: s.group_runners_enabled,
    lfs_enabled: s.lfs_enabled,
    creator_id: p.creator_id,
    import_url: null,
    import_type: s.import_type,
    import_status: s.import_status,
    ...(maintainer ? { import_error: null } : {}),
    ...(x.forkedFrom ? { forked_from_project: presentProjectSimple(ctx, x.forkedFrom.row, x.forkedFrom.extras) } : {}),
    ...(available('issues') ? { open_issues_count: x.openIssuesCount } : {}),
    description_html: null,
    ci_default_git_depth: s.ci_default_git_depth,
    ci_forward_deployment_enabled: s.ci_forward_deployment_enabled,
    ci_forward_deployment_rollback_allowed: s.ci_forward_deployment_rollback_allowed,
    ci_job_token_scope_enabled: s.ci_job_token_scope_enabled,
    ci_separated_caches: s.ci_separated_caches,
    ci_allow_fork_pipelines_to_run_in_parent_project: s.ci_allow_fork_pipelines_to_run_in_parent_project,
    ...(maintainer ? { build_git_strategy: s.build_git_strategy } : {}),
    keep_latest_artifact: s.keep_latest_artifact,
    restrict_user_defined_variables: s.restrict_user_defined_variables,
    ci_pipeline_variables_minimum_override_role: s.ci_pipeline_variables_minimum_override_role,
    ...(maintainer && x.runnersToken !== undefined ? { runners_token: x.runnersToken } : {}),
    runner_token_expiration_interval: s.runner_token_expiration_interval,
    auto_cancel_pending_pipelines: s.auto_cancel_pending_pipelines,
    build_timeout: s.build_timeout,
    auto_devops_enabled: s.auto_devops_enabled,
    auto_devops_deploy_strategy: s.auto_devops_deploy_strategy,
    ...(available('repository') ? { ci_config_path: s.ci_config_path } : {}),
    public_jobs: s.public_jobs,
    shared_with_groups: x.sharedWithGroups.map(presentSharedGroup),
    only_allow_merge_if_pipeline_succeeds: s.only_allow_merge_if_pipeline_succeeds,
    allow_merge_on_skipped_pipeline: s.allow_merge_on_skipped_pipeline,
    request_access_enabled: s.request_access_enabled,
    only_allow_merge_if_all_discussions_are_resolved: s.only_allow_merge_if_all_discussions_are_resolved,
    remove_source_branch_after_merge: s.remove_source_branch_after_merge,
    printing_merge_request_link_enabled: s.printing_merge_request_link_enabled,
    merge_method: s.merge_method,
    squash_option: s.squash_option,
    enforce_auth_checks_on_uploads: s.enforce_auth_checks_on_uploads,
    suggestion_commit_message: s.suggestion_commit_message,
    merge_commit_template: s.merge_commit_template,
    squash_commit_template: s.squash_commit_template,
    issue_branch_template: s.issue_branch_template,
    warn_about_potentially_unwanted_characters: s.warn_about_potentially_unwanted_characters,
    autoclose_referenced_issues: s.autoclose_referenced_issues,
    max_artifacts_size: s.max_artifacts_size,
    mr_default_target_self: s.mr_default_target_self,
    allow_pipeline_trigger_approve_deployment: s.allow_pipeline_trigger_approve_deployment,
    ...(x.admin ? { repository_storage: p.repository_storage } : {}),
  };
}

/** The GitLab default notification level of a membership ("global"). */
const NOTIFICATION_GLOBAL = 3;

/** GitLab's ProjectWithAccess: the Project form plus the caller's permissions. */
export function presentProjectWithAccess(ctx: PresentContext, p: ProjectRow, x: ProjectExtras) {
  const access = (level: number | null | undefined) => (level ? { access_level: level, notification_level: NOTIFICATION_GLOBAL } : null);
  return {
    ...presentProject(ctx, p, x),
    permissions: {
      project_access: access(x.projectAccess),
      group_access: p.namespace.type === 'Group' ? access(x.groupAccess) : null,
    },
  };
}
