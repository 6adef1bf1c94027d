import { sql } from 'kysely';
import type { Cairn, PostReceiveEvent } from '../context.js';
import type { Project } from '../db/schema/core.js';
import { headBranch, refSnapshot, type RefUpdate } from '../git/http.js';
import { isZeroOid } from '../git/validate.js';
import { setHead } from '../git/refs.js';
import { projectRepoPath } from './projects.js';

/**
 * Which branch becomes the default when the current one does not exist: the only branch, the
 * one HEAD names, then main, then master, then the first by name (as Gitaly picks it).
 */
function pickDefaultBranch(branches: string[], preferred: (string | null)[]): string | null {
  if (!branches.length) return null;
  if (branches.length === 1) return branches[0];
  for (const name of [...preferred, 'main', 'master']) if (name && branches.includes(name)) return name;
  return [...branches].sort()[0];
}

/**
 * After receive-pack has finished: finds which of the pushed ref updates took effect, keeps
 * the project's default branch, empty_repo and last_activity_at true to the repository, and
 * calls every post-receive hook with the changes. Returns the event (null when nothing moved).
 */
export async function recordPush(
  cairn: Cairn,
  project: Pick<Project, 'id' | 'default_branch' | 'repository_storage' | 'disk_path'>,
  userId: number | null,
  updates: RefUpdate[],
  log: { error: (obj: unknown, msg: string) => void } = console,
  pushOptions: string[] = [],
): Promise<PostReceiveEvent | null> {
  const gitDir = projectRepoPath(cairn, project);
  const { values, branches } = await refSnapshot(gitDir, updates.map((u) => u.ref));
  const changes = updates
    .filter((u) => (isZeroOid(u.newSha) ? !values.has(u.ref) : values.get(u.ref) === u.newSha))
    .map((u) => ({ ref: u.ref, oldSha: u.oldSha, newSha: u.newSha }));
  if (!changes.length) return null;

  let defaultBranch = project.default_branch;
  if (!defaultBranch || !branches.includes(defaultBranch)) {
    const picked = pickDefaultBranch(branches, [defaultBranch, await headBranch(gitDir)]);
    if (picked) {
      await setHead(gitDir, picked);
      defaultBranch = picked;
    }
  }
  // As GitLab counts it: a repository without branches has no visible content.
  await cairn.db
    .updateTable('projects')
    .set({ default_branch: defaultBranch, empty_repo: branches.length === 0, last_activity_at: sql`now()` as any })
    .where('id', '=', project.id)
    .execute();

  const event: PostReceiveEvent = { projectId: project.id, userId, changes, pushOptions };
  await runPostReceiveHooks(cairn, event, log);
  return event;
}

/**
 * Calls every post-receive hook (merge request refresh, pipeline creation...) with a change of
 * refs, however it was made: a push, a commit through the API, a branch or tag created through
 * the API. A failing hook is logged; the others still run.
 */
export async function runPostReceiveHooks(cairn: Cairn, event: PostReceiveEvent, log: { error: (obj: unknown, msg: string) => void } = console): Promise<void> {
  for (const hook of cairn.postReceiveHooks) {
    try {
      await hook(event);
    } catch (err) {
      log.error({ err, projectId: event.projectId }, 'post-receive hook failed');
    }
  }
}
