import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, Project } from '../db/schema/core.js';
import { MEMBER } from '../policies/rules.js';

// A user's level on one project or group, read from the access rules (migration 0700_access_rules).
// Policies answer over the level these load; they do no I/O themselves.

/** The highest access level a user has on a group (0: none). */
export async function groupAccessLevel(db: Database, userId: number, group: Pick<Namespace, 'id'>): Promise<number> {
  const row = await sql<{ level: number }>`select group_access_level(${userId}, ${group.id}) as level`.execute(db);
  return row.rows[0]?.level ?? 0;
}

/** The highest access level a user has on a project (0: none). */
export async function projectAccessLevel(db: Database, userId: number, project: Pick<Project, 'id'>): Promise<number> {
  const row = await sql<{ level: number }>`select project_access_level(${userId}, ${project.id}) as level`.execute(db);
  return row.rows[0]?.level ?? 0;
}

/**
 * GitLab lets a user see a private group when they have access to one of its subgroups or
 * projects (read_group through descendants); the same rule as groupVisibleTo (policies/access.ts).
 */
export async function hasAccessBelowGroup(db: Database, userId: number, groupId: number): Promise<boolean> {
  const row = await sql<{ found: boolean }>`
    select exists (
      select 1 from group_authorizations(${userId}) ga join namespaces n on n.id = ga.group_id
       where n.traversal_ids @> array[${groupId}::int] and ${MEMBER.level(sql`ga.access_level`)}
      union all
      select 1 from project_authorizations(${userId}) pa
        join projects p on p.id = pa.project_id join namespaces n on n.id = p.namespace_id
       where n.traversal_ids @> array[${groupId}::int]
    ) as found`.execute(db);
  return row.rows[0]?.found ?? false;
}
