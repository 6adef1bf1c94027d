import crypto from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { OAuthApplication } from '../db/schema/oauth.js';
import { hashPassword, safeEqual, tokenDigest, verifyPassword } from '../lib/secrets.js';
import { ApiError } from '../plugins/errors.js';
import { findUserByLogin, upgradePasswordHash } from '../services/users.js';
import { accountLockedFor, clearAccountFailures, ipBannedFor, recordAccountFailure, recordIpFailure, signInAccountThrottle } from '../services/auth_failures.js';
import { findApplicationByUid, redirectUriRegistered, secretMatches, splitRedirectUris } from './applications.js';
import { DEFAULT_SCOPES, isKnownScope, isSubset, parseScopes } from './scopes.js';
import {
  AUTHORIZATION_CODE_TTL,
  epochSeconds,
  findTokenByRefreshToken,
  issueAccessToken,
  newOpaqueToken,
  revokeTokensOfGrant,
  type IssuedToken,
} from './tokens.js';
import { findUserById } from '../finders/users.js';

/** RFC 6749 section 5.2 error codes, with our own descriptions. */
const DESCRIPTIONS: Record<string, string> = {
  invalid_request: 'The request is missing a required parameter, has an unsupported parameter value, or is otherwise malformed.',
  invalid_client: 'Client authentication failed: the client is unknown, sent no authentication, or used an unsupported method.',
  invalid_grant: 'The authorization grant or refresh token is invalid, expired, revoked, does not match the redirect URI of the authorization request, or belongs to another client.',
  unauthorized_client: 'The client may not perform this request.',
  unsupported_grant_type: 'The authorization server does not support this grant type.',
  invalid_scope: 'The requested scope is invalid, unknown, malformed, or not enabled for this application.',
  access_denied: 'The resource owner or the authorization server denied the request.',
  unsupported_response_type: 'The authorization server does not support this response type.',
  invalid_redirect_uri: 'The redirect URI is not registered for this application.',
};

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

