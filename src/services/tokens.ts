import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { PersonalAccessToken } from '../db/schema/core.js';
import { parseCalendarDate } from '../lib/timestamps.js';
import { randomToken, tokenDigest } from '../lib/secrets.js';

export const PERSONAL_ACCESS_TOKEN_PREFIX = 'glpat-';

export const PAT_SCOPES = [
  'api', 'read_api', 'read_user', 'create_runner', 'manage_runner', 'k8s_proxy', 'read_repository', 'write_repository',
  'read_registry', 'write_registry', 'sudo', 'admin_mode', 'read_service_ping', 'ai_features', 'self_rotate',
] as const;

export function newPersonalAccessToken(): string {
  return PERSONAL_ACCESS_TOKEN_PREFIX + randomToken(20);
}

export interface TokenInput {
  userId: number;
  name: string;
  scopes: string[];
  expiresAt: string | null;
  impersonation?: boolean;
  description?: string | null;
  /** A chosen value (CAIRN_ROOT_TOKEN); generated when absent. */
  token?: string;
}

/** Stores the digest of a new token and returns the row together with the one-time plain value. */
export async function insertPersonalAccessToken(db: Database, input: TokenInput) {
  const token = input.token ?? newPersonalAccessToken();
  const row = await db
    .insertInto('personal_access_tokens')
    .values({
      user_id: input.userId,
      name: input.name,
      description: input.description ?? null,
      scopes: input.scopes,
      expires_at: input.expiresAt,
      impersonation: input.impersonation ?? false,
      token_digest: tokenDigest(token),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { row, token };
}

/** GitLab's longest allowed lifetime of a personal access token. */
export const MAX_TOKEN_LIFETIME_DAYS = 365;
/** A rotated token lives one week unless the caller names a date. */
export const ROTATION_LIFETIME_DAYS = 7;

export function dateAfterDays(days: number, from = new Date()): string {
  const d = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate()));
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

export function isTokenActive(t: { revoked: boolean; expires_at: string | null }, today = dateAfterDays(0)): boolean {
  return !t.revoked && (t.expires_at === null || t.expires_at > today);
}

/**
 * Model validation of a new token, as GitLab words it: {"field": ["message"]}; empty when valid.
 */
export function tokenValidationErrors(input: { name?: string | null; scopes: string[]; expiresAt: string | null }): Record<string, string[]> {
  const errors: Record<string, string[]> = {};
  const add = (field: string, msg: string) => (errors[field] ??= []).push(msg);
  if (!input.name || !input.name.trim()) add('name', "can't be blank");
  if (input.scopes.length === 0) add('scopes', "can't be blank");
  else if (!input.scopes.every((s) => (PAT_SCOPES as readonly string[]).includes(s))) add('scopes', 'can only contain available scopes');
  const max = dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
  if (input.expiresAt && input.expiresAt > max) add('expires_at', `must be before ${max}`);
  return errors;
}

/** Sentence form of validation errors ("Expires at must be before 2026-01-01"), for render_api_error. */
export function fullMessages(errors: Record<string, string[]>): string {
  const human = (f: string) => f.charAt(0).toUpperCase() + f.slice(1).replace(/_/g, ' ');
  return Object.entries(errors).flatMap(([f, msgs]) => msgs.map((m) => `${human(f)} ${m}`)).join(' and ');
}

export async function revokeToken(db: Database, tokenId: number): Promise<void> {
  await db.updateTable('personal_access_tokens').set({ revoked: true, updated_at: new Date() }).where('id', '=', tokenId).execute();
}

/**
 * Revokes `token` and issues its successor with the same name, scopes and kind, in one
 * transaction. The row lock makes two concurrent rotations of one token yield one successor.
 */
export async function rotateToken(
  db: Database,
  tokenId: number,
  expiresAt: string | null,
): Promise<{ row: PersonalAccessToken; token: string; error?: undefined } | { row?: undefined; token?: undefined; error: string }> {
  return db.transaction().execute(async (trx) => {
    const old = await trx.selectFrom('personal_access_tokens').selectAll().where('id', '=', tokenId).forUpdate().executeTakeFirst();
    if (!old) return { error: 'Token not found' };
    if (old.revoked) return { error: 'Token already revoked' };
    await trx.updateTable('personal_access_tokens').set({ revoked: true, updated_at: new Date() }).where('id', '=', old.id).execute();
    const token = newPersonalAccessToken();
    const row = await trx
      .insertInto('personal_access_tokens')
      .values({
        user_id: old.user_id,
        name: old.name,
        description: old.description,
        scopes: old.scopes,
        impersonation: old.impersonation,
        expires_at: expiresAt ?? dateAfterDays(ROTATION_LIFETIME_DAYS),
        previous_personal_access_token_id: old.id,
        token_digest: tokenDigest(token),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { row, token };
  });
}

/**
 * A revoked token that was rotated is being used again: someone holds a leaked copy, so every
 * token rotated from it (directly or down the chain) is revoked too, as GitLab does.
 */
export async function revokeTokenFamily(db: Database, tokenId: number): Promise<number> {
  const result = await sql`
    with recursive family(id) as (
      select id from personal_access_tokens where previous_personal_access_token_id = ${tokenId}
      union
      select t.id from personal_access_tokens t join family f on t.previous_personal_access_token_id = f.id
    )
    update personal_access_tokens set revoked = true, updated_at = now()
     where id in (select id from family) and revoked = false`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/**
 * An expiry date a person typed (the `cairn token create` flag, the settings page's field):
 * YYYY-MM-DD, a real calendar day, after today and within the longest lifetime. The error is a
 * sentence; null when the date is good.
 */
export function expiryDateError(value: string, today = dateAfterDays(0)): string | null {
  if (parseCalendarDate(value) !== value) return `expiry date "${value}" is not a date (YYYY-MM-DD)`;
  if (value <= today) return 'expiry date must be in the future';
  const max = dateAfterDays(MAX_TOKEN_LIFETIME_DAYS, new Date(`${today}T00:00:00Z`));
  if (value > max) return `expiry date must be before ${max}`;
  return null;
}
