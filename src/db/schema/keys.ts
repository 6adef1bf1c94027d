import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

type Auto<T> = ColumnType<T, T | undefined, T>;

export type KeyUsageType = 'auth' | 'signing' | 'auth_and_signing';

export interface KeysTable {
  id: Generated<number>;
  /** The owner of a user key; the creator of a deploy key. */
  user_id: number | null;
  /** null for a user's key, 'DeployKey' for a deploy key. */
  type: 'DeployKey' | null;
  title: string;
  /** Normalized OpenSSH text: "<type> <base64>[ <comment>]". */
  key: string;
  /** MD5 of the blob as colon-separated hex. */
  fingerprint: string | null;
  /** "SHA256:" + unpadded base64, as ssh-keygen prints it. */
  fingerprint_sha256: string;
  usage_type: Auto<KeyUsageType>;
  /** Instance-wide deploy key (created through POST /deploy_keys). */
  public: Auto<boolean>;
  expires_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Key = Selectable<KeysTable>;

export interface DeployKeysProjectsTable {
  id: Generated<number>;
  deploy_key_id: number;
  project_id: number;
  can_push: Auto<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type DeployKeysProject = Selectable<DeployKeysProjectsTable>;

export interface KeysTables {
  keys: KeysTable;
  deploy_keys_projects: DeployKeysProjectsTable;
}
