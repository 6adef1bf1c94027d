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

const STORE = `export interface Reading {
  station: string;
  temperature: number;
  at?: Date;
}

/** Readings in memory, newest last. */
export class Store {
  private readings: Reading[] = [];

  async add(reading: Reading): Promise<void> {
    this.readings.push(reading);
  }

  async list(opts: { station?: string; limit: number }): Promise<Reading[]> {
    const all = opts.station ? this.readings.filter((r) => r.station === opts.station) : this.readings;
    return all.slice(-opts.limit);
  }
}
`;

const STORE_V2 = `export interface Reading {
  station: string;
  temperature: number;
  humidity?: number;
  at?: Date;
}

/** Readings in memory, newest last, at most \`capacity\` of them. */
export class Store {
  private readings: Reading[] = [];

  constructor(private readonly capacity = 10_000) {}

  async add(reading: Reading): Promise<void> {
    this.readings.push(reading);
    if (this.readings.length > this.capacity) this.readings.shift();
  }

  async list(opts: { station?: string; limit: number }): Promise<Reading[]> {
    const all = opts.station ? this.readings.filter((r) => r.station === opts.station) : this.readings;
    return all.slice(-opts.limit);
  }
}
`;

describe('commits in Chromium', { skip: noChromium }, () => {
  let t: TestContext;
  let alice: TestUser;
  let browser: Browser;
  let baseUrl: string;
  let projectUrl: string;
  let changed: string;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ username: 'alice', name: 'Alice Liddell' });
    const group = await t.createGroup({ path: 'weather', name: 'Weather', visibility: 0, owner: alice.user });
    const project = await t.createProject({ group, path: 'station', name: 'Weather station', visibility: 0 });
    const w = workTree(t, project);
    w.write('README.md', '# Weather station\n');
    w.write('src/store.ts', STORE);
    w.write('docs/setup.md', '# Setup\n\nRun `npm start`.\n');
    w.commit('Initial version of the station service', { author: ['Alice Liddell', 'alice@example.com'] });
    w.write('src/store.ts', STORE_V2);
    w.write('docs/setup.md', '# Setup\n\nRun `npm start`. Set `CAPACITY` to keep more readings.\n');
    changed = w.commit('Keep at most 10,000 readings\n\nOld readings are dropped first, so memory stays bounded.\nHumidity is recorded when the sensor has it.', {
      author: ['Bob Builder', 'bob@example.com'],
    });
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

  it('signs in, opens the commits, a commit, switches to side by side, and compares', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const problems = watchProblems(page);
    await browserSignIn(page, baseUrl, alice);

    // The project's navigation leads to the commits of the default branch.
    await page.goto(projectUrl);
    await page.locator('nav.side').getByRole('link', { name: 'Commits' }).click();
    await page.waitForURL(`${projectUrl}/-/commits/main`);
    const titles = await page.locator('ul.commits a.title').allInnerTexts();
    assert.deepEqual(titles, ['Keep at most 10,000 readings', 'Initial version of the station service']);

    // The switcher (the script submits it on change) shows another branch's history.
    await Promise.all([page.waitForURL(`${projectUrl}/-/commits/feature/charts`), page.selectOption('#commits-ref', 'feature/charts')]);
    assert.equal((await page.locator('ul.commits a.title').allInnerTexts())[0], 'Charts, first steps');
    await page.goBack();
    await page.waitForURL(`${projectUrl}/-/commits/main`);

    // The description unfolds; the title opens the commit.
    await page.locator('ul.commits details.commit-more summary').first().click();
    assert.match(await page.locator('ul.commits pre.commit-description').first().innerText(), /memory stays bounded/);
    if (SCREENSHOTS) {
      fs.mkdirSync(SHOTS_DIR, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS_DIR, 'commits.png') });
    }
    await page.getByRole('link', { name: 'Keep at most 10,000 readings' }).click();
    await page.waitForURL(`${projectUrl}/-/commit/${changed}`);
    assert.match(await page.locator('h2.commit-title').innerText(), /Keep at most 10,000 readings/);
    assert.equal(await page.locator('section.diff-file').count(), 2);
    assert.equal(await page.locator('table.diff.inline').count(), 2);

    // Side by side: the old line left, the new right, coloured.
    await page.getByRole('link', { name: 'Side-by-side' }).click();
    await page.waitForURL(`${projectUrl}/-/commit/${changed}?view=parallel`);
    assert.equal(await page.locator('table.diff.parallel').count(), 2);
    const added = page.locator('table.diff.parallel td.add:not(.ln)').first();
    const background = await added.evaluate((el) => getComputedStyle(el).backgroundColor);
    assert.notEqual(background, 'rgba(0, 0, 0, 0)', 'added lines are coloured');
    assert.equal(await page.locator('table.diff.parallel .hljs-keyword').first().innerText(), 'export');
    if (SCREENSHOTS) {
      await page.screenshot({ path: path.join(SHOTS_DIR, 'commit.png') });
    }

    // The parent link, then compare through the form.
    await page.locator('dl.facts a.sha').first().click();
    await page.waitForURL(/\/-\/commit\/[0-9a-f]{40}$/);
    assert.match(await page.locator('dl.facts').innerText(), /none \(root commit\)/);
    await page.goto(`${projectUrl}/-/compare`);
    await page.fill('#compare-to', 'feature/charts');
    await page.fill('#compare-from', 'main');
    await Promise.all([page.waitForURL(`${projectUrl}/-/compare/main...feature/charts`), page.getByRole('button', { name: 'Compare' }).click()]);
    assert.deepEqual(await page.locator('ul.commits a.title').allInnerTexts(), ['Charts, first steps']);
    assert.equal(await page.locator('section.diff-file').count(), 1);
    assert.deepEqual(problems, [], 'no script errors or CSP violations');
    await context.close();
  });

  it('shows an outsider a 404 for a private project\'s commits', async () => {
    const outsider = await t.createUser();
    const context = await browser.newContext();
    const page = await context.newPage();
    await browserSignIn(page, baseUrl, outsider);
    for (const url of ['/weather/station/-/commits/main', `/weather/station/-/commit/${changed}`, '/weather/station/-/compare/main...feature/charts']) {
      const res = await page.goto(`${baseUrl}${url}`);
      assert.equal(res?.status(), 404, url);
      assert.match(await page.locator('h1').innerText(), /404/);
    }
    await context.close();
  });
});
