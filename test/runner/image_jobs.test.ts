// Jobs in images (issue #27), through Cairn's built-in runner over HTTP, with a local stand-in
// for the image store (test/helpers/rootfs.ts: busybox root filesystems, no registry): the
// image's PATH and Env, GitLab's paths, root inside and the job user outside, nothing of the
// machine visible, the cached image never written, entrypoints, docker.user, services answering
// on their aliases and derived names in the job's network namespace, a service that never
// listens, artifacts, an image pull failure, a job without image beside them. Plus the runner's
// own wrappers never getting the job's variables in their environment (LD_DEBUG shows who loads
// what), and the shell executor ignoring image and services with a warning.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { registrationToken } from '../../src/ci/runners.js';
import type { Project } from '../../src/db/schema/core.js';
import { startJobListener } from '../../src/plugins/job_listener.js';
import { detectExecutor } from '../../src/runner/executor.js';
import { Runner, startBuiltinRunner, type BuiltinRunner } from '../../src/runner/runner.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';
import { BUSYBOX, BusyboxImages } from '../helpers/rootfs.js';
import { freePort } from '../helpers/serve.js';
import { FakeServer, makeRepo, tmpDir } from './fake_server.js';

const sandbox = detectSandbox();
const owner = sandbox.runAs ? { uid: sandbox.runAs.uid, gid: sandbox.runAs.gid } : { uid: 65534, gid: 65534 };
const root = tmpDir('cairn-image-jobs-');
// The job user reaches the job directories (each 0711, named at random) through it.
fs.chmodSync(root, 0o711);
const images = BUSYBOX
  ? new BusyboxImages(path.join(root, 'images'), owner, {
      'busybox:stable': { env: ['PATH=/usr/local/bin:/bin', 'GREETING=from-the-image'] },
      'with-entrypoint:1': {
        entrypoint: ['/usr/local/bin/entry.sh'],
        files: { 'usr/local/bin/entry.sh': { content: '#!/bin/sh\necho entrypoint-ran\nexport ENTRY_VAR=set-by-entrypoint\nexec "$@"\n', mode: 0o755 } },
      },
      // Port 80: a service may listen below 1024 in its job's namespace.
      'web-server:1': { exposedPorts: [80], cmd: ['sh', '-c', 'echo "$MSG from $CI_JOB_NAME" > /var/www/index.html && exec httpd -f -p 80 -h /var/www'] },
      'registry.example.com:5000/group/tutum/wordpress:latest': { exposedPorts: [8081], cmd: ['sh', '-c', 'echo wordpress-here > /var/www/index.html && exec httpd -f -p 8081 -h /var/www'] },
      'tcp-echo:15': { exposedPorts: [5432], cmd: ['nc', '-ll', '-p', '5432', '-e', '/bin/echo', 'pong'] },
      'never-listens:1': { exposedPorts: [6000], cmd: ['sh', '-c', 'echo never-listening-here; exec sleep 600'] },
    })
  : null;
const choice = images ? detectExecutor({ sandbox, images: { source: images }, workDir: path.join(root, 'builds') }) : null;
const skip = !BUSYBOX ? 'busybox-static is not installed' : choice?.name !== 'image' ? `no image executor here: ${choice?.imageUnavailable}` : false;

