import { sql } from 'kysely';
import type { Config } from '../config.js';
import type { Database } from '../db/index.js';
import { queueHookEvent } from '../hooks/events.js';
import type { User } from '../db/schema/core.js';
import type { AwardEmoji } from '../db/schema/work_items.js';
import { awardEmojiName } from '../lib/emoji.js';
import { ApiError, notFound } from '../plugins/errors.js';

/**
 * Emoji reactions (GitLab's AwardEmojis services) on any awardable: (awardable_type,
 * awardable_id) names it. A user awards a given emoji once (the award_emoji_once index decides,
 * so two requests at once make one award).
 */

export type AwardWithUser = AwardEmoji & { user: User };

/** Given, the award is sent to the project's hooks (GitLab's emoji events), in the award's transaction. */
export interface AwardHooks {
  config: Config;
  projectId: number;
}

async function emojiEvent(hooks: AwardHooks | undefined, trx: Database, awardId: number, userId: number, action: 'award' | 'revoke') {
  if (hooks) await queueHookEvent({ config: hooks.config, db: trx }, trx, { kind: 'emoji', projectId: hooks.projectId, id: awardId, userId, action });
}

/** GitLab answers every refused award with a 404 naming the reason ("404 Award Emoji <reason> Not Found"). */
const refused = (reason: string) => new ApiError(404, { message: `404 Award Emoji ${reason} Not Found` });

function withUsers(db: Database) {
  return db
    .selectFrom('award_emoji as a')
    .innerJoin('users as u', 'u.id', 'a.user_id')
    .selectAll('a')
    .select(sql<User>`to_jsonb(u)`.as('user_json'));
}

function toAward(row: any): AwardWithUser {
  const { user_json, ...award } = row;
  const user = { ...user_json };
  for (const [k, v] of Object.entries(user)) if (k.endsWith('_at') && typeof v === 'string') user[k] = new Date(v);
  return { ...(award as AwardEmoji), user: user as User };
}

/** A page of the awards on one awardable, oldest first, and their total. */
export async function listAwards(db: Database, type: string, id: number, page: { limit: number; offset: number }) {
  const rows = await withUsers(db).where('a.awardable_type', '=', type).where('a.awardable_id', '=', id).orderBy('a.id').limit(page.limit).offset(page.offset).execute();
  const total = await db
    .selectFrom('award_emoji')
    .select(sql<number>`count(*)::int`.as('n'))
    .where('awardable_type', '=', type)
    .where('awardable_id', '=', id)
    .executeTakeFirstOrThrow();
  return { rows: rows.map(toAward), total: total.n };
}

/** One award on the awardable; 404 (GitLab's "404 Not found") when it is not one of its awards. */
export async function findAward(db: Database, type: string, id: number, awardId: number): Promise<AwardWithUser> {
  const row = await withUsers(db).where('a.awardable_type', '=', type).where('a.awardable_id', '=', id).where('a.id', '=', awardId).executeTakeFirst();
  if (!row) throw notFound();
  return toAward(row);
}

/** Awards `rawName` from `user`; the name must be a known emoji (aliases such as +1 are stored by their canonical name). */
export async function addAward(db: Database, input: { type: string; id: number; user: User; name: string }, hooks?: AwardHooks): Promise<AwardWithUser> {
  const name = awardEmojiName(input.name.trim().replace(/^:(.+):$/, '$1'));
  if (!name) throw refused('Name is not a valid emoji name');
  const inserted = await db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('award_emoji')
      .values({ name, user_id: input.user.id, awardable_type: input.type, awardable_id: input.id })
      .onConflict((oc) => oc.columns(['awardable_type', 'awardable_id', 'user_id', 'name']).doNothing())
      .returning('id')
      .executeTakeFirst();
    if (row) await emojiEvent(hooks, trx, row.id, input.user.id, 'award');
    return row;
  });
  if (!inserted) throw refused('Name has already been taken');
  return findAward(db, input.type, input.id, inserted.id);
}

/** Removes an award: its awarder or an administrator (403 for anyone else). */
export async function removeAward(db: Database, award: AwardEmoji, user: User, hooks?: AwardHooks): Promise<void> {
  // GitLab: unauthorized! unless the award is the caller's or they are an administrator.
  if (award.user_id !== user.id && !user.admin) throw new ApiError(401, { message: '401 Unauthorized' });
  await db.transaction().execute(async (trx) => {
    // The event's payload is built first, from the award as it is.
    await emojiEvent(hooks, trx, award.id, user.id, 'revoke');
    await trx.deleteFrom('award_emoji').where('id', '=', award.id).execute();
  });
}
