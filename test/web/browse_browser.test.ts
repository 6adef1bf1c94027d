import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree } from '../helpers/repo.js';
import { browserSignIn, launchChromium, listen, noChromium, watchProblems } from '../helpers/web.js';

const SCREENSHOTS = process.env.CAIRN_SCREENSHOTS === '1';
const SHOTS_DIR = path.resolve(import.meta.dirname, '../../docs/screenshots');

const README = `# Weather station

A small service that collects readings from weather sensors and serves them over HTTP.

## Getting started

1. Install the dependencies: \`npm install\`
2. Start the server: \`npm start\`
3. Open <http://localhost:8080/readings>

See the [configuration guide](docs/configuration.md) and the [source](src).

## Features

- Readings kept for 30 days
- [x] JSON API
- [ ] Charts

\`\`\`sh
curl http://localhost:8080/readings?station=north
\`\`\`
`;

const SERVER = `import http from 'node:http';
import { Store, type Reading } from './store.js';

/** The HTTP server: GET /readings lists readings, POST /readings adds one. */
export function createServer(store: Store): http.Server {
  return http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method === 'GET' && url.pathname === '/readings') {
      const station = url.searchParams.get('station') ?? undefined;
      const readings: Reading[] = await store.list({ station, limit: 100 });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(readings));
      return;
    }
    if (req.method === 'POST' && url.pathname === '/readings') {
      let body = '';
      for await (const chunk of req) body += chunk;
      const reading = JSON.parse(body) as Reading;
      if (typeof reading.temperature !== 'number') {
        res.writeHead(400).end('temperature must be a number');
        return;
      }
      await store.add({ ...reading, at: new Date() });
      res.writeHead(201).end();
      return;
    }
    res.writeHead(404).end('Not found');
  });
}

const port = Number(process.env.PORT ?? 8080);
createServer(new Store()).listen(port, () => console.log(\`listening on \${port}\`));
`;

