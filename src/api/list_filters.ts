import { timestampParam } from './params.js';
import { invalidParam } from '../plugins/errors.js';

/**
 * Query parameters that the issue and merge request lists read alike: dates, a user as an id or
 * None/Any, comma lists, labels with None/Any. A bad value is GitLab's 400 naming the parameter.
 */

/** A date-time parameter; '' counts as absent (api/params.ts timestampParam). */
export function dateParam(value: string | undefined, name: string): Date | undefined {
  return timestampParam(name, value);
}

/** A user filter: an id, or None (nobody) / Any (somebody), any case. */
export function userMatchParam(value: number | string | undefined, name: string): number | 'none' | 'any' | undefined {
  if (value === undefined || value === '') return undefined;
  if (typeof value === 'number') return value;
  const v = value.trim().toLowerCase();
  if (v === 'none') return 'none';
  if (v === 'any') return 'any';
  if (/^\d+$/.test(v) && Number(v) <= 2147483647) return Number(v);
  throw invalidParam(name);
}

/**
 * The most items one list filter takes (labels, not[labels], iids, usernames, ids...). GitLab's
 * REST API caps only a few (approved_by_ids at 5); an uncapped list lets one request make the
 * database plan and run a condition per item, so Cairn takes at most this many and answers a 400
 * beyond (README, Reliability, "List filters").
 */
export const MAX_LIST_FILTER_ITEMS = 100;

/** The items, or GitLab's 400 naming the parameter when there are more than `max`. */
export function capList<T>(items: T[], name: string, max = MAX_LIST_FILTER_ITEMS): T[] {
  if (items.length > max) throw invalidParam(name, `allows a maximum of ${max} items`);
  return items;
}

/** capList for a parameter that may be absent. */
export function capOptional<T>(items: T[] | undefined, name: string, max = MAX_LIST_FILTER_ITEMS): T[] | undefined {
  return items === undefined ? undefined : capList(items, name, max);
}

/** `a,b` or `x[]=a&x[]=b`: the non-empty items, trimmed; at most MAX_LIST_FILTER_ITEMS of them. */
export function commaList(value: string | string[] | undefined, name: string): string[] | undefined {
  if (value === undefined) return undefined;
  return capList((Array.isArray(value) ? value : value.split(',')).map((s) => s.trim()).filter(Boolean), name);
}

/** `labels`: names (at most MAX_LIST_FILTER_ITEMS), or None / Any alone. */
export function labelListParam(value: string | string[] | undefined, name: string): string[] | 'none' | 'any' | undefined {
  const names = commaList(value, name);
  if (names === undefined) return undefined;
  if (names.length === 1 && names[0].toLowerCase() === 'none') return 'none';
  if (names.length === 1 && names[0].toLowerCase() === 'any') return 'any';
  return names;
}

/** A value that may also be None or Any (milestone, my_reaction_emoji). */
export function noneAnyParam(value: string | undefined): string | 'none' | 'any' | undefined {
  if (value === undefined || value === '') return undefined;
  const v = value.toLowerCase();
  return v === 'none' ? 'none' : v === 'any' ? 'any' : value;
}
