import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';
import { ANONYMOUS, getPage, postForm, webSignIn, type WebSession } from '../helpers/web.js';

const YAML = `
stages: [build, test, deploy]
build: { stage: build, script: [make] }
"te<st>": { stage: test, script: [t], needs: [build] }
lint: { stage: test, script: [l] }
deploy: { stage: deploy, script: [d], when: manual }
`;

describe('web: pipelines and jobs pages', () => {
  let t: TestContext;
  let project: Project;
  let base: string;
  let maintainer: TestUser, developer: TestUser, reporter: TestUser, guest: TestUser, outsider: TestUser;
  let maintainerWeb: WebSession, developerWeb: WebSession, reporterWeb: WebSession, guestWeb: WebSession, outsiderWeb: WebSession;
  let pipelineId: number;

  before(async () => {
    // Developers retry and play pipelines of main here: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    [maintainer, developer, reporter, guest, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    project = await t.createProject({ owner: maintainer.user });
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, guest.user, 10);
    base = `/${maintainer.user.username}/${project.path}`;
    await commitFiles(t, project, { '.gitlab-ci.yml': YAML }, { message: 'Add CI <script>alert(1)</script>\n\nbody' });
    pipelineId = (await latestPipeline(t, project.id)).id;
    [maintainerWeb, developerWeb, reporterWeb, guestWeb, outsiderWeb] = await Promise.all([maintainer, developer, reporter, guest, outsider].map((u) => webSignIn(t, u)));
  });
  after(() => t.close());

  it('lists pipelines with status, ref, commit title (escaped), short sha and scope tabs', async () => {
    const res = await getPage(t, reporterWeb, `${base}/-/pipelines`);
    assert.equal(res.status, 200, res.text);
    assert.ok(res.text.includes(`href="${base}/-/pipelines/${pipelineId}"`));
    assert.ok(res.text.includes('Add CI &lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(!res.text.includes('<script>alert(1)'));
    assert.match(res.text, /<span class="badge pending">pending<\/span>/);
    assert.match(res.text, /aria-current="page">All</);
    const sha = (await latestPipeline(t, project.id)).sha;
    assert.ok(res.text.includes(sha.slice(0, 8)));
    const finished = await getPage(t, reporterWeb, `${base}/-/pipelines?scope=finished`);
    assert.equal(finished.status, 200);
    assert.match(finished.text, /aria-current="page">Finished</);
    assert.match(finished.text, /There are no pipelines to show here/);
    const branches = await getPage(t, reporterWeb, `${base}/-/pipelines?scope=branches`);
    assert.ok(branches.text.includes(`/-/pipelines/${pipelineId}"`));
  });

  it('clears runner caches for maintainers (the jobs_cache_index goes up), 403 for developers', async () => {
    const url = `${base}/-/settings/ci_cd/reset_cache`;
    assert.ok(!(await getPage(t, developerWeb, `${base}/-/pipelines`)).text.includes(`action="${url}"`));
    assert.ok((await getPage(t, maintainerWeb, `${base}/-/pipelines`)).text.includes(`action="${url}"`));
    assert.equal((await postForm(t, developerWeb, url, {})).status, 403);
    assert.equal((await postForm(t, maintainerWeb, url, { authenticity_token: 'wrong' })).status, 422);
    const index = async () => (await t.db.selectFrom('projects').select('jobs_cache_index').where('id', '=', project.id).executeTakeFirstOrThrow()).jobs_cache_index;
    assert.equal(await index(), null);
    const res = await postForm(t, maintainerWeb, url, {});
    assert.equal(res.status, 303);
    assert.equal(await index(), 1);
    assert.equal((await postForm(t, maintainerWeb, url, {})).status, 303);
    assert.equal(await index(), 2);
    assert.match((await getPage(t, maintainerWeb, `${base}/-/pipelines?cache_cleared=1`)).text, /Project cache successfully reset\./);
  });

  it('shows a pipeline: header, stages as columns with each job linking to its page, the jobs table', async () => {
    const res = await getPage(t, reporterWeb, `${base}/-/pipelines/${pipelineId}`);
    assert.equal(res.status, 200, res.text);
    const jobs = await jobsByName(t, pipelineId);
    for (const stage of ['build', 'test', 'deploy']) assert.ok(res.text.includes(`aria-label="Stage ${stage}"`), stage);
    assert.ok(res.text.includes(`href="${base}/-/jobs/${jobs.build.id}"`));
    assert.ok(res.text.includes('te&lt;st&gt;'));
    assert.ok(!res.text.includes('te<st>'));
    assert.match(res.text, /needs: build/);
    assert.ok(res.text.includes('Add CI &lt;script&gt;'));
    // A reporter sees no buttons.
    assert.ok(!res.text.includes('/cancel"'));
    const dev = await getPage(t, developerWeb, `${base}/-/pipelines/${pipelineId}`);
    assert.ok(dev.text.includes(`action="${base}/-/pipelines/${pipelineId}/cancel"`));
    assert.equal((await getPage(t, reporterWeb, `${base}/-/pipelines/999999`)).status, 404);
    assert.equal((await getPage(t, reporterWeb, `${base}/-/pipelines/abc`)).status, 404);
  });

  it('explains a stuck job as GitLab does (no online runner can take it), with what to install; the API shows no runner', async () => {
    const jobs = await jobsByName(t, pipelineId);
    const page = await getPage(t, reporterWeb, `${base}/-/jobs/${jobs.build.id}`);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /This job is stuck because the project doesn(&#39;|&#x27;|')t have any runners online assigned to it\./);
    assert.match(page.text, /apt-get install bubblewrap passt/);
    const pipelinePage = await getPage(t, reporterWeb, `${base}/-/pipelines/${pipelineId}`);
    assert.match(pipelinePage.text, /(A job of this pipeline is|\d+ jobs of this pipeline are) stuck: no online runner can take/);
    assert.match(pipelinePage.text, /class="badge warn" title="no online runner can take this job">stuck</);
    const api = await t.get(`/api/v4/projects/${project.id}/jobs/${jobs.build.id}`);
    assert.equal(api.status, 200);
    assert.equal(api.body.status, 'pending');
    assert.equal(api.body.runner, null);
    assert.equal('stuck' in api.body, false, "GitLab's public job JSON has no stuck field");
    // An online instance runner for untagged jobs: nothing is stuck any more.
    const runner = await t.db
      .insertInto('ci_runners')
      .values({ token_digest: `stuck-test-${Math.random()}`, runner_type: 'instance_type', tag_list: [], run_untagged: true, description: 'online', contacted_at: new Date() })
      .returning('id')
      .executeTakeFirstOrThrow();
    try {
      const again = await getPage(t, reporterWeb, `${base}/-/jobs/${jobs.build.id}`);
      assert.doesNotMatch(again.text, /This job is stuck/);
      assert.match(again.text, /it waits for a runner/);
      assert.doesNotMatch((await getPage(t, reporterWeb, `${base}/-/pipelines/${pipelineId}`)).text, /stuck/);
    } finally {
      await t.db.deleteFrom('ci_runners').where('id', '=', runner.id).execute();
    }
  });

  it('hides a private project\'s pipelines and jobs: 404 to outsiders, sign in for anonymous visitors, 404 to guests when jobs are not public', async () => {
    const jobs = await jobsByName(t, pipelineId);
    for (const path of ['/-/pipelines', `/-/pipelines/${pipelineId}`, '/-/jobs', `/-/jobs/${jobs.build.id}`, `/-/jobs/${jobs.build.id}/raw`]) {
      assert.equal((await getPage(t, outsiderWeb, base + path)).status, 404, path);
      const anon = await getPage(t, ANONYMOUS, base + path);
      assert.equal(anon.status, 302, path);
      assert.match(anon.headers.location, /^\/users\/sign_in\?redirect_to=/);
    }
    // Guests read pipelines while the project's jobs are public (the default, as GitLab's public_builds).
    assert.equal((await getPage(t, guestWeb, `${base}/-/pipelines`)).status, 200);
    assert.equal((await t.put(`/api/v4/projects/${project.id}`, { public_jobs: false })).status, 200);
    try {
      for (const path of ['/-/pipelines', `/-/pipelines/${pipelineId}`, '/-/jobs', `/-/jobs/${jobs.build.id}`]) {
        const res = await getPage(t, guestWeb, base + path);
        assert.equal(res.status, 404, path);
      }
      const nav = await getPage(t, guestWeb, base);
      assert.ok(!nav.text.includes(`${base}/-/pipelines"`), 'no Pipelines link for the guest');
      assert.equal((await getPage(t, reporterWeb, `${base}/-/pipelines`)).status, 200);
    } finally {
      await t.put(`/api/v4/projects/${project.id}`, { public_jobs: true });
    }
  });

  it('lists jobs and shows a finished job with its log cleaned of escape sequences and section markers, and the raw log', async () => {
    const jobs = await jobsByName(t, pipelineId);
    const trace = '\x1b[0Ksection_start:1700000000:prepare\r\x1b[0K\x1b[36;1mPreparing <env>\x1b[0;m\n$ make\nbuilt \x1b[32mOK\x1b[0m\n\x1b[0Ksection_end:1700000001:prepare\r\x1b[0K';
    await runJob(t, jobs.build, 'success', { trace });
    const list = await getPage(t, reporterWeb, `${base}/-/jobs`);
    assert.equal(list.status, 200);
    assert.ok(list.text.includes(`href="${base}/-/jobs/${jobs.build.id}"`));
    assert.ok(list.text.includes('te&lt;st&gt;'));
    const finished = await getPage(t, reporterWeb, `${base}/-/jobs?scope=finished`);
    assert.ok(finished.text.includes(`/-/jobs/${jobs.build.id}"`));
    assert.ok(!finished.text.includes(`/-/jobs/${jobs.lint.id}"`));

    const page = await getPage(t, reporterWeb, `${base}/-/jobs/${jobs.build.id}`);
    assert.equal(page.status, 200, page.text);
    const log = /<pre class="log"[^>]*>([\s\S]*?)<\/pre>/.exec(page.text);
    assert.ok(log);
    assert.equal(log[1], 'Preparing &lt;env&gt;\n$ make\nbuilt OK\n');
    assert.ok(!log[0].includes('data-log-stream'), 'a finished job does not stream');
    assert.match(page.text, /<span class="badge success" data-job-status>passed<\/span>/);
    assert.ok(page.text.includes(`href="${base}/-/pipelines/${pipelineId}"`));
    assert.ok(page.text.includes('test runner'), 'the runner is shown');

    const raw = await getPage(t, reporterWeb, `${base}/-/jobs/${jobs.build.id}/raw`);
    assert.equal(raw.status, 200);
    assert.match(raw.headers['content-type'], /^text\/plain/);
    assert.equal(raw.text, trace);

    // A pending job's page streams its log.
    const pending = await getPage(t, reporterWeb, `${base}/-/jobs/${jobs.lint.id}`);
    assert.match(pending.text, new RegExp(`data-log-stream="${base}/-/jobs/${jobs.lint.id}/trace/stream\\?offset=0"`));
    assert.match(pending.text, /has not started yet/);
  });

  it('retries and cancels for developers (CSRF checked), 403 for reporters', async () => {
    const jobs = await jobsByName(t, pipelineId);
    const pipelineUrl = `${base}/-/pipelines/${pipelineId}`;
    const denied = await postForm(t, reporterWeb, `${pipelineUrl}/cancel`, {});
    assert.equal(denied.status, 403);
    assert.equal((await postForm(t, reporterWeb, `${pipelineUrl}/retry`, {})).status, 403);
    assert.equal((await postForm(t, reporterWeb, `${base}/-/jobs/${jobs.build.id}/retry`, {})).status, 403);
    assert.equal((await postForm(t, outsiderWeb, `${pipelineUrl}/cancel`, {})).status, 404);
    const stale = await postForm(t, developerWeb, `${pipelineUrl}/cancel`, { authenticity_token: 'wrong' });
    assert.equal(stale.status, 422);
    assert.equal((await postForm(t, developerWeb, `${base}/-/jobs/${jobs.lint.id}/cancel`, { authenticity_token: 'wrong' })).status, 422);
    assert.equal((await latestPipeline(t, project.id)).status, 'running');

    // Cancel one job, then the pipeline.
    const cancelJob = await postForm(t, developerWeb, `${base}/-/jobs/${jobs.lint.id}/cancel`, {});
    assert.equal(cancelJob.status, 303);
    assert.equal(cancelJob.headers.location, `${base}/-/jobs/${jobs.lint.id}`);
    assert.equal((await jobsByName(t, pipelineId)).lint.status, 'canceled');
    const cancel = await postForm(t, developerWeb, `${pipelineUrl}/cancel`, {});
    assert.equal(cancel.status, 303);
    assert.equal(cancel.headers.location, pipelineUrl);
    assert.equal((await latestPipeline(t, project.id)).status, 'canceled');

    // The pipeline page now offers retry; retrying brings new attempts.
    const page = await getPage(t, developerWeb, pipelineUrl);
    assert.ok(page.text.includes(`action="${pipelineUrl}/retry"`));
    const retry = await postForm(t, developerWeb, `${pipelineUrl}/retry`, {});
    assert.equal(retry.status, 303);
    const after = await jobsByName(t, pipelineId);
    assert.notEqual(after.lint.id, jobs.lint.id);
    assert.notEqual(after.lint.status, 'canceled');

    // Retrying one job redirects to the new attempt.
    const retryJob = await postForm(t, developerWeb, `${base}/-/jobs/${jobs.build.id}/retry`, {});
    assert.equal(retryJob.status, 303);
    const newer = await jobsByName(t, pipelineId);
    assert.notEqual(newer.build.id, jobs.build.id);
    assert.equal(retryJob.headers.location, `${base}/-/jobs/${newer.build.id}`);
    const oldPage = await getPage(t, developerWeb, `${base}/-/jobs/${jobs.build.id}`);
    assert.ok(oldPage.text.includes(`its latest attempt, #${newer.build.id}`));
    assert.ok(!oldPage.text.includes(`action="${base}/-/jobs/${jobs.build.id}/retry"`), 'no retry button on an old attempt');
    // An old attempt is not retryable again.
    assert.equal((await postForm(t, developerWeb, `${base}/-/jobs/${jobs.build.id}/retry`, {})).status, 403);
  });

  it('plays a manual job', async () => {
    await t.db.updateTable('ci_builds').set({ status: 'manual' }).where('pipeline_id', '=', pipelineId).where('name', '=', 'deploy').where('retried', '=', false).execute();
    const deploy = (await jobsByName(t, pipelineId)).deploy;
    const page = await getPage(t, developerWeb, `${base}/-/jobs/${deploy.id}`);
    assert.ok(page.text.includes(`action="${base}/-/jobs/${deploy.id}/play"`));
    assert.match(page.text, /requires a manual action/);
    assert.equal((await postForm(t, reporterWeb, `${base}/-/jobs/${deploy.id}/play`, {})).status, 403);
    const play = await postForm(t, developerWeb, `${base}/-/jobs/${deploy.id}/play`, {});
    assert.equal(play.status, 303);
    const row = await t.db.selectFrom('ci_builds').select(['status', 'user_id']).where('id', '=', deploy.id).executeTakeFirstOrThrow();
    assert.notEqual(row.status, 'manual');
    assert.equal(row.user_id, developer.user.id);
    assert.equal((await postForm(t, developerWeb, `${base}/-/jobs/${deploy.id}/play`, {})).status, 400);
  });

  it('paginates the pipelines list', async () => {
    const p = await latestPipeline(t, project.id);
    const rows = Array.from({ length: 21 }, (_, i) => ({
      iid: 100 + i, project_id: project.id, ref: 'main', sha: p.sha, source: 'api', status: 'success' as const, created_at: new Date(), updated_at: new Date(),
    }));
    await t.db.insertInto('ci_pipelines').values(rows as any).execute();
    const first = await getPage(t, reporterWeb, `${base}/-/pipelines`);
    assert.match(first.text, /Page 1 of 2/);
    assert.match(first.text, /rel="next"/);
    const second = await getPage(t, reporterWeb, `${base}/-/pipelines?page=2`);
    assert.match(second.text, /Page 2 of 2/);
    assert.ok(second.text.includes(`/-/pipelines/${pipelineId}"`), 'the oldest pipeline is on page 2');
    assert.ok(!first.text.includes(`/-/pipelines/${pipelineId}"`));
  });
});
