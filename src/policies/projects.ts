import type { User } from '../db/schema/core.js';
import type { FoundProject } from '../finders/projects.js';

/** A project as a route guard loaded it for the caller (src/finders/authorize.ts: authorizeProject). */
export interface ProjectAccess {
  project: FoundProject;
  /** The caller's effective level (admins count as owners; 0 for outsiders/anonymous). */
  accessLevel: number;
  user: User | null;
}
