import type { FastifyRequest } from 'fastify';
import type { MemberSource } from '../../finders/members.js';
import { invalidParam, notFound } from '../../plugins/errors.js';
import { authorizeGroup } from '../../finders/authorize.js';
import { authorizeProject } from '../../finders/authorize.js';
import type { GroupAbility, ProjectAbility } from '../../policies/abilities.js';
import { groupOf, projectOf, type Access } from '../route.js';
import type { User } from '../../db/schema/core.js';
import { MAX_ROW_ID, rowId } from '../../lib/ids.js';
import { calendarDateParam } from '../params.js';
import type { PresentContext } from '../../presenters/users.js';

export type SourceKind = 'groups' | 'projects';

export interface LoadedSource {
  source: MemberSource;
  /** The caller's level on the source (admins count as owners). */
  level: number;
  user: User | null;
}

/** Loads /groups/:id or /projects/:id for the caller (404 when invisible). */
export async function loadSource(request: FastifyRequest, kind: SourceKind, id: string): Promise<LoadedSource> {
  if (kind === 'projects') {
    const { project, accessLevel, user } = await authorizeProject(request, id);
    return { source: { type: 'Project', project }, level: accessLevel, user };
  }
  const { group, accessLevel, user } = await authorizeGroup(request, id);
  return { source: { type: 'Namespace', group }, level: accessLevel, user };
}

/** Who may call a route of either kind: the project ability on /projects/:id, the group one on /groups/:id. */
export function sourceAccess(kind: SourceKind, projectAbility: ProjectAbility, groupAbility: GroupAbility): Access {
  return kind === 'projects' ? { project: projectAbility, signedIn: true } : { group: groupAbility, signedIn: true };
}

/** The source a route declared with sourceAccess() loaded for the caller. */
export function sourceOf(request: FastifyRequest, kind: SourceKind): LoadedSource {
  if (kind === 'projects') {
    const { project, accessLevel, user } = projectOf(request);
    return { source: { type: 'Project', project }, level: accessLevel, user };
  }
  const { group, accessLevel, user } = groupOf(request);
  return { source: { type: 'Namespace', group }, level: accessLevel, user };
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== '';
}

/** An integer from a path segment (`:user_id`): anything else is "<name> is invalid". */
export function pathInt(value: string, name: string): number {
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) throw invalidParam(name);
  // No row has an id beyond the integer range: such a member, group or user is not there.
  if (Number(value) > MAX_ROW_ID) throw notFound();
  return Number(value);
}

/**
 * A date parameter: YEAR-MONTH-DAY (a full timestamp is cut to its date, as Grape's Date
 * coercion does). Absent -> undefined; empty -> null (clears it); unparsable -> 400.
 */
export function dateParam(params: Record<string, unknown>, name: string): string | null | undefined {
  if (!(name in params) || params[name] === undefined) return undefined;
  const v = params[name];
  if (v === null || v === '') return null;
  if (typeof v !== 'string' || !/^\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$/.test(v.trim())) throw invalidParam(name);
  return calendarDateParam(name, v, { time: 'allowed' });
}

/** An integer array: `name[]=1&name[]=2`, a JSON array, or "1,2" (CommaSeparatedToIntegerArray). */
export function intArrayParam(params: Record<string, unknown>, name: string): number[] | undefined {
  const v = params[name];
  if (!present(v)) return undefined;
  const items = Array.isArray(v) ? v : typeof v === 'string' || typeof v === 'number' ? String(v).split(',') : null;
  if (!items) throw invalidParam(name);
  const out: number[] = [];
  for (const item of items) {
    const s = String(item).trim();
    if (s === '') continue;
    if (!/^\d+$/.test(s)) throw invalidParam(name);
    // An id beyond the integer range matches nothing; leaving it out keeps the filter's meaning.
    const id = rowId(s);
    if (id !== undefined) out.push(id);
  }
  return out;
}

/** A string array: `name[]=a`, a JSON array, or "a,b" (CommaSeparatedToArray). */
export function stringArrayParam(params: Record<string, unknown>, name: string): string[] | undefined {
  const v = params[name];
  if (!present(v)) return undefined;
  const items = Array.isArray(v) ? v : typeof v === 'string' ? v.split(',') : null;
  if (!items || items.some((i) => typeof i !== 'string' && typeof i !== 'number')) throw invalidParam(name);
  return items.map((i) => String(i).trim()).filter((s) => s !== '');
}

export function presentContext(request: FastifyRequest): PresentContext {
  return { baseUrl: request.server.cairn.config.externalUrl };
}
