import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import { apiError, forbidden } from '../plugins/errors.js';
import { INTERNAL_USER_TYPES } from '../finders/users.js';
import { deleteUser } from './user-deletion.js';

/**
 * State changes administrators make through the API, with GitLab's answers: a successful
 * change is `true` (201); a no-op GitLab skips is `null`; refusals are 403/409 messages.
 */
export const BLOCKED_STATES = ['blocked', 'ldap_blocked'];
/** Users who have not been active for this many days may be deactivated (GitLab's default). */
export const DORMANT_DAYS = 90;

const isInternal = (u: User) => INTERNAL_USER_TYPES.includes(u.user_type);

async function setState(db: Database, user: User, state: string) {
  await db.updateTable('users').set({ state, updated_at: new Date() }).where('id', '=', user.id).execute();
}

export async function blockUser(db: Database, actor: User, user: User): Promise<true | null> {
  if (user.state === 'ldap_blocked') throw forbidden('LDAP blocked users cannot be modified by the API');
  if (actor.id === user.id) throw forbidden('The API initiating user cannot be blocked by the API');
  if (user.state === 'blocked') return null;
  if (isInternal(user)) throw apiError(403, 'An internal user cannot be blocked');
  await setState(db, user, 'blocked');
  return true;
}

/** Unblocking is GitLab's `activate` transition: false when the user is not in a state it leaves. */
export async function unblockUser(db: Database, user: User): Promise<boolean> {
  if (user.state === 'ldap_blocked') throw forbidden('LDAP blocked users cannot be unblocked by the API');
  if (user.state === 'deactivated') throw forbidden('Deactivated users cannot be unblocked by the API');
  if (!['blocked', 'blocked_pending_approval', 'banned'].includes(user.state)) return false;
  await setState(db, user, 'active');
  return true;
}

export async function deactivateUser(db: Database, user: User): Promise<true | null> {
  if (user.state === 'deactivated') return null;
  if (BLOCKED_STATES.includes(user.state)) throw apiError(403, 'Error occurred. A blocked user cannot be deactivated');
  if (isInternal(user)) throw apiError(403, 'Internal users cannot be deactivated');
  const lastActive = user.last_activity_on ? new Date(user.last_activity_on).getTime() : user.current_sign_in_at ? new Date(user.current_sign_in_at).getTime() : 0;
  const dormant = lastActive <= Date.now() - DORMANT_DAYS * 86_400_000;
  if (user.state !== 'active' || !dormant) {
    throw apiError(403, `The user you are trying to deactivate has been active in the past ${DORMANT_DAYS} days and cannot be deactivated`);
  }
  await setState(db, user, 'deactivated');
  return true;
}

export async function activateUser(db: Database, user: User): Promise<true> {
  if (BLOCKED_STATES.includes(user.state)) throw apiError(403, 'Error occurred. A blocked user must be unblocked to be activated');
  if (user.state !== 'active') await setState(db, user, 'active');
  return true;
}

export async function banUser(db: Database, user: User): Promise<true> {
  if (user.state !== 'active') throw apiError(403, `You cannot ban ${user.state} users.`);
  await setState(db, user, 'banned');
  return true;
}

export async function unbanUser(db: Database, user: User): Promise<true> {
  if (user.state !== 'banned') throw apiError(403, `You cannot unban ${user.state} users.`);
  await setState(db, user, 'active');
  return true;
}

export async function approveUser(db: Database, actor: User, user: User) {
  if (!actor.admin) throw apiError(403, 'You are not allowed to approve a user');
  if (user.state !== 'blocked_pending_approval') throw apiError(409, 'The user you are trying to approve is not pending approval');
  await setState(db, user, 'active');
  return { message: 'Success' };
}

/** Rejecting a sign-up deletes the account outright. */
export async function rejectUser(cairn: Cairn, actor: User, user: User) {
  if (!actor.admin) throw apiError(403, 'You are not allowed to reject a user');
  if (user.state !== 'blocked_pending_approval') throw apiError(409, 'User does not have a pending request');
  await deleteUser(cairn, user, { hardDelete: true });
  return { message: 'Success' };
}
