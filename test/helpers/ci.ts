import assert from 'node:assert/strict';
import { assignBuild, finishBuild } from '../../src/ci/jobs/state.js';
import { tokenDigest } from '../../src/lib/secrets.js';
import type { CiBuild, CiPipeline } from '../../src/db/schema/ci.js';
import type { Project } from '../../src/db/schema/core.js';
import type { TestContext } from './app.js';

/** Commits files (.gitlab-ci.yml and others) through the commits API; the push creates pipelines. */
export async function commitFiles(
  t: TestContext,
  project: Project | number,
  files: Record<string, string | null>,
  opts: { branch?: string; message?: string; startBranch?: string; token?: string } = {},
): Promise<string> {
  const id = typeof project === 'number' ? project : project.id;
  const tree = await t.get(`/api/v4/projects/${id}/repository/tree`, { query: { ref: opts.branch ?? 'main', recursive: true, per_page: 100 }, token: undefined });
  const existing = new Set(tree.status === 200 ? (tree.body as { path: string }[]).map((e) => e.path) : []);
  let startExisting = existing;
  if (opts.startBranch && tree.status !== 200) {
    const t2 = await t.get(`/api/v4/projects/${id}/repository/tree`, { query: { ref: opts.startBranch, recursive: true, per_page: 100 } });
    startExisting = new Set(t2.status === 200 ? (t2.body as { path: string }[]).map((e) => e.path) : []);
  }
  const actions = Object.entries(files).map(([file_path, content]) =>
    content === null ? { action: 'delete', file_path } : { action: startExisting.has(file_path) ? 'update' : 'create', file_path, content },
  );
  const body: Record<string, unknown> = { branch: opts.branch ?? 'main', commit_message: opts.message ?? 'change', actions };
  if (opts.startBranch) body.start_branch = opts.startBranch;
  const res = await t.post(`/api/v4/projects/${id}/repository/commits`, body, { token: opts.token });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.id;
}

export async function pipelinesOf(t: TestContext, projectId: number): Promise<CiPipeline[]> {
  return t.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', projectId).orderBy('id', 'desc').execute();
}

export async function latestPipeline(t: TestContext, projectId: number): Promise<CiPipeline> {
  const p = (await pipelinesOf(t, projectId))[0];
  assert.ok(p, 'a pipeline exists');
  return p;
}

export async function pipeline(t: TestContext, id: number): Promise<CiPipeline> {
  return t.db.selectFrom('ci_pipelines').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

/** Latest (not retried) jobs of a pipeline by name. */
export async function jobsByName(t: TestContext, pipelineId: number): Promise<Record<string, CiBuild>> {
  const rows = await t.db.selectFrom('ci_builds').selectAll().where('pipeline_id', '=', pipelineId).where('retried', '=', false).orderBy('id').execute();
  return Object.fromEntries(rows.map((r) => [r.name, r]));
}

export async function statuses(t: TestContext, pipelineId: number): Promise<Record<string, string>> {
  const jobs = await jobsByName(t, pipelineId);
  return Object.fromEntries(Object.entries(jobs).map(([k, v]) => [k, v.status]));
}

let runnerId: number | null = null;
/** An instance runner row (the runner protocol is another module's; tests drive jobs directly). */
export async function testRunner(t: TestContext): Promise<number> {
  if (runnerId !== null) {
    const r = await t.db.selectFrom('ci_runners').select('id').where('id', '=', runnerId).executeTakeFirst();
    if (r) return runnerId;
  }
  const r = await t.db
    .insertInto('ci_runners')
    .values({ token_digest: tokenDigest(`runner-${Math.random()}`), runner_type: 'instance_type', tag_list: [], description: 'test runner' })
    .returning('id')
    .executeTakeFirstOrThrow();
  runnerId = r.id;
  return r.id;
}

/** Takes a pending job as a runner would and finishes it. */
export async function runJob(t: TestContext, build: CiBuild | number, status: 'success' | 'failed', opts: { exitCode?: number; trace?: string; failureReason?: string } = {}) {
  const id = typeof build === 'number' ? build : build.id;
  const runner = await testRunner(t);
  const taken = await t.db.transaction().execute((trx) => assignBuild(trx, id, runner));
  assert.ok(taken, `job ${id} was pending`);
  if (opts.trace) await t.db.insertInto('ci_build_trace_chunks').values({ build_id: id, chunk_index: 0, data: Buffer.from(opts.trace) }).execute();
  assert.equal(await finishBuild(t.app.cairn, id, { status, exitCode: opts.exitCode, failureReason: opts.failureReason }), true);
}

/**
 * A runner that speaks the runner protocol over HTTP, as gitlab-runner does: registers with the
 * instance registration token, takes a pending job (POST /jobs/request), appends to its log
 * (PATCH /jobs/:id/trace with Content-Range) and finishes it (PUT /jobs/:id). `app` is the
 * Cairn it talks to (another app on the same database plays another process).
 */
export class ProtocolRunner {
  private constructor(readonly app: TestContext['app'], readonly token: string) {}

  static async register(t: TestContext, app: TestContext['app'] = t.app): Promise<ProtocolRunner> {
    const { registrationToken } = await import('../../src/ci/runners.js');
    const reg = await registrationToken(app.cairn, { type: 'instance_type' });
    const res = await app.inject({ method: 'POST', url: '/api/v4/runners', payload: { token: reg, description: 'protocol runner', run_untagged: true, locked: false, paused: false } });
    assert.equal(res.statusCode, 201, res.body);
    return new ProtocolRunner(app, JSON.parse(res.body).token);
  }

  /** Takes the pending job the queue gives this runner (null when there is none), with the whole answer as `payload`. */
  async takeJob(): Promise<{ id: number; token: string; sent: number; payload: any } | null> {
    const res = await this.app.inject({ method: 'POST', url: '/api/v4/jobs/request', payload: { token: this.token, info: { name: 'gitlab-runner', features: { trace_sections: true } } } });
    if (res.statusCode === 204) return null;
    assert.equal(res.statusCode, 201, res.body);
    const job = JSON.parse(res.body);
    return { id: job.id, token: job.token, sent: 0, payload: job };
  }

  /** Appends text to the job's log where the last append stopped. */
  async append(job: { id: number; token: string; sent: number }, text: string | Buffer) {
    const data = Buffer.isBuffer(text) ? text : Buffer.from(text);
    const res = await this.app.inject({
      method: 'PATCH',
      url: `/api/v4/jobs/${job.id}/trace`,
      headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': `${job.sent}-${job.sent + data.length - 1}` },
      payload: data,
    });
    assert.equal(res.statusCode, 202, res.body);
    job.sent += data.length;
  }

  async finish(job: { id: number; token: string }, state: 'success' | 'failed' = 'success') {
    const res = await this.app.inject({ method: 'PUT', url: `/api/v4/jobs/${job.id}`, payload: { token: job.token, state, ...(state === 'failed' ? { failure_reason: 'script_failure' } : {}) } });
    assert.equal(res.statusCode, 200, res.body);
  }
}
