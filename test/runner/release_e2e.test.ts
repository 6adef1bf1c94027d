// The `release:` keyword end to end (issue #32): a Cairn server on loopback, a real `cairn runner`
// process, a tag created through the API. The jobs' environment has neither glab nor
// release-cli, so the runner creates the releases itself (src/runner/release.ts) with the job
// token: variables expanded, asset links, a description read from a file in the project
// directory (never through a link), the tag made from the pipeline's commit when missing; the
// job fails when the API refuses (the release exists). A job that brings its own release-cli
// runs the step's script instead.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { registrationToken } from '../../src/ci/runners.js';
import type { Project } from '../../src/db/schema/core.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';
import { freePort } from '../helpers/serve.js';
import { until } from '../helpers/until.js';

const sandbox = detectSandbox();

function cli(args: string[], env: Record<string, string>): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/cairn.mjs', 'runner', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    child.on('close', (status) => resolve({ status, out }));
  });
}

const CONFIG = [
  'workflow:',
  '  rules: [{ if: $CI_COMMIT_TAG }]',
  'publish:',
  '  script: [echo "building $CI_COMMIT_TAG"]',
  '  release:',
  '    tag_name: $CI_COMMIT_TAG',
  "    description: 'Release $CI_COMMIT_TAG'",
  '    assets:',
  '      links:',
  '        - name: binary $CI_COMMIT_TAG',
  '          url: https://example.com/downloads/$CI_COMMIT_TAG/tool',
  '          link_type: package',
  'notes:',
  `  script: [${JSON.stringify('printf "Notes for %s\\n\\n* one\\n" "$CI_COMMIT_TAG" > NOTES.md')}]`,
  '  release:',
  '    tag_name: notes-$CI_COMMIT_TAG',
  '    name: Notes $CI_COMMIT_TAG',
  '    description: ./NOTES.md',
  '    milestones: []',
  'linked:',
  '  script: [ln -s /etc/hostname LINKED.md]',
  '  release:',
  '    tag_name: linked-$CI_COMMIT_TAG',
  '    description: LINKED.md',
  'own-cli:',
  '  variables:',
  '    PATH: "tools:/usr/local/bin:/usr/bin:/bin"',
  '  script:',
  '    - mkdir tools',
  `    - ${JSON.stringify(`printf '#!/bin/sh\\necho "own release-cli: $*"\\n' > tools/release-cli`)}`,
  '    - chmod +x tools/release-cli',
  '  release:',
  '    tag_name: own-$CI_COMMIT_TAG',
  '    description: mine',
  '',
].join('\n');

