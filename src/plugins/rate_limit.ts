import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
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
  const window = rule.windowSeconds ?? 60;
  const db = request.server.cairn.db;
  const key = `${rule.name}:${rateLimitSubject(request)}`;
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
  if (count > rule.limit) {
    throw new ApiError(429, rule.body ?? TOO_MANY_REQUESTS, { 'retry-after': String(Math.max(1, retry_after)) });
  }
}
