import type { Insertable } from 'kysely';
import type { Cairn } from '../context.js';
import type { ProjectsTable } from '../db/schema/core.js';
import { hashedDiskPath, initBareRepository, repositoryPath } from '../git/repository.js';
import { randomToken } from '../lib/secrets.js';

export type NewProject = Omit<Insertable<ProjectsTable>, 'disk_path' | 'runners_token'>;

export function storageRoot(cairn: Cairn, storage: string): string {
  const root = cairn.config.storages[storage];
  if (!root) throw new Error(`unknown repository storage "${storage}"`);
  return root;
}

export function projectRepoPath(cairn: Cairn, project: { repository_storage: string; disk_path: string }): string {
  return repositoryPath(storageRoot(cairn, project.repository_storage), project.disk_path);
}

/**
 * Inserts the project and creates its bare repository inside one transaction: a failed
 * `git init` rolls the row back, and a crash before commit leaves only an unused directory
 * under a hashed path no row points to.
 */
export async function insertProject(cairn: Cairn, attrs: NewProject) {
  return cairn.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('projects')
      .values({ ...attrs, runners_token: 'GR1348941' + randomToken(20) })
      .returningAll()
      .executeTakeFirstOrThrow();
    const diskPath = hashedDiskPath('project', inserted.id);
    const project = await trx.updateTable('projects').set({ disk_path: diskPath }).where('id', '=', inserted.id).returningAll().executeTakeFirstOrThrow();
    await initBareRepository(projectRepoPath(cairn, project), project.default_branch ?? 'main');
    return project;
  });
}
