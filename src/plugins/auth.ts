import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Actor, Cairn, Credential, TokenChannel } from '../context.js';
import type { User } from '../db/schema/core.js';
import { findUserByIdOrUsername } from '../finders/users.js';
import { tokenDigest } from '../lib/secrets.js';
import { revokeTokenFamily } from '../services/tokens.js';
import { ApiError, forbidden, notFound, unauthorized } from './errors.js';
import { allParams } from './params.js';

const INSUFFICIENT_SCOPE = (scopes: string[]) =>
  new ApiError(403, {
    error: 'insufficient_scope',
    error_description: 'The request requires higher privileges than provided by the access token.',
    scope: scopes.join(' '),
  });

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Finds the credential a request carries, by channel, as GitLab reads them. */
export function extractToken(request: FastifyRequest): { channel: TokenChannel; token: string } | null {
  const q = (request.query ?? {}) as Record<string, unknown>;
  const privateToken = header(request, 'private-token') ?? (typeof q.private_token === 'string' ? q.private_token : undefined);
  if (privateToken) return { channel: 'private', token: privateToken };
  const authz = header(request, 'authorization');
  if (authz && /^bearer\s+/i.test(authz)) return { channel: 'bearer', token: authz.replace(/^bearer\s+/i, '').trim() };
  if (typeof q.access_token === 'string' && q.access_token) return { channel: 'bearer', token: q.access_token };
  const jobToken = header(request, 'job-token') ?? (typeof q.job_token === 'string' ? q.job_token : undefined);
  if (jobToken) return { channel: 'job', token: jobToken };
  return null;
}

/** The personal access token resolver: PRIVATE-TOKEN and Bearer. */
export const personalAccessTokenResolver = {
  channels: ['private', 'bearer'] as TokenChannel[],
  async resolve(cairn: Cairn, token: string): Promise<Credential | null> {
    const digest = tokenDigest(token);
    // Cached by digest; expiry, revocation and last use are judged below on every call.
    const row = await cairn.cache.load(`pat:${digest}`, () =>
      cairn.db
        .selectFrom('personal_access_tokens as t')
        .innerJoin('users as u', 'u.id', 't.user_id')
        .select(['t.id as token_id', 't.scopes', 't.expires_at', 't.revoked', 't.impersonation', 't.last_used_at'])
        .selectAll('u')
        .where('t.token_digest', '=', digest)
        .executeTakeFirst(),
    );
    if (!row) return null;
    const today = new Date().toISOString().slice(0, 10);
    if (row.revoked) {
      await revokeTokenFamily(cairn.db, row.token_id);
      throw unauthorized();
    }
    if (row.expires_at && row.expires_at <= today) throw unauthorized();
    const { token_id, scopes, expires_at: _e, revoked: _r, impersonation, last_used_at, ...user } = row;
    // Recording use on every request would be a write per read; once in ten minutes is enough.
    if (!last_used_at || Date.now() - new Date(last_used_at).getTime() > 10 * 60_000) {
      await cairn.db.updateTable('personal_access_tokens').set({ last_used_at: sql`now()` as any }).where('id', '=', token_id).execute();
    }
    return {
      kind: impersonation ? 'impersonation_token' : 'personal_access_token',
      user: user as User,
      scopes,
      tokenId: token_id,
    };
  },
};

/** Refuses credentials of users who may not use the API. */
export function checkUserState(user: User) {
  if (user.state === 'blocked' || user.state === 'ldap_blocked' || user.state === 'blocked_pending_approval' || user.state === 'banned' || user.user_type === 'ghost') {
    throw unauthorized();
  }
  if (user.state === 'deactivated') {
    throw new ApiError(403, {
      message: '403 Forbidden - Your account has been deactivated by your administrator. Please log back in to reactivate your account.',
    });
  }
}

export async function resolveCredential(cairn: Cairn, channel: TokenChannel, token: string): Promise<Credential | null> {
  for (const resolver of cairn.tokenResolvers) {
    if (!resolver.channels.includes(channel)) continue;
    const cred = await resolver.resolve(cairn, token);
    if (cred) return cred;
  }
  return null;
}

/** May this credential call this route? read_api reads, read_user reads user endpoints, api does all. */
export function checkScopes(request: FastifyRequest, scopes: string[]) {
  if (scopes.includes('api')) return;
  const allowed = request.routeOptions.config?.allowScopes;
  if (allowed === 'any' || allowed?.some((s) => scopes.includes(s))) return;
  const reading = request.method === 'GET' || request.method === 'HEAD';
  if (reading && scopes.includes('read_api')) return;
  if (reading && request.routeOptions.config?.readUser && scopes.includes('read_user')) return;
  throw INSUFFICIENT_SCOPE(reading ? ['api', 'read_api'] : ['api']);
}

export async function authenticate(request: FastifyRequest): Promise<Actor | null> {
  const cairn = request.server.cairn;
  const found = extractToken(request);
  if (!found) return null;
  const cred = await resolveCredential(cairn, found.channel, found.token);
  if (!cred) throw unauthorized();
  // A CI job token works only where the route says it does (GET /job, job artifacts...).
  if (cred.kind === 'job_token' && !request.routeOptions.config?.jobToken) throw unauthorized();
  checkUserState(cred.user);
  checkScopes(request, cred.scopes);

  const params = allParams(request);
  const sudoValue = header(request, 'sudo') ?? (params.sudo !== undefined ? String(params.sudo) : undefined);
  if (sudoValue === undefined || sudoValue === '') return { ...cred, authUser: cred.user, sudo: false };
  if (!cred.user.admin) throw forbidden('Must be admin to use sudo');
  if (!cred.scopes.includes('sudo')) throw forbidden('Private token must be specified in order to use sudo');
  const target = await findUserByIdOrUsername(cairn.db, sudoValue);
  if (!target) throw notFound(`User with ID or username '${sudoValue}'`);
  checkUserState(target);
  return { ...cred, user: target, authUser: cred.user, sudo: true };
}

export function registerAuth(app: FastifyInstance) {
  app.decorateRequest('actor', null);
  // After body parsing (sudo may be a body parameter), before validation (401 before 400).
  app.addHook('preValidation', async (request) => {
    const config = request.routeOptions.config ?? {};
    if (config.skipApiAuth) return;
    request.actor = await authenticate(request);
    if (config.auth === 'required' && !request.actor) throw unauthorized();
    if (config.admin) {
      if (!request.actor) throw unauthorized();
      if (!request.actor.user.admin) throw forbidden();
    }
  });
}

/** The signed-in user, or 401. */
export function requireUser(request: FastifyRequest): User {
  if (!request.actor) throw unauthorized();
  return request.actor.user;
}

export function requireAdmin(request: FastifyRequest): User {
  const user = requireUser(request);
  if (!user.admin) throw forbidden();
  return user;
}