/** A value fit for an auth-param's quoted-string (RFC 6750 section 3: no '"' or '\\', printable ASCII). */
function quotable(value: string): string {
  return value.replace(/[^\x20-\x7e]|["\\]/g, '');
}

/**
 * An error in RFC 6749 shape: {"error": ..., "error_description": ...}. invalid_client is a 401;
 * `basicChallenge` (the client tried HTTP Basic client authentication) adds the challenge RFC 6749
 * section 5.2 requires then, in the scheme the client used, naming the error as RFC 6750 section 3
 * does. A client that sent its credentials in the body gets no challenge (as Doorkeeper).
 */
export function oauthError(error: string, description?: string, opts: { basicChallenge?: boolean } = {}): ApiError {
  const status = error === 'invalid_client' ? 401 : error === 'unauthorized_client' ? 403 : 400;
  const errorDescription = description ?? DESCRIPTIONS[error] ?? error;
  const headers: Record<string, string> = { ...NO_STORE };
  if (status === 401 && opts.basicChallenge) {
    headers['www-authenticate'] = `Basic realm="Cairn OAuth", error="${quotable(error)}", error_description="${quotable(errorDescription)}"`;
  }
  return new ApiError(status, { error, error_description: errorDescription }, headers);
}

export function describeError(error: string): string {
  return DESCRIPTIONS[error] ?? error;
}

const missing = (name: string) => oauthError('invalid_request', `Missing required parameter: ${name}.`);

/** A parameter as a single string; arrays, objects and blanks count as absent. */
export function str(params: Record<string, unknown>, name: string): string | undefined {
  const v = params[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}

// ---------------------------------------------------------------- client authentication

export interface ClientCredentials {
  clientId?: string;
  clientSecret?: string;
  /** The request carried `Authorization: Basic ...`: a client authentication failure is challenged. */
  basic?: boolean;
}

/** invalid_client for these credentials: challenged when they came (or were meant to come) by HTTP Basic. */
function invalidClient(creds: ClientCredentials): ApiError {
  return oauthError('invalid_client', undefined, { basicChallenge: creds.basic === true });
}

function decodeFormComponent(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s;
  }
}

/** client_id / client_secret from HTTP Basic (preferred, RFC 6749 2.3.1) or the form. */
export function clientCredentials(request: FastifyRequest, params: Record<string, unknown>): ClientCredentials {
  const authz = request.headers.authorization;
  const basic = typeof authz === 'string' && /^basic(\s|$)/i.test(authz);
  if (basic) {
    const decoded = Buffer.from(authz.replace(/^basic\s*/i, '').trim(), 'base64').toString('utf8');
    const i = decoded.indexOf(':');
    if (i > 0) return { clientId: decodeFormComponent(decoded.slice(0, i)), clientSecret: decodeFormComponent(decoded.slice(i + 1)), basic };
  }
  return { clientId: str(params, 'client_id'), clientSecret: str(params, 'client_secret'), basic };
}

export interface AuthenticatedClient {
  app: OAuthApplication;
  /** The secret was presented and matched. */
  authenticated: boolean;
}

/**
 * The client of a token request. Unknown clients and wrong secrets are invalid_client;
 * confidential clients must present their secret.
 */
async function requestClient(cairn: Cairn, creds: ClientCredentials): Promise<AuthenticatedClient | null> {
  if (!creds.clientId) {
    if (creds.clientSecret || creds.basic) throw invalidClient(creds);
    return null;
  }
  const app = await findApplicationByUid(cairn.db, creds.clientId);
  if (!app) throw invalidClient(creds);
  if (creds.clientSecret !== undefined) {
    if (!secretMatches(app, creds.clientSecret)) throw invalidClient(creds);
    return { app, authenticated: true };
  }
  if (app.confidential) throw invalidClient(creds);
  return { app, authenticated: false };
}

// ---------------------------------------------------------------- PKCE

const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/;

export function validPkceValue(v: string): boolean {
  return PKCE_VALUE.test(v);
}

function base64url(buf: Buffer): string {
  return buf.toString('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function pkceMatches(verifier: string, challenge: string, method: string): boolean {
  const computed = method === 'S256' ? base64url(crypto.createHash('sha256').update(verifier, 'ascii').digest()) : verifier;
  return safeEqual(computed, challenge);
}

// ---------------------------------------------------------------- token responses

export function tokenResponse(issued: IssuedToken) {
  const body: Record<string, unknown> = {
    access_token: issued.accessToken,
    token_type: 'Bearer',
    expires_in: issued.row.expires_in,
  };
  if (issued.refreshToken) body.refresh_token = issued.refreshToken;
  body.scope = issued.row.scopes.join(' ');
  body.created_at = epochSeconds(issued.row.created_at);
  return body;
}

export function userMaySignIn(user: User): boolean {
  // Bots of project and group access tokens act only through their tokens.
  return user.state === 'active' && user.user_type !== 'ghost' && user.user_type !== 'project_bot';
}

// A valid scrypt hash of a random password, so an unknown login costs as much as a wrong password.
let dummyHash: Promise<string> | null = null;
async function burnPasswordCheck(password: string) {
  dummyHash ??= hashPassword(crypto.randomBytes(16).toString('hex'));
  await verifyPassword(password, await dummyHash);
}

export type LoginResult =
  | { user: User; failure?: undefined }
  /** Unknown login or wrong password (one answer for both). */
  | { user?: undefined; failure: 'invalid' }
  /** The account is locked after too many failed sign-ins; the password was not checked. */
  | { user?: undefined; failure: 'locked'; retryAfter: number }
  /** The client's address is banned after too many failed sign-ins. */
  | { user?: undefined; failure: 'banned'; retryAfter: number }
  /** Too many password attempts named this account within the protected paths period. */
  | { user?: undefined; failure: 'throttled'; retryAfter: number };

/**
 * Username or e-mail and password, for the sign-in form and the OAuth password grant, with the
 * failed sign-in defences of services/auth_failures.ts: a banned address or a locked account is
 * refused before the password is checked; a wrong password counts against the address and the
 * account; a correct one resets the account's count.
 */
export async function checkLogin(cairn: Cairn, ip: string, login: string, password: string): Promise<LoginResult> {
  const banned = await ipBannedFor(cairn, 'sign_in', ip);
  if (banned) return { failure: 'banned', retryAfter: banned };
  const user = await findUserByLogin(cairn.db, login);
  if (user) {
    const wait = await signInAccountThrottle(cairn, user.id);
    if (wait) return { failure: 'throttled', retryAfter: wait };
    const locked = await accountLockedFor(cairn, user.id);
    if (locked) return { failure: 'locked', retryAfter: locked };
  }
  const valid = user ? await verifyPassword(password, user.encrypted_password) : (await burnPasswordCheck(password), false);
  if (!user || !valid) {
    await recordIpFailure(cairn, 'sign_in', ip);
    if (user) await recordAccountFailure(cairn, user.id);
    return { failure: 'invalid' };
  }
  await clearAccountFailures(cairn, user.id);
  await upgradePasswordHash(cairn.db, user, password);
  return { user };
}

export const ACCOUNT_LOCKED = 'Your account is locked after too many failed sign-in attempts. Try again later or ask an administrator.';
export const ADDRESS_BANNED = 'Too many failed sign-in attempts from your address. Try again later.';
export const ACCOUNT_THROTTLED = 'Too many sign-in attempts for this account. Try again later.';
export const TOO_MANY_TOKEN_REQUESTS = 'Too many requests from your address. Try again later.';

// ---------------------------------------------------------------- grants

async function authorizationCodeGrant(cairn: Cairn, creds: ClientCredentials, params: Record<string, unknown>) {
  const client = await requestClient(cairn, creds);
  if (!client) throw invalidClient(creds);
  const code = str(params, 'code');
  if (!code) throw missing('code');
  const redirectUri = str(params, 'redirect_uri');
  if (!redirectUri) throw missing('redirect_uri');

  const db = cairn.db;
  const grant = await db.selectFrom('oauth_access_grants').selectAll().where('token_digest', '=', tokenDigest(code)).executeTakeFirst();
  if (!grant || grant.application_id !== client.app.id) throw oauthError('invalid_grant');
  if (grant.revoked_at) {
    // A replayed code: whoever holds it now may be an attacker, so its tokens die too (RFC 6749 4.1.2).
    await revokeTokensOfGrant(db, grant.id);
    throw oauthError('invalid_grant');
  }
  if (new Date(grant.created_at).getTime() + grant.expires_in * 1000 <= Date.now()) throw oauthError('invalid_grant');
  if (redirectUri !== grant.redirect_uri) throw oauthError('invalid_grant');
  if (grant.code_challenge) {
    const verifier = str(params, 'code_verifier');
    if (!verifier) throw missing('code_verifier');
    if (!validPkceValue(verifier)) throw oauthError('invalid_request', 'The code_verifier must be 43 to 128 characters from A-Z a-z 0-9 - . _ ~.');
    if (!pkceMatches(verifier, grant.code_challenge, grant.code_challenge_method ?? 'plain')) {
      throw oauthError('invalid_grant', 'The code_verifier does not match the code_challenge of the authorization request.');
    }
  }
  const user = await findUserById(db, grant.resource_owner_id);
  if (!user || !userMaySignIn(user)) throw oauthError('invalid_grant');

  const issued = await db.transaction().execute(async (trx) => {
    const consumed = await trx
      .updateTable('oauth_access_grants')
      .set({ revoked_at: sql`now()` as any })
      .where('id', '=', grant.id)
      .where('revoked_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (!consumed) return null;
    return issueAccessToken(trx, {
      userId: grant.resource_owner_id,
      applicationId: client.app.id,
      accessGrantId: grant.id,
      scopes: grant.scopes,
      ttl: cairn.config.oauthAccessTokenTtl,
      withRefreshToken: true,
    });
  });
  if (!issued) {
    // Another request consumed the code between our read and our update: a replay.
    await revokeTokensOfGrant(db, grant.id);
    throw oauthError('invalid_grant');
  }
  return issued;
}

async function refreshTokenGrant(cairn: Cairn, creds: ClientCredentials, params: Record<string, unknown>) {
  const refreshToken = str(params, 'refresh_token');
  if (!refreshToken) throw missing('refresh_token');
  const client = await requestClient(cairn, creds);
  const db = cairn.db;
  const old = await findTokenByRefreshToken(db, refreshToken);
  if (!old || old.revoked_at || old.resource_owner_id === null) throw oauthError('invalid_grant');
  if (old.application_id !== null && old.application_id !== client?.app.id) throw oauthError('invalid_grant');
  let scopes = old.scopes;
  const asked = parseScopes(params.scope);
  if (asked.length) {
    if (!isSubset(asked, old.scopes)) throw oauthError('invalid_scope');
    scopes = asked;
  }
  const user = await findUserById(db, old.resource_owner_id);
  if (!user || !userMaySignIn(user)) throw oauthError('invalid_grant');

  const issued = await db.transaction().execute(async (trx) => {
    // Rotation: the old access and refresh tokens stop working the moment new ones exist.
    const revoked = await trx
      .updateTable('oauth_access_tokens')
      .set({ revoked_at: sql`now()` as any })
      .where('id', '=', old.id)
      .where('revoked_at', 'is', null)
      .returning('id')
      .executeTakeFirst();
    if (!revoked) return null;
    return issueAccessToken(trx, {
      userId: old.resource_owner_id!,
      applicationId: old.application_id,
      accessGrantId: old.access_grant_id,
      scopes,
      ttl: cairn.config.oauthAccessTokenTtl,
      withRefreshToken: true,
    });
  });
  if (!issued) throw oauthError('invalid_grant');
  return issued;
}

async function passwordGrant(cairn: Cairn, ip: string, creds: ClientCredentials, params: Record<string, unknown>) {
  const client = await requestClient(cairn, creds);
  const username = str(params, 'username');
  const password = str(params, 'password');
  if (!username) throw missing('username');
  if (!password) throw missing('password');
  let scopes = parseScopes(params.scope);
  if (scopes.length === 0) scopes = DEFAULT_SCOPES;
  if (!scopes.every(isKnownScope)) throw oauthError('invalid_scope');
  if (client && !isSubset(scopes, client.app.scopes)) throw oauthError('invalid_scope');

  const result = await checkLogin(cairn, ip, username, password);
  if (result.failure === 'banned' || result.failure === 'throttled') {
    const description = result.failure === 'banned' ? ADDRESS_BANNED : ACCOUNT_THROTTLED;
    throw new ApiError(429, { error: 'too_many_requests', error_description: description }, { ...NO_STORE, 'retry-after': String(result.retryAfter) });
  }
  if (result.failure === 'locked') throw oauthError('invalid_grant', ACCOUNT_LOCKED);
  const user = result.user;
  if (!user || !userMaySignIn(user)) throw oauthError('invalid_grant');
  if (user.two_factor_enabled) {
    throw oauthError('invalid_grant', 'The password grant is not available to users with two-factor authentication enabled.');
  }
  return issueAccessToken(cairn.db, {
    userId: user.id,
    applicationId: client?.app.id ?? null,
    scopes,
    ttl: cairn.config.oauthAccessTokenTtl,
    withRefreshToken: true,
  });
}

/** POST /oauth/token. */
export async function exchangeToken(cairn: Cairn, request: FastifyRequest, params: Record<string, unknown>) {
  const grantType = str(params, 'grant_type');
  if (!grantType) throw missing('grant_type');
  const creds = clientCredentials(request, params);
  let issued: IssuedToken;
  if (grantType === 'authorization_code') issued = await authorizationCodeGrant(cairn, creds, params);
  else if (grantType === 'refresh_token') issued = await refreshTokenGrant(cairn, creds, params);
  else if (grantType === 'password') issued = await passwordGrant(cairn, request.ip, creds, params);
  else throw oauthError('unsupported_grant_type');
  return tokenResponse(issued);
}

/** POST /oauth/revoke (RFC 7009): unknown tokens are a success; a confidential client's token needs that client. */
export async function revokeToken(cairn: Cairn, request: FastifyRequest, params: Record<string, unknown>) {
  const token = str(params, 'token');
  if (!token) throw missing('token');
  const digest = tokenDigest(token);
  const hint = str(params, 'token_type_hint');
  const byAccess = () => cairn.db.selectFrom('oauth_access_tokens').selectAll().where('token_digest', '=', digest).executeTakeFirst();
  const byRefresh = () => cairn.db.selectFrom('oauth_access_tokens').selectAll().where('refresh_token_digest', '=', digest).executeTakeFirst();
  const row = hint === 'refresh_token' ? ((await byRefresh()) ?? (await byAccess())) : ((await byAccess()) ?? (await byRefresh()));
  if (!row) return {};
  if (row.application_id !== null) {
    const app = await cairn.db.selectFrom('oauth_applications').selectAll().where('id', '=', row.application_id).executeTakeFirst();
    if (app?.confidential) {
      const creds = clientCredentials(request, params);
      const ok = creds.clientId === app.uid && creds.clientSecret !== undefined && secretMatches(app, creds.clientSecret);
      if (!ok) throw oauthError('unauthorized_client', 'You are not authorized to revoke this token.');
    }
  }
  await cairn.db.updateTable('oauth_access_tokens').set({ revoked_at: sql`now()` as any }).where('id', '=', row.id).where('revoked_at', 'is', null).execute();
  return {};
}

// ---------------------------------------------------------------- authorization requests

export interface AuthorizationRequest {
  app: OAuthApplication;
  redirectUri: string;
  responseType: string;
  state?: string;
  scopes: string[];
  codeChallenge?: string;
  codeChallengeMethod?: string;
}

/** Problems that may not be sent to the redirect URI: the page itself shows them. */
export class AuthorizationPageError extends Error {
  constructor(readonly error: string, readonly description: string) {
    super(description);
  }
}

/** Problems reported back to the client through its (verified) redirect URI. */
export class AuthorizationRedirectError extends Error {
  constructor(readonly request: Pick<AuthorizationRequest, 'redirectUri' | 'responseType' | 'state'>, readonly error: string, readonly description?: string) {
    super(error);
  }
}

/** Checks an authorization request in the order that decides where errors may go. */
export async function validateAuthorizationRequest(cairn: Cairn, params: Record<string, unknown>): Promise<AuthorizationRequest> {
  const clientId = str(params, 'client_id');
  const app = clientId ? await findApplicationByUid(cairn.db, clientId) : undefined;
  if (!app) throw new AuthorizationPageError('invalid_client', 'Client authentication failed: the client_id is missing or unknown.');
  let redirectUri = str(params, 'redirect_uri');
  if (!redirectUri) {
    const registered = splitRedirectUris(app.redirect_uri);
    if (registered.length !== 1) throw new AuthorizationPageError('invalid_redirect_uri', 'The request has no redirect_uri and the application registers more than one.');
    redirectUri = registered[0];
  }
  if (!redirectUriRegistered(app, redirectUri)) {
    throw new AuthorizationPageError('invalid_redirect_uri', 'The redirect URI included is not valid: it must exactly match one registered for this application.');
  }
  const state = str(params, 'state');
  const responseType = str(params, 'response_type') ?? '';
  const back = { redirectUri, responseType: responseType === 'token' ? 'token' : 'code', state };
  if (!responseType) throw new AuthorizationRedirectError(back, 'invalid_request', 'Missing required parameter: response_type.');
  if (responseType !== 'code' && responseType !== 'token') throw new AuthorizationRedirectError(back, 'unsupported_response_type');

  let scopes = parseScopes(params.scope);
  if (scopes.length === 0) scopes = DEFAULT_SCOPES;
  if (!scopes.every(isKnownScope) || !isSubset(scopes, app.scopes)) throw new AuthorizationRedirectError(back, 'invalid_scope');

  const codeChallenge = str(params, 'code_challenge');
  let codeChallengeMethod = str(params, 'code_challenge_method');
  if (codeChallenge || codeChallengeMethod) {
    if (responseType !== 'code') throw new AuthorizationRedirectError(back, 'invalid_request', 'PKCE applies to the authorization code flow only.');
    if (!codeChallenge) throw new AuthorizationRedirectError(back, 'invalid_request', 'Missing required parameter: code_challenge.');
    codeChallengeMethod ??= 'plain';
    if (codeChallengeMethod !== 'S256' && codeChallengeMethod !== 'plain') {
      throw new AuthorizationRedirectError(back, 'invalid_request', 'The code_challenge_method must be S256 or plain.');
    }
    if (!validPkceValue(codeChallenge)) throw new AuthorizationRedirectError(back, 'invalid_request', 'The code_challenge is malformed.');
  }
  return { app, redirectUri, responseType, state, scopes, codeChallenge, codeChallengeMethod };
}

function withParams(uri: string, values: Record<string, string | number | undefined>, inFragment: boolean): string {
  const url = new URL(uri);
  const pairs = Object.entries(values).filter(([, v]) => v !== undefined) as [string, string | number][];
  if (inFragment) {
    url.hash = new URLSearchParams(pairs.map(([k, v]) => [k, String(v)])).toString();
  } else {
    for (const [k, v] of pairs) url.searchParams.append(k, String(v));
  }
  return url.toString();
}

export function errorRedirect(e: AuthorizationRedirectError): string {
  return withParams(e.request.redirectUri, { error: e.error, error_description: e.description ?? describeError(e.error), state: e.request.state }, e.request.responseType === 'token');
}

/** The user said yes: a code (code flow) or a token in the fragment (implicit flow), as a redirect URL. */
export async function approveAuthorization(cairn: Cairn, req: AuthorizationRequest, user: User): Promise<string> {
  if (req.responseType === 'token') {
    const issued = await issueAccessToken(cairn.db, {
      userId: user.id,
      applicationId: req.app.id,
      scopes: req.scopes,
      ttl: cairn.config.oauthAccessTokenTtl,
      withRefreshToken: false,
    });
    return withParams(req.redirectUri, {
      access_token: issued.accessToken,
      token_type: 'Bearer',
      expires_in: issued.row.expires_in ?? undefined,
      scope: req.scopes.join(' '),
      state: req.state,
    }, true);
  }
  const code = newOpaqueToken();
  await cairn.db
    .insertInto('oauth_access_grants')
    .values({
      resource_owner_id: user.id,
      application_id: req.app.id,
      token_digest: tokenDigest(code),
      expires_in: AUTHORIZATION_CODE_TTL,
      redirect_uri: req.redirectUri,
      scopes: req.scopes,
      code_challenge: req.codeChallenge ?? null,
      code_challenge_method: req.codeChallenge ? (req.codeChallengeMethod ?? 'plain') : null,
    })
    .execute();
  return withParams(req.redirectUri, { code, state: req.state }, false);
}

export function denyRedirect(req: AuthorizationRequest): string {
  return errorRedirect(new AuthorizationRedirectError(req, 'access_denied'));
}
