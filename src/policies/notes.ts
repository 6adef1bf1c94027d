import type { User } from '../db/schema/core.js';
import { AccessLevel } from './access.js';

/**
 * The rules of notes on any noteable, for the API (src/api/notes/routes.ts) and the web pages
 * (src/web/components/notes.ts) alike: who may comment on a locked discussion, and who resolves
 * a thread or a note. Pure: the caller brings the access level it loaded with the noteable's
 * parent (project or group) and what the kind's abilities answered.
 */

/** A member of the noteable's parent, as GitLab's IssuablePolicy counts one for a locked discussion: guest and up, or an administrator. */
export function isNoteableMember(user: User | null, accessLevel: number): boolean {
  return !!user && (user.admin || accessLevel >= AccessLevel.GUEST);
}

/** The lock rule of a new note or reply: on a locked discussion only members of the parent may add one. */
export function mayCommentDespiteLock(user: User | null, accessLevel: number, locked: boolean): boolean {
  return !locked || isNoteableMember(user, accessLevel);
}

/** Who resolves threads of one noteable: its author, and whoever has the kind's resolve ability. */
export interface ResolveRights {
  /** The noteable's author (issues, merge requests, snippets, epics), whatever their level. */
  noteableAuthorId: number | null | undefined;
  /** The caller has the kind's `resolve` ability on the parent (false for kinds without one). */
  resolveAny: boolean;
}

/** GitLab's Discussion#can_resolve?: a resolvable thread, resolved by the noteable's author or the resolve ability. */
export function mayResolveThread(user: User | null, resolvable: boolean, rights: ResolveRights): boolean {
  if (!user || !resolvable) return false;
  return rights.noteableAuthorId === user.id || rights.resolveAny;
}

/** GitLab's resolve_note on one note: its author too, besides whoever resolves the noteable's threads. */
export function mayResolveNote(user: User | null, noteAuthorId: number | null, rights: ResolveRights): boolean {
  if (!user) return false;
  return noteAuthorId === user.id || mayResolveThread(user, true, rights);
}
