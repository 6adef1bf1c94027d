// GET /projects/:id/pipelines/:pipeline_id/test_report and /test_report_summary: the JUnit reports
// (artifacts:reports:junit) a runner uploads, read as GitLab reads them.
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { parseJunit, XmlError } from '../../src/ci/reports/junit.js';
import { testSuiteName } from '../../src/services/test_reports.js';
import { TestReportSchema, TestReportSummarySchema } from '../../src/presenters/schemas/test_reports.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, latestPipeline, ProtocolRunner } from '../helpers/ci.js';
import { assertOne } from '../helpers/contract.js';

function multipart(boundary: string, filename: string, data: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`),
    data,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
}

const RSPEC_1 = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="rspec" tests="3">
    <testcase classname="spec.user" name="is valid" time="0.25" file="./spec/user_spec.rb"/>
    <testcase classname="spec.user" name="saves" time="1.5">
      <failure message="expected true" type="RSpec::Expectations"><![CDATA[Failure/Error: expect(x).to be true
  expected true, got false]]></failure>
    </testcase>
    <testcase classname="spec.user" name="is pending" time="0"><skipped/></testcase>
  </testsuite>
</testsuites>
`;
// a second file of the same job: PHPUnit-style nested suites, and a duplicate of a passing case
const RSPEC_1_B = `<testsuite name="outer"><testsuite name="rspec">
  <testcase classname="spec.user" name="is valid" time="0.25"/>
  <testcase classname="spec.order" name="blows up" time="0.5"><error message="boom"/></testcase>
</testsuite></testsuite>`;
const RSPEC_2 = `<testsuite name="rspec"><testcase classname="spec.cart" name="adds &amp; removes" time="2"/></testsuite>`;

describe('pipeline test report API', () => {
  let t: TestContext;
  let project: Project;
  let developer: TestUser, outsider: TestUser;
  let pipelineId: number;

  before(async () => {
    t = await createTestContext();
    [developer, outsider] = await Promise.all([t.createUser(), t.createUser()]);
    project = await t.createProject({ visibility: 0 });
    await t.addMember(project, developer.user, 30);
    await t.db.updateTable('ci_runners').set({ active: false }).execute();
    await commitFiles(t, project, {
      '.gitlab-ci.yml': `
rspec: { script: [x], parallel: 2, artifacts: { reports: { junit: rspec.xml } } }
matrix: { script: [x], parallel: { matrix: [{ OS: linux }] }, artifacts: { reports: { junit: [m.xml] } } }
broken: { script: [x], artifacts: { reports: { junit: b.xml } } }
lint: { script: [x] }
`,
    });
    pipelineId = (await latestPipeline(t, project.id)).id;
    const runner = await ProtocolRunner.register(t);
    const uploads: Record<string, Buffer> = {
      'rspec 1/2': Buffer.concat([zlib.gzipSync(RSPEC_1), zlib.gzipSync(RSPEC_1_B)]),
      'rspec 2/2': zlib.gzipSync(RSPEC_2),
      'matrix: [linux]': zlib.gzipSync('<testsuite><testcase name="m" time="0.125"/></testsuite>'),
      broken: zlib.gzipSync('<testsuite><testcase name="x">'),
    };
    // five jobs: rspec 1/2, rspec 2/2, matrix, broken, lint (a runner asking for more would wait)
    for (let n = 0; n < 5; n++) {
      const job = await runner.takeJob();
      assert.ok(job, 'a pending job');
      const row = await t.db.selectFrom('ci_builds').select('name').where('id', '=', job.id).executeTakeFirstOrThrow();
      const data = uploads[row.name];
      if (data) {
        const res = await t.app.inject({
          method: 'POST',
          url: `/api/v4/jobs/${job.id}/artifacts?artifact_type=junit&artifact_format=gzip`,
          headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=xyz' },
          payload: multipart('xyz', 'junit.xml.gz', data),
        });
        assert.equal(res.statusCode, 201, res.body);
      }
      await runner.finish(job, row.name === 'broken' ? 'failed' : 'success');
    }
  });
  after(async () => {
    await t?.close();
  });

  it('reads every JUnit report of the pipeline, one suite per job name, as GitLab counts and sorts them', async () => {
    const res = await t.get(`/api/v4/projects/${project.id}/pipelines/${pipelineId}/test_report`, { token: developer.token });
    assertOne(TestReportSchema, res, 'test_report');
    const body = res.body;
    assert.deepEqual(body.test_suites.map((s: any) => s.name), ['rspec', 'matrix: [linux]', 'broken']);
    const rspec = body.test_suites[0];
    assert.deepEqual(
      { total: rspec.total_count, success: rspec.success_count, failed: rspec.failed_count, skipped: rspec.skipped_count, error: rspec.error_count },
      { total: 5, success: 2, failed: 1, skipped: 1, error: 1 },
    );
    assert.equal(rspec.total_time, 4.5, 'duplicates count once, their time does not');
    assert.deepEqual(
      rspec.test_cases.map((c: any) => [c.status, c.name]),
      [['error', 'blows up'], ['failed', 'saves'], ['success', 'adds & removes'], ['success', 'is valid'], ['skipped', 'is pending']],
    );
    const failed = rspec.test_cases[1];
    assert.equal(failed.classname, 'spec.user');
    assert.equal(failed.execution_time, 1.5);
    assert.equal(failed.system_output, 'Failure/Error: expect(x).to be true\n  expected true, got false');
    assert.deepEqual(rspec.test_cases[0].system_output, { message: 'boom' });
    assert.equal(rspec.test_cases[4].system_output, null);
    assert.equal(rspec.test_cases[3].file, null, 'of two equal cases the later one is kept (it has no file)');
    assert.equal(body.test_suites[1].total_count, 1);
    const broken = body.test_suites[2];
    assert.match(broken.suite_error, /^JUnit XML parsing failed: /);
    assert.equal(broken.total_count, 0);
    assert.deepEqual(broken.test_cases, []);
    assert.deepEqual(
      { total: body.total_count, success: body.success_count, failed: body.failed_count, skipped: body.skipped_count, error: body.error_count, time: body.total_time },
      { total: 6, success: 3, failed: 1, skipped: 1, error: 1, time: 4.63 },
    );
  });

  it('summarises per suite with the jobs that made it', async () => {
    const res = await t.get(`/api/v4/projects/${project.id}/pipelines/${pipelineId}/test_report_summary`, { token: developer.token });
    assertOne(TestReportSummarySchema, res, 'test_report_summary');
    const { total, test_suites } = res.body;
    assert.deepEqual({ ...total, suite_error: typeof total.suite_error }, { time: 4.63, count: 6, success: 3, failed: 1, skipped: 1, error: 1, suite_error: 'string' });
    const jobs = await t.db.selectFrom('ci_builds').select(['id', 'name']).where('pipeline_id', '=', pipelineId).orderBy('id').execute();
    const ids = (prefix: string) => jobs.filter((j) => j.name.startsWith(prefix)).map((j) => j.id);
    assert.deepEqual(test_suites.map((s: any) => [s.name, s.build_ids, s.total_count]), [['rspec', ids('rspec'), 5], ['matrix: [linux]', ids('matrix'), 1], ['broken', ids('broken'), 0]]);
  });

  it('is empty for a pipeline without reports, 404 for pipelines and projects a caller cannot see', async () => {
    const other = await t.createProject({ visibility: 0 });
    await commitFiles(t, other, { '.gitlab-ci.yml': 'a: { script: [x] }\n' });
    const otherPipeline = (await latestPipeline(t, other.id)).id;
    const empty = await t.get(`/api/v4/projects/${other.id}/pipelines/${otherPipeline}/test_report`);
    assert.deepEqual(empty.body, { total_time: 0, total_count: 0, success_count: 0, failed_count: 0, skipped_count: 0, error_count: 0, test_suites: [] });
    assert.equal((await t.get(`/api/v4/projects/${project.id}/pipelines/${otherPipeline}/test_report`, { token: developer.token })).status, 404);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/pipelines/${pipelineId}/test_report`, { token: outsider.token })).status, 404);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/pipelines/${pipelineId}/test_report_summary`, { token: null })).status, 404);
  });

  it('parses JUnit XML safely: no entities beyond the predefined ones, bounded nesting, clear errors', () => {
    assert.throws(() => parseJunit('<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite><testcase name="&a;"/></testsuite>'), XmlError);
    assert.throws(() => parseJunit('<testsuite>' + '<x>'.repeat(300) + '</x>'.repeat(300) + '</testsuite>'), /Excessive depth/);
    assert.throws(() => parseJunit('<testsuite></testsuites>'), /Opening and ending tag mismatch/);
    assert.throws(() => parseJunit(''), /Document is empty/);
    assert.deepEqual(parseJunit('<testsuites><testcase name="top"/><testsuites><testsuite><testcase name="deep"/></testsuite></testsuites></testsuites>').map((c) => c.name), ['top']);
    assert.equal(testSuiteName({ name: 'rspec 3/10', options: {} as any }), 'rspec');
    assert.equal(testSuiteName({ name: 'build: [linux, amd64]', options: { parallel: { matrix: { OS: 'linux' } } } as any }), 'build: [linux, amd64]');
  });
});
