import type { PersonalAccessToken } from '../db/schema/core.js';
import { isTokenActive } from '../services/tokens.js';
import { iso } from './users.js';

/** GitLab's PersonalAccessToken entity. */
export function presentPersonalAccessToken(t: PersonalAccessToken) {
  return {
    id: t.id,
    name: t.name,
    revoked: t.revoked,
    created_at: iso(t.created_at),
    description: t.description,
    scopes: t.scopes,
    user_id: t.user_id,
    last_used_at: iso(t.last_used_at),
    active: isTokenActive(t),
    expires_at: t.expires_at,
  };
}

/** The create and rotate responses: the one time the plain token is shown. */
export function presentPersonalAccessTokenWithToken(t: PersonalAccessToken, token: string) {
  return { ...presentPersonalAccessToken(t), token };
}

export function presentImpersonationToken(t: PersonalAccessToken) {
  return { ...presentPersonalAccessToken(t), impersonation: t.impersonation };
}

export function presentImpersonationTokenWithToken(t: PersonalAccessToken, token: string) {
  return { ...presentImpersonationToken(t), token };
}

/** GitLab's ResourceAccessToken entity: a project or group access token. */
export function presentResourceAccessToken(t: PersonalAccessToken & { access_level: number | null }) {
  return { ...presentPersonalAccessToken(t), access_level: t.access_level };
}

export function presentResourceAccessTokenWithToken(t: PersonalAccessToken & { access_level: number | null }, token: string) {
  return { ...presentResourceAccessToken(t), token };
}
