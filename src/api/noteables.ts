import type { FastifyRequest } from 'fastify';
import type { FoundNoteable, NoteAbilities, NoteableKind } from '../noteables/registry.js';
import { can } from '../policies/abilities.js';
import type { GroupAccess } from '../policies/groups.js';
import type { ProjectAccess } from '../policies/projects.js';
import { groupOf, projectOf, type Access } from './route.js';

/**
 * What every API served over the noteable registry (src/noteables/) shares: a kind's route
 * guard, and the noteable of a request found for the caller under the parent the guard loaded.
 * Notes, award emoji, subscriptions and resource label events all start here.
 */

export type AbilityKey = keyof NoteAbilities<unknown>;

/** The route guard of a kind: its parent loaded for the caller with the given ability. */
export function noteableGuard(kind: NoteableKind, ability: 'read' | 'create', signedIn = false): Access {
  const extra = signedIn || kind.signedIn ? { signedIn: true } : {};
  return kind.parent === 'project' ? { project: kind.abilities[ability], ...extra } : { group: kind.abilities[ability], ...extra };
}

/** A noteable found for the caller, with the parent's access and the kind's abilities asked of it. */
export interface CallerNoteable<R = unknown> {
  found: FoundNoteable<R>;
  access: ProjectAccess | GroupAccess;
  /** The caller has the kind's ability `a` on the parent (false when the kind has none). */
  allowed: (a: AbilityKey) => boolean;
}

/** Finds the noteable named by the path for the caller (the kind's 404s) under the parent the route's guard loaded. */
export async function findNoteableFor<R>(kind: NoteableKind<R>, request: FastifyRequest): Promise<CallerNoteable<R>> {
  const cairn = request.server.cairn;
  const params = request.params as Record<string, unknown>;
  if (kind.parent === 'project') {
    const access = projectOf(request);
    const subject = { project: access.project, accessLevel: access.accessLevel };
    const found = await kind.find({ cairn, access, params });
    return { found, access, allowed: (a) => !!kind.abilities[a] && can(access.user, kind.abilities[a]!, subject) };
  }
  const access = groupOf(request);
  const subject = { group: access.group, accessLevel: access.accessLevel };
  const found = await kind.find({ cairn, access, params });
  return { found, access, allowed: (a) => !!kind.abilities[a] && can(access.user, kind.abilities[a]!, subject) };
}
