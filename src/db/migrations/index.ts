import type { Migration } from 'kysely';
import * as core from './0001_core.js';
import * as protectedBranches from './0002_protected_branches.js';
import * as projectAccessLevel from './0051_project_access_level.js';
import * as keys from './0150_keys.js';
import * as members from './0250_members.js';
import * as users from './0100_users.js';
import * as oauth from './0500_oauth.js';
import * as groupsProjects from './0200_groups_projects.js';
import * as notes from './0300_notes.js';
import * as cacheInvalidation from './0600_cache_invalidation.js';
import * as workItems from './0700_work_items.js';
import * as labels from './0710_labels.js';
import * as accessRules from './0700_access_rules.js';
import * as forks from './0730_forks.js';
import * as issues from './0730_issues.js';
import * as mergeRequestListIndexes from './0720_merge_request_list_indexes.js';
import * as ci from './0800_ci.js';
import * as ciEngine from './0810_ci_engine.js';
import * as ciProtocol from './0820_ci_protocol.js';
import * as runnersTokenLookup from './0830_runners_token_lookup.js';
import * as runnerManagement from './0850_runner_management.js';
import * as commitStatuses from './0840_commit_statuses.js';
import * as recurringJobs from './0845_recurring_jobs.js';
import * as protectedEnvironments from './0910_protected_environments.js';
import * as errorTracking from './0930_error_tracking.js';
import * as notificationSettings from './0920_notification_settings.js';
import * as snippets from './0900_snippets.js';
import * as repositoryStorageMoves from './0940_repository_storage_moves.js';
import * as jobTokenScope from './0950_job_token_scope.js';
import * as jobLogNotify from './0960_job_log_notify.js';
import * as ciResourceGroups from './0965_ci_resource_groups.js';
import * as pipelineSchedulesTriggers from './0970_pipeline_schedules_triggers.js';
import * as ciCaches from './0975_ci_caches.js';
import * as environments from './0980_environments.js';
import * as environmentAutoDelete from './0985_environment_auto_delete.js';
import * as lfs from './0990_lfs.js';
import * as releases from './1000_releases.js';
import * as deployTokens from './1010_deploy_tokens.js';
import * as resourceAccessTokens from './1020_resource_access_tokens.js';
import * as webhooks from './1030_webhooks.js';
import * as backgroundJobPriority from './1060_background_job_priority.js';

// Every migration, by name. Names sort in the order they were written; each area of the
// code adds its own file and one line here.
export const migrations: Record<string, Migration> = {
  '0001_core': core,
  '0002_protected_branches': protectedBranches,
  '0051_project_access_level': projectAccessLevel,
  '0150_keys': keys,
  '0250_members': members,
  '0100_users': users,
  '0500_oauth': oauth,
  '0200_groups_projects': groupsProjects,
  '0300_notes': notes,
  '0600_cache_invalidation': cacheInvalidation,
  '0700_work_items': workItems,
  '0710_labels': labels,
  '0700_access_rules': accessRules,
  '0730_forks': forks,
  '0730_issues': issues,
  '0720_merge_request_list_indexes': mergeRequestListIndexes,
  '0800_ci': ci,
  '0810_ci_engine': ciEngine,
  '0820_ci_protocol': ciProtocol,
  '0830_runners_token_lookup': runnersTokenLookup,
  '0840_commit_statuses': commitStatuses,
  '0845_recurring_jobs': recurringJobs,
  '0910_protected_environments': protectedEnvironments,
  '0930_error_tracking': errorTracking,
  '0920_notification_settings': notificationSettings,
  '0850_runner_management': runnerManagement,
  '0900_snippets': snippets,
  '0940_repository_storage_moves': repositoryStorageMoves,
  '0950_job_token_scope': jobTokenScope,
  '0960_job_log_notify': jobLogNotify,
  '0965_ci_resource_groups': ciResourceGroups,
  '0970_pipeline_schedules_triggers': pipelineSchedulesTriggers,
  '0975_ci_caches': ciCaches,
  '0980_environments': environments,
  '0985_environment_auto_delete': environmentAutoDelete,
  '0990_lfs': lfs,
  '1000_releases': releases,
  '1010_deploy_tokens': deployTokens,
  '1020_resource_access_tokens': resourceAccessTokens,
  '1030_webhooks': webhooks,
  '1060_background_job_priority': backgroundJobPriority,
};
