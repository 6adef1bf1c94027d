import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assignBuild } from '../../src/ci/jobs/state.js';
import { dropStuckJobs, STUCK_JOBS_SWEEP } from '../../src/ci/jobs/stuck.js';
import type { Project } from '../../src/db/schema/core.js';
import { drainJobs, scheduleRecurring } from '../../src/jobs/queue.js';
import { tokenDigest } from '../../src/lib/secrets.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';

const YAML = `
untagged: { script: [x] }
gpu: { script: [x], tags: [gpu] }
cpu: { script: [x], tags: [cpu] }
old_cpu: { script: [x], tags: [cpu] }
busy: { script: [x] }
quiet: { script: [x] }
later: { script: [x], when: delayed, start_in: 1 day }
`;

describe('stuck-job sweep', () => {
  let t: TestContext;
  let project: Project;
  let runnerId: number;
  const ago = (seconds: number) => new Date(Date.now() - seconds * 1000);
  const age = (id: number, seconds: number) => t.db.updateTable('ci_builds').set({ updated_at: ago(seconds) }).where('id', '=', id).execute();
  const job = async (id: number) => (await t.get(`/api/v4/projects/${project.id}/jobs/${id}`)).body;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 0 });
    // An online instance runner for cpu jobs only (it does not take untagged ones).
    runnerId = (await t.db
      .insertInto('ci_runners')
      .values({ token_digest: tokenDigest('stuck-runner'), runner_type: 'instance_type', tag_list: ['cpu'], run_untagged: false, description: 'cpu', contacted_at: new Date() })
      .returning('id')
      .executeTakeFirstOrThrow()).id;
  });
  after(async () => {
    await t?.close();
  });

  it('fails pending jobs no online runner takes after an hour, any pending job after a day, running jobs nobody updated for an hour, stale schedules', async () => {
    await commitFiles(t, project, { '.gitlab-ci.yml': YAML });
    const pipeline = await latestPipeline(t, project.id);
    const jobs = await jobsByName(t, pipeline.id);
    assert.equal(jobs.untagged.status, 'pending');
    assert.equal(jobs.later.status, 'scheduled');
    for (const name of ['busy', 'quiet']) assert.ok(await t.db.transaction().execute((trx) => assignBuild(trx, jobs[name].id, runnerId)));
    await age(jobs.untagged.id, 2 * 3600); // no online runner for it, over an hour: dropped
    await age(jobs.gpu.id, 30 * 60); // no runner either, but not an hour yet: stays
    await age(jobs.cpu.id, 2 * 3600); // an online runner could take it: stays
    await age(jobs.old_cpu.id, 25 * 3600); // a day old: dropped even so
    await age(jobs.busy.id, 2 * 3600); // running, no update for an hour: dropped
    await age(jobs.quiet.id, 10 * 60); // running, updated lately: stays
    await t.db.updateTable('ci_builds').set({ scheduled_at: ago(2 * 3600) }).where('id', '=', jobs.later.id).execute();

    assert.deepEqual(await dropStuckJobs(t.app.cairn), { pending: 2, running: 1, scheduled: 1 });
    for (const name of ['untagged', 'old_cpu', 'busy']) {
      const shown = await job(jobs[name].id);
      assert.equal(shown.status, 'failed', name);
      assert.equal(shown.failure_reason, 'stuck_or_timeout_failure', name);
    }
    assert.equal((await job(jobs.later.id)).failure_reason, 'stale_schedule');
    assert.equal((await job(jobs.gpu.id)).status, 'pending');
    assert.equal((await job(jobs.cpu.id)).status, 'pending');
    assert.equal((await job(jobs.quiet.id)).status, 'running');
    // Dropped jobs left the runners' queue; the job token of the dropped running job died.
    assert.equal(await t.db.selectFrom('ci_pending_builds').select('build_id').where('build_id', 'in', [jobs.untagged.id, jobs.old_cpu.id]).executeTakeFirst(), undefined);
    assert.equal((await t.db.selectFrom('ci_builds').select('token_digest').where('id', '=', jobs.busy.id).executeTakeFirstOrThrow()).token_digest, null);
    // A second sweep finds nothing more.
    assert.deepEqual(await dropStuckJobs(t.app.cairn), { pending: 0, running: 0, scheduled: 0 });

    // The runner goes offline (no contact for over the online window): the cpu job is stuck now.
    await t.db.updateTable('ci_runners').set({ contacted_at: ago(3 * 3600) }).where('id', '=', runnerId).execute();
    assert.deepEqual(await dropStuckJobs(t.app.cairn), { pending: 1, running: 0, scheduled: 0 });
    assert.equal((await job(jobs.cpu.id)).failure_reason, 'stuck_or_timeout_failure');
    // A paused runner is no help either.
    await t.db.updateTable('ci_runners').set({ contacted_at: new Date(), active: false, tag_list: ['gpu'] }).where('id', '=', runnerId).execute();
    await age(jobs.gpu.id, 2 * 3600);
    assert.deepEqual(await dropStuckJobs(t.app.cairn), { pending: 1, running: 0, scheduled: 0 });
    assert.equal((await job(jobs.gpu.id)).status, 'failed');
  });

  it('a runner\'s keep-alive (PUT /jobs/:id, state running) keeps its job from the sweep', async () => {
    await t.db.updateTable('ci_runners').set({ active: true, tag_list: ['cpu'], contacted_at: new Date() }).where('id', '=', runnerId).execute();
    await commitFiles(t, project, { '.gitlab-ci.yml': 'alive: { script: [x] }\n' });
    const alive = (await jobsByName(t, (await latestPipeline(t, project.id)).id)).alive;
    const taken = await t.db.transaction().execute((trx) => assignBuild(trx, alive.id, runnerId));
    assert.ok(taken);
    await age(alive.id, 2 * 3600);
    const res = await t.put(`/api/v4/jobs/${alive.id}`, { token: taken.token, state: 'running' }, { token: null });
    assert.equal(res.status, 200);
    assert.equal((await dropStuckJobs(t.app.cairn)).running, 0);
    assert.equal((await job(alive.id)).status, 'running');
    await t.put(`/api/v4/jobs/${alive.id}`, { token: taken.token, state: 'success' }, { token: null });
  });

  it('runs from the background queue as a recurring job and schedules its next run', async () => {
    await commitFiles(t, project, { '.gitlab-ci.yml': 'lonely: { script: [x], tags: [nobody] }\n' });
    const lonely = (await jobsByName(t, (await latestPipeline(t, project.id)).id)).lonely;
    await age(lonely.id, 2 * 3600);
    await scheduleRecurring(t.db);
    const row = await t.db.selectFrom('background_jobs').selectAll().where('kind', '=', STUCK_JOBS_SWEEP).where('state', '=', 'pending').executeTakeFirstOrThrow();
    assert.ok(new Date(row.run_at as any).getTime() > Date.now() + 3000 * 1000, 'an hour from now');
    await t.db.updateTable('background_jobs').set({ run_at: ago(1) }).where('id', '=', row.id).execute();
    await drainJobs(t.app.cairn);
    assert.equal((await job(lonely.id)).failure_reason, 'stuck_or_timeout_failure');
    const next = await t.db.selectFrom('background_jobs').select(['id', 'run_at']).where('kind', '=', STUCK_JOBS_SWEEP).where('state', '=', 'pending').executeTakeFirstOrThrow();
    assert.notEqual(next.id, row.id);
  });
});
