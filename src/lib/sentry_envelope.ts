/**
 * Sentry's wire formats, as the SDKs send them to a DSN: the envelope (a JSON header line, then
 * items, each a JSON header line and a payload of `length` bytes or up to the next newline) and
 * the legacy store body (one JSON event). Pure functions over bytes; any malformed input is a
 * SentryParseError (the collector answers 400).
 */

export class SentryParseError extends Error {}

export interface EnvelopeItem {
  type: string;
  headers: Record<string, unknown>;
  payload: Buffer;
}

export interface Envelope {
  headers: Record<string, unknown>;
  items: EnvelopeItem[];
}

const NEWLINE = 0x0a;
/** A real envelope holds a handful of items; this bounds the work one request can ask for. */
const MAX_ITEMS = 100;

function jsonObject(bytes: Buffer, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new SentryParseError(`${what} is not JSON`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new SentryParseError(`${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

function lineEnd(buf: Buffer, from: number): number {
  const i = buf.indexOf(NEWLINE, from);
  return i < 0 ? buf.length : i;
}

export function parseEnvelope(buf: Buffer): Envelope {
  let pos = 0;
  const headerEnd = lineEnd(buf, pos);
  const headers = jsonObject(buf.subarray(pos, headerEnd), 'envelope header');
  pos = headerEnd + 1;
  const items: EnvelopeItem[] = [];
  while (pos < buf.length) {
    const end = lineEnd(buf, pos);
    const line = buf.subarray(pos, end);
    pos = end + 1;
    if (!line.toString('utf8').trim()) continue; // blank lines between items
    if (items.length >= MAX_ITEMS) throw new SentryParseError('too many envelope items');
    const itemHeaders = jsonObject(line, 'item header');
    const type = itemHeaders.type;
    if (typeof type !== 'string' || !type) throw new SentryParseError('item without a type');
    let payload: Buffer;
    const length = itemHeaders.length;
    if (length !== undefined && length !== null) {
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0) throw new SentryParseError('bad item length');
      if (pos + length > buf.length) throw new SentryParseError('item longer than the envelope');
      payload = buf.subarray(pos, pos + length);
      pos += length;
      if (buf[pos] === NEWLINE) pos += 1;
    } else {
      const payloadEnd = lineEnd(buf, pos);
      payload = buf.subarray(Math.min(pos, buf.length), payloadEnd);
      pos = payloadEnd + 1;
    }
    items.push({ type, headers: itemHeaders, payload });
  }
  return { headers, items };
}

export function parseEvent(payload: Buffer): Record<string, unknown> {
  return jsonObject(payload, 'event');
}

/**
 * The client key of a request: `sentry_key` in the query (what the SDKs put in the envelope URL),
 * else the `X-Sentry-Auth` header (or `Authorization: Sentry ...`), `Sentry sentry_key=<key>, ...`.
 */
export function sentryKeyOf(query: Record<string, unknown>, headers: Record<string, string | string[] | undefined>): string | null {
  const fromQuery = query.sentry_key;
  if (typeof fromQuery === 'string' && fromQuery) return fromQuery;
  for (const name of ['x-sentry-auth', 'authorization']) {
    const raw = headers[name];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (!value) continue;
    const m = /^\s*Sentry\s+(.*)$/i.exec(value);
    if (!m) continue;
    for (const part of m[1].split(',')) {
      const eq = part.indexOf('=');
      if (eq < 0) continue;
      if (part.slice(0, eq).trim() === 'sentry_key') return part.slice(eq + 1).trim() || null;
    }
  }
  return null;
}

export interface ReportedError {
  name: string;
  description: string;
  actor: string;
  platform: string | null;
  occurredAt: Date;
  environment: string | null;
  level: string | null;
  eventId: string | null;
}

/** A string field as PostgreSQL text can hold it (no NUL characters). */
const str = (v: unknown): string | null => (typeof v === 'string' ? v.replace(/\u0000/g, '') : typeof v === 'number' ? String(v) : null);
const cap = (s: string, n: number) => (s.length > n ? s.slice(0, n) : s);

/**
 * What GitLab's CollectErrorService takes from an event: the exception (the first with a
 * stacktrace, since the first may lack context), its type and value, the actor (the transaction,
 * or the last frame's function and module), platform and timestamp. Null when the event carries
 * no exception (GitLab keeps exceptions only).
 */
export function reportedError(event: Record<string, unknown>, now = new Date()): ReportedError | null {
  const raw = event.exception;
  const values = Array.isArray(raw) ? raw : raw && typeof raw === 'object' && Array.isArray((raw as any).values) ? (raw as any).values : [];
  const exceptions = (values as unknown[]).filter((x): x is Record<string, any> => !!x && typeof x === 'object' && !Array.isArray(x));
  const exception = exceptions.find((x) => x.stacktrace && typeof x.stacktrace === 'object') ?? exceptions[0];
  if (!exception) return null;
  const name = str(exception.type);
  if (!name) return null;
  let actor = str(event.transaction);
  if (!actor) {
    const frames = exception.stacktrace?.frames;
    const last = Array.isArray(frames) && frames.length ? frames[frames.length - 1] : null;
    if (last && typeof last === 'object') actor = `${str(last.function) ?? ''}(${str(last.module) ?? ''})`;
  }
  let occurredAt = now;
  const ts = event.timestamp;
  if (typeof ts === 'number' || (typeof ts === 'string' && /^\d+(\.\d+)?$/.test(ts))) occurredAt = new Date(Number(ts) * 1000);
  else if (typeof ts === 'string') occurredAt = new Date(ts);
  if (Number.isNaN(occurredAt.getTime()) || occurredAt.getUTCFullYear() < 1970 || occurredAt.getUTCFullYear() > 9999) occurredAt = now;
  return {
    name: cap(name, 255),
    description: cap(str(exception.value) ?? '', 1024),
    actor: cap(actor ?? '', 255),
    platform: str(event.platform) === null ? null : cap(str(event.platform)!, 255),
    occurredAt,
    environment: str(event.environment) === null ? null : cap(str(event.environment)!, 255),
    level: str(event.level) === null ? null : cap(str(event.level)!, 255),
    eventId: str(event.event_id) === null ? null : cap(str(event.event_id)!, 64),
  };
}
