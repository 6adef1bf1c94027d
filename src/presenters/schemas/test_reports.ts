import { Type } from 'typebox';
import { Nullable, strict } from './common.js';

/** Response schemas of src/presenters/test_reports.ts (a pipeline's unit test report). */

/** TestCaseEntity (attachment_url is not shown: Cairn keeps no JUnit attachments). */
export const TestCaseSchema = Type.Object(
  {
    status: Type.Union([Type.Literal('success'), Type.Literal('failed'), Type.Literal('skipped'), Type.Literal('error')]),
    name: Type.String(),
    classname: Nullable(Type.String()),
    file: Nullable(Type.String()),
    execution_time: Type.Number(),
    /** The failure's text; its attributes when it has none (what GitLab's Hash.from_xml gives). */
    system_output: Type.Unknown(),
    stack_trace: Type.Null(),
    recent_failures: Type.Null(),
  },
  strict,
);

const suiteCounts = {
  name: Type.String(),
  total_time: Type.Number(),
  total_count: Type.Integer(),
  success_count: Type.Integer(),
  failed_count: Type.Integer(),
  skipped_count: Type.Integer(),
  error_count: Type.Integer(),
};

/** TestSuiteEntity with details. */
export const TestSuiteSchema = Type.Object({ ...suiteCounts, suite_error: Nullable(Type.String()), test_cases: Type.Array(TestCaseSchema) }, strict);

/** TestReportEntity: GET /projects/:id/pipelines/:pipeline_id/test_report. */
export const TestReportSchema = Type.Object(
  {
    total_time: Type.Number(),
    total_count: Type.Integer(),
    success_count: Type.Integer(),
    failed_count: Type.Integer(),
    skipped_count: Type.Integer(),
    error_count: Type.Integer(),
    test_suites: Type.Array(TestSuiteSchema),
  },
  strict,
);

/** TestReportSummaryEntity: GET /projects/:id/pipelines/:pipeline_id/test_report_summary. */
export const TestReportSummarySchema = Type.Object(
  {
    total: Type.Object(
      {
        time: Type.Number(),
        count: Type.Integer(),
        success: Type.Integer(),
        failed: Type.Integer(),
        skipped: Type.Integer(),
        error: Type.Integer(),
        suite_error: Nullable(Type.String()),
      },
      strict,
    ),
    test_suites: Type.Array(Type.Object({ ...suiteCounts, build_ids: Type.Array(Type.Integer()), suite_error: Nullable(Type.String()) }, strict)),
  },
  strict,
);
