/**
 * A job's log as a page shows it: text without the terminal's escape sequences (colours, erase
 * line) and without gitlab-runner's section markers (`section_start:<time>:<name>[opts]\r`) and
 * other control characters. The log arrives in pieces (a page's first
 * read, then what the live stream appends), and a piece may end in the middle of a UTF-8
 * character, an escape sequence or a marker: `LogText` turns only the complete part into text
 * and keeps the rest for the next piece, counting the bytes it has turned into text (`offset`),
 * which is where a stream that continues the page starts reading.
 */

/** How far back from the end an unfinished sequence or marker is held; longer ones are shown as they are. */
const HOLD_LIMIT = 256;
const MARKER_PREFIXES = ['section_start:', 'section_end:'];

/** Bytes at the end of `buf` that may continue in the next piece (an unfinished character, escape sequence or marker). */
export function unfinishedTail(buf: Buffer): number {
  let end = buf.length;
  // An unfinished UTF-8 character: a lead byte whose continuation bytes have not all arrived.
  for (let i = end - 1; i >= Math.max(0, end - 4); i--) {
    const b = buf[i];
    if ((b & 0xc0) === 0x80) continue; // a continuation byte
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    if (end - i < need) end = i;
    break;
  }
  const from = Math.max(0, end - HOLD_LIMIT);
  const tail = buf.toString('latin1', from, end);
  // An unfinished escape sequence; an operating system command (a link, a title) runs to its terminator.
  const esc = tail.lastIndexOf('\x1b');
  if (esc >= 0 && !escapeComplete(tail.slice(esc))) end = from + esc;
  const osc = tail.lastIndexOf('\x1b]', end - from);
  if (osc >= 0 && !escapeComplete(tail.slice(osc, end - from))) end = from + osc;
  // A carriage return whose line feed may follow.
  if (end > 0 && buf[end - 1] === 0x0d) end -= 1;
  // An unfinished section marker (it ends with a carriage return), or the start of one.
  const line = tail.slice(0, end - from);
  const lineStart = Math.max(line.lastIndexOf('\n'), line.lastIndexOf('\r')) + 1;
  const at = line.indexOf('section_', lineStart);
  for (let i = at >= 0 ? at : Math.max(lineStart, line.length - 14); i < line.length; i++) {
    const rest = line.slice(i);
    if (MARKER_PREFIXES.some((p) => p.startsWith(rest) || (rest.startsWith(p) && /^[0-9]*(:[^\r\n]*)?$/.test(rest.slice(p.length))))) {
      end = from + i;
      break;
    }
  }
  return buf.length - end;
}

/** Is this text, which starts with ESC, a whole escape sequence (or more)? */
function escapeComplete(s: string): boolean {
  if (s.length < 2) return false;
  if (s[1] === '[') return /^\x1b\[[0-?]*[ -/]*[@-~]/.test(s);
  if (s[1] === ']') return /^\x1b\][^\x07\x1b]*(\x07|\x1b\\)/.test(s);
  return true;
}

const MARKER = /section_(?:start|end):[0-9]+:[A-Za-z0-9_.\-]*(?:\[[^\]\r\n]*\])?\r?/g;
const CSI = /\x1b\[[0-?]*[ -/]*[@-~]/g;
const OSC = /\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;
const OTHER_ESCAPE = /\x1b[@-Z\\-_]?/g;
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;

/**
 * Log text without markers, escape sequences and control characters (tabs and newlines stay); a
 * carriage return that does not end a line (a progress line redrawn) starts a new one.
 */
export function cleanLog(text: string): string {
  return text.replace(MARKER, '').replace(CSI, '').replace(OSC, '').replace(OTHER_ESCAPE, '').replace(/\r\n?/g, '\n').replace(CONTROL, '');
}

/** A log read piece by piece (see the top of this file). */
export class LogText {
  private held: Buffer = Buffer.alloc(0);
  /** Bytes of the log turned into text so far, counted from `start`. */
  offset: number;

  constructor(start = 0) {
    this.offset = start;
  }

  /** Bytes read so far, those held included: where the next read starts. */
  get readTo(): number {
    return this.offset + this.held.length;
  }

  /** The text of what is complete after this piece. */
  push(bytes: Buffer): string {
    const all = this.held.length ? Buffer.concat([this.held, bytes]) : bytes;
    const keep = unfinishedTail(all);
    const done = all.subarray(0, all.length - keep);
    this.held = Buffer.from(all.subarray(all.length - keep));
    this.offset += done.length;
    return cleanLog(done.toString('utf8'));
  }

  /** The log is complete: the text of what was held. */
  flush(): string {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    this.offset += rest.length;
    return cleanLog(rest.toString('utf8'));
  }
}
