// A pipeline's unit test report as GitLab's TestReportEntity / TestReportSummaryEntity show it.
import { round2, type TestCase, type TestSuiteReport } from '../ci/reports/junit.js';

function totalCount(s: TestSuiteReport): number {
  return s.counts.success + s.counts.failed + s.counts.skipped + s.counts.error;
}

function suiteCounts(s: TestSuiteReport) {
  return {
    name: s.name,
    total_time: s.totalTime,
    total_count: totalCount(s),
    success_count: s.counts.success,
    failed_count: s.counts.failed,
    skipped_count: s.counts.skipped,
    error_count: s.counts.error,
  };
}

export function presentTestCase(tc: TestCase) {
  return {
    status: tc.status,
    name: tc.name ?? '(No name)',
    classname: tc.classname,
    file: tc.file,
    execution_time: tc.executionTime,
    system_output: tc.systemOutput,
    stack_trace: null,
    recent_failures: null,
  };
}

function sum(suites: TestSuiteReport[], f: (s: TestSuiteReport) => number): number {
  return suites.reduce((n, s) => n + f(s), 0);
}

export function presentTestReport(suites: TestSuiteReport[]) {
  return {
    total_time: round2(sum(suites, (s) => s.totalTime)),
    total_count: sum(suites, totalCount),
    success_count: sum(suites, (s) => s.counts.success),
    failed_count: sum(suites, (s) => s.counts.failed),
    skipped_count: sum(suites, (s) => s.counts.skipped),
    error_count: sum(suites, (s) => s.counts.error),
    test_suites: suites.map((s) => ({ ...suiteCounts(s), suite_error: s.suiteError, test_cases: s.testCases.map(presentTestCase) })),
  };
}

export function presentTestReportSummary(suites: TestSuiteReport[]) {
  return {
    total: {
      time: round2(sum(suites, (s) => s.totalTime)),
      count: sum(suites, totalCount),
      success: sum(suites, (s) => s.counts.success),
      failed: sum(suites, (s) => s.counts.failed),
      skipped: sum(suites, (s) => s.counts.skipped),
      error: sum(suites, (s) => s.counts.error),
      suite_error: suites.find((s) => s.suiteError)?.suiteError ?? null,
    },
    test_suites: suites.map((s) => ({ ...suiteCounts(s), build_ids: s.buildIds, suite_error: s.suiteError })),
  };
}
