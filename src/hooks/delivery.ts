import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { HookEventFlag, WebHook } from '../db/schema/webhooks.js';
import { defineJob } from '../jobs/queue.js';
import { decryptSecret } from '../lib/secrets.js';
import { hookAlertStatus, PERMANENT_FAILURE_THRESHOLD, TEMPORARY_FAILURE_THRESHOLD } from '../presenters/hooks.js';
import { GITLAB_COMPAT_VERSION } from '../version.js';
import { BlockedUrlError, checkLiteralHost, guardedLookup } from './url_blocker.js';

/**
 * Delivering a hook's event: one `webhooks.deliver` job per hook and event, in the durable
 * queue, so it survives a crash and two processes deliver it once. A delivery is a POST of the
 * event's JSON with GitLab's headers, bounded by CAIRN_WEBHOOK_TIMEOUT, following up to five
 * redirects (each checked by the SSRF guard), logged in web_hook_logs. A failed delivery is
 * retried with the queue's backoff; four failures in a row disable the hook for a minute,
 * doubling up to a day, and forty disable it for good (GitLab's auto-disabling). A success,
 * a test included, re-enables it.
 */

/** The delivery log's trigger names (GitLab's hook scopes) and their X-Gitlab-Event and switch. */
export const TRIGGERS = {
  push_hooks: { event: 'Push Hook', flag: 'push_events' },
  tag_push_hooks: { event: 'Tag Push Hook', flag: 'tag_push_events' },
  issue_hooks: { event: 'Issue Hook', flag: 'issues_events' },
  confidential_issue_hooks: { event: 'Confidential Issue Hook', flag: 'confidential_issues_events' },
  merge_request_hooks: { event: 'Merge Request Hook', flag: 'merge_requests_events' },
  note_hooks: { event: 'Note Hook', flag: 'note_events' },
  confidential_note_hooks: { event: 'Confidential Note Hook', flag: 'confidential_note_events' },
  pipeline_hooks: { event: 'Pipeline Hook', flag: 'pipeline_events' },
  job_hooks: { event: 'Job Hook', flag: 'job_events' },
  deployment_hooks: { event: 'Deployment Hook', flag: 'deployment_events' },
  release_hooks: { event: 'Release Hook', flag: 'releases_events' },
  emoji_hooks: { event: 'Emoji Hook', flag: 'emoji_events' },
  member_hooks: { event: 'Member Hook', flag: 'member_events' },
  wiki_page_hooks: { event: 'Wiki Page Hook', flag: 'wiki_page_events' },
  milestone_hooks: { event: 'Milestone Hook', flag: 'milestone_events' },
  feature_flag_hooks: { event: 'Feature Flag Hook', flag: 'feature_flag_events' },
  resource_access_token_hooks: { event: 'Resource Access Token Hook', flag: 'resource_access_token_events' },
} as const satisfies Record<string, { event: string; flag: HookEventFlag }>;
export type HookTrigger = keyof typeof TRIGGERS;

export const DELIVER_JOB = 'webhooks.deliver';
/** A delivery is tried this often before it is given up (each failure counts towards disabling the hook). */
export const DELIVERY_ATTEMPTS = 3;
const MAX_REDIRECTS = 5;
/** What the log keeps of a response body. */
const MAX_LOGGED_BODY = 8 * 1024;
/** What is read of a response body at most. */
const MAX_READ_BODY = 64 * 1024;
const REDACTED = '[REDACTED]';

export interface HookSecrets {
  token: string | null;
  urlVariables: Record<string, string>;
  customHeaders: Record<string, string>;
}

function decryptJson(cairn: Pick<Cairn, 'config'>, stored: string | null): Record<string, string> {
  if (!stored) return {};
  const text = decryptSecret(cairn.config, stored);
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

export function hookSecrets(cairn: Pick<Cairn, 'config'>, hook: WebHook): HookSecrets {
  return {
    token: hook.token_encrypted ? decryptSecret(cairn.config, hook.token_encrypted) : null,
    urlVariables: decryptJson(cairn, hook.url_variables_encrypted),
    customHeaders: decryptJson(cairn, hook.custom_headers_encrypted),
  };
}

/** `{name}` placeholders of a hook URL. */
export function urlPlaceholders(url: string): string[] {
  return [...url.matchAll(/\{([A-Za-z0-9_]+)\}/g)].map((m) => m[1]);
}

export function interpolateUrl(url: string, vars: Record<string, string>): string {
  return url.replace(/\{([A-Za-z0-9_]+)\}/g, (whole, key) => (key in vars ? vars[key] : whole));
}

/** The URL as the log shows it: placeholders kept, credentials out. */
function maskedUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = u.username ? REDACTED : '';
      u.password = u.password ? REDACTED : '';
    }
    return u.toString().replace(/%7B([A-Za-z0-9_]+)%7D/g, '{$1}');
  } catch {
    return url;
  }
}

