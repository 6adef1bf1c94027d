// What the server prints: one line per request (method, path without credentials, status,
// duration), and the rest of the log. In a terminal the lines are words (`CAIRN_LOG_FORMAT=text`,
// the default there); elsewhere, or with `json`, pino's JSON lines for log collectors.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { redactUrl } from '../lib/redact.js';

export type LogFormat = 'auto' | 'text' | 'json';

/** The format this process writes: auto is text on a terminal, JSON otherwise. */
export function resolveLogFormat(format: LogFormat, out: { isTTY?: boolean } = process.stdout): 'text' | 'json' {
  return format === 'auto' ? (out.isTTY ? 'text' : 'json') : format;
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

function clock(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** One pino JSON line as a line of words (for a person at a terminal). */
export function formatLogLine(json: string): string {
  let o: Record<string, any>;
  try {
    o = JSON.parse(json);
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = LEVELS[o.level] ?? String(o.level);
  const head = `${clock(typeof o.time === 'number' ? o.time : Date.now())} ${level.padEnd(5)}`;
  if (o.request) {
    const r = o.request as { method: string; url: string; status: number; ms: number };
    return `${head} ${r.method} ${r.url} ${r.status} ${r.ms < 10 ? r.ms.toFixed(1) : Math.round(r.ms)} ms\n`;
  }
  let line = `${head} ${o.msg ?? ''}`;
  const err = o.err as { message?: string; stack?: string; type?: string } | undefined;
  if (err) line += o.level >= 50 && err.stack ? `\n${err.stack}` : `: ${err.message ?? err.type ?? 'error'}`;
  return `${line}\n`;
}

/** A pino destination writing words to `out`. */
export function textLogStream(out: NodeJS.WritableStream = process.stdout): { write(line: string): void } {
  return { write: (line: string) => void out.write(formatLogLine(line)) };
}

/**
 * The request line, once the answer is sent. The built-in runner's (and any runner's) long polls
 * that found no job are at debug level: they would be most of the log and say nothing.
 */
export function registerRequestLog(app: FastifyInstance): void {
  app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done) => {
    const status = reply.statusCode;
    const quiet = status === 204 && request.method === 'POST' && request.url.startsWith('/api/v4/jobs/request');
    const entry = { request: { method: request.method, url: redactUrl(request.url), status, ms: Math.round(reply.elapsedTime * 10) / 10 } };
    if (quiet) request.log.debug(entry, 'request');
    else if (status >= 500) request.log.error(entry, 'request');
    else request.log.info(entry, 'request');
    done();
  });
}
