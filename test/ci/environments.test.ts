import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { environmentSlug, guessTier } from '../../src/lib/environments.js';
import { stopExpiredEnvironments, stopJobRunner } from '../../src/services/environments.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, ProtocolRunner, runJob } from '../helpers/ci.js';
import { getPage, webSignIn } from '../helpers/web.js';

// Deployment jobs: the environment keyword makes environments and deployments at pipeline
// creation; deployments follow their jobs (taken and finished by a runner over the protocol);
// stop jobs, on_stop and auto_stop_in stop environments.

const YAML = `
stages: [build, deploy]
variables: { STOP_IN: 1 hour }
build: { stage: build, script: [make] }
prepare_db:
  stage: build
  script: [migrate]
  environment: { name: production, action: prepare }
deploy_review:
  stage: deploy
  script: [deploy]
  environment:
    name: review/$CI_COMMIT_REF_SLUG
    url: https://$CI_ENVIRONMENT_SLUG.example.com
    on_stop: stop_review
    auto_stop_in: $STOP_IN
stop_review:
  stage: deploy
  script: [stop]
  when: manual
  environment: { name: review/$CI_COMMIT_REF_SLUG, action: stop }
deploy_manual:
  stage: deploy
  script: [deploy]
  when: manual
  environment: { name: staging-eu, deployment_tier: other }
`;

