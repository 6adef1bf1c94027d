/**
 * Dates and times that come from users (query and body parameters, imported records). JavaScript
 * dates reach year +275760 and back to -271821, but a timestamp answers as ISO 8601 with four
 * digits of year and PostgreSQL's dates have no year 0: Cairn takes years 1 to 9999, so a value
 * outside them is the caller's error (400), never a database error or an answer its schema
 * refuses (500). The API's parameter forms are in src/api/params.ts.
 */

export const MIN_YEAR = 1;
export const MAX_YEAR = 9999;

/** Is this a real instant within years 1 to 9999 (UTC)? */
export function inTimestampRange(d: Date): boolean {
  const t = d.getTime();
  if (Number.isNaN(t)) return false;
  const year = d.getUTCFullYear();
  return year >= MIN_YEAR && year <= MAX_YEAR;
}

/** `YYYY-MM-DDTHH:MM[:SS[.fff]]` without a zone: UTC, as Rails reads it (JavaScript would take local time). */
const ZONELESS = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/;

/**
 * A date-time as GitLab's DateTime parameters take it: ISO 8601 (a bare date is midnight UTC,
 * a time without a zone is UTC) or another form JavaScript's Date reads. null when it is not a
 * time, or not within years 1 to 9999.
 */
export function parseTimestamp(text: string): Date | null {
  const s = text.trim();
  if (!s) return null;
  const d = new Date(ZONELESS.test(s) ? `${s.replace(' ', 'T')}Z` : s);
  return inTimestampRange(d) ? d : null;
}

/**
 * A calendar date `YYYY-MM-DD` that exists (no February 30th) within years 1 to 9999, as
 * written. With `time: 'allowed'` a time after it (`2024-01-31T10:00:00Z`) is accepted and
 * cut off, as Grape's Date parameters do. null otherwise.
 */
export function parseCalendarDate(text: string, opts: { time?: 'allowed' } = {}): string | null {
  const m = (opts.time === 'allowed' ? /^(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?$/ : /^(\d{4})-(\d{2})-(\d{2})$/).exec(text.trim());
  if (!m) return null;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const d = new Date(0);
  d.setUTCFullYear(year, month - 1, day);
  if (year < MIN_YEAR || d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day) return null;
  return `${m[1]}-${m[2]}-${m[3]}`;
}
