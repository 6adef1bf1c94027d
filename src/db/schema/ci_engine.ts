import type { ColumnType, Generated } from 'kysely';

// Columns and tables migration 0810_ci_engine adds (declaration merging keeps ci.ts untouched).
declare module './ci.js' {
  interface CiBuildsTable {
    /** A retried or played job: pending as soon as its predecessors allow, whatever its `when`. */
    enqueue_immediately: ColumnType<boolean, boolean | undefined, boolean>;
  }
}

export interface CiJobVariablesTable {
  id: Generated<number>;
  job_id: number;
  key: string;
  value_encrypted: string;
  variable_type: Generated<'env_var' | 'file'>;
}

export interface CiEngineTables {
  ci_job_variables: CiJobVariablesTable;
}
