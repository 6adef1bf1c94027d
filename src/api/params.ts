import { Type, type Static } from 'typebox';
import { parseCalendarDate, parseTimestamp } from '../lib/timestamps.js';
import { invalidParam } from '../plugins/errors.js';

/** Parameters shared across resources: path-parameter schemas, and the parsers of date and time values. */

/** A path segment that names a row: PostgreSQL's integer range, so a larger number is a 400 rather than a database error. */
export const RowId = Type.Integer({ minimum: 0, maximum: 2147483647 });

/** `:id` of a project, group, user or namespace: a numeric id or a URL-encoded path. */
export const IdParams = Type.Object({ id: Type.String() });
export type IdParams = Static<typeof IdParams>;

/** A commit of the project `:id`: `:sha` is a commit SHA or a ref name. */
export const ShaParams = Type.Object({ id: Type.String(), sha: Type.String() });

/** `:id` that can only be a row id (a token, a key). */
export const RowIdParams = Type.Object({ id: RowId });

/** `:user_id` that can only be a row id. */
export const UserIdParams = Type.Object({ user_id: RowId });

/** A member of the group or project `:id`; `:user_id` stays a string that the handler parses, to answer as GitLab does. */
export type MemberParams = IdParams & { user_id: string };

/**
 * A date-time parameter (Grape's DateTime) parsed with src/lib/timestamps.ts: undefined when
 * absent, null or '' (Grape reads '' as nil); 400 "<name> is invalid" when it is not a time within
 * years 1 to 9999.
 */
export function timestampParam(name: string, value: string | null | undefined): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const d = parseTimestamp(value);
  if (!d) throw invalidParam(name);
  return d;
}

/**
 * A calendar-date parameter (Grape's Date), `YYYY-MM-DD` within years 1 to 9999 (a time after it
 * cut off with `time: 'allowed'`): undefined when absent, null or ''; 400 "<name> is invalid"
 * otherwise. Callers that clear a date on '' or null check for those first.
 */
export function calendarDateParam(name: string, value: string | null | undefined, opts: { time?: 'allowed' } = {}): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const date = parseCalendarDate(value, opts);
  if (!date) throw invalidParam(name);
  return date;
}
