import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { OAuthApplication } from '../db/schema/oauth.js';
import { safeEqual, tokenDigest } from '../lib/secrets.js';
import { isKnownScope, parseScopes } from './scopes.js';

export const APPLICATION_SECRET_PREFIX = 'gloas-';

const FORBIDDEN_SCHEMES = new Set(['javascript:', 'data:', 'vbscript:', 'file:']);

export interface ApplicationInput {
  name: unknown;
  redirectUri: unknown;
  scopes: unknown;
  confidential?: boolean;
  ownerId: number | null;
}

export interface ValidApplication {
  name: string;
  redirectUris: string[];
  scopes: string[];
  confidential: boolean;
}

/** Registered redirect URIs are separated by new lines (or any white space, which a URI cannot hold). */
export function splitRedirectUris(value: string): string[] {
  return value.split(/\s+/).filter(Boolean);
}

/** The field errors GitLab's model validation would report, or the cleaned values. */
export function validateApplication(input: ApplicationInput): { errors: Record<string, string[]> } | { value: ValidApplication } {
  const errors: Record<string, string[]> = {};
  const add = (field: string, msg: string) => (errors[field] ??= []).push(msg);

  const name = typeof input.name === 'string' ? input.name.trim() : '';
  if (!name) add('name', "can't be blank");
  else if (name.length > 255) add('name', 'is too long (maximum is 255 characters)');

  const redirectUris = typeof input.redirectUri === 'string' ? splitRedirectUris(input.redirectUri) : [];
  if (redirectUris.length === 0) add('redirect_uri', "can't be blank");
  for (const uri of redirectUris) {
    let parsed: URL;
    try {
      parsed = new URL(uri);
    } catch {
      add('redirect_uri', 'must be an absolute URI.');
      continue;
    }
    if (FORBIDDEN_SCHEMES.has(parsed.protocol)) add('redirect_uri', 'is forbidden by the server.');
    else if (parsed.hash || uri.includes('#')) add('redirect_uri', 'cannot contain a fragment.');
  }

  const scopes = parseScopes(input.scopes);
  if (scopes.length === 0) add('scopes', "can't be blank");
  else if (!scopes.every(isKnownScope)) add('scopes', "doesn't match configured on the server.");

  if (Object.keys(errors).length) return { errors };
  return { value: { name, redirectUris: [...new Set(redirectUris)], scopes, confidential: input.confidential ?? true } };
}

function newUid(): string {
  return crypto.randomBytes(32).toString('hex');
}

function newSecret(): string {
  return APPLICATION_SECRET_PREFIX + crypto.randomBytes(32).toString('hex');
}

/** Stores a new application; the plain secret is returned once and only its digest is kept. */
export async function insertApplication(db: Database, value: ValidApplication, ownerId: number | null) {
  const secret = newSecret();
  const app = await db
    .insertInto('oauth_applications')
    .values({
      name: value.name,
      uid: newUid(),
      secret_digest: tokenDigest(secret),
      redirect_uri: value.redirectUris.join('\n'),
      scopes: value.scopes,
      confidential: value.confidential,
      owner_id: ownerId,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { app, secret };
}

export async function renewApplicationSecret(db: Database, id: number) {
  const secret = newSecret();
  const app = await db
    .updateTable('oauth_applications')
    .set({ secret_digest: tokenDigest(secret), updated_at: sql`now()` as any })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return app ? { app, secret } : null;
}

/** Deletes an application; its grants and tokens go with it (foreign keys cascade). */
export async function deleteApplication(db: Database, id: number): Promise<boolean> {
  const res = await db.deleteFrom('oauth_applications').where('id', '=', id).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

export async function findInstanceApplication(db: Database, id: number) {
  // Ids beyond the integer column's range cannot exist; asking PostgreSQL would be an error.
  if (!Number.isSafeInteger(id) || id < 1 || id > 2147483647) return undefined;
  return db.selectFrom('oauth_applications').selectAll().where('id', '=', id).where('owner_id', 'is', null).executeTakeFirst();
}

export async function listInstanceApplications(db: Database) {
  return db.selectFrom('oauth_applications').selectAll().where('owner_id', 'is', null).orderBy('id').execute();
}

export async function listUserApplications(db: Database, userId: number) {
  return db.selectFrom('oauth_applications').selectAll().where('owner_id', '=', userId).orderBy('id').execute();
}

export async function findApplicationByUid(db: Database, uid: string): Promise<OAuthApplication | undefined> {
  return db.selectFrom('oauth_applications').selectAll().where('uid', '=', uid).executeTakeFirst();
}

export function secretMatches(app: OAuthApplication, secret: string): boolean {
  return safeEqual(app.secret_digest, tokenDigest(secret));
}

export function redirectUriRegistered(app: OAuthApplication, uri: string): boolean {
  return splitRedirectUris(app.redirect_uri).includes(uri);
}
