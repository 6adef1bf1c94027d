import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { browserSignIn, launchChromium, listen, noChromium } from '../helpers/web.js';

/**
 * The walk through a merge request in a real Chromium: sign in, open the project, open
 * the merge request from the list, comment on a line of its changes, see the comment, merge it
 * and see it merged. With CAIRN_SCREENSHOTS=1 it saves docs/screenshots/merge_request.png (the
 * overview) and merge_request_diff.png (the changes side by side, a thread on a line).
 */
const SCREENSHOTS = process.env.CAIRN_SCREENSHOTS === '1';
const SHOTS_DIR = path.join(process.cwd(), 'docs', 'screenshots');

describe('web in Chromium: a merge request from the list to merged', { skip: noChromium }, () => {
  let t: TestContext;
  let alice: TestUser;
  let project: Project;
  let baseUrl: string;
  let browser: Browser;

  before(async () => {
    t = await createTestContext();
    alice = await t.createUser({ username: 'alice', name: 'Alice Liddell' });
    const bob = await t.createUser({ username: 'bob', name: 'Bob Builder' });
    const group = await t.createGroup({ path: 'acme', name: 'Acme', owner: alice.user });
    project = await t.createProject({ group, path: 'rocket', name: 'rocket' });
    await t.addMember(project, bob.user, 30);
    const api = `/api/v4/projects/${project.id}`;
    const commit = async (branch: string, message: string, actions: { action: string; file_path: string; content: string }[], extra: Record<string, unknown> = {}) => {
      const res = await t.post(`${api}/repository/commits`, { branch, commit_message: message, actions, ...extra });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    };
    await commit('main', 'Initial commit', [
      { action: 'create', file_path: 'README.md', content: '# Rocket\n\nA small launcher.\n' },
      { action: 'create', file_path: 'src/engine.ts', content: 'export function thrust(fuel: number): number {\n  return fuel * 2;\n}\n\nexport const STAGES = 2;\n' },
      { action: 'create', file_path: 'src/launch.ts', content: "import { thrust } from './engine';\n\nexport function launch() {\n  return thrust(10);\n}\n" },
    ]);
    await commit('boosters', 'Add a third stage and a countdown', [
      { action: 'update', file_path: 'src/engine.ts', content: 'export function thrust(fuel: number, boost = 1): number {\n  // Boosters multiply the thrust.\n  return fuel * 2 * boost;\n}\n\nexport const STAGES = 3;\n' },
      { action: 'update', file_path: 'src/launch.ts', content: "import { thrust } from './engine';\n\nexport async function launch(countdown = 3) {\n  for (let i = countdown; i > 0; i--) console.log(i);\n  return thrust(10, 1.5);\n}\n" },
    ], { start_branch: 'main' });
    const mr = await t.post(`${api}/merge_requests`, {
      source_branch: 'boosters', target_branch: 'main', title: 'Boosters: a third stage and a countdown',
      description: 'Adds a **third stage** and a countdown before launch.\n\n- [x] engine\n- [x] launch\n- [ ] docs', assignee_ids: [alice.user.id],
    }, { token: bob.token });
    assert.equal(mr.status, 201, JSON.stringify(mr.body));
    baseUrl = await listen(t);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('signs in, opens the merge request, comments on a diff line, sees the comment, merges it', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const errors: string[] = [];
    // Console errors (a CSP refusal would be one), and failed loads of the pages' style sheet and script.
    page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(m.text()); });
    page.on('response', (r) => { if (r.status() >= 400 && r.request().resourceType() !== 'document' && !r.url().endsWith('/favicon.ico')) errors.push(`${r.status()} ${r.url()}`); });
    await browserSignIn(page, baseUrl, alice);

    // The project, then its merge requests, then the merge request.
    await page.goto(`${baseUrl}/acme/rocket`);
    await page.locator('nav.side').getByRole('link', { name: 'Merge requests' }).click();
    await page.waitForURL(/\/-\/merge_requests$/);
    await page.getByRole('link', { name: 'Boosters: a third stage and a countdown' }).click();
    await page.waitForURL(/\/-\/merge_requests\/1$/);
    assert.match(await page.locator('h1').innerText(), /Boosters/);

    // Changes, side by side; the comment link of a line opens the form under it.
    await page.locator('nav.tabs').getByRole('link', { name: /Changes/ }).click();
    await page.waitForURL(/\/diffs$/);
    await page.getByRole('link', { name: 'Side-by-side' }).click();
    await page.waitForURL(/view=parallel/);
    const row = page.locator('tr', { hasText: 'Boosters multiply the thrust' });
    await row.hover();
    await row.getByRole('link', { name: /Comment on line/ }).last().click();
    await page.waitForURL(/line_code=/);
    const box = page.locator('.diff-note-form textarea');
    await box.fill('Should the boost be capped? A boost of **10** would tear the rocket apart.');
    await Promise.all([page.waitForURL(/\/diffs#note_\d+$/), page.getByRole('button', { name: 'Start a thread' }).click()]);
    // Back on the changes, in the view chosen before, with the thread under its line.
    const thread = page.locator('tr.notes .discussion');
    await thread.waitFor();
    assert.match(await thread.innerText(), /Should the boost be capped\?/);
    assert.equal(await page.locator('table.diff.parallel').count() > 0, true, 'the side-by-side view is remembered');
    if (SCREENSHOTS) {
      fs.mkdirSync(SHOTS_DIR, { recursive: true });
      await thread.scrollIntoViewIfNeeded();
      await page.locator('section.diff-file').first().evaluate((el) => el.scrollIntoView());
      await page.screenshot({ path: path.join(SHOTS_DIR, 'merge_request_diff.png') });
    }

    // The overview lists the thread; merge.
    await page.locator('nav.tabs').getByRole('link', { name: /Overview/ }).click();
    await page.waitForURL(/\/-\/merge_requests\/1$/);
    assert.match(await page.locator('.discussions').innerText(), /Should the boost be capped\?/);
    const merge = page.getByRole('button', { name: 'Merge', exact: true });
    await merge.waitFor();
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SHOTS_DIR, 'merge_request.png') });
    await page.getByLabel('Delete source branch').check();
    await Promise.all([page.waitForURL(/\/-\/merge_requests\/1$/), merge.click()]);
    assert.match(await page.locator('.merge-widget').innerText(), /Merged\s+by Alice Liddell/);
    assert.match(await page.locator('.mr-head').innerText(), /Merged/);
    assert.deepEqual(errors, [], 'no console errors (the CSP refuses nothing)');

    const state = await t.get(`/api/v4/projects/${project.id}/merge_requests/1`);
    assert.equal(state.body.state, 'merged');
    assert.equal((await t.get(`/api/v4/projects/${project.id}/repository/branches/boosters`)).status, 404);
    await context.close();
  });
});
