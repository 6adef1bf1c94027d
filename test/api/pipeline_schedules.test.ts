import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../../src/app.js';
import { nextRunAt, runDueSchedule, runDueSchedules } from '../../src/ci/pipelines/schedules.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';
import { until } from '../helpers/until.js';

const CI = `scheduled:
  script: [echo "$SCHED_VAR"]
  rules:
    - if: $CI_PIPELINE_SOURCE == "schedule"
pushed:
  script: [echo push]
  rules:
    - if: $CI_PIPELINE_SOURCE == "push"
`;

describe('pipeline schedules API', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project;
  let base: string;
  let guest: TestUser, reporter: TestUser, developer: TestUser, developer2: TestUser, maintainer: TestUser, outsider: TestUser;

  before(async () => {
    t = await createTestContext({ defaultBranchProtection: 0 });
    group = await t.createGroup();
    project = await t.createProject({ group });
    base = `/api/v4/projects/${project.id}/pipeline_schedules`;
    [guest, reporter, developer, developer2, maintainer, outsider] = await Promise.all(Array.from({ length: 6 }, () => t.createUser()));
    for (const [u, level] of [[guest, 10], [reporter, 20], [developer, 30], [developer2, 30], [maintainer, 40]] as const) await t.addMember(project, u.user, level);
    await commitFiles(t, project, { '.gitlab-ci.yml': CI, 'README.md': 'hi\n' });
  });
  after(async () => {
    await t?.close();
  });

  const create = (body: Record<string, unknown>, token = developer.token) => t.post(base, body, { token });

  it('creates a schedule: the full ref, the time zone, the next run, the owner', async () => {
    const res = await create({ description: 'Nightly', ref: 'main', cron: '0 2 * * *', cron_timezone: 'Asia/Tokyo' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const s = res.body;
    assert.equal(s.description, 'Nightly');
    assert.equal(s.ref, 'refs/heads/main');
    assert.equal(s.cron, '0 2 * * *');
    assert.equal(s.cron_timezone, 'Asia/Tokyo');
    assert.equal(s.active, true);
    assert.equal(s.owner.username, developer.user.username);
    assert.equal(s.last_pipeline, null);
    assert.deepEqual(s.variables, []);
    // 02:00 in Tokyo is 17:00 UTC, within the next day.
    const next = new Date(s.next_run_at);
    assert.equal(next.getUTCHours(), 17);
    assert.equal(next.getUTCMinutes(), 0);
    assert.ok(next.getTime() > Date.now() && next.getTime() <= Date.now() + 86_400_000);

    const defaults = await create({ description: 'Weekly', ref: 'refs/heads/main', cron: '@weekly', active: false });
    assert.equal(defaults.status, 201);
    assert.equal(defaults.body.cron_timezone, 'UTC');
    assert.equal(defaults.body.active, false);
    assert.equal(new Date(defaults.body.next_run_at).getUTCDay(), 0);
    // Rails' zone names, as GitLab's documentation shows them.
    const rails = await create({ description: 'Pacific', ref: 'main', cron: '30 8 * * 1-5', cron_timezone: 'Pacific Time (US & Canada)' });
    assert.equal(rails.status, 201);
    assert.equal(rails.body.cron_timezone, 'Pacific Time (US & Canada)');
    // A form (curl --form) is read like JSON.
    const boundary = 'XyZzy';
    const form = ['description=Form', 'ref=main', 'cron=5 4 * * *'].map((f) => {
      const [k, v] = f.split('=');
      return `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
    }).join('') + `--${boundary}--\r\n`;
    const multipart = await t.app.inject({ method: 'POST', url: base, headers: { 'private-token': developer.token, 'content-type': `multipart/form-data; boundary=${boundary}` }, payload: form });
    assert.equal(multipart.statusCode, 201, multipart.body);
    assert.equal(JSON.parse(multipart.body).cron, '5 4 * * *');
  });

  it('refuses bad input with GitLab\'s errors', async () => {
    const bad = async (body: Record<string, unknown>, expected: unknown) => {
      const res = await create({ description: 'x', ref: 'main', cron: '* * * * *', ...body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.deepEqual(res.body, expected, JSON.stringify(body));
    };
    for (const cron of ['* * * *', '60 * * * *', '* 24 * * *', '* * 0 * *', '* * * 13 *', '* * * * 8', '*/0 * * * *', 'a b c d e', '0 0 30 2 *', '* * * * * *', '1-2-3 * * * *', '@reboot']) {
      await bad({ cron }, { message: { cron: [' is invalid syntax'] } });
    }
    for (const cron_timezone of ['Mars/Olympus', 'asia/tokyo', '+01:00', '']) {
      await bad({ cron_timezone }, { message: { cron_timezone: [' is invalid syntax'] } });
    }
    await bad({ description: '  ' }, { message: { description: ["can't be blank"] } });
    await bad({ ref: '' }, { error: 'ref is empty' });
    const missing = await t.post(base, { ref: 'main', cron: '* * * * *' }, { token: developer.token });
    assert.equal(missing.status, 400);
    assert.match(missing.body.error, /description is missing/);
    // A name that is a branch and a tag is ambiguous.
    assert.equal((await t.post(`/api/v4/projects/${project.id}/repository/tags`, { tag_name: 'main', ref: 'main' })).status, 201);
    await bad({ ref: 'main' }, { message: { ref: ['is ambiguous'] } });
    assert.equal((await t.delete(`/api/v4/projects/${project.id}/repository/tags/main`)).status, 204);
    assert.equal((await t.get(base, { query: { scope: 'all' }, token: reporter.token })).status, 400);
  });

  it('shows schedules to reporters, variables to who may edit them, nothing to others', async () => {
    const s = (await create({ description: 'Seen', ref: 'main', cron: '0 0 * * *' })).body;
    assert.equal((await t.post(`${base}/${s.id}/variables`, { key: 'SECRET', value: 's3cret' }, { token: developer.token })).status, 201);
    const list = await t.get(base, { token: reporter.token });
    assert.equal(list.status, 200);
    assert.ok(list.body.some((x: any) => x.id === s.id));
    const ids = list.body.map((x: any) => x.id);
    assert.deepEqual(ids, [...ids].sort((a: number, b: number) => b - a), 'newest first');
    assert.ok(list.body.every((x: any) => !('variables' in x) && !('last_pipeline' in x)));
    assert.equal(list.headers['x-total'], String(list.body.length));
    const active = await t.get(base, { query: { scope: 'inactive' }, token: reporter.token });
    assert.ok(active.body.every((x: any) => x.active === false));
    const asReporter = await t.get(`${base}/${s.id}`, { token: reporter.token });
    assert.equal(asReporter.status, 200);
    assert.equal('variables' in asReporter.body, false);
    const asMaintainer = await t.get(`${base}/${s.id}`, { token: maintainer.token });
    assert.deepEqual(asMaintainer.body.variables, [{ variable_type: 'env_var', key: 'SECRET', value: 's3cret', raw: false }]);
    assert.deepEqual((await t.get(`${base}/${s.id}`, { token: developer.token })).body.variables?.map((v: any) => v.key), ['SECRET']);
    assert.equal((await t.get(`${base}/${s.id}`, { token: developer2.token })).body.variables, undefined);
    assert.equal((await t.get(base, { token: guest.token })).status, 403);
    assert.deepEqual((await t.get(`${base}/${s.id}`, { token: guest.token })).body, { message: '404 Pipeline Schedule Not Found' });
    assert.equal((await t.get(base, { token: outsider.token })).status, 404);
    assert.equal((await t.get(base, { token: null })).status, 401);
    assert.equal((await create({ description: 'x', ref: 'main', cron: '* * * * *' }, reporter.token)).status, 403);
    assert.equal((await t.get(`${base}/999999`, { token: maintainer.token })).status, 404);
  });

  it('lets its owner edit it, maintainers take it over and delete it', async () => {
    const s = (await create({ description: 'Owned', ref: 'main', cron: '0 3 * * *' })).body;
    // Only the owner (and administrators) edit; maintainers take ownership first.
    assert.equal((await t.put(`${base}/${s.id}`, { cron: '0 4 * * *' }, { token: maintainer.token })).status, 403);
    assert.equal((await t.put(`${base}/${s.id}`, { cron: '0 4 * * *' }, { token: developer2.token })).status, 403);
    const edited = await t.put(`${base}/${s.id}`, { cron: '15 4 * * *', description: 'Owned!', active: false }, { token: developer.token });
    assert.equal(edited.status, 200);
    assert.equal(edited.body.cron, '15 4 * * *');
    assert.equal(edited.body.active, false);
    assert.equal(new Date(edited.body.next_run_at).getUTCMinutes(), 15);
    assert.deepEqual((await t.put(`${base}/${s.id}`, { cron: 'every day' }, { token: developer.token })).body, { message: { cron: [' is invalid syntax'] } });
    assert.equal((await t.put(`${base}/${s.id}`, { description: 'by root' })).status, 200);

    assert.equal((await t.post(`${base}/${s.id}/take_ownership`, {}, { token: developer2.token })).status, 403);
    const taken = await t.post(`${base}/${s.id}/take_ownership`, {}, { token: maintainer.token });
    assert.equal(taken.status, 201);
    assert.equal(taken.body.owner.username, maintainer.user.username);
    assert.equal((await t.post(`${base}/${s.id}/take_ownership`, {}, { token: maintainer.token })).status, 200);
    assert.equal((await t.put(`${base}/${s.id}`, { active: true }, { token: developer.token })).status, 403, 'the old owner may not edit it');
    assert.equal((await t.put(`${base}/${s.id}`, { active: true }, { token: maintainer.token })).status, 200);

    assert.equal((await t.delete(`${base}/${s.id}`, { token: developer.token })).status, 403);
    assert.equal((await t.delete(`${base}/${s.id}`, { token: maintainer.token })).status, 204);
    assert.equal((await t.get(`${base}/${s.id}`, { token: maintainer.token })).status, 404);
  });

  it('manages schedule variables: the owner sets them, maintainers read and delete them', async () => {
    const s = (await create({ description: 'Vars', ref: 'main', cron: '0 5 * * *' })).body;
    const vbase = `${base}/${s.id}/variables`;
    const made = await t.post(vbase, { key: 'DEPLOY_ENV', value: 'staging', variable_type: 'file' }, { token: developer.token });
    assert.equal(made.status, 201);
    assert.deepEqual(made.body, { variable_type: 'file', key: 'DEPLOY_ENV', value: 'staging', raw: false });
    const row = await t.db.selectFrom('ci_pipeline_schedule_variables').selectAll().where('pipeline_schedule_id', '=', s.id).executeTakeFirstOrThrow();
    assert.ok(!row.value_encrypted.includes('staging'), 'stored encrypted');
    assert.deepEqual((await t.post(vbase, { key: 'DEPLOY_ENV', value: 'x' }, { token: developer.token })).body, { message: { key: ['has already been taken'] } });
    assert.deepEqual((await t.post(vbase, { key: 'bad-key', value: 'x' }, { token: developer.token })).body, { message: { key: ["can contain only letters, digits and '_'."] } });
    assert.equal((await t.post(vbase, { key: 'T', value: 'x', variable_type: 'json' }, { token: developer.token })).status, 400);
    assert.equal((await t.post(vbase, { key: 'OTHER', value: 'x' }, { token: maintainer.token })).status, 403, 'not the owner');
    assert.equal((await t.post(vbase, { key: 'OTHER', value: 'x' }, { token: reporter.token })).status, 403);
    const updated = await t.put(`${vbase}/DEPLOY_ENV`, { value: 'production' }, { token: developer.token });
    assert.deepEqual(updated.body, { variable_type: 'file', key: 'DEPLOY_ENV', value: 'production', raw: false });
    assert.equal((await t.put(`${vbase}/NOPE`, { value: 'x' }, { token: developer.token })).status, 404);
    assert.equal((await t.get(`${vbase}/DEPLOY_ENV`, { token: maintainer.token })).body.value, 'production');
    assert.equal((await t.get(`${vbase}/DEPLOY_ENV`, { token: developer2.token })).status, 403);
    assert.equal((await t.delete(`${vbase}/DEPLOY_ENV`, { token: developer2.token })).status, 403);
    const gone = await t.delete(`${vbase}/DEPLOY_ENV`, { token: maintainer.token });
    assert.equal(gone.status, 202);
    assert.deepEqual(gone.body, { variable_type: 'file', key: 'DEPLOY_ENV', value: 'production', raw: false });
    assert.deepEqual((await t.get(`${vbase}/DEPLOY_ENV`, { token: maintainer.token })).body, { message: '404 Pipeline Schedule Variable Not Found' });
  });

  it('keeps schedules off protected refs for who may not update them', async () => {
    const prot = `/api/v4/projects/${project.id}/protected_branches`;
    assert.equal((await t.post(`/api/v4/projects/${project.id}/repository/branches`, { branch: 'release', ref: 'main' })).status, 201);
    const maintained = (await create({ description: 'Release', ref: 'release', cron: '0 6 * * *' }, maintainer.token)).body;
    assert.equal((await t.post(prot, { name: 'release', push_access_level: 40, merge_access_level: 40 })).status, 201);
    const refused = await create({ description: 'Release', ref: 'release', cron: '0 6 * * *' });
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.body, { message: { base: ['The current user is not authorized to create the pipeline schedule'] } });
    assert.equal((await create({ description: 'Release', ref: 'release', cron: '0 6 * * *' }, maintainer.token)).status, 201);
    // Moving a schedule of one's own onto it is refused too; playing one there is forbidden.
    const mine = (await create({ description: 'Mine', ref: 'main', cron: '0 6 * * *' })).body;
    assert.deepEqual((await t.put(`${base}/${mine.id}`, { ref: 'release' }, { token: developer.token })).body, { message: { base: ['The current user is not authorized to update the pipeline schedule'] } });
    assert.equal((await t.post(`${base}/${maintained.id}/play`, {}, { token: developer.token })).status, 403);
  });

  async function schedulePipelines(id: number) {
    return t.db.selectFrom('ci_pipelines').selectAll().where('pipeline_schedule_id', '=', id).orderBy('id').execute();
  }

  /** Makes these schedules due (their next run a minute ago) and no other (the others' far away, whatever the clock says). */
  async function makeDue(...ids: number[]) {
    await t.db.updateTable('ci_pipeline_schedules').set({ next_run_at: new Date('2100-01-01T00:00:00Z') }).where('id', 'not in', [0, ...ids]).execute();
    if (ids.length) await t.db.updateTable('ci_pipeline_schedules').set({ next_run_at: new Date(Math.floor(Date.now() / 60_000) * 60_000 - 60_000) }).where('id', 'in', ids).execute();
  }

  it('runs a due schedule once: its pipeline as its owner, with its variables, and the next run after now', async () => {
    const s = (await create({ description: 'Run', ref: 'main', cron: '*/10 * * * *' })).body;
    assert.equal((await t.post(`${base}/${s.id}/variables`, { key: 'SCHED_VAR', value: 'from the schedule' }, { token: developer.token })).status, 201);
    await makeDue();
    assert.deepEqual(await runDueSchedules(t.app.cairn), [], 'not due yet');
    await makeDue(s.id);
    const now = new Date();
    const outcomes = await runDueSchedules(t.app.cairn, now);
    assert.deepEqual(outcomes, ['created']);
    const [p] = await schedulePipelines(s.id);
    assert.equal(p.source, 'schedule');
    assert.equal(p.user_id, developer.user.id);
    assert.equal(p.ref, 'main');
    const after = (await t.get(`${base}/${s.id}`, { token: developer.token })).body;
    assert.ok(new Date(after.next_run_at).getTime() > now.getTime(), 'the next run is after the run');
    assert.equal(new Date(after.next_run_at).getUTCMinutes() % 10, 0);
    assert.equal(after.last_pipeline.id, p.id);
    assert.equal(after.last_pipeline.source, 'schedule');
    assert.deepEqual(await runDueSchedules(t.app.cairn, now), [], 'ran once');
    const listed = await t.get(`${base}/${s.id}/pipelines`, { token: reporter.token });
    assert.deepEqual(listed.body.map((x: any) => x.id), [p.id]);
    // The pipeline's job sees the schedule's variables and its source (the rules kept "scheduled" only).
    const jobs = await t.db.selectFrom('ci_builds').select(['name']).where('pipeline_id', '=', p.id).execute();
    assert.deepEqual(jobs.map((j) => j.name), ['scheduled']);
    const runner = await ProtocolRunner.register(t);
    let job = await runner.takeJob();
    while (job && !job.payload.variables.some((v: any) => v.key === 'CI_PIPELINE_ID' && v.value === String(p.id))) {
      await runner.finish(job);
      job = await runner.takeJob();
    }
    assert.ok(job, 'the scheduled job was handed out');
    const vars = Object.fromEntries(job.payload.variables.map((v: any) => [v.key, v.value]));
    assert.equal(vars.CI_PIPELINE_SOURCE, 'schedule');
    assert.equal(vars.SCHED_VAR, 'from the schedule');
    assert.equal(vars.GITLAB_USER_LOGIN, developer.user.username);
    await runner.finish(job);
  });

  it('plays a schedule now, as the caller, leaving its next run alone', async () => {
    const s = (await create({ description: 'Play', ref: 'main', cron: '0 0 1 1 *' })).body;
    assert.equal((await t.post(`${base}/${s.id}/play`, {}, { token: reporter.token })).status, 403);
    const played = await t.post(`${base}/${s.id}/play`, {}, { token: developer2.token });
    assert.equal(played.status, 201);
    assert.deepEqual(played.body, { message: '201 Created' });
    await drainJobs(t.app.cairn);
    const [p] = await schedulePipelines(s.id);
    assert.ok(p, 'the queue created the pipeline');
    assert.equal(p.source, 'schedule');
    assert.equal(p.user_id, developer2.user.id);
    assert.equal((await t.get(`${base}/${s.id}`, { token: developer.token })).body.next_run_at, s.next_run_at);
  });

  it('deactivates a schedule whose owner may no longer run pipelines', async () => {
    const leaver = await t.createUser();
    await t.addMember(project, leaver.user, 30);
    const s = (await create({ description: 'Leaver', ref: 'main', cron: '0 7 * * *' }, leaver.token)).body;
    await t.db.deleteFrom('members').where('user_id', '=', leaver.user.id).execute();
    await makeDue(s.id);
    assert.deepEqual(await runDueSchedules(t.app.cairn), ['deactivated']);
    assert.equal((await schedulePipelines(s.id)).length, 0);
    const after = (await t.get(`${base}/${s.id}`, { token: maintainer.token })).body;
    assert.equal(after.active, false);
    // A maintainer takes it over and turns it on again.
    assert.equal((await t.post(`${base}/${s.id}/take_ownership`, {}, { token: maintainer.token })).status, 201);
    assert.equal((await t.put(`${base}/${s.id}`, { active: true }, { token: maintainer.token })).body.active, true);
  });

  it('runs a due time once when runs race in one process', async () => {
    const s = (await create({ description: 'Race', ref: 'main', cron: '*/5 * * * *' })).body;
    await makeDue(s.id);
    const row = await t.db.selectFrom('ci_pipeline_schedules').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
    const countPipelines = async () => (await t.db.selectFrom('ci_pipelines').select('id').where('project_id', '=', project.id).execute()).length;
    const before = await countPipelines();
    const outcomes = await Promise.all(Array.from({ length: 4 }, () => runDueSchedule(t.app.cairn, row)));
    assert.deepEqual(outcomes.filter((o) => o === 'created'), ['created']);
    assert.ok(outcomes.every((o) => o === 'created' || o === 'taken'), JSON.stringify(outcomes));
    assert.equal((await schedulePipelines(s.id)).length, 1);
    assert.equal(await countPipelines(), before + 1, 'no other pipeline was left behind');
  });

  it('runs each due time exactly once with two Cairn processes on one PostgreSQL', { skip: !process.env.DATABASE_URL && 'needs PostgreSQL (DATABASE_URL): two processes share the database' }, async () => {
    const second: App = await buildApp({ config: t.config, prepare: false, logger: false });
    try {
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) ids.push((await create({ description: `Two ${i}`, ref: 'main', cron: '*/15 * * * *' })).body.id);
      for (let round = 1; round <= 3; round++) {
        await makeDue(...ids);
        const cairns = [t.app.cairn, second.cairn, t.app.cairn, second.cairn];
        const now = new Date();
        const outcomes = (await Promise.all(cairns.map((c) => runDueSchedules(c, now)))).flat();
        assert.equal(outcomes.filter((o) => o === 'created').length, ids.length, `round ${round}: ${JSON.stringify(outcomes)}`);
        for (const id of ids) assert.equal((await schedulePipelines(id)).length, round, `schedule ${id}, round ${round}`);
      }
    } finally {
      await second.close();
    }
  });

  it('rolls a pipeline back when another process moved the due time on while it was made (the guarded update)', { skip: !process.env.DATABASE_URL && 'needs PostgreSQL (DATABASE_URL): a second connection holds the row' }, async () => {
    const second: App = await buildApp({ config: t.config, prepare: false, logger: false });
    try {
      const s = (await create({ description: 'Guard', ref: 'main', cron: '*/20 * * * *' })).body;
      await makeDue(s.id);
      const row = await t.db.selectFrom('ci_pipeline_schedules').selectAll().where('id', '=', s.id).executeTakeFirstOrThrow();
      // The other process moves the due time on and holds its transaction open...
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let moved!: () => void;
      const movedSignal = new Promise<void>((r) => (moved = r));
      const other = second.cairn.db.transaction().execute(async (trx) => {
        await trx.updateTable('ci_pipeline_schedules').set({ next_run_at: new Date(Date.now() + 3_600_000) }).where('id', '=', s.id).execute();
        moved();
        await held;
      });
      await movedSignal;
      // ...while this one, which read the old due time, makes the pipeline and waits on the row.
      const run = runDueSchedule(t.app.cairn, row);
      await until('the guarded update to wait for the row', async () =>
        (await sql<{ n: number }>`select count(*)::int as n from pg_locks where not granted`.execute(t.db)).rows[0].n > 0, 30_000);
      release();
      await other;
      assert.equal(await run, 'taken');
      assert.equal((await schedulePipelines(s.id)).length, 0, 'the pipeline was rolled back');
    } finally {
      await second.close();
    }
  });

  it('computes next runs as the cron and the zone say', () => {
    const from = new Date('2026-03-07T12:00:00Z');
    // 02:30 does not happen in New York on 2026-03-08: it runs an hour later, 03:30 EDT.
    assert.equal(nextRunAt({ cron: '30 2 * * *', cron_timezone: 'America/New_York' }, from)?.toISOString(), '2026-03-08T07:30:00.000Z');
    assert.equal(nextRunAt({ cron: '30 2 * * *', cron_timezone: 'America/New_York' }, new Date('2026-03-08T07:30:00Z'))?.toISOString(), '2026-03-09T06:30:00.000Z');
    // 01:30 happens twice on 2026-11-01: it runs once, the first time.
    assert.equal(nextRunAt({ cron: '30 1 * * *', cron_timezone: 'America/New_York' }, new Date('2026-11-01T04:00:00Z'))?.toISOString(), '2026-11-01T05:30:00.000Z');
    assert.equal(nextRunAt({ cron: '30 1 * * *', cron_timezone: 'America/New_York' }, new Date('2026-11-01T05:30:00Z'))?.toISOString(), '2026-11-02T06:30:00.000Z');
    // GitLab's documented examples.
    assert.equal(nextRunAt({ cron: '0 1 * * 5', cron_timezone: 'UTC' }, new Date('2017-05-19T13:43:08Z'))?.toISOString(), '2017-05-26T01:00:00.000Z');
    assert.equal(nextRunAt({ cron: '0 2 * * *', cron_timezone: 'Asia/Tokyo' }, new Date('2017-05-19T13:44:16Z'))?.toISOString(), '2017-05-19T17:00:00.000Z');
  });
});
