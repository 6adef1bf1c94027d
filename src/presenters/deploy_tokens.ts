import type { DeployToken } from '../db/schema/deploy_tokens.js';
import { isDeployTokenExpired } from '../policies/deploy_tokens.js';
import { iso } from './users.js';

/** GitLab's DeployToken entity. */
export function presentDeployToken(row: DeployToken, now = new Date()) {
  return {
    id: row.id,
    name: row.name,
    username: row.username,
    expires_at: iso(row.expires_at),
    scopes: row.scopes,
    revoked: row.revoked,
    expired: isDeployTokenExpired(row, now),
  };
}

/** GitLab's DeployTokenWithToken: the new token's value, shown once. */
export function presentDeployTokenWithToken(row: DeployToken, token: string) {
  return { ...presentDeployToken(row), token };
}
