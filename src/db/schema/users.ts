import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

type Auto<T> = ColumnType<T, T | undefined, T>;

export interface IdentitiesTable {
  id: Generated<number>;
  user_id: number;
  provider: string;
  extern_uid: string;
  saml_provider_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Identity = Selectable<IdentitiesTable>;

export interface UserCustomAttributesTable {
  id: Generated<number>;
  user_id: number;
  key: string;
  value: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type UserCustomAttribute = Selectable<UserCustomAttributesTable>;

export interface UserStatusesTable {
  user_id: number;
  emoji: Auto<string>;
  message: string | null;
  availability: Auto<string>;
  clear_status_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type UserStatus = Selectable<UserStatusesTable>;

export interface UserFollowUsersTable {
  follower_id: number;
  followee_id: number;
  created_at: Timestamp;
}

export interface UsersAreaTables {
  identities: IdentitiesTable;
  user_custom_attributes: UserCustomAttributesTable;
  user_statuses: UserStatusesTable;
  user_follow_users: UserFollowUsersTable;
}
