import type { Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

export interface ProtectedEnvironmentsTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  required_approval_count: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type ProtectedEnvironment = Selectable<ProtectedEnvironmentsTable>;

/** Who may deploy: exactly one of access_level, user_id, group_id (migration 0910). */
export interface ProtectedEnvironmentDeployAccessLevelsTable {
  id: Generated<number>;
  protected_environment_id: number;
  access_level: number | null;
  user_id: number | null;
  group_id: number | null;
  /** 0: direct members of the group only; 1: members of the group and of its ancestors. */
  group_inheritance_type: Generated<number>;
  created_at: Timestamp;
}
export type DeployAccessLevel = Selectable<ProtectedEnvironmentDeployAccessLevelsTable>;

export type EnvironmentState = 'available' | 'stopping' | 'stopped';
export type EnvironmentTier = 'production' | 'staging' | 'testing' | 'development' | 'other';
export const ENVIRONMENT_TIERS: EnvironmentTier[] = ['production', 'staging', 'testing', 'development', 'other'];

/** An environment of a project (migration 0980). */
export interface EnvironmentsTable {
  id: Generated<number>;
  project_id: number;
  name: string;
  slug: string;
  external_url: string | null;
  description: string | null;
  state: Generated<EnvironmentState>;
  tier: Generated<EnvironmentTier>;
  auto_stop_at: NullableTimestamp;
  /** Scheduled deletion of a stopped review app (migration 0985). */
  auto_delete_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Environment = Selectable<EnvironmentsTable>;

export type DeploymentStatus = 'created' | 'running' | 'success' | 'failed' | 'canceled' | 'skipped' | 'blocked';
export const DEPLOYMENT_STATUSES: DeploymentStatus[] = ['created', 'running', 'success', 'failed', 'canceled', 'skipped', 'blocked'];

/** A deployment: one deployment job (`deployable_id`) or one reported through the API (migration 0980). */
export interface DeploymentsTable {
  id: Generated<number>;
  iid: number;
  project_id: number;
  environment_id: number;
  ref: string;
  tag: Generated<boolean>;
  sha: string;
  user_id: number | null;
  deployable_id: number | null;
  status: Generated<DeploymentStatus>;
  created_at: Timestamp;
  updated_at: Timestamp;
  finished_at: NullableTimestamp;
}
export type Deployment = Selectable<DeploymentsTable>;

export interface EnvironmentTables {
  environments: EnvironmentsTable;
  deployments: DeploymentsTable;
  protected_environments: ProtectedEnvironmentsTable;
  protected_environment_deploy_access_levels: ProtectedEnvironmentDeployAccessLevelsTable;
}
