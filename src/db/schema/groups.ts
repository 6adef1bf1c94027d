import type { ColumnType, Generated } from 'kysely';

type Auto<T> = ColumnType<T, T | undefined, T>;

// Columns migration 0200 adds to the core tables (declaration merging keeps core.ts untouched).
declare module './core.js' {
  interface NamespacesTable {
    /** 0 owners, 1 maintainers. */
    subgroup_creation_level: Auto<number>;
    /** 0 no one, 1 maintainers, 2 developers and maintainers. */
    project_creation_level: Auto<number>;
    default_branch_name: string | null;
    request_access_enabled: Auto<boolean>;
  }
  interface ProjectsTable {
    topics: Auto<string[]>;
  }
}

export interface UsersStarProjectsTable {
  id: Generated<number>;
  user_id: number;
  project_id: number;
  created_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface GroupsTables {
  users_star_projects: UsersStarProjectsTable;
}
