import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import { apiError, validationFailed } from '../plugins/errors.js';

/** clear_status_after values and their durations. */
export const CLEAR_STATUS_AFTER: Record<string, number> = {
  '30_minutes': 30 * 60_000,
  '3_hours': 3 * 3_600_000,
  '8_hours': 8 * 3_600_000,
  '1_day': 86_400_000,
  '3_days': 3 * 86_400_000,
  '7_days': 7 * 86_400_000,
  '30_days': 30 * 86_400_000,
};
export const DEFAULT_STATUS_EMOJI = 'speech_balloon';
export const AVAILABILITIES = ['not_set', 'busy'];
export const STATUS_MESSAGE_MAX = 100;
const EMOJI_NAME = /^[a-z0-9_+-]{1,100}$/;

export interface StatusInput {
  emoji?: string | null;
  message?: string | null;
  availability?: string | null;
  clear_status_after?: string | null;
}

/**
 * PUT /user/status. Empty emoji, message and availability clear the status. An omitted
 * clear_status_after clears a previous expiry; an omitted availability keeps the previous one.
 */
export async function setUserStatus(db: Database, user: User, input: StatusInput) {
  const emoji = input.emoji?.trim() || '';
  const message = input.message ?? '';
  const availability = input.availability?.trim() || '';
  if (!emoji && !message.trim() && !availability) {
    await db.deleteFrom('user_statuses').where('user_id', '=', user.id).execute();
    return null;
  }
  const errors: Record<string, string[]> = {};
  if (emoji && !EMOJI_NAME.test(emoji)) errors.emoji = ['is not included in the list'];
  if (message.length > STATUS_MESSAGE_MAX) errors.message = [`is too long (maximum is ${STATUS_MESSAGE_MAX} characters)`];
  if (availability && !AVAILABILITIES.includes(availability)) errors.availability = ['is not included in the list'];
  if (Object.keys(errors).length) throw validationFailed(errors);

  const clearAfter = input.clear_status_after ? CLEAR_STATUS_AFTER[input.clear_status_after] : undefined;
  const values = {
    emoji: emoji || DEFAULT_STATUS_EMOJI,
    message: message || null,
    clear_status_at: clearAfter ? new Date(Date.now() + clearAfter) : null,
    updated_at: new Date(),
  };
  return db
    .insertInto('user_statuses')
    .values({ user_id: user.id, ...values, availability: availability || 'not_set' })
    .onConflict((oc) => oc.column('user_id').doUpdateSet(availability ? { ...values, availability } : values))
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Puts back the expiry a status had before a change that did not mention clear_status_after. */
export async function keepStatusExpiry(db: Database, user: User, clearStatusAt: string) {
  return db.updateTable('user_statuses').set({ clear_status_at: clearStatusAt }).where('user_id', '=', user.id).returningAll().executeTakeFirstOrThrow();
}

export const MAX_FOLLOWEES = 300;

/** 'followed', or 'unchanged' when already following (or following oneself). */
export async function followUser(db: Database, follower: User, followee: User): Promise<'followed' | 'unchanged'> {
  if (follower.id === followee.id) return 'unchanged';
  const count = await db.selectFrom('user_follow_users').select((eb) => eb.fn.countAll<number>().as('n')).where('follower_id', '=', follower.id).executeTakeFirstOrThrow();
  const already = await db.selectFrom('user_follow_users').select('followee_id').where('follower_id', '=', follower.id).where('followee_id', '=', followee.id).executeTakeFirst();
  if (already) return 'unchanged';
  if (Number(count.n) >= MAX_FOLLOWEES) {
    throw apiError(400, `You can't follow more than ${MAX_FOLLOWEES} users. To follow more users, unfollow some others.`);
  }
  const res = await db.insertInto('user_follow_users').values({ follower_id: follower.id, followee_id: followee.id })
    .onConflict((oc) => oc.doNothing()).executeTakeFirst();
  return Number(res.numInsertedOrUpdatedRows ?? 0) > 0 ? 'followed' : 'unchanged';
}

export async function unfollowUser(db: Database, follower: User, followee: User): Promise<boolean> {
  const res = await db.deleteFrom('user_follow_users').where('follower_id', '=', follower.id).where('followee_id', '=', followee.id).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/** Custom attributes are indexed by key and value, which GitLab keeps to 255 characters each. */
const CUSTOM_ATTRIBUTE_MAX = 255;

export async function setCustomAttribute(db: Database, userId: number, key: string, value: string) {
  const errors: Record<string, string[]> = {};
  if (key.length > CUSTOM_ATTRIBUTE_MAX) errors.key = [`is too long (maximum is ${CUSTOM_ATTRIBUTE_MAX} characters)`];
  if (value.length > CUSTOM_ATTRIBUTE_MAX) errors.value = [`is too long (maximum is ${CUSTOM_ATTRIBUTE_MAX} characters)`];
  if (Object.keys(errors).length) throw validationFailed(errors);
  return db
    .insertInto('user_custom_attributes')
    .values({ user_id: userId, key, value })
    .onConflict((oc) => oc.columns(['user_id', 'key']).doUpdateSet({ value, updated_at: new Date() }))
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteCustomAttribute(db: Database, userId: number, key: string): Promise<boolean> {
  const res = await db.deleteFrom('user_custom_attributes').where('user_id', '=', userId).where('key', '=', key).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
