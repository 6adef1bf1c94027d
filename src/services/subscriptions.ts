import { sql } from 'kysely';
import type { Database } from '../db/index.js';

/**
 * Subscriptions to a subscribable (issue, merge request, label...): an explicit row wins; without
 * one, participants count as subscribed, as in GitLab. `participant` says whether the user takes
 * part through the thing itself (author, assignee, reviewer); one who commented on it takes part too.
 */
export async function isSubscribed(db: Database, userId: number, type: string, id: number, participant: boolean): Promise<boolean> {
  const row = await db
    .selectFrom('subscriptions')
    .select('subscribed')
    .where('subscribable_type', '=', type)
    .where('subscribable_id', '=', id)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  if (row) return row.subscribed;
  return participant || (await hasCommented(db, userId, type, id));
}

/** The user wrote a (non-system) note on the noteable `type` / `id`. */
async function hasCommented(db: Database, userId: number, type: string, id: number): Promise<boolean> {
  const note = await db
    .selectFrom('notes')
    .select('id')
    .where('noteable_type', '=', type)
    .where('noteable_id', '=', id)
    .where('author_id', '=', userId)
    .where('system', '=', false)
    .limit(1)
    .executeTakeFirst();
  return !!note;
}

/** Subscribes or unsubscribes; false when the user already was in that state (the API's 304). */
export async function setSubscription(db: Database, userId: number, type: string, id: number, projectId: number | null, subscribed: boolean, participant: boolean): Promise<boolean> {
  if ((await isSubscribed(db, userId, type, id, participant)) === subscribed) return false;
  await db
    .insertInto('subscriptions')
    .values({ user_id: userId, subscribable_type: type, subscribable_id: id, project_id: projectId, subscribed })
    .onConflict((oc) => oc.columns(['subscribable_type', 'subscribable_id', 'user_id']).doUpdateSet({ subscribed, updated_at: sql`now()` as any }))
    .execute();
  return true;
}
