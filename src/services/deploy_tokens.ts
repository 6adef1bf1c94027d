import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { DeployToken } from '../db/schema/deploy_tokens.js';
import { findDeployTokenByValue } from '../finders/deploy_tokens.js';
import { decryptSecret, encryptSecret, randomToken, tokenDigest } from '../lib/secrets.js';
import { apiError, invalidParam } from '../plugins/errors.js';
import { isDeployTokenActive } from '../policies/deploy_tokens.js';
import { toSentence } from '../policies/members.js';

/** GitLab's prefix of new deploy tokens. */
export const DEPLOY_TOKEN_PREFIX = 'gldt-';

/** The one name whose token CI jobs receive as CI_DEPLOY_USER / CI_DEPLOY_PASSWORD. */
export const GITLAB_DEPLOY_TOKEN_NAME = 'gitlab-deploy-token';

/** Every scope a deploy token may have, in the order GitLab lists a token's scopes. */
export const DEPLOY_TOKEN_SCOPES = [
  'read_repository', 'read_registry', 'write_registry', 'read_package_registry', 'write_package_registry',
  'read_virtual_registry', 'write_virtual_registry', 'write_repository',
] as const;

const USERNAME_FORMAT = /^[a-zA-Z0-9.+_-]+$/;
const MAX_LENGTH = 255;

export interface DeployTokenInput {
  name: string;
  /** An array, or GitLab's comma-separated string. */
  scopes: string[] | string;
  /** Already parsed (api/params timestampParam). */
  expiresAt: Date | null;
  username?: string | null;
}

export type DeployTokenOwnerRef = { projectId: number } | { groupId: number };

/** The scopes parameter as GitLab reads it: a list or "a,b" (commas split in list items too); 400 "scopes does not have a valid value" for an unknown one. */
export function parseDeployTokenScopes(value: string[] | string): string[] {
  const list = (Array.isArray(value) ? value : [value]).flatMap((s) => String(s).split(',')).map((s) => s.trim()).filter((s) => s !== '');
  if (!list.every((s) => (DEPLOY_TOKEN_SCOPES as readonly string[]).includes(s))) throw invalidParam('scopes', 'does not have a valid value');
  return DEPLOY_TOKEN_SCOPES.filter((s) => list.includes(s));
}

/** The model's validation, in GitLab's full messages; empty when valid. */
function validationErrors(name: string, scopes: string[], username: string | null): string[] {
  const errors: string[] = [];
  if (!name.trim()) errors.push("Name can't be blank");
  else if (name.length > MAX_LENGTH) errors.push(`Name is too long (maximum is ${MAX_LENGTH} characters)`);
  if (username !== null) {
    if (username.length > MAX_LENGTH) errors.push(`Username is too long (maximum is ${MAX_LENGTH} characters)`);
    if (!USERNAME_FORMAT.test(username)) errors.push("Username can contain only letters, digits, '_', '-', '+', and '.'");
  }
  if (scopes.length === 0) errors.push("Scopes can't be blank");
  return errors;
}

/**
 * Creates a deploy token of a project or a group and returns its row with the one-time value.
 * Only its digest is stored, and, for `gitlab-deploy-token` alone, its value encrypted with the
 * instance's secret, so that CI jobs can be given it (ciDeployCredentials).
 */
export async function createDeployToken(cairn: Cairn, owner: DeployTokenOwnerRef, creatorId: number | null, input: DeployTokenInput): Promise<{ row: DeployToken; token: string }> {
  const scopes = parseDeployTokenScopes(input.scopes);
  const username = input.username === undefined || input.username === null || input.username === '' ? null : input.username;
  const errors = validationErrors(input.name, scopes, username);
  if (errors.length) throw apiError(400, toSentence(errors));
  const token = DEPLOY_TOKEN_PREFIX + randomToken(20);
  const db = cairn.db;
  // The id is taken first: the default user name carries it.
  const { id } = await sql<{ id: number }>`select nextval(pg_get_serial_sequence('deploy_tokens', 'id'))::int as id`.execute(db).then((r) => r.rows[0]);
  const row = await db
    .insertInto('deploy_tokens')
    .values({
      id: id as any,
      project_id: 'projectId' in owner ? owner.projectId : null,
      group_id: 'groupId' in owner ? owner.groupId : null,
      creator_id: creatorId,
      name: input.name,
      username: username ?? `gitlab+deploy-token-${id}`,
      token_digest: tokenDigest(token),
      token_encrypted: input.name === GITLAB_DEPLOY_TOKEN_NAME ? encryptSecret(cairn.config, token) : null,
      scopes,
      expires_at: input.expiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { row, token };
}

/** Deletes one of a project's or a group's deploy tokens; false when it has no such token. */
export async function deleteDeployToken(db: Database, owner: DeployTokenOwnerRef, id: number): Promise<boolean> {
  let q = db.deleteFrom('deploy_tokens').where('id', '=', id);
  q = 'projectId' in owner ? q.where('project_id', '=', owner.projectId) : q.where('group_id', '=', owner.groupId);
  const res = await q.executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/**
 * The deploy token a git client presents as HTTP Basic `username:token`: undefined when the value
 * is no deploy token's or the user name is not the token's; 'inactive' when it is revoked or expired.
 */
export async function deployTokenForLogin(db: Database, username: string, token: string): Promise<DeployToken | 'inactive' | undefined> {
  const row = await findDeployTokenByValue(db, tokenDigest(token));
  if (!row || row.username !== username) return undefined;
  return isDeployTokenActive(row) ? row : 'inactive';
}

/**
 * CI_DEPLOY_USER / CI_DEPLOY_PASSWORD of a job (GitLab's gitlab_deploy_token): the active token
 * named gitlab-deploy-token of the project, else of the project's group. Null when there is none
 * (or its stored value cannot be decrypted: another instance secret).
 */
export async function ciDeployCredentials(cairn: Cairn, project: { id: number; namespace_id: number }): Promise<{ username: string; password: string } | null> {
  const rows = await cairn.db
    .selectFrom('deploy_tokens')
    .selectAll()
    .where('name', '=', GITLAB_DEPLOY_TOKEN_NAME)
    .where('revoked', '=', false)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<Date>`now()`)]))
    .where((eb) => eb.or([eb('project_id', '=', project.id), eb('group_id', '=', project.namespace_id)]))
    .orderBy(sql`project_id is null`)
    .orderBy('id')
    .execute();
  for (const row of rows) {
    const password = row.token_encrypted ? decryptSecret(cairn.config, row.token_encrypted) : null;
    if (password) return { username: row.username, password };
  }
  return null;
}
