import type { Generated, Selectable } from 'kysely';
import type { Timestamp } from './core.js';

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

export interface EnvironmentTables {
  protected_environments: ProtectedEnvironmentsTable;
  protected_environment_deploy_access_levels: ProtectedEnvironmentDeployAccessLevelsTable;
}
