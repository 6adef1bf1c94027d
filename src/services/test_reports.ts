// A pipeline's unit test report (GitLab's Pipeline#test_reports and #test_report_summary): the
// JUnit artifacts (artifacts:reports:junit) of its latest jobs, read when asked, one test suite
// per job name (parallel jobs "rspec 1/3", "rspec 2/3" share the suite "rspec"; a matrix job
// keeps its own). The report is made from the artifacts each time, so it is the same in every
// Cairn process and goes when the artifacts expire (GitLab keeps the summary longer).
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Readable } from 'node:stream';
import { sql } from 'kysely';
import { RE2JS } from 're2js';
import type { Cairn } from '../context.js';
import type { CiBuild } from '../db/schema/ci.js';
import { parseJunit, round2, STATUS_ORDER, XmlError, type TestCase, type TestStatus, type TestSuiteReport } from '../ci/reports/junit.js';
import { artifactStore } from '../storage/index.js';

/** Decompressed bytes read from one JUnit artifact; a larger report is a suite error, not a stalled server. */
export const MAX_JUNIT_BYTES = 30 * 1024 * 1024;
const gunzip = promisify(zlib.gunzip);


// Ci::Build#group_name: "rspec 1/3" and "build: [linux, amd64]" lose their index suffix.
const GROUP_SUFFIX = RE2JS.compile('([\\x08\\s:]+((\\[.*\\])|(\\d+[\\s:/\\\\]+\\d+))){1,3}\\s*$');

/** The suite a job's tests belong to (Ci::Build#test_suite_name). */
export function testSuiteName(build: Pick<CiBuild, 'name' | 'options'>): string {
  const matrix = (build.options as { parallel?: { matrix?: unknown } } | null)?.parallel?.matrix;
  if (matrix) return build.name;
  const m = GROUP_SUFFIX.matcher(build.name);
  return (m.find() ? build.name.slice(0, m.start()) : build.name).trim();
}

async function readAll(stream: Readable, limit: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      stream.destroy();
      return null;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

class Suite {
  private readonly byStatus = new Map<TestStatus, Map<string, TestCase>>();
  totalTime = 0;
  suiteError: string | null = null;
  readonly buildIds: number[] = [];

  constructor(readonly name: string) {}

  add(tc: TestCase) {
    let bucket = this.byStatus.get(tc.status);
    if (!bucket) this.byStatus.set(tc.status, (bucket = new Map()));
    bucket.set(JSON.stringify([tc.suiteName ?? this.name, tc.classname, tc.name]), tc);
    this.totalTime += tc.executionTime;
  }

  report(): TestSuiteReport {
    const counts = { success: 0, failed: 0, skipped: 0, error: 0 } as Record<TestStatus, number>;
    const testCases: TestCase[] = [];
    if (!this.suiteError) {
      for (const status of STATUS_ORDER) {
        const bucket = [...(this.byStatus.get(status)?.values() ?? [])];
        counts[status] = bucket.length;
        testCases.push(...bucket.sort((a, b) => b.executionTime - a.executionTime));
      }
    }
    return { name: this.name, totalTime: round2(this.totalTime), counts, testCases, suiteError: this.suiteError, buildIds: [...this.buildIds] };
  }
}

/** The test suites of a pipeline's latest jobs that uploaded a JUnit report, in job order. */
export async function pipelineTestSuites(cairn: Cairn, pipelineId: number): Promise<TestSuiteReport[]> {
  const rows = await cairn.db
    .selectFrom('ci_builds as b')
    .innerJoin('ci_job_artifacts as a', 'a.job_id', 'b.id')
    .select(['b.id', 'b.name', 'b.options', 'a.store_key', 'a.file_format', 'a.size'])
    .where('b.pipeline_id', '=', pipelineId)
    .where('b.retried', '=', false)
    .where('b.type', '=', 'Ci::Build')
    .where('a.file_type', '=', 'junit')
    .where(sql<boolean>`(a.expire_at is null or a.expire_at > now())`)
    .orderBy('b.id')
    .execute();
  const store = artifactStore(cairn.config);
  const suites = new Map<string, Suite>();
  for (const row of rows) {
    const name = testSuiteName(row as Pick<CiBuild, 'name' | 'options'>);
    let suite = suites.get(name);
    if (!suite) suites.set(name, (suite = new Suite(name)));
    suite.buildIds.push(row.id);
    try {
      const stream = await store.get(row.store_key);
      if (!stream) continue;
      const raw = await readAll(stream, MAX_JUNIT_BYTES);
      if (!raw) throw new Error('the report is too big');
      const xml = row.file_format === 'gzip' ? await gunzip(raw, { maxOutputLength: MAX_JUNIT_BYTES }) : raw;
      for (const tc of parseJunit(xml.toString('utf8'))) suite.add(tc);
    } catch (err) {
      if (err instanceof XmlError) suite.suiteError = `JUnit XML parsing failed: ${err.message}`;
      else if ((err as NodeJS.ErrnoException)?.code === 'ERR_BUFFER_TOO_LARGE' || (err as Error)?.message === 'the report is too big') {
        suite.suiteError = 'JUnit data parsing failed: the report is too big';
      } else if ((err as NodeJS.ErrnoException)?.code?.startsWith?.('Z_')) suite.suiteError = `JUnit data parsing failed: ${(err as Error).message}`;
      else throw err;
    }
  }
  return [...suites.values()].map((s) => s.report());
}
