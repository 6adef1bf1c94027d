import type { Namespace, User } from '../db/schema/core.js';

/** A group as a route guard loaded it for the caller (src/finders/authorize.ts: authorizeGroup). */
export interface GroupAccess {
  group: Namespace;
  accessLevel: number;
  user: User | null;
}
