import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import { apiError, forbidden } from '../plugins/errors.js';
import { findUserById, INTERNAL_USER_TYPES } from '../finders/users.js';
import { deleteUser } from './user-deletion.js';
import { defineMachine, transition, type EventOf } from '../db/state_machine.js';

/**
 * State changes administrators make through the API, with GitLab's answers: a successful
 * change is `true` (201); a no-op GitLab skips is `null`; refusals are 403/409 messages.
 */
export const BLOCKED_STATES = ['blocked', 'ldap_blocked'];
/** Users who have not been active for this many days may be deactivated (GitLab's default). */
export const DORMANT_DAYS = 90;

const isInternal = (u: User) => INTERNAL_USER_TYPES.includes(u.user_type);

/**
 * The state changes administrators make, as data: the states each one leaves and the state it
 * enters (GitLab's user state machine, narrowed to what its API allows). A change is one guarded
 * UPDATE, so two requests racing on the same user can never both make it.
 */
export const USER_MACHINE = defineMachine('users', 'state', {
  block: { from: ['active', 'deactivated', 'blocked_pending_approval', 'banned'], to: 'blocked' },
  unblock: { from: ['blocked', 'blocked_pending_approval', 'banned'], to: 'active' },
  activate: { from: ['deactivated', 'blocked_pending_approval', 'banned'], to: 'active' },
  deactivate: { from: ['active'], to: 'deactivated' },
  ban: { from: ['active'], to: 'banned' },
  unban: { from: ['banned'], to: 'active' },
  approve: { from: ['blocked_pending_approval'], to: 'active' },
});

export type UserStateChange = EventOf<typeof USER_MACHINE>;

/** Makes `change` if the user is still in one of its `from` states; false when another request got there first. */
async function applyStateChange(db: Database, userId: number, change: UserStateChange): Promise<boolean> {
  return (await transition(db, USER_MACHINE, userId, change, { set: { updated_at: new Date() } })) !== null;
}

/**
 * Runs `decide` on the user (it throws GitLab's refusal, returns a result without a change, or
 * names the change to make) and makes the change with a guarded update. When the user's state
 * moved in between, the decision is taken again on the fresh row, so the answer always matches
 * the state the change was made from.
 */
async function changeState<R>(db: Database, user: User, decide: (u: User) => { change: UserStateChange; result: R } | { result: R }): Promise<R> {
  let current = user;
  for (let attempt = 0; attempt < 3; attempt++) {
    const decision = decide(current);
    if (!('change' in decision)) return decision.result;
    if (await applyStateChange(db, current.id, decision.change)) return decision.result;
    const fresh = await findUserById(db, current.id);
    if (!fresh) throw apiError(404, '404 User Not Found');
    current = fresh;
  }
  throw apiError(409, "The user's state is changing; try again");
}

export async function blockUser(db: Database, actor: User, user: User): Promise<true | null> {
  return changeState(db, user, (u) => {
    if (u.state === 'ldap_blocked') throw forbidden('LDAP blocked users cannot be modified by the API');
    if (actor.id === u.id) throw forbidden('The API initiating user cannot be blocked by the API');
    if (u.state === 'blocked') return { result: null };
    if (isInternal(u)) throw apiError(403, 'An internal user cannot be blocked');
    return { change: 'block', result: true as const };
  });
}

/** Unblocking is GitLab's `activate` transition: false when the user is not in a state it leaves. */
export async function unblockUser(db: Database, user: User): Promise<boolean> {
  return changeState(db, user, (u) => {
    if (u.state === 'ldap_blocked') throw forbidden('LDAP blocked users cannot be unblocked by the API');
    if (u.state === 'deactivated') throw forbidden('Deactivated users cannot be unblocked by the API');
    if (!USER_MACHINE.can('unblock', u.state)) return { result: false };
    return { change: 'unblock', result: true };
  });
}

export async function deactivateUser(db: Database, user: User): Promise<true | null> {
  return changeState(db, user, (u) => {
    if (u.state === 'deactivated') return { result: null };
    if (BLOCKED_STATES.includes(u.state)) throw apiError(403, 'Error occurred. A blocked user cannot be deactivated');
    if (isInternal(u)) throw apiError(403, 'Internal users cannot be deactivated');
    const lastActive = u.last_activity_on ? new Date(u.last_activity_on).getTime() : u.current_sign_in_at ? new Date(u.current_sign_in_at).getTime() : 0;
    const dormant = lastActive <= Date.now() - DORMANT_DAYS * 86_400_000;
    if (u.state !== 'active' || !dormant) {
      throw apiError(403, `The user you are trying to deactivate has been active in the past ${DORMANT_DAYS} days and cannot be deactivated`);
    }
    return { change: 'deactivate', result: true as const };
  });
}

export async function activateUser(db: Database, user: User): Promise<true> {
  return changeState(db, user, (u) => {
    if (BLOCKED_STATES.includes(u.state)) throw apiError(403, 'Error occurred. A blocked user must be unblocked to be activated');
    if (u.state === 'active') return { result: true as const };
    return { change: 'activate', result: true as const };
  });
}

export async function banUser(db: Database, user: User): Promise<true> {
  return changeState(db, user, (u) => {
    if (u.state !== 'active') throw apiError(403, `You cannot ban ${u.state} users.`);
    return { change: 'ban', result: true as const };
  });
}

export async function unbanUser(db: Database, user: User): Promise<true> {
  return changeState(db, user, (u) => {
    if (u.state !== 'banned') throw apiError(403, `You cannot unban ${u.state} users.`);
    return { change: 'unban', result: true as const };
  });
}

export async function approveUser(db: Database, actor: User, user: User) {
  if (!actor.admin) throw apiError(403, 'You are not allowed to approve a user');
  return changeState(db, user, (u) => {
    if (u.state !== 'blocked_pending_approval') throw apiError(409, 'The user you are trying to approve is not pending approval');
    return { change: 'approve', result: { message: 'Success' } };
  });
}

/** Rejecting a sign-up deletes the account outright. */
export async function rejectUser(cairn: Cairn, actor: User, user: User) {
  if (!actor.admin) throw apiError(403, 'You are not allowed to reject a user');
  if (user.state !== 'blocked_pending_approval') throw apiError(409, 'User does not have a pending request');
  await deleteUser(cairn, user, { hardDelete: true });
  return { message: 'Success' };
}
