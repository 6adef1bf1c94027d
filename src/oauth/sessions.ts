import type { FastifyReply, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { Session } from '../db/schema/oauth.js';
import { randomToken, safeEqual, tokenDigest } from '../lib/secrets.js';
import { findUserById } from '../finders/users.js';

export const SESSION_COOKIE = '_cairn_session';
/** A signed-in session lasts a week, like GitLab's default session_expire_delay. */
const USER_SESSION_TTL_MS = 7 * 24 * 3600 * 1000;
/** An anonymous session only carries the sign-in form's CSRF token. */
const ANONYMOUS_SESSION_TTL_MS = 2 * 3600 * 1000;

export interface LoadedSession {
  session: Session;
  user: User | null;
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const name = part.slice(0, i).trim();
    let value = part.slice(i + 1).trim();
    if (value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    try {
      out[name] = decodeURIComponent(value);
    } catch {
      out[name] = value;
    }
  }
  return out;
}

function cookieAttributes(cairn: Cairn): string {
  const secure = cairn.config.externalUrl.startsWith('https:') ? '; Secure' : '';
  return `Path=/; HttpOnly; SameSite=Lax${secure}`;
}

function setSessionCookie(cairn: Cairn, reply: FastifyReply, value: string) {
  reply.header('set-cookie', `${SESSION_COOKIE}=${value}; ${cookieAttributes(cairn)}`);
}

function clearSessionCookie(cairn: Cairn, reply: FastifyReply) {
  reply.header('set-cookie', `${SESSION_COOKIE}=; Max-Age=0; ${cookieAttributes(cairn)}`);
}

function sessionId(request: FastifyRequest): string | undefined {
  const id = parseCookies(request.headers.cookie)[SESSION_COOKIE];
  return id && /^[A-Za-z0-9]{20,128}$/.test(id) ? id : undefined;
}

/** The request's live session and its user (null when anonymous, blocked or gone). */
export async function loadSession(cairn: Cairn, request: FastifyRequest): Promise<LoadedSession | null> {
  const id = sessionId(request);
  if (!id) return null;
  const session = await cairn.db
    .selectFrom('sessions')
    .selectAll()
    .where('session_digest', '=', tokenDigest(id))
    .where('expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
  if (!session) return null;
  if (session.user_id === null) return { session, user: null };
  const user = await findUserById(cairn.db, session.user_id);
  if (!user || user.state !== 'active') {
    // A user blocked after signing in loses the session.
    await cairn.db.deleteFrom('sessions').where('id', '=', session.id).execute();
    return null;
  }
  return { session, user };
}

/** A new session (its id only in the cookie; the database keeps the digest). */
export async function createSession(cairn: Cairn, request: FastifyRequest, reply: FastifyReply, userId: number | null): Promise<Session> {
  // Expired rows are cleared whenever a session is made, so the table does not grow without bound.
  await cairn.db.deleteFrom('sessions').where('expires_at', '<=', sql<Date>`now()`).execute();
  const id = randomToken(40);
  const ttl = userId === null ? ANONYMOUS_SESSION_TTL_MS : USER_SESSION_TTL_MS;
  const session = await cairn.db
    .insertInto('sessions')
    .values({
      session_digest: tokenDigest(id),
      user_id: userId,
      csrf_token: randomToken(43),
      expires_at: new Date(Date.now() + ttl),
      ip_address: request.ip ?? null,
      user_agent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'].slice(0, 255) : null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  setSessionCookie(cairn, reply, id);
  return session;
}

/** The current session, or a new anonymous one (pages with forms need a CSRF token). */
export async function ensureSession(cairn: Cairn, request: FastifyRequest, reply: FastifyReply): Promise<LoadedSession> {
  return (await loadSession(cairn, request)) ?? { session: await createSession(cairn, request, reply, null), user: null };
}

export async function destroySession(cairn: Cairn, reply: FastifyReply, session: Session | null) {
  if (session) await cairn.db.deleteFrom('sessions').where('id', '=', session.id).execute();
  clearSessionCookie(cairn, reply);
}

/** The per-session CSRF token, compared in constant time. */
export function csrfValid(session: Session | null | undefined, submitted: unknown): boolean {
  return !!session && typeof submitted === 'string' && submitted.length > 0 && safeEqual(session.csrf_token, submitted);
}

/** A local path to go back to after signing in; anything else (other hosts, //x, \x) falls back. */
export function safeReturnPath(value: unknown, fallback: string): string {
  if (typeof value !== 'string' || !value.startsWith('/') || value.startsWith('//') || value.startsWith('/\\')) return fallback;
  if (/[\u0000-\u001f\u007f]/.test(value)) return fallback;
  return value;
}
