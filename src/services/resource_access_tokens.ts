import crypto from 'node:crypto';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import { findResourceToken, type ResourceToken } from '../finders/tokens.js';
import { sourceId, type MemberSource } from '../finders/members.js';
import { apiError, badRequest } from '../plugins/errors.js';
import { AccessLevel } from '../policies/access.js';
import { insertUser } from './users.js';
import { upsertMember } from './members.js';
import { fullMessages, insertPersonalAccessToken, revokeToken, rotateToken, tokenValidationErrors } from './tokens.js';

/**
 * Project and group access tokens, as GitLab has them: each token gets a bot user of its own
 * (user_type project_bot, a no-reply address, no password), a direct membership of the project
 * or group at the token's access level, and a personal access token of that bot. Everything the
 * token does goes through the bot's membership and the ordinary token authentication; revoking
 * (or rotating) the token, or ending the bot's membership (migration 1020's trigger), ends it.
 */

/** Scopes a project or group access token may have (GitLab's resource_bot_scopes). */
export const RESOURCE_TOKEN_SCOPES = [
  'api', 'read_api', 'create_runner', 'manage_runner', 'k8s_proxy', 'self_rotate',
  'read_repository', 'write_repository', 'read_registry', 'write_registry', 'ai_features',
] as const;

/** The levels a token may be given (GitLab's options_with_owner). */
export const RESOURCE_TOKEN_LEVELS = [AccessLevel.GUEST, AccessLevel.REPORTER, AccessLevel.DEVELOPER, AccessLevel.MAINTAINER, AccessLevel.OWNER] as const;

export type ResourceRef = { type: 'Project' | 'Namespace'; id: number };

export function resourceRef(source: MemberSource): ResourceRef {
  return { type: source.type, id: sourceId(source) };
}

const kindName = (source: MemberSource) => (source.type === 'Project' ? 'project' : 'group');

export interface CreateResourceTokenInput {
  name: string;
  scopes: string[];
  description: string | null;
  accessLevel: number;
  expiresAt: string;
}

/**
 * Creates the bot, its membership and its token in one transaction. `creatorLevel` is the
 * caller's level on the resource (administrators count as owners): nobody gives a token more
 * than they have, and only owners give a project token Owner.
 */
export async function createResourceAccessToken(
  db: Database,
  opts: { source: MemberSource; creator: User; creatorLevel: number; host: string },
  input: CreateResourceTokenInput,
): Promise<{ row: ResourceToken; token: string; bot: User }> {
  const { source, creator, creatorLevel } = opts;
  if (source.type === 'Project' && input.accessLevel === AccessLevel.OWNER && creatorLevel < AccessLevel.OWNER) {
    throw badRequest('Could not provision owner access to project access token');
  }
  if (creatorLevel < input.accessLevel) {
    throw badRequest("Access level of the token can't be greater the access level of the user who created the token");
  }
  const errors = tokenValidationErrors({ name: input.name, scopes: input.scopes, expiresAt: input.expiresAt });
  if (Object.keys(errors).length) throw apiError(400, fullMessages(errors));

  const ref = resourceRef(source);
  const username = `${kindName(source)}_${ref.id}_bot_${crypto.randomBytes(16).toString('hex')}`;
  return db.transaction().execute(async (trx) => {
    const bot = await insertUser(trx, {
      username,
      name: input.name,
      email: `${username}@noreply.${opts.host}`,
      user_type: 'project_bot',
      // A bot made by an external user is external too, as GitLab does.
      external: creator.external,
      projects_limit: 0,
      can_create_group: false,
      confirmed_at: new Date(),
      password: null,
    });
    await trx.insertInto('resource_bots').values({ user_id: bot.id, source_type: ref.type, source_id: ref.id }).execute();
    await upsertMember(trx, source, bot.id, { accessLevel: input.accessLevel, expiresAt: null, createdById: creator.id });
    const { row, token } = await insertPersonalAccessToken(trx, {
      userId: bot.id,
      name: input.name,
      description: input.description,
      scopes: input.scopes,
      expiresAt: input.expiresAt,
    });
    return { row: { ...row, access_level: input.accessLevel }, token, bot };
  });
}

/**
 * Revokes the token and issues its successor (the bot and its membership stay). Only someone at
 * least at the bot's level may rotate it.
 */
export async function rotateResourceAccessToken(
  db: Database,
  ref: ResourceRef,
  token: ResourceToken,
  callerLevel: number,
  expiresAt: string | null,
): Promise<{ row: ResourceToken; token: string }> {
  if ((token.access_level ?? 0) > callerLevel) throw badRequest('Not eligible to rotate token with access level higher than the user');
  const result = await rotateToken(db, token.id, expiresAt);
  if (!result.row) throw badRequest(result.error);
  const fresh = await findResourceToken(db, ref, result.row.id);
  return { row: fresh ?? { ...result.row, access_level: token.access_level }, token: result.token };
}

/** Revokes the token (GitLab keeps the bot and lists the token as inactive). */
export async function revokeResourceAccessToken(db: Database, token: ResourceToken): Promise<void> {
  if (token.access_level === null) throw badRequest('Failed to find bot user');
  await revokeToken(db, token.id);
}
