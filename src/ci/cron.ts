/**
 * Cron expressions of pipeline schedules, as GitLab reads them (Fugit): five fields (minute,
 * hour, day of month, month, day of week) of `*`, numbers, ranges `a-b`, steps `* /n` and `a-b/n`
 * (written without the space), lists `a,b`, month and day names (`JAN`, `MON`, any case), 7 as
 * Sunday, `L` for the last day of the month and `DAY#n` for the n-th weekday of the month (`#L` the
 * last), and the nicknames `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
 * `@hourly`. When both day fields are restricted a day matching either one matches (cron's rule).
 *
 * Times are wall-clock times in the schedule's time zone (an IANA name, or one of the names
 * Rails' ActiveSupport::TimeZone knows, as GitLab accepts both). Daylight saving time: a time the
 * clocks skip (02:30 on a spring-forward night) runs when the clocks have moved on, as much
 * later as they jumped (03:30), as JavaScript's Temporal "compatible" disambiguation does; a time
 * that happens twice (01:30 on a fall-back night) runs once, at its first occurrence.
 */

export interface CronSchedule {
  minutes: number[];
  hours: number[];
  /** Days of the month 1..31. */
  days: Set<number>;
  lastDay: boolean;
  months: Set<number>;
  /** Days of the week 0..6 (Sunday 0). */
  weekdays: Set<number>;
  /** DAY#n: weekday -> the n-th (1..5, -1 the last) of the month. */
  nthWeekdays: Map<number, Set<number>>;
  dayRestricted: boolean;
  weekdayRestricted: boolean;
}

const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};
const MONTHS = ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'];
const WEEKDAYS = ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];

interface FieldSpec {
  min: number;
  max: number;
  names?: string[];
  /** The value names count from (1 for months, 0 for days of the week). */
  nameBase?: number;
}
const MINUTE: FieldSpec = { min: 0, max: 59 };
const HOUR: FieldSpec = { min: 0, max: 23 };
const DAY: FieldSpec = { min: 1, max: 31 };
const MONTH: FieldSpec = { min: 1, max: 12, names: MONTHS, nameBase: 1 };
const WEEKDAY: FieldSpec = { min: 0, max: 7, names: WEEKDAYS, nameBase: 0 };

function value(text: string, spec: FieldSpec): number | null {
  if (/^\d{1,2}$/.test(text)) {
    const n = Number(text);
    return n >= spec.min && n <= spec.max ? n : null;
  }
  const i = spec.names?.indexOf(text.toUpperCase()) ?? -1;
  return i >= 0 ? i + (spec.nameBase ?? 0) : null;
}

/** The values of one field, or null when it does not parse. */
function field(text: string, spec: FieldSpec): number[] | null {
  const out = new Set<number>();
  for (const item of text.split(',')) {
    const m = /^([^/]+)(?:\/(\d{1,2}))?$/.exec(item);
    if (!m) return null;
    const step = m[2] === undefined ? 1 : Number(m[2]);
    if (step < 1 || step > spec.max - spec.min + 1) return null;
    let from: number;
    let to: number;
    if (m[1] === '*') {
      from = spec.min;
      to = spec.max;
    } else {
      const range = /^([^-]+)-([^-]+)$/.exec(m[1]);
      const a = value(range ? range[1] : m[1], spec);
      if (a === null) return null;
      const b = range ? value(range[2], spec) : m[2] !== undefined ? spec.max : a;
      if (b === null) return null;
      from = a;
      to = b;
    }
    // A range may wrap around (FRI-MON, 22-2).
    const span = to >= from ? to - from : spec.max - from + 1 + (to - spec.min);
    for (let k = 0; k <= span; k += step) out.add(from + k > spec.max ? from + k - (spec.max - spec.min + 1) : from + k);
  }
  return [...out].sort((a, b) => a - b);
}