export interface DeliveryResult {
  status: number | null;
  headers: Record<string, string>;
  body: string;
  error: string | null;
  durationSeconds: number;
}

interface Attempt {
  status: number;
  headers: Record<string, string>;
  body: string;
  location?: string;
}

function requestOnce(cairn: Cairn, url: URL, method: 'POST' | 'GET', headers: Record<string, string>, body: string | null, verify: boolean, signal: AbortSignal): Promise<Attempt> {
  checkLiteralHost(cairn.config, url);
  const lib = url.protocol === 'https:' ? https : http;
  return new Promise<Attempt>((resolve, reject) => {
    const req = lib.request(
      url,
      {
        method,
        headers: { ...headers, ...(body !== null ? { 'Content-Length': String(Buffer.byteLength(body)) } : {}) },
        lookup: guardedLookup(cairn.config),
        rejectUnauthorized: verify,
        signal,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < MAX_READ_BODY) chunks.push(c);
          size += c.length;
          if (size >= MAX_READ_BODY) res.destroy();
        });
        const done = () => {
          const out: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out[k.split('-').map((p) => p.charAt(0).toUpperCase() + p.slice(1)).join('-')] = Array.isArray(v) ? v.join(', ') : v;
          resolve({ status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks).toString('utf8'), location: res.headers.location });
        };
        res.on('end', done);
        res.on('close', done);
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (body !== null) req.write(body);
    req.end();
  });
}

