import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import { ApiError } from './errors.js';

export interface RateLimitRule {
  /** What is limited (e.g. `archive`); the caller's identity is appended. */
  name: string;
  /** Requests allowed per window; 0 = unlimited. */
  limit: number;
  windowSeconds?: number;
  /** Response body when the limit is hit. */
  body?: Record<string, unknown>;
}

export const TOO_MANY_REQUESTS = { message: 'This endpoint has been requested too many times. Try again later.' };

/** Who a limit counts against: the signed-in user, else the client address. */
export function rateLimitSubject(request: FastifyRequest): string {
  const user = request.actor?.user;
  return user ? `user:${user.id}` : `ip:${request.ip}`;
}

/**
 * Counts one request in a fixed window shared through the database (one upsert), so every
 * Cairn process enforces the same limit. Over the limit: 429 with Retry-After.
 */
export async function checkRateLimit(request: FastifyRequest, rule: RateLimitRule): Promise<void> {
  if (!rule.limit || rule.limit <= 0) return;
  const key = `${rule.name}:${rateLimitSubject(request)}`;
  const { count, retryAfter } = await countInWindow(request.server.cairn.db, key, rule.windowSeconds ?? 60);
  if (count > rule.limit) {
    throw new ApiError(429, rule.body ?? TOO_MANY_REQUESTS, { 'retry-after': String(retryAfter) });
  }
}

/**
 * Adds one to `key`'s counter in the current fixed window (one upsert, shared by every process)
 * and returns the new count and the seconds left in the window.
 */
export async function countInWindow(db: Database, key: string, windowSeconds: number): Promise<{ count: number; retryAfter: number }> {
  const window = windowSeconds;
  const row = await sql<{ count: number; retry_after: number }>`
    insert into rate_limit_counters (key, window_start, count)
    values (${key}, to_timestamp(floor(extract(epoch from now()) / ${window}) * ${window}), 1)
    on conflict (key, window_start) do update set count = rate_limit_counters.count + 1
    returning count, ceil(extract(epoch from window_start) + ${window} - extract(epoch from now()))::int as retry_after`.execute(db);
  const { count, retry_after } = row.rows[0];
  // Old windows are useless; the first request of each new window clears its own key's.
  if (count === 1) {
    await sql`delete from rate_limit_counters where key = ${key} and window_start < now() - make_interval(secs => ${window})`.execute(db);
  }
  return { count, retryAfter: Math.max(1, retry_after) };
}

/** Forgets every window of `key` (a success that resets a failure count). */
export async function clearCounter(db: Database, key: string): Promise<void> {
  await db.deleteFrom('rate_limit_counters').where('key', '=', key).execute();
}

/** Starts a ban now: one row of `key` whose window_start is the ban's start (its length is the reader's). */
export async function startBan(db: Database, key: string): Promise<void> {
  await db.deleteFrom('rate_limit_counters').where('key', '=', key).execute();
  await sql`insert into rate_limit_counters (key, window_start, count) values (${key}, now(), 1) on conflict do nothing`.execute(db);
}

/** Seconds left of a ban started by startBan that lasts `seconds`; 0 when there is none. */
export async function banSecondsLeft(db: Database, key: string, seconds: number): Promise<number> {
  const row = await sql<{ left: number }>`
    select ceil(extract(epoch from max(window_start)) + ${seconds} - extract(epoch from now()))::int as left
    from rate_limit_counters where key = ${key}`.execute(db);
  const left = row.rows[0]?.left;
  return left && left > 0 ? left : 0;
}

/**
 * Reads a ban (as banSecondsLeft) and whether a counter has any rows, in one statement: the
 * check a request makes before it authenticates, and what it needs to know to clear the
 * counter afterwards without a write when there is nothing to clear.
 */
export async function banAndCounter(db: Database, banKey: string, banSeconds: number, counterKey: string): Promise<{ banLeft: number; counted: boolean }> {
  const row = await sql<{ left: number | null; counted: boolean }>`
    select ceil(extract(epoch from max(window_start) filter (where key = ${banKey})) + ${banSeconds} - extract(epoch from now()))::int as left,
           bool_or(key = ${counterKey}) as counted
    from rate_limit_counters where key in (${banKey}, ${counterKey})`.execute(db);
  const left = row.rows[0]?.left;
  return { banLeft: left && left > 0 ? left : 0, counted: !!row.rows[0]?.counted };
}
