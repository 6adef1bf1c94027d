import type { ColumnType, Generated, Selectable } from 'kysely';
import './ci.js';
import type { Timestamp } from './core.js';

// Tables and columns of migration 0965_ci_resource_groups (declaration merging keeps ci.ts untouched).
declare module './ci.js' {
  interface CiBuildsTable {
    /** The resource group the job waits for or holds (resource_group:), once it was enqueued. */
    resource_group_id: ColumnType<number | null, number | null | undefined, number | null>;
  }
}

export type ProcessMode = 'unordered' | 'oldest_first' | 'newest_first' | 'newest_ready_first';

export interface CiResourceGroupsTable {
  id: Generated<number>;
  project_id: number;
  key: string;
  process_mode: Generated<ProcessMode>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiResourceGroup = Selectable<CiResourceGroupsTable>;

export interface CiResourcesTable {
  id: Generated<number>;
  resource_group_id: number;
  build_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CiResourceGroupTables {
  ci_resource_groups: CiResourceGroupsTable;
  ci_resources: CiResourcesTable;
}
