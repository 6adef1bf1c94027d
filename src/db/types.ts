import type { BranchTables } from './schema/branches.js';
import type { CiTables } from './schema/ci.js';
import type { CiCacheTables } from './schema/ci_caches.js';
import type { CiEngineTables } from './schema/ci_engine.js';
import type { CiResourceGroupTables } from './schema/ci_resource_groups.js';
import './schema/commit_statuses.js';
import type { CoreTables } from './schema/core.js';
import type { DeployTokenTables } from './schema/deploy_tokens.js';
import type { EnvironmentTables } from './schema/environments.js';
import type { ErrorTrackingTables } from './schema/error_tracking.js';
import type { ForkTables } from './schema/forks.js';
import type { GroupsTables } from './schema/groups.js';
import type { JobTokenScopeTables } from './schema/job_token_scope.js';
import type { KeysTables } from './schema/keys.js';
import type { LfsTables } from './schema/lfs.js';
import type { OAuthTables } from './schema/oauth.js';
import type { PipelineScheduleTables } from './schema/pipeline_schedules.js';
import type { ReleaseTables } from './schema/releases.js';
import type { ResourceAccessTokenTables } from './schema/resource_access_tokens.js';
import type { WebHookTables } from './schema/webhooks.js';
import type { UsersAreaTables } from './schema/users.js';
import type { NoteTables } from './schema/notes.js';
import type { NotificationTables } from './schema/notifications.js';
import type { SnippetTables } from './schema/snippets.js';
import type { StorageMoveTables } from './schema/storage_moves.js';
import type { WorkItemTables } from './schema/work_items.js';

/** The whole database as Kysely sees it: each area's tables, from src/db/schema/. */
export interface DB
  extends CoreTables,
    BranchTables,
    GroupsTables,
    KeysTables,
    OAuthTables,
    UsersAreaTables,
    NoteTables,
    WorkItemTables,
    ForkTables,
    CiTables,
    CiCacheTables,
    CiEngineTables,
    CiResourceGroupTables,
    EnvironmentTables,
    ReleaseTables,
    ResourceAccessTokenTables,
    ErrorTrackingTables,
    NotificationTables,
    SnippetTables,
    StorageMoveTables,
    JobTokenScopeTables,
    PipelineScheduleTables,
    LfsTables,
    DeployTokenTables,
    WebHookTables {}
