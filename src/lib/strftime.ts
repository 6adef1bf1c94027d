/**
 * Ruby's strftime for a moment seen at a fixed UTC offset (a DateTime's), as the changelog's
 * `date_format` is written for it. Flags `-` (no padding), `_` (spaces), `0` (zeros), `^`
 * (upper case), `#` (swap case) and a width are understood; an unknown directive is printed as
 * written, as Ruby does.
 */

export interface ZonedTime {
  /** Milliseconds since the epoch. */
  epochMs: number;
  /** Minutes east of UTC. */
  offsetMinutes: number;
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

function pad(value: number | string, width: number, fill: string): string {
  const s = String(value);
  if (fill === '' || s.length >= width) return s;
  const negative = s.startsWith('-');
  const digits = negative ? s.slice(1) : s;
  return (negative ? '-' : '') + fill.repeat(Math.max(0, width - s.length)) + digits;
}

function offsetString(minutes: number, colons: number): string {
  const sign = minutes < 0 ? '-' : '+';
  const abs = Math.abs(minutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  return colons === 0 ? `${sign}${hh}${mm}` : colons === 1 ? `${sign}${hh}:${mm}` : `${sign}${hh}:${mm}:00`;
}

/** ISO 8601 week-based year and week number. */
function isoWeek(d: Date): { year: number; week: number } {
  const t = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
  const day = t.getUTCDay() || 7;
  t.setUTCDate(t.getUTCDate() + 4 - day);
  const yearStart = Date.UTC(t.getUTCFullYear(), 0, 1);
  return { year: t.getUTCFullYear(), week: Math.ceil(((t.getTime() - yearStart) / 86400000 + 1) / 7) };
}

export function strftime(format: string, time: ZonedTime): string {
  // The wall-clock fields at the given offset, read through UTC getters.
  const d = new Date(time.epochMs + time.offsetMinutes * 60000);
  const year = d.getUTCFullYear();
  const month = d.getUTCMonth();
  const day = d.getUTCDate();
  const hour = d.getUTCHours();
  const minute = d.getUTCMinutes();
  const second = d.getUTCSeconds();
  const millis = d.getUTCMilliseconds();
  const weekday = d.getUTCDay();
  const yday = Math.floor((Date.UTC(year, month, day) - Date.UTC(year, 0, 1)) / 86400000) + 1;

  const directive = /%([-_0^#]*)(\d*)(:{0,2})([a-zA-Z%+])/g;
  return format.replace(directive, (whole, flags: string, widthText: string, colons: string, conv: string) => {
    const width = widthText ? Number(widthText) : null;
    let fill: string | null = null;
    if (flags.includes('-')) fill = '';
    else if (flags.includes('_')) fill = ' ';
    else if (flags.includes('0')) fill = '0';
    const num = (v: number, w: number, defaultFill = '0') => pad(v, width ?? w, fill ?? defaultFill);
    const str = (s: string) => {
      let out = s;
      if (flags.includes('^')) out = out.toUpperCase();
      else if (flags.includes('#')) out = out === out.toUpperCase() ? out.toLowerCase() : out.toUpperCase();
      return width ? pad(out, width, fill ?? ' ') : out;
    };
    const compose = (f: string) => strftime(f, time);
    if (colons && conv !== 'z') return whole;
    switch (conv) {
      case 'Y': return num(year, 1);
      case 'C': return num(Math.floor(year / 100), 2);
      case 'y': return num(((year % 100) + 100) % 100, 2);
      case 'm': return num(month + 1, 2);
      case 'B': return str(MONTHS[month]);
      case 'b':
      case 'h': return str(MONTHS[month].slice(0, 3));
      case 'd': return num(day, 2);
      case 'e': return num(day, 2, ' ');
      case 'j': return num(yday, 3);
      case 'H': return num(hour, 2);
      case 'k': return num(hour, 2, ' ');
      case 'I': return num(hour % 12 || 12, 2);
      case 'l': return num(hour % 12 || 12, 2, ' ');
      case 'P': return str(hour < 12 ? 'am' : 'pm');
      case 'p': return flags.includes('#') ? (hour < 12 ? 'am' : 'pm') : str(hour < 12 ? 'AM' : 'PM');
      case 'M': return num(minute, 2);
      case 'S': return num(second, 2);
      case 'L': return String(millis).padStart(3, '0').padEnd(width ?? 3, '0').slice(0, width ?? 3);
      case 'N': return String(millis).padStart(3, '0').padEnd(width ?? 9, '0').slice(0, width ?? 9);
      case 'z': return offsetString(time.offsetMinutes, colons.length);
      case 'Z': return str(offsetString(time.offsetMinutes, 1));
      case 'A': return str(DAYS[weekday]);
      case 'a': return str(DAYS[weekday].slice(0, 3));
      case 'u': return num(weekday || 7, 1);
      case 'w': return num(weekday, 1);
      case 'U': return num(Math.floor((yday + 6 - weekday) / 7), 2);
      case 'W': return num(Math.floor((yday + 6 - ((weekday + 6) % 7)) / 7), 2);
      case 'G': return num(isoWeek(d).year, 1);
      case 'g': return num(isoWeek(d).year % 100, 2);
      case 'V': return num(isoWeek(d).week, 2);
      case 's': return num(Math.floor(time.epochMs / 1000), 1);
      case 'Q': return num(time.epochMs, 1);
      case 'n': return '\n';
      case 't': return '\t';
      case '%': return '%';
      case 'F': return str(compose('%Y-%m-%d'));
      case 'D':
      case 'x': return str(compose('%m/%d/%y'));
      case 'T':
      case 'X': return str(compose('%H:%M:%S'));
      case 'R': return str(compose('%H:%M'));
      case 'r': return str(compose('%I:%M:%S %p'));
      case 'c': return str(compose('%a %b %e %H:%M:%S %Y'));
      case 'v': return str(compose('%e-%^b-%4Y'));
      case '+': return str(compose('%a %b %e %H:%M:%S %Z %Y'));
      default: return whole;
    }
  });
}
