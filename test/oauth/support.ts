import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { TestContext } from '../helpers/app.js';

/** x-www-form-urlencoded from an object (undefined values left out). */
export function form(values: Record<string, string | undefined>): string {
  return new URLSearchParams(Object.entries(values).filter(([, v]) => v !== undefined) as [string, string][]).toString();
}

export function csrfFrom(html: string): string {
  const m = /name="authenticity_token" value="([^"]+)"/.exec(html);
  assert.ok(m, 'page has an authenticity_token');
  return m[1];
}

export function sessionCookieFrom(headers: Record<string, any>): string | undefined {
  const raw = headers['set-cookie'];
  const list: string[] = Array.isArray(raw) ? raw : raw ? [raw] : [];
  const c = list.find((s) => s.startsWith('_cairn_session=') && !s.startsWith('_cairn_session=;'));
  return c ? c.split(';')[0] : undefined;
}

export interface Browser {
  cookie: string;
  csrf: string;
}

/** Signs in through the HTML form; returns the session cookie and its CSRF token. */
export async function signIn(t: TestContext, login: string, password: string): Promise<Browser> {
  const pageRes = await t.get('/users/sign_in', { token: null });
  assert.equal(pageRes.status, 200);
  const anonCookie = sessionCookieFrom(pageRes.headers)!;
  const res = await t.call('POST', '/users/sign_in', {
    token: null,
    headers: { cookie: anonCookie },
    form: form({ 'user[login]': login, 'user[password]': password, authenticity_token: csrfFrom(pageRes.text) }),
  });
  assert.equal(res.status, 302, res.text);
  const cookie = sessionCookieFrom(res.headers)!;
  assert.ok(cookie && cookie !== anonCookie, 'a new session id after sign-in');
  const settings = await t.get('/-/user_settings/applications', { token: null, headers: { cookie } });
  assert.equal(settings.status, 200);
  return { cookie, csrf: csrfFrom(settings.text) };
}

export interface RegisteredApp {
  id: number;
  application_id: string;
  secret: string;
}

/** An instance-wide application registered by root through the API. */
export async function registerApp(
  t: TestContext,
  opts: { scopes?: string; confidential?: boolean; redirectUri?: string; name?: string } = {},
): Promise<RegisteredApp> {
  const res = await t.post('/api/v4/applications', {
    name: opts.name ?? t.unique('app'),
    redirect_uri: opts.redirectUri ?? 'https://client.example/callback',
    scopes: opts.scopes ?? 'api read_user',
    confidential: opts.confidential ?? true,
  });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

export function pkcePair(method: 'S256' | 'plain' = 'S256') {
  const verifier = crypto.randomBytes(48).toString('base64url');
  const challenge = method === 'S256' ? crypto.createHash('sha256').update(verifier).digest('base64url') : verifier;
  return { verifier, challenge, method };
}

/** Opens the consent page and presses Authorize (or Deny); returns the redirect Location. */
export async function authorize(t: TestContext, browser: Browser, query: Record<string, string | undefined>, decision: 'authorize' | 'deny' = 'authorize') {
  const page = await t.get(`/oauth/authorize?${form(query)}`, { token: null, headers: { cookie: browser.cookie } });
  assert.equal(page.status, 200, page.text);
  // The consent page's forms carry the (validated) request back.
  const fields: Record<string, string> = {};
  const formHtml = page.text.split('<form method="post" action="/oauth/authorize">')[1];
  for (const m of formHtml.split('</form>')[0].matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields[m[1]] = m[2].replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>');
  }
  if (decision === 'deny') fields._method = 'delete';
  const res = await t.call('POST', '/oauth/authorize', { token: null, headers: { cookie: browser.cookie }, form: form(fields) });
  assert.equal(res.status, 302, res.text);
  return new URL(res.headers.location as string);
}

export async function tokenRequest(t: TestContext, values: Record<string, string | undefined>, headers: Record<string, string> = {}) {
  return t.call('POST', '/oauth/token', { token: null, form: form(values), headers });
}

export function basic(id: string, secret: string) {
  return { authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}` };
}

export const bearer = (token: string) => ({ token: null, headers: { authorization: `Bearer ${token}` } });
