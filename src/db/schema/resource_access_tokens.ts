import type { Selectable } from 'kysely';
import type { Timestamp } from './core.js';

/** Migration 1020: the project or group a bot user of a project or group access token belongs to. */
export interface ResourceBotsTable {
  user_id: number;
  /** 'Project' or 'Namespace' (a group), as in members. */
  source_type: 'Project' | 'Namespace';
  source_id: number;
  created_at: Timestamp;
}
export type ResourceBot = Selectable<ResourceBotsTable>;

export interface ResourceAccessTokenTables {
  resource_bots: ResourceBotsTable;
}
