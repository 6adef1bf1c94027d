// The two reported artifact exploits as real CI jobs, run by the built-in runner against a
// listening Cairn server:
// - root write: a job uploads (with its CI_JOB_TOKEN, POST /jobs/:id/artifacts) a zip holding
//   `y -> z/../..`, `z -> ../..` and `y/<host dir>/PROOF.txt`; the next stage's runner extracted
//   it through the links, as root, onto the host;
// - root read: a job makes the same links and declares `y/<host file>` paths (with decoys where
//   the links read as text lead, so a text-resolving check is satisfied); the runner uploaded
//   the host's files as its artifacts.
// The host files are in a test directory outside the data and builds directories.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { registrationToken } from '../../src/ci/runners.js';
import { startWorker } from '../../src/jobs/queue.js';
import { startBuiltinRunner, type BuiltinRunner } from '../../src/runner/runner.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';
import { jobsByName, latestPipeline } from '../helpers/ci.js';
import { freePort } from '../helpers/serve.js';
import { until } from '../helpers/until.js';

const sandbox = detectSandbox();
/** Nine levels: `z` leads back to the build directory, `y` reads as staying inside but reaches /. */
const DEEP = 'deep/a/b/c/d/e/f/g/h';
const Z = '../'.repeat(9);
const Y = `z${'/..'.repeat(9)}`;

function zipEntries(buf: Buffer): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    const out = new Map<string, Buffer>();
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      zip!.on('entry', (e: yauzl.Entry) =>
        zip!.openReadStream(e, (err2, s) => {
          if (err2) return reject(err2);
          const chunks: Buffer[] = [];
          s!.on('data', (c: Buffer) => chunks.push(c));
          s!.on('end', () => {
            out.set(e.fileName, Buffer.concat(chunks));
            zip!.readEntry();
          });
        }),
      );
      zip!.on('end', () => resolve(out));
      zip!.on('error', reject);
      zip!.readEntry();
    });
  });
}

