import { FEATURE_ACCESS_VALUES, PROJECT_FEATURES, PROJECT_SETTING_DEFAULTS } from '../presenters/projects.js';
import { toBoolean } from '../plugins/params.js';

type Kind = 'boolean' | 'string' | 'integer' | readonly string[];

/** Project settings the Projects API accepts on create and update, and how each is checked. */
const SETTING_KINDS: Record<string, Kind> = {
  packages_enabled: 'boolean',
  resolve_outdated_diff_discussions: 'boolean',
  service_desk_enabled: 'boolean',
  emails_enabled: 'boolean',
  show_diff_preview_in_email: 'boolean',
  shared_runners_enabled: 'boolean',
  group_runners_enabled: 'boolean',
  lfs_enabled: 'boolean',
  ci_default_git_depth: 'integer',
  ci_forward_deployment_enabled: 'boolean',
  ci_forward_deployment_rollback_allowed: 'boolean',
  ci_job_token_scope_enabled: 'boolean',
  ci_separated_caches: 'boolean',
  ci_allow_fork_pipelines_to_run_in_parent_project: 'boolean',
  build_git_strategy: ['fetch', 'clone'],
  keep_latest_artifact: 'boolean',
  restrict_user_defined_variables: 'boolean',
  ci_pipeline_variables_minimum_override_role: ['no_one_allowed', 'developer', 'maintainer', 'owner'],
  auto_cancel_pending_pipelines: ['enabled', 'disabled'],
  build_timeout: 'integer',
  auto_devops_enabled: 'boolean',
  auto_devops_deploy_strategy: ['continuous', 'manual', 'timed_incremental'],
  ci_config_path: 'string',
  public_jobs: 'boolean',
  only_allow_merge_if_pipeline_succeeds: 'boolean',
  allow_merge_on_skipped_pipeline: 'boolean',
  request_access_enabled: 'boolean',
  only_allow_merge_if_all_discussions_are_resolved: 'boolean',
  remove_source_branch_after_merge: 'boolean',
  printing_merge_request_link_enabled: 'boolean',
  merge_method: ['merge', 'rebase_merge', 'ff'],
  squash_option: ['never', 'always', 'default_on', 'default_off'],
  enforce_auth_checks_on_uploads: 'boolean',
  suggestion_commit_message: 'string',
  merge_commit_template: 'string',
  squash_commit_template: 'string',
  issue_branch_template: 'string',
  warn_about_potentially_unwanted_characters: 'boolean',
  autoclose_referenced_issues: 'boolean',
  mr_default_target_self: 'boolean',
  allow_pipeline_trigger_approve_deployment: 'boolean',
  ...Object.fromEntries(PROJECT_FEATURES.map((f) => [`${f}_access_level`, FEATURE_ACCESS_VALUES])),
};

/** Deprecated boolean switches that map onto an access level (GitLab still accepts them). */
const LEGACY_ENABLED: Record<string, string> = {
  issues_enabled: 'issues_access_level',
  merge_requests_enabled: 'merge_requests_access_level',
  wiki_enabled: 'wiki_access_level',
  jobs_enabled: 'builds_access_level',
  snippets_enabled: 'snippets_access_level',
  container_registry_enabled: 'container_registry_access_level',
};

/**
 * Picks and checks the settings among request parameters. Returns the settings to merge into
 * projects.settings, or the per-parameter errors (GitLab's "does not have a valid value").
 */
export function parseProjectSettings(params: Record<string, unknown>): {
  settings: Record<string, unknown>;
  errors: string[];
  modelErrors: Record<string, string[]>;
} {
  const settings: Record<string, unknown> = {};
  const errors: string[] = [];
  const modelErrors: Record<string, string[]> = {};
  for (const [legacy, target] of Object.entries(LEGACY_ENABLED)) {
    if (params[legacy] === undefined || params[target] !== undefined) continue;
    const b = toBoolean(params[legacy]);
    if (b === undefined) errors.push(`${legacy} is invalid`);
    else settings[target] = b ? 'enabled' : 'disabled';
  }
  if (params.emails_disabled !== undefined && params.emails_enabled === undefined) {
    const b = toBoolean(params.emails_disabled);
    if (b === undefined) errors.push('emails_disabled is invalid');
    else settings.emails_enabled = !b;
  }
  for (const [key, kind] of Object.entries(SETTING_KINDS)) {
    const v = params[key];
    if (v === undefined) continue;
    if (kind === 'boolean') {
      const b = v === null ? null : toBoolean(v);
      if (b === undefined || (b === null && key !== 'allow_merge_on_skipped_pipeline')) errors.push(`${key} is invalid`);
      else settings[key] = b;
    } else if (kind === 'integer') {
      const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : NaN;
      if (!Number.isInteger(n)) errors.push(`${key} is invalid`);
      else settings[key] = n;
    } else if (kind === 'string') {
      if (v !== null && typeof v !== 'string') errors.push(`${key} is invalid`);
      else settings[key] = v === '' && key === 'ci_config_path' ? null : v;
    } else if (typeof v !== 'string' || !kind.includes(v)) {
      errors.push(`${key} does not have a valid value`);
    } else {
      settings[key] = v;
    }
  }
  if (typeof settings.build_timeout === 'number' && (settings.build_timeout < 600 || settings.build_timeout > 2_592_000)) {
    modelErrors.build_timeout = ['needs to be between 10 minutes and 1 month'];
  }
  return { settings, errors, modelErrors };
}

export { PROJECT_SETTING_DEFAULTS };
