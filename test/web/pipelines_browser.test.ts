import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser } from 'playwright-core';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, latestPipeline, ProtocolRunner } from '../helpers/ci.js';
import { browserSignIn, launchChromium, listen, noChromium, watchProblems } from '../helpers/web.js';

const YAML = `
stages: [build, test, deploy]
compile: { stage: build, script: [make] }
unit: { stage: test, script: [make test] }
lint: { stage: test, script: [make lint] }
production: { stage: deploy, script: [make deploy], when: manual }
`;

const SCREENSHOTS = process.env.CAIRN_SCREENSHOTS === '1' ? path.resolve(import.meta.dirname, '../../docs/screenshots') : null;

describe('web in Chromium: a running job\'s log grows live', { skip: noChromium }, () => {
  let t: TestContext;
  let browser: Browser;
  let server: string;
  let alice: TestUser;
  let project: Project;

  before(async () => {
    t = await createTestContext({ runnerPollTimeout: 1 });
    alice = await t.createUser({ username: 'alice', name: 'Alice Liddell' });
    project = await t.createProject({ owner: alice.user, path: 'demo', name: 'demo' });
    await t.addMember(project, alice.user, 40);
    await commitFiles(t, project, { '.gitlab-ci.yml': YAML, 'Makefile': 'all:\n\techo ok\n' }, { message: 'Build, test and deploy with CI' });
    server = await listen(t);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await t?.close();
  });

  it('opens the pipeline, clicks through to the running job, sees the log grow and the status change when it finishes', async () => {
    const runner = await ProtocolRunner.register(t);
    const job = await runner.takeJob();
    assert.ok(job);
    await runner.append(job, '\x1b[0KRunning with gitlab-runner 17.5.0 (8ec04662)\x1b[0;m\n\x1b[0K\x1b[36;1mPreparing the "shell" executor\x1b[0;m\n');
    await runner.append(job, '\x1b[0Ksection_start:1700000000:get_sources\r\x1b[0K\x1b[0K\x1b[36;1mGetting source from Git repository\x1b[0;m\n\x1b[32;1mChecking out 1a2b3c4d as detached HEAD (ref is main)...\x1b[0;m\n\x1b[0Ksection_end:1700000001:get_sources\r\x1b[0K\n');

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const failures = watchProblems(page);
    await browserSignIn(page, server, alice);

    const pipeline = await latestPipeline(t, project.id);
    await page.goto(`${server}/alice/demo/-/pipelines`);
    await Promise.all([page.waitForURL(`**/-/pipelines/${pipeline.id}`), page.click(`a[href="/alice/demo/-/pipelines/${pipeline.id}"]`)]);
    assert.equal(await page.locator('.stage').count(), 3);
    if (SCREENSHOTS) {
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, 'pipeline.png') });
    }

    await Promise.all([page.waitForURL(`**/-/jobs/${job.id}`), page.click(`.stage a[href="/alice/demo/-/jobs/${job.id}"]`)]);
    const log = page.locator('pre.log');
    assert.match(await log.textContent() ?? '', /Checking out 1a2b3c4d/);
    assert.ok(!(await log.textContent())?.includes('section_start'), 'section markers are hidden');
    assert.equal(await page.locator('[data-job-status]').textContent(), 'running');

    // The runner appends while the page is open: the text appears without a reload.
    await runner.append(job, '\x1b[0Ksection_start:1700000002:step_script\r\x1b[0K\x1b[0K\x1b[36;1mExecuting "step_script" stage of the job script\x1b[0;m\n\x1b[32;1m$ make\x1b[0;m\necho ok\nok\n');
    await page.waitForFunction(() => document.querySelector('pre.log')?.textContent?.includes('$ make\necho ok\nok\n'), null, { timeout: 30_000 });
    await runner.append(job, '\x1b[0Ksection_end:1700000003:step_script\r\x1b[0K\x1b[32;1mJob succeeded\x1b[0;m\n');
    await page.waitForFunction(() => document.querySelector('pre.log')?.textContent?.endsWith('Job succeeded\n'), null, { timeout: 30_000 });
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'job.png') });

    await runner.finish(job, 'success');
    await page.waitForFunction(() => document.querySelector('[data-job-status]')?.textContent === 'passed', null, { timeout: 30_000 });
    assert.equal(await page.locator('[data-job-status]').getAttribute('class'), 'badge success');
    await page.waitForFunction(() => !document.querySelector('pre.log')?.hasAttribute('aria-busy'), null, { timeout: 30_000 });
    const text = (await log.textContent()) ?? '';
    assert.equal(text.split('Job succeeded').length, 2, 'nothing was repeated');
    assert.deepEqual(failures, []);
    await context.close();
  });
});
