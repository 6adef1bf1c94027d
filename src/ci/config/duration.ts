// Human durations as GitLab accepts them (ChronicDuration): "30 minutes", "1h 30m", "2 days",
// "1 week and 2 hours", "3600" (bare numbers are seconds). Returns seconds, or null when the text
// is not a duration or is longer than MAX_DURATION_SECONDS.

const UNIT_SECONDS: Record<string, number> = {};
function unit(seconds: number, ...names: string[]) {
  for (const n of names) UNIT_SECONDS[n] = seconds;
}
unit(1, 's', 'sec', 'secs', 'second', 'seconds');
unit(60, 'm', 'min', 'mins', 'minute', 'minutes');
unit(3600, 'h', 'hr', 'hrs', 'hour', 'hours');
unit(86400, 'd', 'day', 'days');
unit(604800, 'w', 'wk', 'wks', 'week', 'weeks');
unit(2592000, 'mo', 'mos', 'month', 'months');
unit(31536000, 'y', 'yr', 'yrs', 'year', 'years');

/**
 * The longest duration Cairn takes: 1000 years. A duration becomes a date (`now + expire_in`,
 * `now + start_in`) or an integer column, and JavaScript's dates end in year 275760, timestamps
 * here in year 9999 (src/lib/timestamps.ts): "999999999999 years" must be the caller's error,
 * never a RangeError or a database overflow.
 */
export const MAX_DURATION_SECONDS = 1000 * 31536000;

export function parseDuration(input: unknown): number | null {
  const seconds = parseSeconds(input);
  return seconds !== null && Number.isFinite(seconds) && seconds >= 0 && seconds <= MAX_DURATION_SECONDS ? seconds : null;
}

function parseSeconds(input: unknown): number | null {
  if (typeof input === 'number') return Number.isFinite(input) && input >= 0 ? Math.round(input) : null;
  if (typeof input !== 'string') return null;
  const text = input.trim().toLowerCase();
  if (!text) return null;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text));
  // hh:mm:ss and mm:ss
  const clock = /^(\d+):(\d{1,2})(?::(\d{1,2}))?$/.exec(text);
  if (clock) {
    const parts = clock.slice(1).filter((p) => p !== undefined).map(Number);
    return parts.length === 3 ? parts[0] * 3600 + parts[1] * 60 + parts[2] : parts[0] * 60 + parts[1];
  }
  const re = /(\d+(?:\.\d+)?)\s*([a-z]+)?/g;
  let total = 0;
  let matched = false;
  // What lies between the terms, gathered in one pass (a text of N terms is read in O(N), so a
  // megabyte of "1s 1s ..." in a .gitlab-ci.yml costs milliseconds, not minutes).
  let between = '';
  let last = 0;
  for (const m of text.matchAll(re)) {
    const value = Number(m[1]);
    const u = m[2] ?? 's';
    const factor = UNIT_SECONDS[u];
    if (factor === undefined) return null;
    total += value * factor;
    matched = true;
    between += `${text.slice(last, m.index)} `;
    last = m.index + m[0].length;
  }
  if (!matched) return null;
  between += text.slice(last);
  if (between.replace(/\band\b|,/g, ' ').trim() !== '') return null;
  return Math.round(total);
}
