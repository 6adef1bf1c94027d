// The image executor with the runner's own image store (images.ts: skopeo and umoci) against a
// local docker-registry, as `cairn runner run` and the built-in runner open it: a job and its
// service pulled, then found cached by the next job.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { detectExecutor } from '../../src/runner/executor.js';
import { openImageStore } from '../../src/runner/image_source.js';
import { jobOwner, Runner } from '../../src/runner/runner.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { buildImage, pushImage, registryToolsMissing, startRegistry } from '../helpers/oci.js';
import { FakeServer, makeRepo, tmpDir } from './fake_server.js';

const sandbox = detectSandbox();
const owner = jobOwner(sandbox);
const root = tmpDir('cairn-image-registry-');
// The job user reaches the job directories (each 0711, named at random) through it.
fs.chmodSync(root, 0o711);
const tools = registryToolsMissing();
const store = tools ? null : openImageStore({ dir: path.join(root, 'images'), owner });
const choice = store ? detectExecutor({ sandbox, images: store, workDir: path.join(root, 'builds') }) : null;
const skip = tools ?? (choice?.name !== 'image' ? `no image executor here: ${choice?.imageUnavailable}` : false);

after(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe('images from a registry, through the runner\'s own image store', { skip }, () => {
  test('a job and its service pulled from a local registry (skopeo, umoci), then cached', async () => {
    const registry = await startRegistry();
    const server = await new FakeServer().start();
    server.runnerRegistered = true;
    try {
      const base = buildImage({ env: ['PATH=/bin', 'FROM_REGISTRY=yes'] });
      const web = buildImage({ files: { 'var/www/index.html': 'served-from-registry-image\n' }, exposedPorts: [8080], cmd: ['httpd', '-f', '-p', '8080', '-h', '/var/www'] });
      pushImage(base, registry, 'cairn/base:1');
      pushImage(web, registry, 'cairn/web:1');
      const repo = makeRepo(path.join(root, 'registry-git'), { 'README.md': 'x\n' });
      const payload = (id: number) => ({
        id,
        token: `job-token-${id}-abcdefgh`,
        git_info: { repo_url: repo.url, ref: 'main', sha: repo.sha, ref_type: 'branch', refspecs: ['+refs/heads/main:refs/remotes/origin/main'], depth: 20 },
        runner_info: { timeout: 60 },
        variables: [{ key: 'CI_PROJECT_PATH', value: 'group/project' }],
        image: { name: `${registry.host}/cairn/base:1`, pull_policy: ['if-not-present'] },
        services: [{ name: `${registry.host}/cairn/web:1`, alias: 'web', pull_policy: ['if-not-present'] }],
        steps: [{ name: 'script', script: ['echo "from_registry=$FROM_REGISTRY"', 'wget -q -O - http://web:8080/'], timeout: 60, when: 'on_success', allow_failure: false }],
        features: { failure_reasons: ['script_failure', 'image_pull_failure'] },
      });
      const first = server.addJob(payload(5001));
      const second = server.addJob(payload(5002));
      const withStore = new Runner({
        url: server.url,
        token: server.runnerToken,
        buildsDir: path.join(root, 'registry-builds'),
        sandbox,
        images: store!.source,
        imagesDir: path.join(root, 'images'),
        checkIntervalMs: 50,
        executor: { traceIntervalMs: 100, allowFileUrls: true },
        log: () => {},
      });
      assert.equal(withStore.executorChoice.name, 'image', withStore.executorChoice.summary);
      void withStore.start();
      const [f1, f2] = [await first.final, await second.final];
      await withStore.stop();
      const log1 = first.trace.toString();
      const log2 = second.trace.toString();
      assert.equal(f1.state, 'success', log1);
      assert.equal(f2.state, 'success', log2);
      assert.match(log1, /^from_registry=yes$/m);
      assert.match(log1, /^served-from-registry-image$/m);
      assert.match(log1, /Pulling docker image/);
      assert.doesNotMatch(log2, /Pulling docker image/, 'the second job finds both images cached');
      assert.match(log2, /^served-from-registry-image$/m);
    } finally {
      await server.close();
      await registry.stop();
    }
  });
});