describe('artifacts cannot reach the host through job-made links (built-in runner, end to end)', () => {
  let t: TestContext;
  let url: string;
  let runner: BuiltinRunner | null = null;
  let stopWorker: (() => Promise<void>) | null = null;
  let hostDir: string;
  let buildsDir: string;
  const log: string[] = [];

  before(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url });
    await t.app.listen({ host: '127.0.0.1', port });
    stopWorker = startWorker(t.app.cairn, { idleMs: 100 });
    hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-host-'));
    fs.chmodSync(hostDir, 0o755);
    buildsDir = path.join(t.tmpDir, 'builds');
    runner = await startBuiltinRunner({
      url,
      registrationToken: await registrationToken(t.app.cairn, { type: 'instance_type' }),
      dataDir: t.tmpDir,
      buildsDir,
      concurrent: 2,
      allowUnisolated: !sandbox.available,
      log: (m) => log.push(m),
      executor: { allowFileUrls: true },
    });
    assert.ok(runner, log.join('\n'));
  });

  after(async () => {
    await runner?.stop();
    await stopWorker?.();
    await t?.close();
    if (hostDir) fs.rmSync(hostDir, { recursive: true, force: true });
  });

  const trace = async (projectId: number, jobId: number) => (await t.get(`/api/v4/projects/${projectId}/jobs/${jobId}/trace`)).text;

  test('a dependency zip with y -> z/../.., z -> ../.., y/<host dir>/PROOF.txt writes nothing outside the job', async () => {
    const project = await t.createProject();
    const marker = path.join(hostDir, `PROOF-${crypto.randomBytes(4).toString('hex')}.txt`);
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.from(Y), `${DEEP}/y`, { mode: 0o120777 });
    zip.addBuffer(Buffer.from(Z), `${DEEP}/z`, { mode: 0o120777 });
    zip.addBuffer(Buffer.from('written by a job\n'), `${DEEP}/y/${marker.slice(1)}`);
    zip.addBuffer(Buffer.from('fine\n'), 'ok.txt');
    zip.end();
    const chunks: Buffer[] = [];
    for await (const c of zip.outputStream) chunks.push(c as Buffer);
    const evil = Buffer.concat(chunks);

    const res = await t.post(`/api/v4/projects/${project.id}/repository/commits`, {
      branch: 'main',
      commit_message: 'ci',
      actions: [
        {
          action: 'create',
          file_path: '.gitlab-ci.yml',
          content: [
            'stages: [one, two]',
            'plant:',
            '  stage: one',
            '  script:',
            // The token for the upload the test makes in the job's name (as a job would with curl).
            '    - printf %s "$CI_JOB_TOKEN" > token.txt',
            '    - for i in $(seq 1 600); do [ -e uploaded ] && break; sleep 0.1; done',
            'use:',
            '  stage: two',
            '  dependencies: [plant]',
            '  script:',
            '    - cat ok.txt',
            `    - ls -la ${DEEP}`,
            '',
          ].join('\n'),
        },
      ],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const pipeline = await latestPipeline(t, project.id);
    const jobs = await jobsByName(t, pipeline.id);

    const build = await until('the plant job to run', () => {
      if (!fs.existsSync(buildsDir)) return null;
      const dir = fs.readdirSync(buildsDir).find((d) => d.startsWith(`job-${jobs.plant.id}-`));
      const b = dir && path.join(buildsDir, dir, 'build');
      return b && fs.existsSync(path.join(b, 'token.txt')) ? b : null;
    });
    const form = new FormData();
    form.append('file', new Blob([evil]), 'artifacts.zip');
    const up = await fetch(`${url}/api/v4/jobs/${jobs.plant.id}/artifacts?artifact_type=archive&artifact_format=zip`, {
      method: 'POST',
      headers: { 'JOB-TOKEN': fs.readFileSync(path.join(build, 'token.txt'), 'utf8') },
      body: form,
    });
    assert.equal(up.status, 201, await up.text());
    fs.writeFileSync(path.join(build, 'uploaded'), '');

    await until('the pipeline to finish', async () => {
      const p = await t.db.selectFrom('ci_pipelines').select('status').where('id', '=', pipeline.id).executeTakeFirstOrThrow();
      return ['success', 'failed', 'canceled'].includes(p.status) ? p : null;
    });
    const use = (await jobsByName(t, pipeline.id)).use;
    const useLog = await trace(project.id, use.id);
    assert.ok(!fs.existsSync(marker), `the host file was written:\n${useLog}`);
    assert.deepEqual(fs.readdirSync(hostDir), []);
    assert.equal(use.status, 'success', useLog + log.join('\n'));
    assert.match(useLog, /^fine$/m);
    assert.match(useLog, new RegExp(`${DEEP}/y/${marker.slice(1).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ${DEEP}/y is a symlink: entry not extracted through it`));
  });

  test('declared paths y/<host file> through y -> z/../.., z -> ../.. upload nothing from outside the job', async () => {
    const project = await t.createProject();
    const secret = `HOST-SECRET-${crypto.randomBytes(8).toString('hex')}`;
    const hostFile = path.join(hostDir, 'host-secret.txt');
    fs.writeFileSync(hostFile, secret, { mode: 0o600 });
    const keyFile = path.join(t.tmpDir, 'secret_key_base');
    const runnerFile = path.join(t.tmpDir, 'runner', 'builtin.json');
    assert.ok(fs.existsSync(runnerFile));
    const targets = [hostFile, keyFile, runnerFile, '/etc/shadow'].map((p) => p.slice(1));
    const res = await t.post(`/api/v4/projects/${project.id}/repository/commits`, {
      branch: 'main',
      commit_message: 'ci',
      actions: [
        {
          action: 'create',
          file_path: '.gitlab-ci.yml',
          content: [
            'leak:',
            '  script:',
            `    - mkdir -p ${DEEP} && ln -s ${Z} ${DEEP}/z && ln -s ${Y} ${DEEP}/y`,
            // Decoys where the links lead when read as text (deep/), so such a check is satisfied.
            ...targets.map((p) => `    - mkdir -p deep/${path.posix.dirname(p)} && echo decoy > deep/${p}`),
            '    - echo mine > mine.txt',
            '  artifacts:',
            `    paths: [${[...targets.map((p) => `${DEEP}/y/${p}`), 'mine.txt'].join(', ')}]`,
            '',
          ].join('\n'),
        },
      ],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const pipeline = await latestPipeline(t, project.id);
    const job = await until('the job to finish', async () => {
      const j = (await jobsByName(t, pipeline.id)).leak;
      return ['success', 'failed', 'canceled'].includes(j.status) ? j : null;
    });
    const leakLog = await trace(project.id, job.id);
    assert.equal(job.status, 'success', leakLog + log.join('\n'));
    const dl = await fetch(`${url}/api/v4/projects/${project.id}/jobs/${job.id}/artifacts`, { headers: { 'PRIVATE-TOKEN': ROOT_TOKEN } });
    assert.equal(dl.status, 200);
    const entries = await zipEntries(Buffer.from(await dl.arrayBuffer()));
    const forbidden = [secret, fs.existsSync(keyFile) ? fs.readFileSync(keyFile, 'utf8') : null, fs.readFileSync(runnerFile, 'utf8')].filter((s): s is string => !!s);
    for (const [name, data] of entries) for (const s of forbidden) assert.ok(!data.toString().includes(s), `${name} holds a host file`);
    assert.deepEqual([...entries.keys()], ['mine.txt'], 'only the job\'s own file is uploaded');
    assert.match(leakLog, new RegExp(`${DEEP}/y/etc/shadow: ${DEEP}/y is a symlink, skipped`));
  });
});