after(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe('jobs in images, with services', { skip }, () => {
  let t: TestContext;
  let project: Project;
  let builtin: BuiltinRunner | null = null;
  const buildsDir = path.join(root, 'builds');
  const messages: string[] = [];
  // A service of this machine's loopback (a database's stand-in) that jobs must not reach.
  let db: net.Server;
  let dbConnections = 0;

  before(async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url, runnerPollTimeout: 1 });
    await t.app.listen({ host: '127.0.0.1', port });
    const jobPort = (await startJobListener(t.app)).port;
    project = await t.createProject();
    db = net.createServer((c) => {
      dbConnections++;
      c.end('a database\n');
    });
    await new Promise<void>((r) => db.listen(0, '127.0.0.1', () => r()));
    builtin = await startBuiltinRunner({
      url,
      registrationToken: await registrationToken(t.app.cairn, { type: 'instance_type' }),
      dataDir: t.tmpDir,
      buildsDir,
      env: { CAIRN_BUILTIN_RUNNER_CONCURRENT: '2', CAIRN_RUNNER_WAIT_FOR_SERVICES_TIMEOUT: '3' },
      forwardPorts: [{ jobPort: port, hostPort: jobPort }],
      images,
      imagesDir: images!.dir,
      executor: { keepBuilds: true },
      log: (m) => (messages.push(m), process.env.TEST_LOG && console.log(m)),
    });
    assert.ok(builtin, messages.join('\n'));
  });

  after(async () => {
    await builtin?.stop();
    if (db) await new Promise((r) => db.close(r));
    if (process.env.TEST_LOG) console.log(messages.join('\n'));
    await t?.close();
  });

  const trace = async (jobId: number) => (await t.get(`/api/v4/projects/${project.id}/jobs/${jobId}/trace`)).text;
  const finished = async (jobId: number, ms = 60_000) => {
    const end = Date.now() + ms;
    for (;;) {
      const row = await t.db.selectFrom('ci_builds').select(['status', 'failure_reason']).where('id', '=', jobId).executeTakeFirstOrThrow();
      if (['success', 'failed', 'canceled', 'skipped'].includes(row.status)) return row;
      if (Date.now() > end) throw new Error(`job ${jobId} did not finish: ${row.status}\n${await trace(jobId)}\n${messages.join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  /** The job's directory the runner kept (keepBuilds). */
  const keptBuild = (jobId: number) => {
    const dir = fs.readdirSync(buildsDir).find((n) => n.startsWith(`job-${jobId}-`));
    assert.ok(dir, `the directory of job ${jobId} was kept`);
    return path.join(buildsDir, dir, 'build');
  };

  test('the script runs in the image: its PATH and Env, GitLab paths, root inside, the job user outside, nothing of the machine', async () => {
    const imagesDir = images!.dir;
    await commitFiles(t, project, {
      'README.md': 'cloned for the image\n',
      '.gitlab-ci.yml': [
        'stages: [one, two]',
        'inside:',
        '  stage: one',
        '  image: busybox:stable',
        '  variables:',
        `    DATA_DIR: "${t.tmpDir}"`,
        `    DB_PORT: "${(db.address() as net.AddressInfo).port}"`,
        '  script:',
        `    - 'wget -q -O - --header "JOB-TOKEN: $CI_JOB_TOKEN" "$CI_API_V4_URL/job" | grep -o ''"id":[0-9]*'' | head -1 | sed "s/^/api=/"'`,
        '    - (echo | nc -w 2 127.0.0.1 "$DB_PORT") 2>/dev/null | grep -q database && echo db=reachable || echo db=unreachable',
        '    - test -n "$(ls -A /run 2>/dev/null)" && echo run=visible || echo run=empty',
        '    - echo "path=$PATH greeting=$GREETING"',
        '    - echo "project_dir=$CI_PROJECT_DIR builds_dir=$CI_BUILDS_DIR image=$CI_JOB_IMAGE pwd=$(pwd)"',
        '    - echo "whoami=$(whoami) uid=$(id -u) readme=$(cat README.md)"',
        '    - test -e /etc/shadow && echo shadow=visible || echo shadow=absent',
        '    - test -e /work && echo work=visible || echo work=absent',
        '    - test -e "$DATA_DIR" && echo data=visible || echo data=absent',
        '    - (echo x > /proc/sys/kernel/hostname) 2>/dev/null && echo procsys=writable || echo procsys=readonly',
        '    - (mkdir -p /mnt && mount -t tmpfs x /mnt) 2>/dev/null && echo mount=yes || echo mount=no',
        '    - echo tampered > /etc/tamper && rm /bin/ls && echo image-modified',
        '    - echo made-inside > made.txt',
        '  artifacts:',
        '    paths: [made.txt]',
        'pullfail:',
        '  stage: one',
        '  allow_failure: true',
        '  image: does-not-exist:1',
        '  script: [echo never]',
        'plainshell:',
        '  stage: one',
        '  variables:',
        '    LD_DEBUG: files',
        '  script:',
        '    - echo "project_dir=$CI_PROJECT_DIR"',
        '    - /bin/true',
        `    - test -n "$(ls -A '${imagesDir}' 2>/dev/null)" && echo images=visible || echo images=hidden`,
        'clean:',
        '  stage: two',
        '  image: busybox:stable',
        '  script:',
        '    - test ! -e /etc/tamper && test -e /bin/ls && echo clean-image',
        '    - echo "artifact=$(cat made.txt)"',
        'entry:',
        '  stage: two',
        '  image: with-entrypoint:1',
        '  script: [\'echo "entry_var=${ENTRY_VAR:-unset}"\']',
        'noentry:',
        '  stage: two',
        '  image: { name: "with-entrypoint:1", entrypoint: [""] }',
        '  script: [\'echo "entry_var=${ENTRY_VAR:-unset}"\']',
        'asuser:',
        '  stage: two',
        '  image: { name: "busybox:stable", docker: { user: builder } }',
        '  script:',
        '    - echo "user=$(whoami) uid=$(id -u) home=$HOME"',
        '    - touch own.txt && ls -ln own.txt',
        '',
      ].join('\n'),
    });
    const jobs = await jobsByName(t, (await latestPipeline(t, project.id)).id);
    const inside = await finished(jobs.inside.id);
    const log = await trace(jobs.inside.id);
    if (process.env.TEST_LOG) console.log(log);
    assert.equal(inside.status, 'success', log + messages.join('\n'));
    assert.match(log, /Preparing the "image" executor/);
    assert.match(log, /^path=\/usr\/local\/bin:\/bin greeting=from-the-image$/m, "the image's PATH and Env");
    const paths = /^project_dir=(\S+) builds_dir=\/builds image=busybox:stable pwd=(\S+)$/m.exec(log);
    assert.ok(paths, 'CI_PROJECT_DIR, CI_BUILDS_DIR, CI_JOB_IMAGE');
    assert.match(paths[1], /^\/builds\/[\w.-]+\/[\w.-]+$/, "GitLab's /builds/<namespace>/<project>");
    assert.equal(paths[2], paths[1], 'the script starts in CI_PROJECT_DIR');
    assert.match(log, /^whoami=root uid=0 readme=cloned for the image$/m);
    assert.match(log, new RegExp(`^api="id":${jobs.inside.id}$`, 'm'), "Cairn's API with the job token, through CI_API_V4_URL");
    assert.match(log, /^db=unreachable$/m, "this machine's loopback");
    assert.equal(dbConnections, 0);
    assert.match(log, /^run=empty$/m);
    assert.match(log, /^shadow=absent$/m);
    assert.match(log, /^work=absent$/m);
    assert.match(log, /^data=absent$/m, "Cairn's data directory");
    assert.match(log, /^procsys=readonly$/m);
    assert.match(log, /^mount=no$/m);
    assert.match(log, /^image-modified$/m);
    // Outside, the file the job's root wrote is the job user's; the cached image is untouched.
    const made = path.join(keptBuild(jobs.inside.id), 'made.txt');
    assert.equal(fs.statSync(made).uid, owner.uid);
    const rootfs = (await images!.prepare('busybox:stable', { pullPolicy: null, variables: [] })).rootfs;
    assert.equal(fs.existsSync(path.join(rootfs, 'etc', 'tamper')), false, 'the cached image was not written');
    assert.equal(fs.lstatSync(path.join(rootfs, 'bin', 'ls')).isSymbolicLink(), true);
    const artifacts = await t.db.selectFrom('ci_job_artifacts').selectAll().where('job_id', '=', jobs.inside.id).execute();
    assert.ok(artifacts.some((a) => a.file_type === 'archive'), 'artifacts of an image job are uploaded');

    const pullfail = await finished(jobs.pullfail.id);
    assert.equal(pullfail.status, 'failed');
    assert.equal(pullfail.failure_reason, 'image_pull_failure');
    assert.match(await trace(jobs.pullfail.id), /ERROR: failed to pull image "does-not-exist:1": manifest unknown/);

    const plain = await finished(jobs.plainshell.id);
    const plainLog = await trace(jobs.plainshell.id);
    assert.equal(plain.status, 'success', plainLog);
    assert.match(plainLog, /Preparing the "shell" executor/);
    assert.match(plainLog, new RegExp(`^project_dir=${buildsDir}/job-${jobs.plainshell.id}-\\w+/build$`, 'm'), 'a job without image runs in the shell sandbox');
    assert.match(plainLog, /^images=hidden$/m, 'the image store is hidden from shell jobs');
    // The job's LD_DEBUG reached its own commands, not the runner's privileged wrappers.
    assert.match(plainLog, /needed by \/(usr\/)?bin\/true/);
    for (const wrapper of ['bwrap', 'nsenter', 'setpriv', 'prlimit', '/bin/sh', 'bash']) assert.doesNotMatch(plainLog, new RegExp(`needed by \\S*${wrapper.replace(/\//g, '\\/')}\\b`), wrapper);

    const clean = await finished(jobs.clean.id);
    const cleanLog = await trace(jobs.clean.id);
    assert.equal(clean.status, 'success', cleanLog);
    assert.match(cleanLog, /^clean-image$/m, 'another job gets the image as it was');
    assert.match(cleanLog, /^artifact=made-inside$/m, "the artifacts of an image job reach the next one");

    const entryRow = await finished(jobs.entry.id);
    const entry = await trace(jobs.entry.id);
    assert.equal(entryRow.status, 'success', entry);
    assert.match(entry, /^entrypoint-ran$/m, "the script runs through the image's entrypoint");
    assert.match(entry, /^entry_var=set-by-entrypoint$/m);
    const noentryRow = await finished(jobs.noentry.id);
    const noentry = await trace(jobs.noentry.id);
    assert.equal(noentryRow.status, 'success', noentry);
    assert.doesNotMatch(noentry, /entrypoint-ran/, 'entrypoint: [""] clears it');
    assert.match(noentry, /^entry_var=unset$/m);

    const asuserRow = await finished(jobs.asuser.id);
    const asuser = await trace(jobs.asuser.id);
    assert.equal(asuserRow.status, 'success', asuser);
    assert.match(asuser, /^user=builder uid=1000 home=\/home\/builder$/m);
    assert.match(asuser, /^-rw-r--r-- +1 1000 +1000 .*own\.txt$/m);
    assert.equal(fs.statSync(path.join(keptBuild(jobs.asuser.id), 'own.txt')).uid, owner.uid, "outside, the job user's");
  });

  test('services answer on their aliases and derived names; one that never listens is a warning', async () => {
    await commitFiles(t, project, {
      '.gitlab-ci.yml': [
        'svc:',
        '  image: busybox:stable',
        '  services:',
        '    - name: web-server:1',
        '      alias: web,www',
        '      variables: { MSG: hello-from-web }',
        '    - registry.example.com:5000/group/tutum/wordpress:latest',
        '    - name: tcp-echo:15',
        '      alias: db',
        '  script:',
        '    - wget -q -O - http://web/',
        '    - wget -q -O - http://www/ | sed "s/^/www=/"',
        '    - wget -q -O - http://registry.example.com__group__tutum__wordpress:8081/',
        '    - wget -q -O - http://registry.example.com-group-tutum-wordpress:8081/ | sed "s/^/dashed=/"',
        '    - echo | nc db 5432',
        '    - echo | nc tcp-echo 5432 | sed "s/^/derived=/"',
        'silent:',
        '  image: busybox:stable',
        '  services: [never-listens:1]',
        '  script: [echo after-the-wait]',
        '',
      ].join('\n'),
    });
    const pipeline = await latestPipeline(t, project.id);
    const jobs = await jobsByName(t, pipeline.id);
    assert.ok(jobs.svc, JSON.stringify(pipeline));
    const svc = await finished(jobs.svc.id);
    const log = await trace(jobs.svc.id);
    if (process.env.TEST_LOG) console.log(log);
    assert.equal(svc.status, 'success', log + messages.join('\n'));
    assert.match(log, /Starting service web-server:1/);
    assert.match(log, /Waiting for services to be up and running \(timeout 3 seconds\)/);
    assert.match(log, /^hello-from-web from svc$/m, "the service got its own variables and the job's");
    assert.match(log, /^www=hello-from-web from svc$/m);
    assert.match(log, /^wordpress-here$/m);
    assert.match(log, /^dashed=wordpress-here$/m);
    assert.match(log, /^pong$/m);
    assert.match(log, /^derived=pong$/m);
    assert.doesNotMatch(log, /probably didn't start properly/);

    const silent = await finished(jobs.silent.id);
    const silentLog = await trace(jobs.silent.id);
    assert.equal(silent.status, 'success', silentLog);
    assert.match(silentLog, /\*\*\* WARNING:.* Service never-listens:1 probably didn't start properly/);
    assert.match(silentLog, /no TCP connection to port 6000 within 3 seconds/);
    assert.match(silentLog, /Service container logs:\nnever-listening-here/, "the service's output is shown");
    assert.match(silentLog, /^after-the-wait$/m, 'the job goes on');
  });
});

describe('a runner without the image executor', { skip: sandbox.available ? false : `bubblewrap cannot run here: ${sandbox.reason}` }, () => {
  test("runs a job's script on its own filesystem and says that image and services are ignored", async () => {
    const server = await new FakeServer().start();
    server.runnerRegistered = true;
    try {
      const repo = makeRepo(path.join(root, 'shell-git'), { 'README.md': 'x\n' });
      const job = server.addJob({
        id: 4242,
        token: 'job-token-4242-abcdefgh',
        git_info: { repo_url: repo.url, ref: 'main', sha: repo.sha, ref_type: 'branch', refspecs: ['+refs/heads/main:refs/remotes/origin/main'], depth: 20 },
        runner_info: { timeout: 60 },
        variables: [],
        image: { name: 'alpine:3.20' },
        services: [{ name: 'postgres:15' }],
        steps: [{ name: 'script', script: ['test -d /usr/bin && echo on-the-host'], timeout: 60, when: 'on_success', allow_failure: false }],
      });
      const runner = new Runner({
        url: server.url,
        token: server.runnerToken,
        buildsDir: path.join(root, 'shell-builds'),
        sandbox,
        imagesUnavailable: 'skopeo is not installed (the test says so)',
        checkIntervalMs: 50,
        executor: { traceIntervalMs: 100, allowFileUrls: true },
        log: () => {},
      });
      assert.equal(runner.executorChoice.name, 'shell');
      assert.match(runner.executorChoice.summary, /executor: shell .*skopeo is not installed \(the test says so\)/);
      void runner.start();
      const final = await job.final;
      await runner.stop();
      const log = job.trace.toString();
      assert.equal(final.state, 'success', log);
      assert.match(log, /WARNING: this runner has no image executor \(skopeo is not installed \(the test says so\)\): the job's image alpine:3\.20 is ignored/);
      assert.match(log, /the job's services \(postgres:15\) are not started/);
      assert.match(log, /^on-the-host$/m);
    } finally {
      await server.close();
    }
  });
});

describe('an image job that times out', { skip }, () => {
  test('its step and its services are killed, nothing is left running, after_script still runs in the image', async () => {
    const server = await new FakeServer().start();
    server.runnerRegistered = true;
    const marker = String(3600 + (process.pid % 500));
    try {
      const repo = makeRepo(path.join(root, 'timeout-git'), { 'README.md': 'x\n' });
      const job = server.addJob({
        id: 4343,
        token: 'job-token-4343-abcdefgh',
        git_info: { repo_url: repo.url, ref: 'main', sha: repo.sha, ref_type: 'branch', refspecs: ['+refs/heads/main:refs/remotes/origin/main'], depth: 20 },
        runner_info: { timeout: 3 },
        variables: [],
        image: { name: 'busybox:stable' },
        services: [{ name: 'tcp-echo:15', alias: 'db', command: ['sh', '-c', `sleep ${marker} & exec nc -ll -p 5432 -e /bin/echo pong`] }],
        steps: [
          { name: 'script', script: ['echo started', `sleep ${marker}`], timeout: 3, when: 'on_success', allow_failure: false },
          { name: 'after_script', script: ['echo "after in the image: $(echo | nc db 5432)"'], timeout: 3, when: 'always', allow_failure: true },
        ],
        features: { failure_reasons: ['script_failure', 'job_execution_timeout'] },
      });
      const runner = new Runner({
        url: server.url,
        token: server.runnerToken,
        buildsDir: path.join(root, 'timeout-builds'),
        sandbox,
        images,
        imagesDir: images!.dir,
        checkIntervalMs: 50,
        // No cgroup: the runner itself must leave nothing behind.
        executor: { traceIntervalMs: 100, allowFileUrls: true, cgroups: null, waitForServicesTimeoutSec: 5 },
        log: () => {},
      });
      void runner.start();
      const final = await job.final;
      await runner.stop();
      const log = job.trace.toString();
      assert.equal(final.state, 'failed', log);
      assert.equal(final.failure_reason, 'job_execution_timeout');
      assert.match(log, /^started$/m);
      assert.match(log, /^after in the image: pong$/m, 'after_script ran in the image, its service still there');
      const cmdlines = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).flatMap((p) => {
        try {
          return [fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')];
        } catch {
          return [];
        }
      });
      assert.deepEqual(cmdlines.filter((c) => c.includes(marker)), [], 'no sleep of the step or of the service is left');
      assert.deepEqual(cmdlines.filter((c) => c.some((a) => a.startsWith('cairn-job-holder:job-4343-') || a.includes('timeout-builds'))), [], "neither the job's holder nor its pasta");
    } finally {
      await server.close();
    }
  });
});