/** Parses a cron expression; null when it is not one. */
export function parseCron(expression: string): CronSchedule | null {
  let text = expression.trim();
  if (NICKNAMES[text.toLowerCase()]) text = NICKNAMES[text.toLowerCase()];
  const parts = text.split(/\s+/);
  if (parts.length !== 5 || text.length > 200) return null;
  const [minuteText, hourText, dayText, monthText, weekdayText] = parts;
  const minutes = field(minuteText, MINUTE);
  const hours = field(hourText, HOUR);
  const months = field(monthText, MONTH);
  if (!minutes || !hours || !months) return null;

  // Days of the month, with L (the last one).
  const dayItems = dayText.split(',');
  const lastDay = dayItems.some((d) => d.toUpperCase() === 'L');
  const plainDays = dayItems.filter((d) => d.toUpperCase() !== 'L');
  const days = plainDays.length ? field(plainDays.join(','), DAY) : [];
  if (!days) return null;

  // Days of the week, with DAY#n.
  const nthWeekdays = new Map<number, Set<number>>();
  const plainWeekdays: string[] = [];
  for (const item of weekdayText.split(',')) {
    const m = /^([^#]+)#(L|-1|[1-5])$/i.exec(item);
    if (!m) {
      plainWeekdays.push(item);
      continue;
    }
    const day = value(m[1], WEEKDAY);
    if (day === null) return null;
    const nth = /^(L|-1)$/i.test(m[2]) ? -1 : Number(m[2]);
    const key = day % 7;
    if (!nthWeekdays.has(key)) nthWeekdays.set(key, new Set());
    nthWeekdays.get(key)!.add(nth);
  }
  const weekdays = plainWeekdays.length ? field(plainWeekdays.join(','), WEEKDAY) : [];
  if (!weekdays) return null;

  return {
    minutes,
    hours,
    days: new Set(days),
    lastDay,
    months: new Set(months),
    weekdays: new Set(weekdays.map((d) => d % 7)),
    nthWeekdays,
    dayRestricted: !dayText.startsWith('*'),
    weekdayRestricted: !weekdayText.startsWith('*'),
  };
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** Does the calendar day (a naive date: UTC fields) match the day fields? */
function dayMatches(c: CronSchedule, d: Date): boolean {
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth() + 1;
  const day = d.getUTCDate();
  const weekday = d.getUTCDay();
  const last = daysInMonth(year, month);
  const byDay = c.days.has(day) || (c.lastDay && day === last);
  const nth = c.nthWeekdays.get(weekday);
  const byWeekday = c.weekdays.has(weekday) || (!!nth && (nth.has(Math.ceil(day / 7)) || (nth.has(-1) && day + 7 > last)));
  if (c.dayRestricted && c.weekdayRestricted) return byDay || byWeekday;
  if (c.dayRestricted) return byDay;
  if (c.weekdayRestricted) return byWeekday;
  return true;
}

/** How far ahead a next run is looked for: a February 29th is at most eight years away. */
const SEARCH_DAYS = 366 * 8 + 2;

/** The first wall-clock time (naive: ms of UTC fields) at or after `from` that matches. */
function nextWallClock(c: CronSchedule, from: number): number | null {
  let day = Math.floor(from / DAY_MS) * DAY_MS;
  let fromMinute = Math.floor((from - day) / MINUTE_MS);
  for (let i = 0; i < SEARCH_DAYS; i++, day += DAY_MS, fromMinute = 0) {
    const d = new Date(day);
    if (!c.months.has(d.getUTCMonth() + 1) || !dayMatches(c, d)) continue;
    for (const hour of c.hours) {
      if (hour * 60 + 59 < fromMinute) continue;
      for (const minute of c.minutes) {
        const t = hour * 60 + minute;
        if (t >= fromMinute) return day + t * MINUTE_MS;
      }
    }
  }
  return null;
}

// ---- time zones -----------------------------------------------------------------------------

/** Rails' ActiveSupport::TimeZone names (what GitLab's forms offer) and the IANA zones they stand for. */
const RAILS_ZONES: Record<string, string> = {
  'International Date Line West': 'Etc/GMT+12', 'Midway Island': 'Pacific/Midway', 'American Samoa': 'Pacific/Pago_Pago',
  Hawaii: 'Pacific/Honolulu', Alaska: 'America/Juneau', 'Pacific Time (US & Canada)': 'America/Los_Angeles', Tijuana: 'America/Tijuana',
  'Mountain Time (US & Canada)': 'America/Denver', Arizona: 'America/Phoenix', Chihuahua: 'America/Chihuahua', Mazatlan: 'America/Mazatlan',
  'Central Time (US & Canada)': 'America/Chicago', Saskatchewan: 'America/Regina', Guadalajara: 'America/Mexico_City',
  'Mexico City': 'America/Mexico_City', Monterrey: 'America/Monterrey', 'Central America': 'America/Guatemala',
  'Eastern Time (US & Canada)': 'America/New_York', 'Indiana (East)': 'America/Indiana/Indianapolis', Bogota: 'America/Bogota',
  Lima: 'America/Lima', Quito: 'America/Lima', 'Atlantic Time (Canada)': 'America/Halifax', Caracas: 'America/Caracas',
  'La Paz': 'America/La_Paz', Santiago: 'America/Santiago', Newfoundland: 'America/St_Johns', Brasilia: 'America/Sao_Paulo',
  'Buenos Aires': 'America/Argentina/Buenos_Aires', Montevideo: 'America/Montevideo', Georgetown: 'America/Guyana',
  'Puerto Rico': 'America/Puerto_Rico', Greenland: 'America/Godthab', 'Mid-Atlantic': 'Atlantic/South_Georgia', Azores: 'Atlantic/Azores',
  'Cape Verde Is.': 'Atlantic/Cape_Verde', Dublin: 'Europe/Dublin', Edinburgh: 'Europe/London', Lisbon: 'Europe/Lisbon',
  London: 'Europe/London', Casablanca: 'Africa/Casablanca', Monrovia: 'Africa/Monrovia', UTC: 'Etc/UTC', Belgrade: 'Europe/Belgrade',
  Bratislava: 'Europe/Bratislava', Budapest: 'Europe/Budapest', Ljubljana: 'Europe/Ljubljana', Prague: 'Europe/Prague',
  Sarajevo: 'Europe/Sarajevo', Skopje: 'Europe/Skopje', Warsaw: 'Europe/Warsaw', Zagreb: 'Europe/Zagreb', Brussels: 'Europe/Brussels',
  Copenhagen: 'Europe/Copenhagen', Madrid: 'Europe/Madrid', Paris: 'Europe/Paris', Amsterdam: 'Europe/Amsterdam', Berlin: 'Europe/Berlin',
  Bern: 'Europe/Zurich', Zurich: 'Europe/Zurich', Rome: 'Europe/Rome', Stockholm: 'Europe/Stockholm', Vienna: 'Europe/Vienna',
  'West Central Africa': 'Africa/Algiers', Bucharest: 'Europe/Bucharest', Cairo: 'Africa/Cairo', Helsinki: 'Europe/Helsinki',
  Kyiv: 'Europe/Kiev', Riga: 'Europe/Riga', Sofia: 'Europe/Sofia', Tallinn: 'Europe/Tallinn', Vilnius: 'Europe/Vilnius',
  Athens: 'Europe/Athens', Istanbul: 'Europe/Istanbul', Minsk: 'Europe/Minsk', Jerusalem: 'Asia/Jerusalem', Harare: 'Africa/Harare',
  Pretoria: 'Africa/Johannesburg', Kaliningrad: 'Europe/Kaliningrad', Moscow: 'Europe/Moscow', 'St. Petersburg': 'Europe/Moscow',
  Volgograd: 'Europe/Volgograd', Samara: 'Europe/Samara', Kuwait: 'Asia/Kuwait', Riyadh: 'Asia/Riyadh', Nairobi: 'Africa/Nairobi',
  Baghdad: 'Asia/Baghdad', Tehran: 'Asia/Tehran', 'Abu Dhabi': 'Asia/Muscat', Muscat: 'Asia/Muscat', Baku: 'Asia/Baku',
  Tbilisi: 'Asia/Tbilisi', Yerevan: 'Asia/Yerevan', Kabul: 'Asia/Kabul', Ekaterinburg: 'Asia/Yekaterinburg', Islamabad: 'Asia/Karachi',
  Karachi: 'Asia/Karachi', Tashkent: 'Asia/Tashkent', Chennai: 'Asia/Kolkata', Kolkata: 'Asia/Kolkata', Mumbai: 'Asia/Kolkata',
  'New Delhi': 'Asia/Kolkata', Kathmandu: 'Asia/Kathmandu', Astana: 'Asia/Dhaka', Dhaka: 'Asia/Dhaka', 'Sri Jayawardenepura': 'Asia/Colombo',
  Almaty: 'Asia/Almaty', Novosibirsk: 'Asia/Novosibirsk', Rangoon: 'Asia/Rangoon', Bangkok: 'Asia/Bangkok', Hanoi: 'Asia/Bangkok',
  Jakarta: 'Asia/Jakarta', Krasnoyarsk: 'Asia/Krasnoyarsk', Beijing: 'Asia/Shanghai', Chongqing: 'Asia/Chongqing',
  'Hong Kong': 'Asia/Hong_Kong', Urumqi: 'Asia/Urumqi', 'Kuala Lumpur': 'Asia/Kuala_Lumpur', Singapore: 'Asia/Singapore',
  Taipei: 'Asia/Taipei', Perth: 'Australia/Perth', Irkutsk: 'Asia/Irkutsk', Ulaanbaatar: 'Asia/Ulaanbaatar', Seoul: 'Asia/Seoul',
  Osaka: 'Asia/Tokyo', Sapporo: 'Asia/Tokyo', Tokyo: 'Asia/Tokyo', Yakutsk: 'Asia/Yakutsk', Darwin: 'Australia/Darwin',
  Adelaide: 'Australia/Adelaide', Canberra: 'Australia/Melbourne', Melbourne: 'Australia/Melbourne', Sydney: 'Australia/Sydney',
  Brisbane: 'Australia/Brisbane', Hobart: 'Australia/Hobart', Vladivostok: 'Asia/Vladivostok', Guam: 'Pacific/Guam',
  'Port Moresby': 'Pacific/Port_Moresby', Magadan: 'Asia/Magadan', Srednekolymsk: 'Asia/Srednekolymsk', 'Solomon Is.': 'Pacific/Guadalcanal',
  'New Caledonia': 'Pacific/Noumea', Fiji: 'Pacific/Fiji', Kamchatka: 'Asia/Kamchatka', 'Marshall Is.': 'Pacific/Majuro',
  Auckland: 'Pacific/Auckland', Wellington: 'Pacific/Auckland', "Nuku'alofa": 'Pacific/Tongatapu', 'Tokelau Is.': 'Pacific/Fakaofo',
  'Chatham Is.': 'Pacific/Chatham', Samoa: 'Pacific/Apia',
};

/** Every Rails time zone name (for tests and docs). */
export const RAILS_ZONE_NAMES = Object.keys(RAILS_ZONES);

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string): Intl.DateTimeFormat {
  let f = formatters.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
    formatters.set(zone, f);
  }
  return f;
}

/**
 * The IANA zone a schedule's `cron_timezone` names, or null when it names none. Names are
 * taken as TZInfo takes them, exactly (Intl alone would also take "asia/tokyo" or "+01:00").
 */
export function resolveTimeZone(name: string): string | null {
  if (typeof name !== 'string' || !name || name.length > 100) return null;
  const zone = RAILS_ZONES[name] ?? name;
  if (!/^[A-Za-z][A-Za-z0-9_+\-]*(\/[A-Za-z0-9_+\-]+)*$/.test(zone)) return null;
  try {
    formatter(zone);
  } catch {
    return null;
  }
  // Intl matches names without regard to case; TZInfo does not.
  const supported = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : null;
  if (supported && !supported.includes(zone) && !['UTC', 'Etc/UTC', 'GMT', 'Etc/GMT'].includes(zone)) {
    const canonical = formatter(zone).resolvedOptions().timeZone;
    if (canonical.toLowerCase() === zone.toLowerCase() && canonical !== zone) return null;
  }
  return zone;
}

/** The zone's offset from UTC at `instant` (ms; local = UTC + offset). */
function offsetAt(zone: string, instant: number): number {
  const parts: Record<string, number> = {};
  for (const p of formatter(zone).formatToParts(new Date(instant))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  const local = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
  return local - (instant - (((instant % 1000) + 1000) % 1000));
}

/** The wall-clock time at `instant` in the zone (naive: ms of UTC fields). */
export function wallClock(zone: string, instant: number): number {
  return instant + offsetAt(zone, instant);
}

/**
 * The instant of a wall-clock time in the zone: the earlier one when the time happens twice, the
 * time as much later as the clocks jumped when it does not happen (Temporal's "compatible").
 */
export function instantOf(zone: string, naive: number): number {
  const before = offsetAt(zone, naive - DAY_MS);
  const after = offsetAt(zone, naive + DAY_MS);
  const candidates = [...new Set([naive - before, naive - after])].filter((t) => wallClock(zone, t) === naive).sort((a, b) => a - b);
  if (candidates.length) return candidates[0];
  return naive - before;
}

/** The next time after `after` (strictly) that the schedule runs, or null when it never does. */
export function nextRunAfter(c: CronSchedule, zone: string, after: Date): Date | null {
  const t = after.getTime();
  let from = Math.floor(wallClock(zone, t) / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
  // A wall-clock time whose instant is not later (the second pass of a repeated hour) is passed over.
  for (let i = 0; i < 200; i++) {
    const naive = nextWallClock(c, from);
    if (naive === null) return null;
    const instant = instantOf(zone, naive);
    if (instant > t) return new Date(instant);
    from = naive + MINUTE_MS;
  }
  return null;
}

/** `cron` and `cron_timezone` of a schedule, checked: the parsed schedule and the zone, or which one is invalid. */
export function checkCron(cron: string, timezone: string): { ok: true; schedule: CronSchedule; zone: string } | { ok: false; field: 'cron' | 'cron_timezone' } {
  const zone = resolveTimeZone(timezone);
  const schedule = parseCron(cron);
  if (!schedule) return { ok: false, field: 'cron' };
  if (!zone) return { ok: false, field: 'cron_timezone' };
  // An expression that names no real day (February 30th) never runs.
  if (!nextRunAfter(schedule, zone, new Date())) return { ok: false, field: 'cron' };
  return { ok: true, schedule, zone };
}
