import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { browserSignIn, launchChromium, listen, noChromium } from '../helpers/web.js';

const SCREENSHOTS = process.env.CAIRN_SCREENSHOTS === '1';
const SHOTS_DIR = path.resolve(import.meta.dirname, '../../docs/screenshots');

describe('web: issues in Chromium', { skip: noChromium }, () => {
  let t: TestContext;
  let alice: TestUser;
  let bob: TestUser;
  let browser: Browser;
  let baseUrl: string;
  let projectId: number;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ username: 'alice', name: 'Alice Liddell' });
    bob = await t.createUser({ username: 'bob', name: 'Bob Builder' });
    const group = await t.createGroup({ path: 'weather', name: 'Weather', visibility: 20, owner: alice.user });
    const project = await t.createProject({ group, path: 'station', name: 'Station', visibility: 20 });
    projectId = project.id;
    await t.addMember(project, bob.user, 30);
    baseUrl = await listen(t);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await t.close();
  });

  it('signs in, opens the project\'s issues, creates an issue, comments on it and sees the comment', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const refused: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
    });
    await browserSignIn(page, baseUrl, alice);
    await page.goto(`${baseUrl}/weather/station`);
    await Promise.all([page.waitForNavigation(), page.click('nav.side a:has-text("Issues")')]);
    assert.equal(new URL(page.url()).pathname, '/weather/station/-/issues');
    assert.match(await page.textContent('main') ?? '', /There are no issues in this project yet/);

    await Promise.all([page.waitForNavigation(), page.click('a:has-text("New issue")')]);
    await page.fill('#issue_title', 'Readings stop after midnight');
    await page.fill('#issue_description', [
      'The north station stops sending readings at **00:00 UTC**.',
      '',
      '### Steps to reproduce',
      '',
      '1. Start the collector',
      '2. Wait until midnight',
      '3. `GET /readings?station=north` answers `[]`',
      '',
      '- [x] Checked the sensor',
      '- [ ] Checked the clock drift',
    ].join('\n'));
    await Promise.all([page.waitForNavigation(), page.click('button:has-text("Create issue")')]);
    assert.match(new URL(page.url()).pathname, /^\/weather\/station\/-\/issues\/1$/);
    assert.equal(await page.textContent('h1.issue-title'), 'Readings stop after midnight');
    assert.equal(await page.textContent('.description strong'), '00:00 UTC');

    // Some life on the issue for the page to show: labels, a milestone, an assignee, bob's comment.
    const milestone = await t.post(`/api/v4/projects/${projectId}/milestones`, { title: 'v1.2', due_date: '2030-01-31' }, { token: alice.token });
    await t.put(`/api/v4/projects/${projectId}/issues/1`, { labels: 'bug,sensors', milestone_id: milestone.body.id, assignee_ids: [bob.user.id] }, { token: alice.token });
    await t.post(`/api/v4/projects/${projectId}/issues/1/notes`, { body: 'I can reproduce it: the clock of the collector jumps at midnight.' }, { token: bob.token });
    await page.reload();

    await page.fill('#note-body', 'Thanks @bob, a fix is on its way in `collector.ts`.');
    await Promise.all([page.waitForNavigation(), page.click('.comment-form button:has-text("Comment")')]);
    assert.match(page.url(), /#note_\d+$/);
    const notes = await page.locator('.discussions .note .note-body').allTextContents();
    assert.deepEqual(notes.map((n) => n.trim()), [
      'I can reproduce it: the clock of the collector jumps at midnight.',
      'Thanks @bob, a fix is on its way in collector.ts.',
    ]);
    assert.equal(await page.textContent('[data-issue-state]'), 'Open');
    assert.deepEqual(refused, [], 'no CSP violation');

    // Reply in bob's thread, without script (the reply form sits in a <details>).
    await page.click('.discussion >> nth=0 >> summary:has-text("Reply")');
    await page.fill('.discussion >> nth=0 >> textarea[name=note]', 'Confirmed on the south station too.');
    await Promise.all([page.waitForNavigation(), page.click('.discussion >> nth=0 >> button:has-text("Reply")')]);
    const thread = await page.locator('.discussion >> nth=0 >> .note-body').allTextContents();
    assert.equal(thread.length, 2);
    assert.equal(thread[1].trim(), 'Confirmed on the south station too.');

    if (SCREENSHOTS) {
      fs.mkdirSync(SHOTS_DIR, { recursive: true });
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.screenshot({ path: path.join(SHOTS_DIR, 'issue.png') });
    }

    // Close it from the page.
    await Promise.all([page.waitForNavigation(), page.click('button:has-text("Close issue")')]);
    if (!page.url().endsWith('/issues/1')) await page.goto(`${baseUrl}/weather/station/-/issues/1`);
    assert.equal(await page.textContent('[data-issue-state]'), 'Closed');
    if (SCREENSHOTS) {
      for (const [who, title, labels] of [
        [bob, 'Show the wind direction on the station page', 'feature'],
        [alice, 'Document the sensor calibration', 'docs'],
        [bob, 'Readings API answers 500 on a bad station name', 'bug'],
      ] as const) {
        await t.post(`/api/v4/projects/${projectId}/issues`, { title, labels }, { token: who.token });
      }
      await page.goto(`${baseUrl}/weather/station/-/issues?state=all`);
      await page.screenshot({ path: path.join(SHOTS_DIR, 'issues.png') });
    }
    await page.close();
  });
});
