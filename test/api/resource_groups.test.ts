// The Resource group API (GitLab's): groups made by `resource_group:`, the job holding each, the
// jobs waiting in process-mode order, and changing the process mode; developers and up.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';

describe('resource groups API', () => {
  let t: TestContext;
  let project: Project;
  let developer: TestUser;
  let reporter: TestUser;
  const pipelines: number[] = [];
  const url = (rest = '') => `/api/v4/projects/${project.id}/resource_groups${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    developer = await t.createUser();
    reporter = await t.createUser();
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, reporter.user, 20);
    // Three pipelines whose deploy jobs share `production`: the first holds it, two wait.
    await commitFiles(t, project, { '.gitlab-ci.yml': 'deploy: { script: [d], resource_group: production }\n' });
    pipelines.push((await latestPipeline(t, project.id)).id);
    for (const branch of ['b1', 'b2']) {
      await commitFiles(t, project, { [`${branch}.txt`]: 'x' }, { branch, startBranch: 'main' });
      pipelines.push((await latestPipeline(t, project.id)).id);
    }
  });
  after(async () => {
    await t?.close();
  });

  const deployOf = async (pipelineId: number) => (await jobsByName(t, pipelineId)).deploy;

  it('lists and shows the project\'s groups', async () => {
    const list = await t.get(url(), { token: developer.token });
    assert.equal(list.status, 200);
    assert.equal(list.headers['x-total'], '1');
    assert.deepEqual(list.body.map((g: { key: string; process_mode: string }) => [g.key, g.process_mode]), [['production', 'unordered']]);
    assert.deepEqual(Object.keys(list.body[0]).sort(), ['created_at', 'id', 'key', 'process_mode', 'updated_at']);
    const one = await t.get(url('/production'), { token: developer.token });
    assert.equal(one.status, 200);
    assert.deepEqual(one.body, list.body[0]);
    assert.equal((await t.get(url('/staging'), { token: developer.token })).status, 404);
  });

  it('shows the job holding the resource and the jobs waiting, in process-mode order', async () => {
    const [first, second, third] = await Promise.all(pipelines.map(deployOf));
    const current = await t.get(url('/production/current_job'), { token: developer.token });
    assert.equal(current.status, 200);
    assert.equal(current.body.id, first.id);
    assert.equal(current.body.status, 'pending');
    assert.equal(current.body.pipeline.id, pipelines[0]);
    assert.equal(current.body.artifacts, undefined, 'the basic form');
    const upcoming = await t.get(url('/production/upcoming_jobs'), { token: developer.token });
    assert.equal(upcoming.status, 200);
    assert.deepEqual(upcoming.body.map((j: { id: number }) => j.id), [second.id, third.id]);
    assert.ok(upcoming.body.every((j: { status: string }) => j.status === 'waiting_for_resource'));

    const changed = await t.put(url('/production'), { process_mode: 'newest_first' }, { token: developer.token });
    assert.equal(changed.status, 200, JSON.stringify(changed.body));
    assert.equal(changed.body.process_mode, 'newest_first');
    const reordered = await t.get(url('/production/upcoming_jobs'), { token: developer.token });
    assert.deepEqual(reordered.body.map((j: { id: number }) => j.id), [third.id, second.id]);
    // The mode decides who gets the resource next.
    await runJob(t, first, 'success');
    await drainJobs(t.app.cairn);
    assert.equal((await deployOf(pipelines[2])).status, 'pending');
    assert.equal((await deployOf(pipelines[1])).status, 'waiting_for_resource');
    const next = await t.get(url('/production/current_job'), { token: developer.token });
    assert.equal(next.body.id, third.id);
  });

  it('current_job is null when the resource is free', async () => {
    await runJob(t, await deployOf(pipelines[2]), 'success');
    await drainJobs(t.app.cairn);
    await runJob(t, await deployOf(pipelines[1]), 'failed');
    await drainJobs(t.app.cairn);
    const free = await t.get(url('/production/current_job'), { token: developer.token });
    assert.equal(free.status, 200);
    assert.equal(free.body, null);
    assert.deepEqual((await t.get(url('/production/upcoming_jobs'), { token: developer.token })).body, []);
  });

  it('refuses a process mode it does not know, and reporters', async () => {
    const bad = await t.put(url('/production'), { process_mode: 'fastest_first' }, { token: developer.token });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body, { error: 'process_mode does not have a valid value' });
    const unchanged = await t.put(url('/production'), {}, { token: developer.token });
    assert.equal(unchanged.status, 200);
    assert.equal(unchanged.body.process_mode, 'newest_first');
    assert.equal((await t.get(url(), { token: reporter.token })).status, 403);
    assert.equal((await t.put(url('/production'), { process_mode: 'oldest_first' }, { token: reporter.token })).status, 403);
    const outsider = await t.createUser();
    assert.equal((await t.get(url(), { token: outsider.token })).status, 404);
  });
});