describe('web browsing in Chromium', { skip: noChromium }, () => {
  let t: TestContext;
  let alice: TestUser;
  let browser: Browser;
  let baseUrl: string;
  let projectUrl: string;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ username: 'alice', name: 'Alice Liddell' });
    const group = await t.createGroup({ path: 'weather', name: 'Weather', visibility: 20, owner: alice.user });
    const project = await t.createProject({ group, path: 'station', name: 'Weather station', visibility: 20 });
    await t.db.updateTable('projects').set({ description: 'Collects readings from weather sensors' }).where('id', '=', project.id).execute();
    for (const [p, name, description] of [
      ['forecast', 'Forecast', 'Forecasts from the readings, hourly'],
      ['dashboard', 'Dashboard', 'Charts of the stations'],
      ['firmware', 'Sensor firmware', 'Firmware for the sensor boards'],
    ]) {
      const other = await t.createProject({ group, path: p, name, visibility: p === 'firmware' ? 0 : 20 });
      await t.db.updateTable('projects').set({ description }).where('id', '=', other.id).execute();
    }
    const w = workTree(t, project);
    w.write('README.md', README);
    w.write('package.json', JSON.stringify({ name: 'weather-station', version: '1.2.0', type: 'module', scripts: { start: 'node src/server.js' } }, null, 2) + '\n');
    w.write('src/server.ts', SERVER.replace('limit: 100', 'limit: 50'));
    w.write('src/store.ts', 'export interface Reading {\n  station: string;\n  temperature: number;\n  at?: Date;\n}\n');
    w.write('docs/configuration.md', '# Configuration\n\nSet `PORT` to change the port.\n');
    w.write('.gitignore', 'node_modules/\n');
    w.commit('Initial version of the station service', { author: ['Alice Liddell', 'alice@example.com'] });
    w.write('src/server.ts', SERVER);
    w.commit('Serve up to 100 readings at once', { author: ['Bob Builder', 'bob@example.com'] });
    w.git(['checkout', '-q', '-b', 'feature/charts']);
    w.write('src/charts.ts', 'export const charts = true;\n');
    w.commit('Charts, first steps');
    w.git(['checkout', '-q', 'main']);
    w.push('--all');
    baseUrl = await listen(t);
    projectUrl = `${baseUrl}/weather/station`;
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await t.close();
  });

  it('signs in, opens a project, browses into a folder, opens a file, follows a line and blame', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const problems = watchProblems(page);
    await browserSignIn(page, baseUrl, alice);
    if (SCREENSHOTS) fs.mkdirSync(SHOTS_DIR, { recursive: true });

    // The home page is the dashboard of the signed-in user's projects.
    await page.goto(`${baseUrl}/`);
    assert.equal(new URL(page.url()).pathname, '/dashboard/projects');
    assert.match(await page.locator('ul.projects').innerText(), /Weather \/ Weather station/);
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SHOTS_DIR, 'dashboard.png') });

    // The project: root files above the README, whose links point into the repository.
    // (The clone URL shows a stable address in the screenshot, not this run's port.)
    if (SCREENSHOTS) t.app.cairn.config.externalUrl = 'https://cairn.example.com';
    await page.getByRole('link', { name: 'Weather / Weather station' }).click();
    await page.waitForURL(projectUrl);
    assert.match(await page.locator('table.tree').innerText(), /docs[\s\S]*src[\s\S]*README\.md/);
    assert.equal(await page.locator('.md a', { hasText: 'configuration guide' }).getAttribute('href'), '/weather/station/-/blob/main/docs/configuration.md');
    assert.match(await page.locator('.last-commit').innerText(), /Serve up to 100 readings at once/);
    if (SCREENSHOTS) {
      await page.screenshot({ path: path.join(SHOTS_DIR, 'project.png') });
      t.app.cairn.config.externalUrl = baseUrl;
    }

    // The switcher (the script submits it on change) goes to the chosen ref's tree.
    await Promise.all([page.waitForURL(`${projectUrl}/-/tree/feature/charts`), page.selectOption('#ref-switch', 'feature/charts')]);
    assert.match(await page.locator('.last-commit').innerText(), /Charts, first steps/);
    assert.equal(await page.locator('#ref-switch').inputValue(), 'feature/charts');
    await page.goto(projectUrl);

    // Into a folder, then a file.
    await page.locator('table.tree').getByRole('link', { name: 'src', exact: true }).click();
    await page.waitForURL(`${projectUrl}/-/tree/main/src`);
    assert.match(await page.locator('nav.path-crumbs').innerText(), /station \/ src/);
    await page.getByRole('link', { name: 'server.ts' }).click();
    await page.waitForURL(`${projectUrl}/-/blob/main/src/server.ts`);
    const keyword = page.locator('tr#L1 .hljs-keyword').first();
    assert.equal(await keyword.innerText(), 'import');
    const color = await keyword.evaluate((el) => getComputedStyle(el).color);
    const plainColor = await page.locator('tr#L1 td:last-child').evaluate((el) => getComputedStyle(el).color);
    assert.notEqual(color, plainColor, 'keywords are coloured');

    // A line number is an anchor: the row is the target.
    await page.locator('tr#L9 td.ln a').click();
    assert.equal(new URL(page.url()).hash, '#L9');
    assert.equal(await page.evaluate(() => document.querySelector(':target')?.id), 'L9');
    if (SCREENSHOTS) {
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: path.join(SHOTS_DIR, 'blob.png') });
    }

    // Blame: the line changed last is Bob's.
    await page.getByRole('link', { name: 'Blame' }).click();
    await page.waitForURL(`${projectUrl}/-/blame/main/src/server.ts`);
    const row = page.locator('tr#L10');
    assert.match(await row.innerText(), /limit: 100/);
    const group = await page.locator('tr.blame-start', { has: page.locator('td.blame', { hasText: 'Bob Builder' }) }).getAttribute('id');
    assert.equal(group, 'L10');
    assert.deepEqual(problems, [], 'no script errors or CSP violations');
    await context.close();
  });

  it('shows an outsider a 404 for a private project\'s files', async () => {
    const outsider = await t.createUser();
    const context = await browser.newContext();
    const page = await context.newPage();
    await browserSignIn(page, baseUrl, outsider);
    for (const url of ['/weather/firmware', '/weather/firmware/-/tree/main']) {
      const res = await page.goto(`${baseUrl}${url}`);
      assert.equal(res?.status(), 404);
      assert.match(await page.locator('h1').innerText(), /404/);
    }
    await context.close();
  });
});
