import type { BranchTables } from './schema/branches.js';
import type { CoreTables } from './schema/core.js';
import type { KeysTables } from './schema/keys.js';
import type { OAuthTables } from './schema/oauth.js';
import type { UsersAreaTables } from './schema/users.js';

/** The whole database as Kysely sees it: each area's tables, from src/db/schema/. */
export interface DB
  extends CoreTables,
    BranchTables,
    KeysTables,
    OAuthTables,
    UsersAreaTables {}
