import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { DeployAccessLevel } from '../db/schema/environments.js';
import { AccessLevel } from './access.js';
import { projectAccessLevel } from '../finders/access_levels.js';

/**
 * Protected environments (GitLab premium): a deployment job (a job with `environment:`) to a
 * protected environment runs only for someone one of its deploy access levels admits.
 * Administrators always may deploy.
 */

/** The deploy access levels of the project's environment `name`, or null when it is not protected. */
export async function deployAccessLevelsOf(db: Database, projectId: number, name: string): Promise<DeployAccessLevel[] | null> {
  const env = await db.selectFrom('protected_environments').select('id').where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst();
  if (!env) return null;
  return db.selectFrom('protected_environment_deploy_access_levels').selectAll().where('protected_environment_id', '=', env.id).orderBy('id').execute();
}

/** Is the user a member of the group (directly, or with inheritance type 1 of one of its ancestors)? */
async function inGroup(db: Database, userId: number, level: DeployAccessLevel): Promise<boolean> {
  const rows = await sql<{ found: boolean }>`
    select exists (
      select 1 from namespaces g join members m on m.user_id = ${userId} and m.source_type = 'Namespace'
       where g.id = ${level.group_id}
         and (m.source_id = g.id or (${level.group_inheritance_type} = 1 and m.source_id = any(g.traversal_ids)))
         and membership_active(m)
    ) as found`.execute(db);
  return rows.rows[0]?.found ?? false;
}

/** Does one of these deploy access levels admit the user (with `accessLevel` on the project)? */
export async function admitsDeployer(db: Database, levels: DeployAccessLevel[], user: Pick<User, 'id' | 'admin'>, accessLevel: number): Promise<boolean> {
  if (user.admin) return true;
  for (const l of levels) {
    if (l.access_level !== null) {
      if (l.access_level === AccessLevel.ADMIN) continue; // administrators only, answered above
      if (accessLevel >= l.access_level) return true;
    } else if (l.user_id !== null) {
      if (l.user_id === user.id) return true;
    } else if (l.group_id !== null && (await inGroup(db, user.id, l))) {
      return true;
    }
  }
  return false;
}

/**
 * May this user deploy to the project's environment? Unprotected environments (and jobs without
 * one) are open to whoever runs the job; a protected one needs a matching deploy access level.
 * `accessLevel` is loaded when not given. A job without a user never deploys to a protected one.
 */
export async function canDeployTo(
  db: Database,
  projectId: number,
  environment: string | null,
  user: Pick<User, 'id' | 'admin'> | null,
  accessLevel?: number,
): Promise<boolean> {
  if (!environment) return true;
  const levels = await deployAccessLevelsOf(db, projectId, environment);
  if (!levels) return true;
  if (!user) return false;
  if (user.admin) return true;
  const level = accessLevel ?? (await projectAccessLevel(db, user.id, { id: projectId }));
  return admitsDeployer(db, levels, user, level);
}
