import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

type Auto<T> = ColumnType<T, T | undefined, T>;

export interface OAuthApplicationsTable {
  id: Generated<number>;
  name: string;
  /** The public client_id (GitLab's application_id). */
  uid: string;
  secret_digest: string;
  /** Registered redirect URIs, one per line. */
  redirect_uri: string;
  scopes: Auto<string[]>;
  confidential: Auto<boolean>;
  /** null: an instance-wide application (Applications API); else the user who registered it. */
  owner_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type OAuthApplication = Selectable<OAuthApplicationsTable>;

export interface OAuthAccessGrantsTable {
  id: Generated<number>;
  resource_owner_id: number;
  application_id: number;
  token_digest: string;
  expires_in: number;
  redirect_uri: string;
  scopes: Auto<string[]>;
  code_challenge: string | null;
  code_challenge_method: string | null;
  created_at: Timestamp;
  revoked_at: NullableTimestamp;
}
export type OAuthAccessGrant = Selectable<OAuthAccessGrantsTable>;

export interface OAuthAccessTokensTable {
  id: Generated<number>;
  resource_owner_id: number | null;
  application_id: number | null;
  access_grant_id: number | null;
  token_digest: string;
  refresh_token_digest: string | null;
  expires_in: number | null;
  scopes: Auto<string[]>;
  created_at: Timestamp;
  revoked_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
}
export type OAuthAccessToken = Selectable<OAuthAccessTokensTable>;

export interface SessionsTable {
  id: Generated<number>;
  session_digest: string;
  user_id: number | null;
  csrf_token: string;
  expires_at: Timestamp;
  created_at: Timestamp;
  ip_address: string | null;
  user_agent: string | null;
}
export type Session = Selectable<SessionsTable>;

export interface OAuthTables {
  oauth_applications: OAuthApplicationsTable;
  oauth_access_grants: OAuthAccessGrantsTable;
  oauth_access_tokens: OAuthAccessTokensTable;
  sessions: SessionsTable;
}