describe('release: keyword with cairn runner', () => {
  let t: TestContext;
  let url: string;
  let runner: ChildProcess | null = null;
  let runnerLog = '';
  let project: Project;

  before(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url });
    await t.app.listen({ host: '127.0.0.1', port });
    project = await t.createProject();
    const config = path.join(t.tmpDir, 'runner-config', 'config.json');
    const env = { CAIRN_DATA_DIR: t.tmpDir, CAIRN_RUNNER_ALLOW_UNISOLATED: sandbox.available ? '' : '1' };
    const reg = await cli(['register', '--url', url, '--token', await registrationToken(t.app.cairn, { type: 'instance_type' }), '--description', 'release-e2e', '--config', config], env);
    assert.equal(reg.status, 0, reg.out);
    runner = spawn(process.execPath, ['bin/cairn.mjs', 'runner', 'run', '--config', config, '--concurrent', '2'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    runner.stdout!.on('data', (b) => (runnerLog += b));
    runner.stderr!.on('data', (b) => (runnerLog += b));
  });

  after(async () => {
    if (runner && runner.exitCode === null) {
      runner.kill('SIGTERM');
      await new Promise((r) => runner!.once('exit', r));
    }
    if (process.env.TEST_LOG) console.log(runnerLog);
    await t?.close();
  });

  const trace = async (jobId: number) => (await t.get(`/api/v4/projects/${project.id}/jobs/${jobId}/trace`)).text as string;
  const finished = (id: number) =>
    until(`job ${id} to finish`, async () => {
      const j = await t.db.selectFrom('ci_builds').select(['status', 'failure_reason']).where('id', '=', id).executeTakeFirstOrThrow();
      return ['success', 'failed', 'canceled'].includes(j.status) ? j : null;
    }, 120_000);

  test('a tag pipeline creates its releases; a second run fails because the release exists', async () => {
    const sha = await commitFiles(t, project, { 'README.md': 'hi\n', '.gitlab-ci.yml': CONFIG });
    const tag = await t.post(`/api/v4/projects/${project.id}/repository/tags`, { tag_name: 'v1.2.0', ref: 'main' });
    assert.equal(tag.status, 201, JSON.stringify(tag.body));
    const pipeline = await latestPipeline(t, project.id);
    assert.equal(pipeline.ref, 'v1.2.0');
    await until('the pipeline to finish', async () => {
      const p = await t.db.selectFrom('ci_pipelines').select('status').where('id', '=', pipeline.id).executeTakeFirstOrThrow();
      return ['success', 'failed', 'canceled'].includes(p.status) ? p : null;
    }, 180_000);
    const jobs = await jobsByName(t, pipeline.id);
    const logs: Record<string, string> = {};
    for (const name of ['publish', 'notes', 'linked', 'own-cli']) logs[name] = await trace(jobs[name].id);
    for (const name of ['publish', 'notes', 'linked', 'own-cli']) assert.equal(jobs[name].status, 'success', `${name}: ${logs[name]}\n${runnerLog}`);

    // publish: variables expanded, the link made, logged as release-cli does.
    assert.match(logs.publish, /Executing "release" stage of the job script/);
    assert.match(logs.publish, /neither glab nor release-cli is in the job environment/);
    assert.match(logs.publish, /level=info msg="Creating Release\.\.\." cli=release-cli command=create/);
    assert.match(logs.publish, /level=info msg="Release created successfully!" cli=release-cli command=create tag-name=v1\.2\.0/);
    const rel = await t.get(`/api/v4/projects/${project.id}/releases/v1.2.0`);
    assert.equal(rel.status, 200, JSON.stringify(rel.body));
    assert.equal(rel.body.description, 'Release v1.2.0');
    assert.equal(rel.body.name, 'v1.2.0');
    assert.equal(rel.body.commit.id, sha);
    assert.equal(rel.body.author.username, 'root');
    assert.deepEqual(rel.body.assets.links.map((l: { name: string; url: string; link_type: string }) => [l.name, l.url, l.link_type]), [
      ['binary v1.2.0', 'https://example.com/downloads/v1.2.0/tool', 'package'],
    ]);

    // notes: the description read from the file the job wrote; the new tag made at the job's commit.
    const notes = await t.get(`/api/v4/projects/${project.id}/releases/notes-v1.2.0`);
    assert.equal(notes.status, 200, JSON.stringify(notes.body) + logs.notes);
    assert.equal(notes.body.description, 'Notes for v1.2.0\n\n* one\n');
    assert.equal(notes.body.name, 'Notes v1.2.0');
    assert.equal(notes.body.commit.id, sha);
    const newTag = await t.get(`/api/v4/projects/${project.id}/repository/tags/notes-v1.2.0`);
    assert.equal(newTag.body.commit.id, sha);

    // linked: a link is never followed out of the project directory; the value stays text.
    const linked = await t.get(`/api/v4/projects/${project.id}/releases/linked-v1.2.0`);
    assert.equal(linked.status, 200, logs.linked);
    assert.equal(linked.body.description, 'LINKED.md');

    // own-cli: the job's environment has release-cli: the step's script runs it.
    assert.match(logs['own-cli'], /own release-cli: create --description mine --tag-name own-v1\.2\.0/);
    assert.ok(!logs['own-cli'].includes('the runner creates the release itself'));
    assert.equal((await t.get(`/api/v4/projects/${project.id}/releases/own-v1.2.0`)).status, 404);

    // Run publish again: the release exists, the API answers 409, the job fails.
    const retry = await t.post(`/api/v4/projects/${project.id}/jobs/${jobs.publish.id}/retry`);
    assert.equal(retry.status, 201, JSON.stringify(retry.body));
    const again = await finished(retry.body.id);
    const log = await trace(retry.body.id);
    assert.equal(again.status, 'failed', log);
    assert.equal(again.failure_reason, 'script_failure');
    assert.match(log, /level=fatal msg="run app" cli=release-cli command=create error="failed to create release: API Error Response status_code: 409 message: Release already exists"/);
  });
});
