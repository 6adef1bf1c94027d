import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Cairn, Credential, TokenResolver } from '../context.js';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { OAuthAccessToken } from '../db/schema/oauth.js';
import { tokenDigest } from '../lib/secrets.js';
import { ApiError } from '../plugins/errors.js';
import { findUserById } from '../finders/users.js';

/** Authorization codes live ten minutes, as GitLab's. */
export const AUTHORIZATION_CODE_TTL = 600;

/** 64 hex characters, the shape of GitLab's OAuth tokens and codes. */
export function newOpaqueToken(): string {
  return crypto.randomBytes(32).toString('hex');
}

export interface IssueTokenInput {
  userId: number;
  applicationId: number | null;
  accessGrantId?: number | null;
  scopes: string[];
  ttl: number;
  withRefreshToken: boolean;
}

export interface IssuedToken {
  row: OAuthAccessToken;
  accessToken: string;
  refreshToken: string | null;
}

export async function issueAccessToken(db: Database, input: IssueTokenInput): Promise<IssuedToken> {
  const accessToken = newOpaqueToken();
  const refreshToken = input.withRefreshToken ? newOpaqueToken() : null;
  const row = await db
    .insertInto('oauth_access_tokens')
    .values({
      resource_owner_id: input.userId,
      application_id: input.applicationId,
      access_grant_id: input.accessGrantId ?? null,
      token_digest: tokenDigest(accessToken),
      refresh_token_digest: refreshToken ? tokenDigest(refreshToken) : null,
      expires_in: input.ttl,
      scopes: input.scopes,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { row, accessToken, refreshToken };
}

/** Seconds left before the token expires (never below zero), or null for a token that does not expire. */
export function secondsLeft(row: Pick<OAuthAccessToken, 'expires_in' | 'created_at'>, now = Date.now()): number | null {
  if (row.expires_in === null) return null;
  const created = new Date(row.created_at).getTime();
  return Math.max(0, Math.floor((created + row.expires_in * 1000 - now) / 1000));
}

export function epochSeconds(d: Date | string): number {
  return Math.floor(new Date(d).getTime() / 1000);
}

export type TokenState = 'valid' | 'expired' | 'revoked';

export function tokenState(row: Pick<OAuthAccessToken, 'expires_in' | 'created_at' | 'revoked_at'>): TokenState {
  if (row.revoked_at) return 'revoked';
  if (row.expires_in !== null && new Date(row.created_at).getTime() + row.expires_in * 1000 <= Date.now()) return 'expired';
  return 'valid';
}

export async function findAccessToken(db: Database, token: string) {
  return db
    .selectFrom('oauth_access_tokens as t')
    .leftJoin('oauth_applications as a', 'a.id', 't.application_id')
    .selectAll('t')
    .select(['a.uid as application_uid'])
    .where('t.token_digest', '=', tokenDigest(token))
    .executeTakeFirst();
}

export async function findTokenByRefreshToken(db: Database, refreshToken: string) {
  return db.selectFrom('oauth_access_tokens').selectAll().where('refresh_token_digest', '=', tokenDigest(refreshToken)).executeTakeFirst();
}

/** Revokes every token issued from one authorization code (the code was replayed). */
export async function revokeTokensOfGrant(db: Database, grantId: number) {
  await db
    .updateTable('oauth_access_tokens')
    .set({ revoked_at: sql`now()` as any })
    .where('access_grant_id', '=', grantId)
    .where('revoked_at', 'is', null)
    .execute();
}

type Lookup = { state: TokenState; credential: Credential } | null;

async function lookupCredential(cairn: Cairn, token: string): Promise<Lookup> {
  const row = await findAccessToken(cairn.db, token);
  if (!row || row.resource_owner_id === null) return null;
  const user = await findUserById(cairn.db, row.resource_owner_id);
  if (!user) return null;
  const state = tokenState(row);
  if (state === 'valid' && (!row.last_used_at || Date.now() - new Date(row.last_used_at).getTime() > 10 * 60_000)) {
    // One write per ten minutes of use, not one per request.
    await cairn.db.updateTable('oauth_access_tokens').set({ last_used_at: sql`now()` as any }).where('id', '=', row.id).execute();
  }
  return {
    state,
    credential: {
      kind: 'oauth',
      user: user as User,
      scopes: row.scopes,
      tokenId: row.id,
      meta: { applicationId: row.application_id, applicationUid: row.application_uid ?? null },
    },
  };
}

/**
 * The credential an OAuth access token stands for, or null when the token is unknown, expired
 * or revoked. Git over HTTP (username oauth2) reaches it through resolveCredential('bearer').
 */
export async function authenticateOAuthToken(cairn: Cairn, token: string): Promise<Credential | null> {
  const found = await lookupCredential(cairn, token);
  return found && found.state === 'valid' ? found.credential : null;
}

/** Authorization: Bearer / access_token: OAuth tokens, answering expired and revoked tokens as GitLab does. */
export const oauthAccessTokenResolver: TokenResolver = {
  channels: ['bearer'],
  async resolve(cairn, token) {
    const found = await lookupCredential(cairn, token);
    if (!found) return null;
    if (found.state === 'revoked') {
      throw new ApiError(401, { error: 'invalid_token', error_description: 'Token was revoked. You have to re-authorize from the user.' }, {
        'www-authenticate': 'Bearer realm="Protected by OAuth 2.0", error="invalid_token", error_description="Token was revoked. You have to re-authorize from the user."',
      });
    }
    if (found.state === 'expired') {
      throw new ApiError(401, { error: 'invalid_token', error_description: 'Token is expired. You can either do re-authorization or token refresh.' }, {
        'www-authenticate': 'Bearer realm="Protected by OAuth 2.0", error="invalid_token", error_description="Token is expired. You can either do re-authorization or token refresh."',
      });
    }
    return found.credential;
  },
};
