// .gitlab-ci.yml keywords whose meaning shows when the pipeline runs (issue #28): artifacts a
// job receives (needs, dependencies, needs:pipeline), child pipelines with inputs.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dependencyJobs } from '../../src/ci/protocol/payload.js';
import type { CompiledJob } from '../../src/ci/config/index.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, pipeline, runJob, statuses, testRunner } from '../helpers/ci.js';

describe('CI pipeline semantics', () => {
  let t: TestContext;

  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t?.close();
  });

  async function pipelineFor(yaml: string, files: Record<string, string> = {}) {
    const p = await t.createProject();
    await commitFiles(t, p, { '.gitlab-ci.yml': yaml, ...files });
    return latestPipeline(t, p.id);
  }

  const depNames = async (pipelineId: number, name: string) => (await dependencyJobs(t.db, (await jobsByName(t, pipelineId))[name])).map((b) => b.name);

  it('a job made manual by rules blocks the later stages; a job-level manual job does not', async () => {
    const p = await pipelineFor(`
stages: [build, deploy]
gate: { stage: build, script: [g], rules: [{ when: manual }] }
later: { stage: deploy, script: [d] }
`);
    assert.deepEqual(await statuses(t, p.id), { gate: 'manual', later: 'created' });
    assert.equal((await pipeline(t, p.id)).status, 'manual');
    const q = await pipelineFor(`
stages: [build, deploy]
gate: { stage: build, script: [g], when: manual }
later: { stage: deploy, script: [d] }
`);
    assert.deepEqual(await statuses(t, q.id), { gate: 'manual', later: 'pending' });
  });

  it('gives a job the artifacts of its needs, narrowed by dependencies; needs: [] gives none', async () => {
    const p = await pipelineFor(`
build: { stage: build, script: [b] }
lint: { stage: build, script: [l] }
all: { stage: test, script: [t] }
only_lint: { stage: test, script: [t], dependencies: [lint] }
dag: { stage: test, script: [t], needs: [build, { job: lint, artifacts: false }] }
dag_narrowed: { stage: test, script: [t], needs: [build, lint], dependencies: [lint] }
dag_no_artifacts: { stage: test, script: [t], needs: [{ job: build, artifacts: false }], dependencies: [build] }
none: { stage: test, script: [t], needs: [], dependencies: [build] }
`);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    await runJob(t, jobs.lint, 'success');
    assert.deepEqual(await depNames(p.id, 'all'), ['build', 'lint']);
    assert.deepEqual(await depNames(p.id, 'only_lint'), ['lint']);
    assert.deepEqual(await depNames(p.id, 'dag'), ['build']);
    assert.deepEqual(await depNames(p.id, 'dag_narrowed'), ['lint']);
    assert.deepEqual(await depNames(p.id, 'dag_no_artifacts'), []);
    assert.deepEqual(await depNames(p.id, 'none'), []);
  });

  it("lets a child pipeline fetch its parent's artifacts with needs:pipeline, and takes trigger:include:inputs", async () => {
    const p = await pipelineFor(
      `
build: { stage: build, script: [b] }
child:
  stage: test
  variables: { PARENT_PIPELINE_ID: $CI_PIPELINE_ID }
  trigger:
    include:
      - local: child.yml
        inputs: { who: parent }
`,
      {
        'child.yml': 'spec:\n  inputs:\n    who:\n---\nuse:\n  script: echo $[[ inputs.who ]]\n  needs:\n    - pipeline: $PARENT_PIPELINE_ID\n      job: build\n',
      },
    );
    await runJob(t, (await jobsByName(t, p.id)).build, 'success');
    await drainJobs(t.app.cairn);
    const bridge = (await jobsByName(t, p.id)).child;
    assert.ok(bridge.downstream_pipeline_id, `bridge ${bridge.status} ${bridge.failure_reason}`);
    const child = await pipeline(t, bridge.downstream_pipeline_id!);
    const use = (await jobsByName(t, child.id)).use;
    assert.equal(use.status, 'pending', 'a job whose needs are all in other pipelines starts at once');
    const options = use.options as unknown as CompiledJob;
    assert.deepEqual(options.script, ['echo parent']);
    assert.deepEqual(options.crossNeeds, [{ pipeline: String(p.id), job: 'build', artifacts: true }]);
    const deps = await dependencyJobs(t.db, use);
    assert.deepEqual(deps.map((d) => [d.pipeline_id, d.name]), [[p.id, 'build']]);
    await runJob(t, use, 'success');
    assert.deepEqual(await statuses(t, child.id), { use: 'success' });
  });

  it('does not hand out a job of a pipeline outside the hierarchy through needs:pipeline', async () => {
    const other = await pipelineFor('build: { script: [b] }\n');
    await runJob(t, (await jobsByName(t, other.id)).build, 'success');
    const p = await pipelineFor(`use: { script: [u], needs: [{ pipeline: "${other.id}", job: build }] }\n`);
    assert.deepEqual(await depNames(p.id, 'use'), []);
  });

  it("POST /pipeline passes inputs to the configuration's spec:inputs, with GitLab's errors", async () => {
    const p = await t.createProject();
    await commitFiles(t, p, {
      '.gitlab-ci.yml': 'spec:\n  inputs:\n    target:\n      options: [staging, production]\n      default: staging\n    replicas: { type: number, default: 1 }\n---\ndeploy:\n  script: deploy x$[[ inputs.replicas ]]\n  environment: $[[ inputs.target ]]\n',
    });
    const url = `/api/v4/projects/${p.id}/pipeline`;
    const ok = await t.post(url, { ref: 'main', inputs: { target: 'production', replicas: 3 } });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    const deploy = (await jobsByName(t, ok.body.id)).deploy;
    assert.equal(deploy.environment, 'production');
    assert.deepEqual((deploy.options as unknown as CompiledJob).script, ['deploy x3']);
    const bad = await t.post(url, { ref: 'main', inputs: { target: 'qa' } });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body.message, { base: ['`target` input: `qa` cannot be used because it is not in the list of allowed options'] });
    const unknown = await t.post(url, { ref: 'main', inputs: { region: 'eu' } });
    assert.deepEqual(unknown.body.message, { base: ['unknown input arguments: region'] });
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`i${i}`, 'x']));
    const tooMany = await t.post(url, { ref: 'main', inputs: many });
    assert.equal(tooMany.status, 400);
    assert.deepEqual(tooMany.body.message, { base: ['There cannot be more than 20 inputs'] });
  });

  it('resource_group: jobs naming the same group run one at a time, across pipelines, in pipeline order', async () => {
    const p = await t.createProject();
    const yaml = 'deploy: { script: [d], resource_group: production }\nother: { script: [o], resource_group: $CI_COMMIT_REF_SLUG }\n';
    await commitFiles(t, p, { '.gitlab-ci.yml': yaml });
    const first = await latestPipeline(t, p.id);
    await commitFiles(t, p, { 'x.txt': 'x' }, { branch: 'feature', startBranch: 'main' });
    const second = await latestPipeline(t, p.id);
    assert.notEqual(first.id, second.id);
    assert.deepEqual(await statuses(t, first.id), { deploy: 'pending', other: 'pending' });
    assert.deepEqual(await statuses(t, second.id), { deploy: 'waiting_for_resource', other: 'pending' }, 'other has a group per branch');
    assert.equal((await pipeline(t, second.id)).status, 'running');
    const groups = await t.db.selectFrom('ci_resource_groups').select(['key', 'process_mode']).where('project_id', '=', p.id).orderBy('key').execute();
    assert.deepEqual(groups.map((g) => g.key), ['feature', 'main', 'production']);
    await runJob(t, (await jobsByName(t, first.id)).deploy, 'success');
    await drainJobs(t.app.cairn);
    assert.equal((await jobsByName(t, second.id)).deploy.status, 'pending', 'the freed resource went to the waiting job');
    // a third pipeline waits; canceling the holder hands the resource on
    await commitFiles(t, p, { 'y.txt': 'y' }, { branch: 'other', startBranch: 'main' });
    const third = await latestPipeline(t, p.id);
    assert.equal((await jobsByName(t, third.id)).deploy.status, 'waiting_for_resource');
    const { cancelBuild } = await import('../../src/ci/jobs/state.js');
    await cancelBuild(t.app.cairn, (await jobsByName(t, second.id)).deploy.id);
    await drainJobs(t.app.cairn);
    assert.equal((await jobsByName(t, third.id)).deploy.status, 'pending');
    const held = await t.db.selectFrom('ci_resources as r').innerJoin('ci_resource_groups as g', 'g.id', 'r.resource_group_id')
      .select(['g.key', 'r.build_id']).where('g.project_id', '=', p.id).where('g.key', '=', 'production').execute();
    assert.deepEqual(held.map((r) => r.build_id), [(await jobsByName(t, third.id)).deploy.id]);
  });

  it('resource_group: racing assignments (as from two processes) give the resource to one job only', async () => {
    const p = await t.createProject();
    await commitFiles(t, p, { '.gitlab-ci.yml': 'a: { script: [a], resource_group: r }\nb: { script: [b], resource_group: r }\nc: { script: [c], resource_group: r }\n' });
    const pl = await latestPipeline(t, p.id);
    assert.deepEqual(await statuses(t, pl.id), { a: 'pending', b: 'waiting_for_resource', c: 'waiting_for_resource' });
    const { assignResources } = await import('../../src/ci/jobs/state.js');
    const group = await t.db.selectFrom('ci_resource_groups').select('id').where('project_id', '=', p.id).executeTakeFirstOrThrow();
    await t.db.updateTable('ci_resources').set({ build_id: null }).where('resource_group_id', '=', group.id).execute();
    await Promise.all([assignResources(t.app.cairn, group.id), assignResources(t.app.cairn, group.id), assignResources(t.app.cairn, group.id)]);
    const after = await statuses(t, pl.id);
    assert.equal(Object.values(after).filter((s) => s === 'pending').length, 2, JSON.stringify(after));
    assert.equal(after.b, 'pending', 'the oldest waiting job');
    assert.equal(after.c, 'waiting_for_resource');
  });

  it('resource_group: a manual job waits for the resource when played', async () => {
    const p = await t.createProject();
    await commitFiles(t, p, { '.gitlab-ci.yml': 'a: { script: [a], resource_group: r }\nb: { script: [b], when: manual, resource_group: r }\n' });
    const pl = await latestPipeline(t, p.id);
    assert.deepEqual(await statuses(t, pl.id), { a: 'pending', b: 'manual' });
    const { playBuild } = await import('../../src/ci/jobs/state.js');
    await playBuild(t.app.cairn, (await jobsByName(t, pl.id)).b.id, null);
    assert.equal((await jobsByName(t, pl.id)).b.status, 'waiting_for_resource');
    await runJob(t, (await jobsByName(t, pl.id)).a, 'failed');
    await drainJobs(t.app.cairn);
    assert.equal((await jobsByName(t, pl.id)).b.status, 'pending');
  });

  describe('auto-cancel of redundant pipelines (interruptible, workflow:auto_cancel)', () => {
    async function start(buildId: number) {
      const { assignBuild } = await import('../../src/ci/jobs/state.js');
      const runner = await testRunner(t);
      assert.ok(await t.db.transaction().execute((trx) => assignBuild(trx, buildId, runner)));
    }
    async function twoPushes(yaml: string, between?: (first: number) => Promise<void>) {
      const p = await t.createProject();
      await commitFiles(t, p, { '.gitlab-ci.yml': yaml });
      const first = (await latestPipeline(t, p.id)).id;
      if (between) await between(first);
      await commitFiles(t, p, { 'next.txt': 'x' });
      const second = (await latestPipeline(t, p.id)).id;
      await drainJobs(t.app.cairn);
      return { p, first, second };
    }
    const yaml = (extra = '') => `${extra}stages: [build, test]\nbuild: { stage: build, script: [b], interruptible: true }\nslow: { stage: build, script: [s] }\ntest: { stage: test, script: [t], interruptible: true }\n`;

    it('conservative (default): a newer pipeline cancels an older one none of whose non-interruptible jobs started', async () => {
      const { first, second } = await twoPushes(yaml());
      assert.equal((await pipeline(t, first)).status, 'canceled');
      assert.deepEqual(await statuses(t, first), { build: 'canceled', slow: 'canceled', test: 'canceled' });
      assert.equal((await pipeline(t, second)).status, 'pending');
    });

    it('conservative: a started job that is not interruptible keeps the older pipeline', async () => {
      const { first } = await twoPushes(yaml(), async (id) => start((await jobsByName(t, id)).slow.id));
      assert.deepEqual(await statuses(t, first), { build: 'pending', slow: 'running', test: 'created' });
    });

    it('interruptible: only the interruptible jobs are canceled, even started ones', async () => {
      const { first } = await twoPushes(yaml('workflow: { auto_cancel: { on_new_commit: interruptible } }\n'), async (id) => start((await jobsByName(t, id)).slow.id));
      assert.deepEqual(await statuses(t, first), { build: 'canceled', slow: 'running', test: 'canceled' });
    });

    it('none, or the project setting disabled: nothing is canceled', async () => {
      const none = await twoPushes(yaml('workflow: { auto_cancel: { on_new_commit: none } }\n'));
      assert.deepEqual(await statuses(t, none.first), { build: 'pending', slow: 'pending', test: 'created' });
      const p = await t.createProject();
      assert.equal((await t.put(`/api/v4/projects/${p.id}`, { auto_cancel_pending_pipelines: 'disabled' })).status, 200);
      await commitFiles(t, p, { '.gitlab-ci.yml': yaml() });
      const first = (await latestPipeline(t, p.id)).id;
      await commitFiles(t, p, { 'next.txt': 'x' });
      await drainJobs(t.app.cairn);
      assert.equal((await pipeline(t, first)).status, 'pending');
    });

    it('workflow:rules:auto_cancel overrides the workflow setting for the pipelines of that rule', async () => {
      const rules = 'workflow:\n  auto_cancel: { on_new_commit: none }\n  rules:\n    - if: $CI_COMMIT_BRANCH == "main"\n      auto_cancel: { on_new_commit: conservative }\n    - when: always\n';
      const { first } = await twoPushes(yaml(rules));
      assert.equal((await pipeline(t, first)).status, 'canceled');
    });

    it('on_job_failure: all cancels the rest of the pipeline when a job fails', async () => {
      const p = await t.createProject();
      await commitFiles(t, p, { '.gitlab-ci.yml': 'workflow: { auto_cancel: { on_job_failure: all } }\na: { script: [a] }\nb: { script: [b] }\nc: { script: [c], allow_failure: true }\nlater: { stage: deploy, script: [d] }\n' });
      const pl = (await latestPipeline(t, p.id)).id;
      await runJob(t, (await jobsByName(t, pl)).c, 'failed');
      await drainJobs(t.app.cairn);
      assert.deepEqual(await statuses(t, pl), { a: 'pending', b: 'pending', c: 'failed', later: 'created' }, 'an allowed failure cancels nothing');
      await runJob(t, (await jobsByName(t, pl)).a, 'failed');
      await drainJobs(t.app.cairn);
      assert.deepEqual(await statuses(t, pl), { a: 'failed', b: 'canceled', c: 'failed', later: 'canceled' });
    });
  });

  it('rules:changes:compare_to compares with the merge base of that ref; an unknown ref fails the pipeline', async () => {
    const p = await t.createProject();
    await commitFiles(t, p, {
      '.gitlab-ci.yml': `
changed_b: { script: [x], rules: [{ changes: { paths: [b.txt], compare_to: refs/heads/main } }] }
changed_a: { script: [x], rules: [{ changes: { paths: [a.txt], compare_to: $CI_DEFAULT_BRANCH } }] }
always: { script: [x] }
`,
      'a.txt': 'a',
    });
    await commitFiles(t, p, { 'a.txt': 'a2' }); // main moves on: a.txt differs from main, not from the merge base
    await commitFiles(t, p, { 'b.txt': 'b' }, { branch: 'feature', startBranch: 'main' });
    await commitFiles(t, p, { 'a.txt': 'a3' }); // and again, after the branch was made
    const feature = await t.db.selectFrom('ci_pipelines').select('id').where('project_id', '=', p.id).where('ref', '=', 'feature').executeTakeFirstOrThrow();
    assert.deepEqual(Object.keys(await statuses(t, feature.id)).sort(), ['always', 'changed_b']);

    const bad = await t.createProject();
    await commitFiles(t, bad, { '.gitlab-ci.yml': 'job1: { script: [x], rules: [{ changes: { paths: [x], compare_to: nope } }] }\njob2: { script: [x] }\n' });
    const failed = await latestPipeline(t, bad.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.yaml_errors, 'Failed to parse rule for job1: rules:changes:compare_to is not a valid ref');
  });

  it('coverage: the last line with a match, and on it the last match, as GitLab reads the log', async () => {
    // GitLab's documented form: no capturing group (with groups, the last group is read)
    const p = await pipelineFor("cov: { script: [x], coverage: '/\\d+(?:\\.\\d+)?%/' }\n");
    await runJob(t, (await jobsByName(t, p.id)).cov, 'success', { trace: 'Lines: 10.5% Branches: 20%\nno coverage here\n' });
    assert.equal((await jobsByName(t, p.id)).cov.coverage, 20);
  });
});
