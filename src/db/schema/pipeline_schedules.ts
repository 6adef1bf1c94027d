import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

/** Migration 0970: pipeline schedules and their variables, pipeline trigger tokens. */

type Auto<T> = ColumnType<T, T | undefined, T>;

declare module './ci.js' {
  interface CiPipelinesTable {
    /** The schedule that ran this pipeline (source schedule). */
    pipeline_schedule_id: Auto<number | null>;
    /** The trigger token that started this pipeline (source trigger). */
    trigger_id: Auto<number | null>;
  }
}

export interface CiPipelineSchedulesTable {
  id: Generated<number>;
  project_id: number;
  owner_id: number | null;
  description: string;
  /** A full ref (refs/heads/x, refs/tags/x), or the short name given when neither existed. */
  ref: string;
  cron: string;
  cron_timezone: string;
  next_run_at: NullableTimestamp;
  active: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiPipelineSchedule = Selectable<CiPipelineSchedulesTable>;

export interface CiPipelineScheduleVariablesTable {
  id: Generated<number>;
  pipeline_schedule_id: number;
  key: string;
  value_encrypted: string;
  variable_type: Generated<'env_var' | 'file'>;
  raw: Generated<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiPipelineScheduleVariable = Selectable<CiPipelineScheduleVariablesTable>;

export interface CiTriggersTable {
  id: Generated<number>;
  project_id: number;
  owner_id: number | null;
  description: Generated<string>;
  token_digest: string;
  token_encrypted: string;
  last_used_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiTrigger = Selectable<CiTriggersTable>;

export interface PipelineScheduleTables {
  ci_pipeline_schedules: CiPipelineSchedulesTable;
  ci_pipeline_schedule_variables: CiPipelineScheduleVariablesTable;
  ci_triggers: CiTriggersTable;
}