/** POSTs `data` to the hook's URL (with redirects), never throwing: failures are in the result. */
export async function postHook(cairn: Cairn, hook: WebHook, secrets: HookSecrets, headers: Record<string, string>, data: unknown): Promise<DeliveryResult> {
  const started = performance.now();
  const timeoutMs = cairn.config.webhookTimeout * 1000;
  const signal = AbortSignal.timeout(timeoutMs);
  let url: URL;
  let method: 'POST' | 'GET' = 'POST';
  let body: string | null = JSON.stringify(data);
  const seconds = () => (performance.now() - started) / 1000;
  try {
    url = new URL(interpolateUrl(hook.url, secrets.urlVariables));
    const sendHeaders = { ...headers };
    if (url.username || url.password) {
      sendHeaders.Authorization = `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
      url.username = '';
      url.password = '';
    }
    for (let hop = 0; ; hop++) {
      const res = await requestOnce(cairn, url, method, sendHeaders, body, hook.enable_ssl_verification, signal);
      if (![301, 302, 303, 307, 308].includes(res.status) || !res.location) {
        return { status: res.status, headers: res.headers, body: res.body, error: null, durationSeconds: seconds() };
      }
      if (hop >= MAX_REDIRECTS) return { status: null, headers: {}, body: '', error: 'Too many redirects', durationSeconds: seconds() };
      const next = new URL(res.location, url);
      if (next.protocol !== 'http:' && next.protocol !== 'https:') throw new BlockedUrlError('Only allowed schemes are http, https');
      // A redirect elsewhere does not take the credentials with it.
      if (next.origin !== url.origin) delete sendHeaders.Authorization;
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = null;
        delete sendHeaders['Content-Type'];
      }
      url = next;
    }
  } catch (err) {
    const e = err as Error & { code?: string };
    let message: string;
    if (err instanceof BlockedUrlError || (e.cause instanceof BlockedUrlError)) message = `URL is blocked: ${(err instanceof BlockedUrlError ? err : (e.cause as Error)).message}`;
    else if (signal.aborted) message = `Request timed out after ${cairn.config.webhookTimeout} seconds`;
    else if (e.code === 'ECONNREFUSED') message = 'Failed to open TCP connection: connection refused';
    else message = e.message || String(err);
    return { status: null, headers: {}, body: '', error: message, durationSeconds: seconds() };
  }
}

export interface HookCall {
  trigger: HookTrigger;
  data: unknown;
  /** X-Gitlab-Event-UUID: the event's, the same for every hook it goes to. */
  eventUuid: string;
  /** Idempotency-Key: this hook's delivery of the event, the same on every retry. */
  idempotencyKey: string;
}

/** GitLab's headers of a delivery; `redact` gives the form kept in the log. */
export function hookHeaders(cairn: Cairn, hook: WebHook, secrets: HookSecrets, call: HookCall, redact: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': `GitLab/${GITLAB_COMPAT_VERSION}`,
    'X-Gitlab-Event': hook.type === 'SystemHook' ? 'System Hook' : TRIGGERS[call.trigger].event,
    'X-Gitlab-Webhook-UUID': hookUuid(hook),
    'X-Gitlab-Instance': cairn.config.externalUrl,
    'X-Gitlab-Event-UUID': call.eventUuid,
    'Idempotency-Key': call.idempotencyKey,
  };
  if (secrets.token) headers['X-Gitlab-Token'] = redact ? REDACTED : secrets.token;
  for (const [k, v] of Object.entries(secrets.customHeaders)) headers[k] = redact ? REDACTED : v;
  return headers;
}

/** A hook's stable UUID (GitLab keeps a column; derived here from the id and the instance key). */
export function hookUuid(hook: Pick<WebHook, 'id' | 'created_at'>): string {
  const h = crypto.createHash('sha256').update(`web_hook:${hook.id}:${new Date(hook.created_at).toISOString()}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * Delivers one call to one hook, logs it and keeps the hook's failure state: the one way a hook is
 * executed (queue jobs and the test endpoint). Returns the result.
 */
export async function executeHook(cairn: Cairn, hook: WebHook, call: HookCall): Promise<DeliveryResult> {
  const secrets = hookSecrets(cairn, hook);
  const result = await postHook(cairn, hook, secrets, hookHeaders(cairn, hook, secrets, call, false), call.data);
  const ok = result.status !== null && result.status >= 200 && result.status < 300;
  await cairn.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('web_hook_logs')
      .values({
        web_hook_id: hook.id,
        trigger: call.trigger,
        url: maskedUrl(hook.url),
        request_headers: JSON.stringify(hookHeaders(cairn, hook, secrets, call, true)) as any,
        request_data: JSON.stringify(call.data) as any,
        response_headers: JSON.stringify(result.headers) as any,
        response_body: result.body.length > MAX_LOGGED_BODY ? result.body.slice(0, MAX_LOGGED_BODY) : result.body,
        response_status: result.status === null ? 'internal error' : String(result.status),
        execution_duration: result.durationSeconds,
        internal_error_message: result.error,
        event_uuid: call.eventUuid,
      })
      .execute();
    if (ok) {
      await trx.updateTable('web_hooks').set({ recent_failures: 0, backoff_count: 0, disabled_until: null }).where('id', '=', hook.id).where(sql<boolean>`(recent_failures > 0 or disabled_until is not null)`).execute();
    } else {
      // One statement, so failures counted by two processes at once add up. The right-hand sides see the old row.
      await sql`
        update web_hooks set
          recent_failures = least(recent_failures + 1, ${PERMANENT_FAILURE_THRESHOLD}),
          backoff_count = case when recent_failures + 1 >= ${TEMPORARY_FAILURE_THRESHOLD} and recent_failures + 1 < ${PERMANENT_FAILURE_THRESHOLD} then backoff_count + 1 else backoff_count end,
          disabled_until = case
            when recent_failures + 1 >= ${PERMANENT_FAILURE_THRESHOLD} then null
            when recent_failures + 1 >= ${TEMPORARY_FAILURE_THRESHOLD} then now() + least(86400, 60 * power(2, least(backoff_count, 20))) * interval '1 second'
            else disabled_until end
        where id = ${hook.id} and recent_failures < ${PERMANENT_FAILURE_THRESHOLD}`.execute(trx);
    }
  });
  return result;
}

export class DeliveryFailed extends Error {}

defineJob(DELIVER_JOB, async (cairn, payload, job) => {
  const hook = await cairn.db.selectFrom('web_hooks').selectAll().where('id', '=', Number(payload.hookId)).executeTakeFirst();
  // Deleted meanwhile, or disabled: the event is dropped, as GitLab drops events for a disabled hook.
  if (!hook || hookAlertStatus(hook) !== 'executable') return;
  const result = await executeHook(cairn, hook, {
    trigger: payload.trigger as HookTrigger,
    data: payload.data,
    eventUuid: String(payload.eventUuid),
    idempotencyKey: String(payload.idempotencyKey),
  });
  const ok = result.status !== null && result.status >= 200 && result.status < 300;
  if (!ok && job.attempts < job.maxAttempts) throw new DeliveryFailed(result.error ?? `hook answered ${result.status}`);
});
