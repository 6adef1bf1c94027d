import type { Database } from '../db/index.js';
import type { ForkNetworkMember } from '../db/schema/forks.js';

/**
 * The fork relation (migration 0730_forks). A project's direct forks are listed through the
 * project list finder (`forkedFromProjectId`); these answer the questions about one project.
 */

/** The project's row in its fork network, if it is in one. */
export async function forkMemberOf(db: Database, projectId: number): Promise<ForkNetworkMember | undefined> {
  return db.selectFrom('fork_network_members').selectAll().where('project_id', '=', projectId).executeTakeFirst();
}

/** Are both projects in one fork network (a merge request may go between them, compare may read across)? */
export async function inSameForkNetwork(db: Database, a: number, b: number): Promise<boolean> {
  if (a === b) return true;
  const row = await db
    .selectFrom('fork_network_members as x')
    .innerJoin('fork_network_members as y', 'y.fork_network_id', 'x.fork_network_id')
    .select('x.project_id')
    .where('x.project_id', '=', a)
    .where('y.project_id', '=', b)
    .executeTakeFirst();
  return !!row;
}
