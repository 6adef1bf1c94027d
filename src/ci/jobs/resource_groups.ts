// resource_group: jobs of a project naming the same group run one at a time, across pipelines
// (GitLab's Ci::ResourceGroup). A job with a group goes to waiting_for_resource when it would be
// queued; it is queued once it holds the group's resource, which it gives back when it finishes.
// Handing a freed resource to the next waiting job is a durable queue job (ASSIGN_RESOURCE_JOB,
// run by src/ci/jobs/state.ts), enqueued in the transaction that freed it: a crash in between
// cannot leave a free resource and a job waiting for ever.
//
// Locks: a resource row is taken with FOR UPDATE SKIP LOCKED, always after the pipeline row, so
// these updates add no lock cycle; losing a race only means waiting for the next assignment.

import { sql } from 'kysely';
import type { Database } from '../../db/index.js';
import type { ProcessMode } from '../../db/schema/ci_resource_groups.js';
import { enqueue } from '../../jobs/queue.js';

export const ASSIGN_RESOURCE_JOB = 'ci.resource_group.assign';
export const PROCESS_MODES: ProcessMode[] = ['unordered', 'oldest_first', 'newest_first', 'newest_ready_first'];
/** GitLab's Ci::ResourceGroup key limit. */
export const MAX_RESOURCE_GROUP_KEY = 255;

/** The group's id, made (with its one resource) when this is the first job naming it. */
export async function ensureResourceGroup(db: Database, projectId: number, key: string): Promise<number> {
  const made = await db
    .insertInto('ci_resource_groups')
    .values({ project_id: projectId, key, created_at: sql`now()` as any, updated_at: sql`now()` as any })
    .onConflict((oc) => oc.columns(['project_id', 'key']).doNothing())
    .returning('id')
    .executeTakeFirst();
  if (made) {
    await db.insertInto('ci_resources').values({ resource_group_id: made.id, created_at: sql`now()` as any, updated_at: sql`now()` as any }).execute();
    return made.id;
  }
  const row = await db.selectFrom('ci_resource_groups').select('id').where('project_id', '=', projectId).where('key', '=', key).executeTakeFirstOrThrow();
  return row.id;
}

/** Takes a free resource of the group for the job (true), or finds none free (false). */
export async function acquireResource(db: Database, groupId: number, buildId: number): Promise<boolean> {
  const held = await db.selectFrom('ci_resources').select('id').where('build_id', '=', buildId).executeTakeFirst();
  if (held) return true;
  const taken = await sql<{ id: number }>`
    update ci_resources set build_id = ${buildId}, updated_at = now()
     where id = (select id from ci_resources where resource_group_id = ${groupId} and build_id is null
                  order by id limit 1 for update skip locked)
    returning id`.execute(db);
  return taken.rows.length > 0;
}

/** The jobs give back what they hold; the next waiting jobs of those groups get it (queued). */
export async function releaseResources(db: Database, buildIds: number[]): Promise<void> {
  if (!buildIds.length) return;
  const freed = await db
    .updateTable('ci_resources')
    .set({ build_id: null, updated_at: sql`now()` as any })
    .where('build_id', 'in', buildIds)
    .returning('resource_group_id')
    .execute();
  for (const groupId of new Set(freed.map((r) => r.resource_group_id))) await enqueue(db, ASSIGN_RESOURCE_JOB, { resourceGroupId: groupId });
}

/**
 * The group's waiting jobs in the order its process mode gives them the resource: unordered and
 * oldest_first by pipeline age, newest_first and newest_ready_first newest pipeline first.
 */
export async function waitingJobs(db: Database, groupId: number): Promise<Array<{ id: number; pipeline_id: number }>> {
  const group = await db.selectFrom('ci_resource_groups').select('process_mode').where('id', '=', groupId).executeTakeFirst();
  if (!group) return [];
  const newest = group.process_mode === 'newest_first' || group.process_mode === 'newest_ready_first';
  return db
    .selectFrom('ci_builds')
    .select(['id', 'pipeline_id'])
    .where('resource_group_id', '=', groupId)
    .where('status', '=', 'waiting_for_resource')
    .orderBy('pipeline_id', newest ? 'desc' : 'asc')
    .orderBy('id', 'asc')
    .limit(100)
    .execute();
}
