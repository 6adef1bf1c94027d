import type { Database } from '../db/index.js';
import type { Project } from '../db/schema/core.js';
import { removeRepository } from '../git/repository.js';
import { defineJob, enqueue } from '../jobs/queue.js';
import { projectRepoPath } from './projects.js';

/**
 * Repositories of deleted projects (and snippets: same storage + disk path location) leave the disk in the durable queue, not inside the request:
 * the job is queued in the transaction that deletes the rows, so a crash leaves either both
 * (nothing happened) or the rows gone and the job waiting; never a row without its repository.
 */
const JOB = 'repository.remove';

type Located = Pick<Project, 'repository_storage' | 'disk_path'>;

defineJob(JOB, async (cairn, payload) => {
  for (const r of payload.repositories as { storage: string; diskPath: string }[]) {
    const located = { repository_storage: r.storage, disk_path: r.diskPath };
    // Hashed paths are never reused, but a path some project points to again is never removed.
    const inUse =
      (await cairn.db.selectFrom('projects').select('id').where('repository_storage', '=', r.storage).where('disk_path', '=', r.diskPath).executeTakeFirst()) ??
      (await cairn.db.selectFrom('snippets').select('id').where('repository_storage', '=', r.storage).where('disk_path', '=', r.diskPath).executeTakeFirst());
    if (inUse) continue;
    const repo = projectRepoPath(cairn, located);
    await removeRepository(repo);
    await removeRepository(repo.replace(/\.git$/, '.wiki.git'));
  }
});

/** Queues the removal of these projects' (or snippets') repositories; call it in the transaction that deletes their rows. */
export async function scheduleRepositoryRemoval(db: Database, projects: Located[]): Promise<void> {
  if (!projects.length) return;
  await enqueue(db, JOB, { repositories: projects.map((p) => ({ storage: p.repository_storage, diskPath: p.disk_path })) });
}
