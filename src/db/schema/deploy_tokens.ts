import type { Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

/** A deploy token of a project or of a group (migration 1010): exactly one of the two is set. */
export interface DeployTokensTable {
  id: Generated<number>;
  project_id: number | null;
  group_id: number | null;
  creator_id: number | null;
  name: string;
  /** The HTTP Basic user name that goes with the token (`gitlab+deploy-token-<id>` by default). */
  username: string;
  /** sha256 of the token (lib/secrets tokenDigest); the token itself is never stored. */
  token_digest: string;
  /** Only for the token named `gitlab-deploy-token`: its value, encrypted (CI_DEPLOY_PASSWORD). */
  token_encrypted: string | null;
  /** In DEPLOY_TOKEN_SCOPES order. */
  scopes: string[];
  expires_at: NullableTimestamp;
  revoked: Generated<boolean>;
  created_at: Generated<Timestamp>;
}
export type DeployToken = Selectable<DeployTokensTable>;

export interface DeployTokenTables {
  deploy_tokens: DeployTokensTable;
}
