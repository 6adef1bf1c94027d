// Renders the sign-in and consent pages in Chromium and saves docs/sign-in.png and docs/authorize.png.
// Run once: node --import tsx scripts/screenshots.ts
import fs from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { createTestContext } from '../test/helpers/app.js';

const root = path.resolve(import.meta.dirname, '..');
const docs = path.join(root, 'docs');
fs.mkdirSync(docs, { recursive: true });

const t = await createTestContext();
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  const alice = await t.createUser({ username: 'alice', name: 'Alice Example', email: 'alice@example.com' });
  const created = await t.post('/api/v4/applications', {
    name: 'Example CI Dashboard',
    redirect_uri: 'https://dashboard.example.com/auth/callback',
    scopes: 'api read_user read_repository',
    confidential: false,
  });
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  t.app.cairn.config.externalUrl = base;

  const page = await browser.newPage({ viewport: { width: 900, height: 640 }, deviceScaleFactor: 1 });
  const authorizeUrl = `${base}/oauth/authorize?${new URLSearchParams({
    client_id: created.body.application_id,
    redirect_uri: 'https://dashboard.example.com/auth/callback',
    response_type: 'code',
    scope: 'api read_user read_repository',
    state: 'example-state',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    code_challenge_method: 'S256',
  })}`;
  await page.goto(authorizeUrl);
  await page.screenshot({ path: path.join(docs, 'sign-in.png'), fullPage: true });
  await page.getByLabel('Username or primary email').fill(alice.user.username);
  await page.getByLabel('Password').fill(alice.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => u.pathname === '/oauth/authorize');
  await page.screenshot({ path: path.join(docs, 'authorize.png'), fullPage: true });
  console.log('wrote docs/sign-in.png and docs/authorize.png');
} finally {
  await browser.close();
  await t.close();
}
