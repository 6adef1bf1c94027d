import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { CallResult, TestContext, TestUser } from './app.js';

/**
 * Helpers for the web pages: a signed-in session through the real sign-in form (cookie + CSRF
 * token), page GETs and form POSTs through app.inject, and a real Chromium for browser tests.
 */
export const CHROMIUM = '/usr/bin/chromium';
export const noChromium = !fs.existsSync(CHROMIUM) && `${CHROMIUM} is not installed`;

export interface WebSession {
  cookie: string;
  csrf: string;
  user: TestUser | null;
}

export const ANONYMOUS: WebSession = { cookie: '', csrf: '', user: null };

function sessionCookie(headers: Record<string, any>): string | undefined {
  const raw = headers['set-cookie'];
  const list: string[] = Array.isArray(raw) ? raw : raw ? [raw] : [];
  const c = list.find((s) => s.startsWith('_cairn_session=') && !s.startsWith('_cairn_session=;'));
  return c ? c.split(';')[0] : undefined;
}

export function csrfOf(htmlText: string): string {
  const m = /name="authenticity_token" value="([^"]+)"/.exec(htmlText);
  assert.ok(m, 'page has an authenticity_token');
  return m[1];
}

/** Signs in through the HTML form; the returned session's CSRF token is the one its pages carry. */
export async function webSignIn(t: TestContext, who: TestUser): Promise<WebSession> {
  const form = await t.call('GET', '/users/sign_in', { token: null });
  const anon = sessionCookie(form.headers)!;
  const res = await t.call('POST', '/users/sign_in', {
    token: null,
    headers: { cookie: anon },
    form: new URLSearchParams({ 'user[login]': who.user.username, 'user[password]': who.password, authenticity_token: csrfOf(form.text) }).toString(),
  });
  assert.equal(res.status, 302, res.text);
  const cookie = sessionCookie(res.headers)!;
  const page = await t.call('GET', '/-/user_settings/personal_access_tokens', { token: null, headers: { cookie } });
  return { cookie, csrf: csrfOf(page.text), user: who };
}

/** GET a page as the session (no API token). */
export function getPage(t: TestContext, s: WebSession, url: string): Promise<CallResult> {
  return t.call('GET', url, { token: null, headers: s.cookie ? { cookie: s.cookie } : {} });
}

/** POST a form as the session, with its CSRF token unless the fields give another. */
export function postForm(t: TestContext, s: WebSession, url: string, fields: Record<string, string | string[]>): Promise<CallResult> {
  const params = new URLSearchParams();
  if (!('authenticity_token' in fields)) params.append('authenticity_token', s.csrf);
  for (const [k, v] of Object.entries(fields)) for (const one of [v].flat()) params.append(k, one);
  return t.call('POST', url, { token: null, headers: s.cookie ? { cookie: s.cookie } : {}, form: params.toString() });
}

/** Starts the app on a port (for a browser) and sets the external URL to it. */
export async function listen(t: TestContext): Promise<string> {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  t.app.cairn.config.externalUrl = url;
  return url;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
}

/** Signs in through the form in a browser page. */
export async function browserSignIn(page: Page, baseUrl: string, who: TestUser) {
  await page.goto(`${baseUrl}/users/sign_in`);
  await page.fill('#user_login', who.user.username);
  await page.fill('#user_password', who.password);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
}

/**
 * What goes wrong in a browser page while a test drives it: console errors (CSP violations are
 * reported there), uncaught script errors and answers of 400 and up. The browser's own request
 * for /favicon.ico (Cairn has none) is not a failure of the pages.
 */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.location().url.endsWith('/favicon.ico')) problems.push(`${m.text()} ${m.location().url}`);
  });
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('response', (r) => {
    if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) problems.push(`${r.status()} ${r.url()}`);
  });
  return problems;
}
