import type { Cairn } from '../context.js';
import { banAndCounter, banSecondsLeft, clearCounter, countInWindow, startBan } from '../plugins/rate_limit.js';

/**
 * Password guessing defences, with every counter in rate_limit_counters so all processes agree.
 * Only failures count, so normal use never meets them:
 * - an account is locked for CAIRN_LOGIN_LOCK_MINUTES after CAIRN_MAX_LOGIN_ATTEMPTS failed
 *   password sign-ins (web form, OAuth password grant, git over HTTP) since its last successful
 *   one (GitLab: 10 attempts, 10 minutes); failures older than a day are forgotten;
 * - an IP address with CAIRN_FAILED_AUTH_MAX_RETRY failed authentications within
 *   CAIRN_FAILED_AUTH_FIND_TIME seconds is banned for CAIRN_FAILED_AUTH_BAN_TIME seconds (GitLab's
 *   failed authentication ban: 30 in 3 minutes, 1 hour). Sign-in (form and password grant) and
 *   git over HTTP count separately; a successful git authentication clears the address's git count.
 */

/** Where a password or token was tried. */
export type AuthChannel = 'sign_in' | 'git_http';

const ACCOUNT_FAILURE_WINDOW = 24 * 3600;

const ipFailures = (channel: AuthChannel, ip: string) => `auth_failed:${channel}:ip:${ip}`;
const ipBan = (channel: AuthChannel, ip: string) => `auth_banned:${channel}:ip:${ip}`;
const accountFailures = (userId: number) => `login_failed:user:${userId}`;
const accountLock = (userId: number) => `login_locked:user:${userId}`;

/** Seconds this address stays banned on this channel; 0 when it is not. */
export async function ipBannedFor(cairn: Cairn, channel: AuthChannel, ip: string): Promise<number> {
  if (cairn.config.failedAuthMaxRetry <= 0) return 0;
  return banSecondsLeft(cairn.db, ipBan(channel, ip), cairn.config.failedAuthBanTime);
}

/** Counts one failed authentication from this address; the one that reaches the limit starts the ban. */
export async function recordIpFailure(cairn: Cairn, channel: AuthChannel, ip: string): Promise<void> {
  const { failedAuthMaxRetry: max, failedAuthFindTime: window } = cairn.config;
  if (max <= 0) return;
  const { count } = await countInWindow(cairn.db, ipFailures(channel, ip), window);
  if (count >= max) {
    await startBan(cairn.db, ipBan(channel, ip));
    await clearCounter(cairn.db, ipFailures(channel, ip));
  }
}

/**
 * The address's standing on this channel in one read: seconds of ban left, and whether it has
 * failures counted (which a successful authentication then clears with clearIpFailures).
 */
export async function ipAuthState(cairn: Cairn, channel: AuthChannel, ip: string): Promise<{ bannedFor: number; hasFailures: boolean }> {
  if (cairn.config.failedAuthMaxRetry <= 0) return { bannedFor: 0, hasFailures: false };
  const { banLeft, counted } = await banAndCounter(cairn.db, ipBan(channel, ip), cairn.config.failedAuthBanTime, ipFailures(channel, ip));
  return { bannedFor: banLeft, hasFailures: counted };
}

/** A successful authentication from this address resets its failure count (not a running ban). */
export async function clearIpFailures(cairn: Cairn, channel: AuthChannel, ip: string): Promise<void> {
  if (cairn.config.failedAuthMaxRetry <= 0) return;
  await clearCounter(cairn.db, ipFailures(channel, ip));
}

/** Seconds this account stays locked; 0 when it is not. */
export async function accountLockedFor(cairn: Cairn, userId: number): Promise<number> {
  if (cairn.config.maxLoginAttempts <= 0) return 0;
  return banSecondsLeft(cairn.db, accountLock(userId), cairn.config.loginLockMinutes * 60);
}

/** Counts one wrong password for this account; the one that reaches the limit locks it. */
export async function recordAccountFailure(cairn: Cairn, userId: number): Promise<void> {
  const max = cairn.config.maxLoginAttempts;
  if (max <= 0) return;
  const { count } = await countInWindow(cairn.db, accountFailures(userId), ACCOUNT_FAILURE_WINDOW);
  if (count >= max) {
    await startBan(cairn.db, accountLock(userId));
    await clearCounter(cairn.db, accountFailures(userId));
  }
}

/** A correct password resets the account's failure count. */
export async function clearAccountFailures(cairn: Cairn, userId: number): Promise<void> {
  if (cairn.config.maxLoginAttempts <= 0) return;
  await clearCounter(cairn.db, accountFailures(userId));
}

/**
 * Request throttles, counted whatever the outcome (GitLab's protected paths): every POST to the
 * sign-in form per address, every password attempt per account (sign-in form and OAuth password
 * grant), and every call to the OAuth token and revoke endpoints per address. The counters are
 * rows of rate_limit_counters, so every process counts together. Each returns the seconds to wait
 * when the request is over its limit, 0 when it may go on.
 */
async function throttle(cairn: Cairn, key: string, limit: number, period: number): Promise<number> {
  if (limit <= 0) return 0;
  const { count, retryAfter } = await countInWindow(cairn.db, key, period);
  return count > limit ? retryAfter : 0;
}

export const signInAddressThrottle = (cairn: Cairn, ip: string) =>
  throttle(cairn, `protected_paths:sign_in:ip:${ip}`, cairn.config.protectedPathsLimit, cairn.config.protectedPathsPeriod);

export const signInAccountThrottle = (cairn: Cairn, userId: number) =>
  throttle(cairn, `protected_paths:sign_in:user:${userId}`, cairn.config.protectedPathsLimit, cairn.config.protectedPathsPeriod);

export const oauthTokenThrottle = (cairn: Cairn, ip: string) =>
  throttle(cairn, `oauth_token:ip:${ip}`, cairn.config.oauthTokenRateLimit, 60);
