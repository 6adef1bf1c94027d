import type { ColumnType, Generated } from 'kysely';

type Auto<T> = ColumnType<T, T | undefined, T>;

// Migration 0950: the CI job token's inbound scope.
declare module './core.js' {
  interface ProjectsTable {
    /** Job tokens of other projects reach this one only from its allowlist (GitLab's inbound_job_token_scope_enabled). */
    ci_inbound_job_token_scope_enabled: Auto<boolean>;
  }
}

export interface CiJobTokenProjectScopeLinksTable {
  id: Generated<number>;
  /** The project whose allowlist this is. */
  source_project_id: number;
  /** The project whose job tokens it admits. */
  target_project_id: number;
  added_by_id: number | null;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface CiJobTokenGroupScopeLinksTable {
  id: Generated<number>;
  source_project_id: number;
  /** Job tokens of projects in this group (or its subgroups) are admitted. */
  target_group_id: number;
  added_by_id: number | null;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface JobTokenScopeTables {
  ci_job_token_project_scope_links: CiJobTokenProjectScopeLinksTable;
  ci_job_token_group_scope_links: CiJobTokenGroupScopeLinksTable;
}