describe('environments and deployments of pipelines', () => {
  let t: TestContext;
  let project: Project;
  let developer: TestUser, maintainer: TestUser;
  let runner: ProtocolRunner;
  const api = (rest: string) => `/api/v4/projects/${project.id}${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    [developer, maintainer] = await Promise.all([t.createUser(), t.createUser()]);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await commitFiles(t, project, { 'README.md': 'hi\n' });
    runner = await ProtocolRunner.register(t);
  });
  after(async () => {
    await t?.close();
  });

  async function pipelineOn(branch: string, user: TestUser = developer, yaml = YAML) {
    await commitFiles(t, project, { '.gitlab-ci.yml': yaml }, { branch, startBranch: 'main', token: user.token });
    const p = await latestPipeline(t, project.id);
    assert.equal(p.ref, branch);
    return p;
  }
  const envByName = (name: string) => t.db.selectFrom('environments').selectAll().where('project_id', '=', project.id).where('name', '=', name).executeTakeFirst();
  const deploymentOf = (jobId: number) => t.db.selectFrom('deployments').selectAll().where('deployable_id', '=', jobId).executeTakeFirst();

  it("derives slugs and tiers as GitLab does", () => {
    assert.equal(environmentSlug('production'), 'production');
    assert.equal(environmentSlug('staging-1234567890123456'), 'staging-1234567890123456');
    for (const [name, prefix] of [['PRODUCTION', 'production-'], ['review/1-foo', 'review-1-foo-'], ['1/foo', 'env-1-foo-'], ['staging-12345678901234567', 'staging-123456789-']]) {
      const slug = environmentSlug(name);
      assert.ok(slug.startsWith(prefix) && slug.length === prefix.length + 6, `${name} -> ${slug}`);
      assert.match(slug, /^[a-z][a-z0-9-]{0,23}$/);
    }
    assert.equal(environmentSlug('review/1-foo'), environmentSlug('review/1-foo'), 'the suffix is stable');
    assert.equal(guessTier('review/feature'), 'development');
    assert.equal(guessTier('qa'), 'testing');
    assert.equal(guessTier('pre-prod'), 'staging');
    assert.equal(guessTier('Production'), 'production');
    assert.equal(guessTier('eu-west'), 'other');
  });

  it('makes environments and deployments at pipeline creation; the deployment follows its job', async () => {
    const p = await pipelineOn('Feature/One');
    const jobs = await jobsByName(t, p.id);
    const review = await envByName('review/feature-one');
    assert.ok(review, 'the dynamic name is expanded');
    assert.equal(review.slug, environmentSlug('review/feature-one'));
    assert.equal(review.tier, 'development');
    assert.equal(review.state, 'available');
    assert.equal(jobs.deploy_review.environment, 'review/feature-one');
    // prepare and stop jobs make (or find) their environment but deploy nothing.
    const production = await envByName('production');
    assert.equal(production?.tier, 'production');
    assert.equal(await deploymentOf(jobs.prepare_db.id), undefined);
    assert.equal(await deploymentOf(jobs.stop_review.id), undefined);
    // deployment_tier is the environment's tier.
    assert.equal((await envByName('staging-eu'))?.tier, 'other');

    const deployment = await deploymentOf(jobs.deploy_review.id);
    assert.ok(deployment);
    assert.equal(deployment.status, 'created');
    assert.equal(deployment.ref, 'Feature/One');
    assert.equal(deployment.sha, p.sha);
    assert.equal(deployment.user_id, developer.user.id);

    assert.equal((await deploymentOf(jobs.deploy_manual.id))?.status, 'created');
    await runJob(t, jobs.build, 'success');
    await runJob(t, jobs.prepare_db, 'success');
    // A manual deployment job blocks its deployment.
    assert.equal((await deploymentOf(jobs.deploy_manual.id))?.status, 'blocked');
    const taken = await runner.takeJob();
    assert.equal(taken?.id, jobs.deploy_review.id);
    const vars = Object.fromEntries((taken!.payload.variables as { key: string; value: string }[]).map((v) => [v.key, v.value]));
    assert.equal(vars.CI_ENVIRONMENT_NAME, 'review/feature-one');
    assert.equal(vars.CI_ENVIRONMENT_SLUG, review.slug);
    assert.equal(vars.CI_ENVIRONMENT_URL, `https://${review.slug}.example.com`);
    assert.equal(vars.CI_ENVIRONMENT_ACTION, 'start');
    assert.equal(vars.CI_ENVIRONMENT_TIER, 'development');
    assert.equal((await deploymentOf(jobs.deploy_review.id))?.status, 'running');

    await runner.finish(taken!, 'success');
    const done = await deploymentOf(jobs.deploy_review.id);
    assert.equal(done?.status, 'success');
    assert.ok(done?.finished_at);
    const deployed = await envByName('review/feature-one');
    assert.equal(deployed?.external_url, `https://${review.slug}.example.com`);
    const stopIn = new Date(deployed!.auto_stop_at as any).getTime() - Date.now();
    assert.ok(stopIn > 3500_000 && stopIn <= 3600_000, `auto_stop_at in an hour (${stopIn} ms)`);

    // Through the API: the environment's last deployment, with its job.
    const shown = await t.get(api(`/environments/${review.id}`), { token: developer.token });
    assert.equal(shown.status, 200, JSON.stringify(shown.body));
    assert.equal(shown.body.last_deployment.id, done!.id);
    assert.equal(shown.body.last_deployment.deployable.id, jobs.deploy_review.id);
    assert.equal(shown.body.last_deployment.deployable.status, 'success');
  });

  it('a failed or canceled job fails or cancels its deployment; a retry deploys anew', async () => {
    const p = await pipelineOn('two');
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    await runJob(t, jobs.prepare_db, 'success');
    const taken = await runner.takeJob();
    assert.equal(taken?.id, jobs.deploy_review.id);
    await runner.finish(taken!, 'failed');
    assert.equal((await deploymentOf(jobs.deploy_review.id))?.status, 'failed');

    const retried = await t.post(api(`/jobs/${jobs.deploy_review.id}/retry`), {}, { token: developer.token });
    assert.equal(retried.status, 201);
    const again = await deploymentOf(retried.body.id);
    assert.ok(again, 'the new attempt has its own deployment');
    assert.equal(again.status, 'created');
    assert.ok(again.iid > (await deploymentOf(jobs.deploy_review.id))!.iid);
    const canceled = await t.post(api(`/jobs/${retried.body.id}/cancel`), {}, { token: developer.token });
    assert.equal(canceled.status, 201);
    assert.equal((await deploymentOf(retried.body.id))?.status, 'canceled');

    // A played manual deployment runs: blocked, then running and success.
    const played = await t.post(api(`/jobs/${jobs.deploy_manual.id}/play`), {}, { token: developer.token });
    assert.equal(played.status, 200);
    assert.equal((await deploymentOf(jobs.deploy_manual.id))?.status, 'blocked');
    await runJob(t, jobs.deploy_manual.id, 'success');
    assert.equal((await deploymentOf(jobs.deploy_manual.id))?.status, 'success');
  });

  it('stopping an environment plays its on_stop job; the stop job stops it', async () => {
    const p = await pipelineOn('three');
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    await runJob(t, jobs.prepare_db, 'success');
    await runJob(t, jobs.deploy_review.id, 'success');
    const env = (await envByName('review/three'))!;
    assert.equal(env.state, 'available');

    const stop = await t.post(api(`/environments/${env.id}/stop`), {}, { token: developer.token });
    assert.equal(stop.status, 200, JSON.stringify(stop.body));
    assert.equal(stop.body.state, 'stopping');
    const stopJob = (await jobsByName(t, p.id)).stop_review;
    assert.equal(stopJob.status, 'pending', 'the manual stop job was played');
    assert.equal(stopJob.user_id, developer.user.id);
    await runJob(t, stopJob.id, 'success');
    const stopped = (await envByName('review/three'))!;
    assert.equal(stopped.state, 'stopped');
    assert.equal(stopped.auto_stop_at, null);

    // A new deployment starts it again.
    const retried = await t.post(api(`/jobs/${jobs.deploy_review.id}/retry`), {}, { token: developer.token });
    await runJob(t, retried.body.id, 'success');
    assert.equal((await envByName('review/three'))?.state, 'available');
    // force: stopped at once, the stop job does not run.
    const forced = await t.post(api(`/environments/${env.id}/stop`), { force: true }, { token: developer.token });
    assert.equal(forced.status, 200);
    assert.equal(forced.body.state, 'stopped');
  });

  it('a failed stop job leaves the environment available again', async () => {
    const p = await pipelineOn('four');
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    await runJob(t, jobs.prepare_db, 'success');
    await runJob(t, jobs.deploy_review.id, 'success');
    const env = (await envByName('review/four'))!;
    assert.equal((await t.post(api(`/environments/${env.id}/stop`), {}, { token: developer.token })).body.state, 'stopping');
    await runJob(t, (await jobsByName(t, p.id)).stop_review.id, 'failed');
    assert.equal((await envByName('review/four'))?.state, 'available');
  });

  it('auto_stop_in: environments past their time are stopped by the sweep (their stop jobs run)', async () => {
    const p = await pipelineOn('five');
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    await runJob(t, jobs.prepare_db, 'success');
    await runJob(t, jobs.deploy_review.id, 'success');
    const env = (await envByName('review/five'))!;
    assert.ok(env.auto_stop_at);
    // An environment without a stop job and a past deadline is stopped outright.
    const plain = await t.post(api('/environments'), { name: 'plain-auto' }, { token: developer.token });
    await t.db.updateTable('environments').set({ auto_stop_at: new Date(Date.now() - 1000) }).where('id', '=', plain.body.id).execute();

    // Not yet: nothing of this project's is due now but the plain one.
    await stopExpiredEnvironments(t.app.cairn, stopJobRunner(t.app.cairn));
    assert.equal((await envByName('review/five'))?.state, 'available');
    assert.equal((await envByName('plain-auto'))?.state, 'stopped');

    await stopExpiredEnvironments(t.app.cairn, stopJobRunner(t.app.cairn), new Date(Date.now() + 2 * 3600_000));
    assert.equal((await envByName('review/five'))?.state, 'stopping');
    const stopJob = (await jobsByName(t, p.id)).stop_review;
    assert.equal(stopJob.status, 'pending');
    assert.equal(stopJob.user_id, developer.user.id, 'run as the last deployer');
    await runJob(t, stopJob.id, 'success');
    assert.equal((await envByName('review/five'))?.state, 'stopped');
  });

  describe('protected environments', () => {
    before(async () => {
      const res = await t.post(api('/protected_environments'), { name: 'staging-eu', deploy_access_levels: [{ access_level: 40 }] }, { token: maintainer.token });
      assert.equal(res.status, 201);
    });

    it("refuses a developer's play, retry, stop and deployments; the job page says why a job failed", async () => {
      const p = await pipelineOn('six');
      let jobs = await jobsByName(t, p.id);
      await runJob(t, jobs.build, 'success');
      await runJob(t, jobs.prepare_db, 'success');
      await runJob(t, jobs.deploy_review, 'success');
      jobs = await jobsByName(t, p.id);
      assert.equal(jobs.deploy_manual.status, 'manual');
      assert.equal((await t.post(api(`/jobs/${jobs.deploy_manual.id}/play`), {}, { token: developer.token })).status, 403);
      const env = (await envByName('staging-eu'))!;
      assert.equal((await t.post(api(`/environments/${env.id}/stop`), {}, { token: developer.token })).status, 403);
      const reported = await t.post(api('/deployments'), { environment: 'staging-eu', sha: p.sha, ref: 'six', tag: false, status: 'success' }, { token: developer.token });
      assert.equal(reported.status, 403);

      // Played by a maintainer, but run for a developer's retry: it would fail, so the retry is refused.
      assert.equal((await t.post(api(`/jobs/${jobs.deploy_manual.id}/play`), {}, { token: maintainer.token })).status, 200);
      await runJob(t, jobs.deploy_manual.id, 'failed');
      assert.equal((await t.post(api(`/jobs/${jobs.deploy_manual.id}/retry`), {}, { token: developer.token })).status, 403);

      // A job that reaches a protected environment for a user it does not admit fails before it runs.
      const auto = YAML.replace('  when: manual\n  environment: { name: staging-eu', '  environment: { name: staging-eu');
      const p2 = await pipelineOn('seven', developer, auto);
      const j2 = await jobsByName(t, p2.id);
      await runJob(t, j2.build, 'success');
      await runJob(t, j2.prepare_db, 'success');
      const failed = (await jobsByName(t, p2.id)).deploy_manual;
      assert.equal(failed.status, 'failed');
      assert.equal(failed.failure_reason, 'protected_environment_failure');
      assert.equal((await deploymentOf(failed.id))?.status, 'failed');
      const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', project.namespace_id).executeTakeFirstOrThrow();
      const page = await getPage(t, await webSignIn(t, maintainer), `/${ns.full_path}/${project.path}/-/jobs/${failed.id}`);
      assert.equal(page.status, 200);
      assert.match(page.text, /the environment this job is deploying to is protected/);
    });
  });
});
