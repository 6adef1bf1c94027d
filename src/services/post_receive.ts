import { sql } from 'kysely';
import type { Cairn, PostReceiveEvent } from '../context.js';
import type { Project } from '../db/schema/core.js';
import { headBranch, refSnapshot, type RefUpdate } from '../git/http.js';
import { isZeroOid } from '../git/validate.js';
import { setHead } from '../git/refs.js';
import { beginInlineJob, defineJob, finishInlineJob } from '../jobs/queue.js';
import { protectCreatedDefaultBranch } from './default_branch_protection.js';
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
  resumed = false,
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

  const event: PostReceiveEvent = { projectId: project.id, userId, changes, pushOptions, ...(resumed ? { resumed } : {}) };
  await runPostReceiveHooks(cairn, event, log);
  return event;
}

/**
 * Calls every post-receive hook (merge request refresh, pipeline creation...) with a change of
 * refs, however it was made: a push, a commit through the API, a branch or tag created through
 * the API. A failing hook is logged; the others still run.
 */
export async function runPostReceiveHooks(cairn: Cairn, event: PostReceiveEvent, log: { error: (obj: unknown, msg: string) => void } = console): Promise<void> {
  try {
    await protectCreatedDefaultBranch(cairn, event);
  } catch (err) {
    log.error({ err, projectId: event.projectId }, 'default branch protection failed');
  }
  for (const hook of cairn.postReceiveHooks) {
    try {
      await hook(event);
    } catch (err) {
      log.error({ err, projectId: event.projectId }, 'post-receive hook failed');
    }
  }
}

/**
 * The post-receive journal. A ref update and the work that follows it (pipelines, merge request
 * refresh, default branch, housekeeping) are not one transaction: a crash between them would
 * leave a pushed commit without its pipeline. So before a write may move refs, its updates are
 * journalled as a background job that this process holds (jobs/queue.ts beginInlineJob); when
 * the hooks have run, the journal goes. If the process dies in between, the job is reclaimed and
 * replays the updates that took effect (recordPush keeps only those), as a resumed event.
 */
export const POST_RECEIVE_JOB = 'post_receive.resume';

export async function journalRefUpdates(cairn: Cairn, projectId: number, userId: number | null, updates: RefUpdate[], pushOptions: string[] = []): Promise<number> {
  return beginInlineJob(cairn.db, POST_RECEIVE_JOB, {
    projectId,
    userId,
    updates: updates.map((u) => ({ ref: u.ref, oldSha: u.oldSha, newSha: u.newSha })),
    pushOptions,
  });
}

export async function endRefJournal(cairn: Cairn, id: number): Promise<void> {
  await finishInlineJob(cairn.db, id);
}

defineJob(POST_RECEIVE_JOB, async (cairn, payload) => {
  const project = await cairn.db
    .selectFrom('projects')
    .select(['id', 'default_branch', 'repository_storage', 'disk_path'])
    .where('id', '=', Number(payload.projectId))
    .executeTakeFirst();
  if (!project) return;
  await recordPush(cairn, project, payload.userId ?? null, payload.updates as RefUpdate[], console, (payload.pushOptions as string[]) ?? [], true);
});
