import { sql, type Kysely } from 'kysely';

// Protected branches: a name or wildcard pattern per project, with who may push and merge.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table protected_branches (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      name text not null,
      allow_force_push boolean not null default false,
      code_owner_approval_required boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, name)
    )`.execute(db);
  // kind 'push' | 'merge' | 'unprotect'; exactly one of access_level, user_id, group_id is set.
  await sql`
    create table protected_branch_access_levels (
      id serial primary key,
      protected_branch_id integer not null references protected_branches(id) on delete cascade,
      kind text not null,
      access_level integer,
      user_id integer references users(id) on delete cascade,
      group_id integer references namespaces(id) on delete cascade,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index protected_branch_access_levels_branch on protected_branch_access_levels (protected_branch_id)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
