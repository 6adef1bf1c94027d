import type { Database } from '../db/index.js';
import { randomToken, tokenDigest } from '../lib/secrets.js';

export const PERSONAL_ACCESS_TOKEN_PREFIX = 'glpat-';

export const PAT_SCOPES = [
  'api', 'read_api', 'read_user', 'create_runner', 'manage_runner', 'k8s_proxy', 'read_repository', 'write_repository',
  'read_registry', 'write_registry', 'sudo', 'admin_mode', 'read_service_ping', 'ai_features',
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
