// Job artifacts after upload: which archive a download gets (by job, or by ref from the latest
// successful pipeline, parent before children), keeping, deleting, bulk expiry of a project and
// the recurring removal of expired artifacts. Rows are the truth: an object is deleted only
// after the transaction that removed its row committed, so a crash can leave bytes without a
// row (disk space) but never a row without bytes.
import crypto from 'node:crypto';
import { pipeline, Transform, type Readable } from 'node:stream';
import { parseDuration } from '../ci/config/duration.js';
import { MultipartError, multipartBoundary, readMultipart } from '../lib/multipart.js';
import { inTimestampRange } from '../lib/timestamps.js';
import { ApiError, apiError } from '../plugins/errors.js';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { CiBuild, CiJobArtifact } from '../db/schema/ci.js';
import { defineJob, defineRecurring, enqueue } from '../jobs/queue.js';
import { artifactStore, deleteObjects } from '../storage/index.js';

export const EXPIRE_PROJECT_ARTIFACTS_JOB = 'ci.artifacts.expire_project';
export const DESTROY_EXPIRED_ARTIFACTS_JOB = 'ci.artifacts.destroy_expired';
/** GitLab's cron for expired artifacts runs every 7 minutes. */
const DESTROY_EVERY_SECONDS = 7 * 60;
const BATCH = 100;

const unexpired = sql<boolean>`(expire_at is null or expire_at > now())`;

/** The job's archive while it is downloadable (present and not expired). */
export async function downloadableArchive(db: Database, jobId: number): Promise<CiJobArtifact | null> {
  const row = await db
    .selectFrom('ci_job_artifacts')
    .selectAll()
    .where('job_id', '=', jobId)
    .where('file_type', '=', 'archive')
    .where(unexpired)
    .executeTakeFirst();
  return row ?? null;
}

/** The latest successful pipeline of a ref (not a child pipeline): GitLab's latest_successful_for_ref. */
export async function latestSuccessfulPipelineId(db: Database, projectId: number, ref: string): Promise<number | null> {
  const row = await db
    .selectFrom('ci_pipelines')
    .select('id')
    .where('project_id', '=', projectId)
    .where('ref', '=', ref)
    .where('status', '=', 'success')
    .where('parent_pipeline_id', 'is', null)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.id ?? null;
}

/** A pipeline and all its descendants (child pipelines), parents before their children. */
async function pipelineTree(db: Database, rootId: number): Promise<number[]> {
  const ids = [rootId];
  let frontier = [rootId];
  while (frontier.length) {
    const children = await db.selectFrom('ci_pipelines').select('id').where('parent_pipeline_id', 'in', frontier).orderBy('id').execute();
    frontier = children.map((c) => c.id).filter((id) => !ids.includes(id));
    ids.push(...frontier);
  }
  return ids;
}

/**
 * The job named `jobName` with a downloadable archive in the latest successful pipeline of
 * `ref`, searching the parent pipeline before its children (the parent's wins on equal names).
 */
export async function latestSuccessfulBuildForRef(db: Database, projectId: number, ref: string, jobName: string): Promise<CiBuild | null> {
  const root = await latestSuccessfulPipelineId(db, projectId, ref);
  if (root === null) return null;
  const tree = await pipelineTree(db, root);
  const depth = new Map(tree.map((id, i) => [id, i]));
  const candidates = await db
    .selectFrom('ci_builds as b')
    .innerJoin('ci_job_artifacts as a', 'a.job_id', 'b.id')
    .selectAll('b')
    .where('b.pipeline_id', 'in', tree)
    .where('b.name', '=', jobName)
    .where('b.type', '=', 'Ci::Build')
    .where('b.retried', '=', false)
    .where('a.file_type', '=', 'archive')
    .where(sql<boolean>`(a.expire_at is null or a.expire_at > now())`)
    .execute();
  candidates.sort((x, y) => depth.get(x.pipeline_id)! - depth.get(y.pipeline_id)! || x.pipeline_id - y.pipeline_id || y.id - x.id);
  return candidates[0] ?? null;
}

/** Keep: the job's artifacts no longer expire. */
export async function keepArtifacts(db: Database, buildId: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('ci_job_artifacts').set({ expire_at: null }).where('job_id', '=', buildId).execute();
    await trx.updateTable('ci_builds').set({ artifacts_expire_at: null, updated_at: sql`now()` as any }).where('id', '=', buildId).execute();
  });
}

/** Deletes the job's artifacts: rows first (committed), then their bytes. */
export async function deleteJobArtifacts(cairn: Cairn, buildId: number): Promise<number> {
  const rows = await cairn.db.deleteFrom('ci_job_artifacts').where('job_id', '=', buildId).returning('store_key').execute();
  await deleteObjects(artifactStore(cairn.config), rows.map((r) => r.store_key));
  return rows.length;
}

/**
 * Pipelines whose artifacts stay whatever their expiry (GitLab's "locked" artifacts): for each
 * given pipeline, kept when the project keeps the latest artifacts (keep_latest_artifact, on
 * by default) and its root pipeline is the latest successful one of its ref.
 */
export async function keptPipelines(db: Database, pipelineIds: number[]): Promise<Set<number>> {
  const kept = new Set<number>();
  if (!pipelineIds.length) return kept;
  // Walk up to the root pipelines (child pipelines nest a couple of levels at most).
  const parentOf = new Map<number, number | null>();
  let unknown = [...new Set(pipelineIds)];
  const info = new Map<number, { project_id: number; ref: string }>();
  while (unknown.length) {
    const rows = await db.selectFrom('ci_pipelines').select(['id', 'parent_pipeline_id', 'project_id', 'ref']).where('id', 'in', unknown).execute();
    for (const r of rows) {
      parentOf.set(r.id, r.parent_pipeline_id);
      info.set(r.id, { project_id: r.project_id, ref: r.ref });
    }
    unknown = [...new Set(rows.flatMap((r) => (r.parent_pipeline_id !== null && !parentOf.has(r.parent_pipeline_id) ? [r.parent_pipeline_id] : [])))];
  }
  const rootOf = (id: number) => {
    let cur = id;
    for (let i = 0; i < 16 && parentOf.get(cur) != null; i++) cur = parentOf.get(cur)!;
    return cur;
  };
  const roots = [...new Set(pipelineIds.map(rootOf))].filter((id) => info.has(id));
  if (!roots.length) return kept;
  const latest = await sql<{ id: number }>`
    select distinct on (p.project_id, p.ref) p.id
      from ci_pipelines p
      join projects pr on pr.id = p.project_id
     where p.status = 'success' and p.parent_pipeline_id is null
       and coalesce((pr.settings->>'keep_latest_artifact')::boolean, true)
       and (p.project_id, p.ref) in (select r.project_id, r.ref from ci_pipelines r where r.id = any(${roots}::int[]))
     order by p.project_id, p.ref, p.id desc`.execute(db);
  const latestRoots = new Set(latest.rows.map((r) => r.id));
  for (const id of pipelineIds) if (latestRoots.has(rootOf(id))) kept.add(id);
  return kept;
}

/** DELETE /projects/:id/artifacts: the work is a durable queue job (202 to the caller). */
export async function scheduleProjectArtifactsExpiry(db: Database, projectId: number): Promise<void> {
  await enqueue(db, EXPIRE_PROJECT_ARTIFACTS_JOB, { projectId });
}

/**
 * Sets the expiry of all the project's artifacts to now, except those of kept pipelines
 * (locked ones); the recurring worker then removes them. In batches of ids.
 */
export async function expireProjectArtifacts(db: Database, projectId: number): Promise<number> {
  let cursor = 0;
  let expired = 0;
  for (;;) {
    const batch = await db
      .selectFrom('ci_job_artifacts as a')
      .innerJoin('ci_builds as b', 'b.id', 'a.job_id')
      .select(['a.id', 'a.job_id', 'a.file_type', 'b.pipeline_id'])
      .where('a.project_id', '=', projectId)
      .where('a.id', '>', cursor)
      .where('a.locked', '=', false)
      .orderBy('a.id')
      .limit(1000)
      .execute();
    if (!batch.length) break;
    cursor = batch[batch.length - 1].id;
    const kept = await keptPipelines(db, [...new Set(batch.map((r) => r.pipeline_id))]);
    const ids = batch.filter((r) => !kept.has(r.pipeline_id)).map((r) => r.id);
    if (!ids.length) continue;
    await db.transaction().execute(async (trx) => {
      const rows = await trx
        .updateTable('ci_job_artifacts')
        .set({ expire_at: sql`now()` as any })
        .where('id', 'in', ids)
        .where(sql<boolean>`(expire_at is null or expire_at > now())`)
        .returning(['job_id', 'file_type'])
        .execute();
      expired += rows.length;
      const jobs = [...new Set(rows.filter((r) => r.file_type === 'archive').map((r) => r.job_id))];
      if (jobs.length) await trx.updateTable('ci_builds').set({ artifacts_expire_at: sql`now()` as any }).where('id', 'in', jobs).execute();
    });
  }
  return expired;
}

/**
 * Removes expired artifacts (not locked, not of a kept pipeline), in id order, in
 * batches: rows deleted in one transaction, then their objects. Stops after `maxBatches`.
 */
export async function destroyExpiredArtifacts(cairn: Cairn, opts: { maxBatches?: number } = {}): Promise<number> {
  const db = cairn.db;
  const store = artifactStore(cairn.config);
  let removed = 0;
  let after = 0;
  for (let i = 0; i < (opts.maxBatches ?? 500); i++) {
    const q = db
      .selectFrom('ci_job_artifacts as a')
      .innerJoin('ci_builds as b', 'b.id', 'a.job_id')
      .select(['a.id', 'b.pipeline_id'])
      .where('a.expire_at', 'is not', null)
      .where('a.expire_at', '<', sql<Date>`now()`)
      .where('a.locked', '=', false)
      .where('a.id', '>', after);
    const batch = await q.orderBy('a.id').limit(BATCH).execute();
    if (!batch.length) break;
    after = batch[batch.length - 1].id;
    const kept = await keptPipelines(db, [...new Set(batch.map((r) => r.pipeline_id))]);
    const ids = batch.filter((r) => !kept.has(r.pipeline_id)).map((r) => r.id);
    if (!ids.length) continue;
    // Re-checked in the delete: a keep between the select and here wins.
    const rows = await db
      .deleteFrom('ci_job_artifacts')
      .where('id', 'in', ids)
      .where('expire_at', '<', sql<Date>`now()`)
      .where('locked', '=', false)
      .returning('store_key')
      .execute();
    removed += rows.length;
    await deleteObjects(store, rows.map((r) => r.store_key));
  }
  return removed;
}

defineJob(EXPIRE_PROJECT_ARTIFACTS_JOB, async (cairn, payload) => {
  await expireProjectArtifacts(cairn.db, Number(payload.projectId));
});

defineRecurring(DESTROY_EXPIRED_ARTIFACTS_JOB, DESTROY_EVERY_SECONDS, async (cairn) => {
  await destroyExpiredArtifacts(cairn);
});

/** The runner protocol's answer to an artifact over CAIRN_MAX_ARTIFACTS_SIZE. */
export const artifactTooLarge = () => new ApiError(413, { message: 'file size has reached maximum size limit' });

/** A job's artifacts upload (POST /jobs/:id/artifacts) as the request brings it. */
export interface ArtifactUpload {
  body: Readable | undefined;
  contentType: string | undefined;
  contentLength: string | undefined;
  /** The query string; a multipart field of the same name is the fallback. */
  query: { artifact_type?: string; artifact_format?: string; expire_in?: string };
  /** Called when the answer is an error sent before the body was read to its end. */
  bodyLeftUnread: () => void;
}

/**
 * Stores an uploaded artifact (and an archive's metadata) of a running job: each file part is
 * streamed into the artifact store under the size limit, then the rows are written in one
 * transaction (with the job's artifacts expiry for an archive). On any failure the objects
 * already stored are deleted again.
 */
export async function storeUploadedArtifacts(cairn: Cairn, build: CiBuild, upload: ArtifactUpload): Promise<void> {
  const { body, bodyLeftUnread, query } = upload;
  const boundary = multipartBoundary(upload.contentType);
  if (!boundary || !body || typeof (body as any)[Symbol.asyncIterator] !== 'function') {
    bodyLeftUnread();
    throw apiError(400, '400 Bad request - file is missing');
  }
  const max = cairn.config.maxArtifactsSize;
  const length = Number(upload.contentLength ?? NaN);
  // The multipart envelope adds a little; a body far beyond the limit is refused unread.
  if (Number.isFinite(length) && length > max + 64 * 1024) {
    bodyLeftUnread();
    throw artifactTooLarge();
  }
  const store = artifactStore(cairn.config);
  const stored: Array<{ field: string; filename: string; key: string; size: number; sha256: string }> = [];
  let fields: Record<string, string>;
  try {
    // A refusal stops the parse without destroying the request: the client still gets the answer.
    const source = typeof body.iterator === 'function' ? body.iterator({ destroyOnReturn: false }) : body;
    fields = await readMultipart(source, boundary, async (part) => {
      if (part.field !== 'file' && part.field !== 'metadata') {
        part.stream.resume();
        return;
      }
      let seen = 0;
      const limit = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          seen += chunk.length;
          if (seen > max) cb(artifactTooLarge());
          else cb(null, chunk);
        },
      });
      pipeline(part.stream, limit, () => {});
      const key = `${build.project_id}/${build.id}/${part.field}-${crypto.randomBytes(8).toString('hex')}`;
      const put = await store.put(key, limit).catch(async (err) => {
        await store.delete(key).catch(() => {});
        throw err;
      });
      stored.push({ field: part.field, filename: part.filename, key, ...put });
    });
  } catch (err) {
    bodyLeftUnread();
    for (const s of stored) await store.delete(s.key).catch(() => {});
    if (err instanceof ApiError) throw err;
    if (err instanceof MultipartError) throw apiError(400, `400 Bad request - ${err.message}`);
    throw err;
  }
  const file = stored.find((s) => s.field === 'file');
  const cleanup = async () => {
    for (const s of stored) await store.delete(s.key).catch(() => {});
  };
  if (!file) {
    await cleanup();
    throw apiError(400, '400 Bad request - file is missing');
  }
  const type = (query.artifact_type ?? fields.artifact_type ?? 'archive').trim() || 'archive';
  const format = (query.artifact_format ?? fields.artifact_format ?? (type === 'archive' ? 'zip' : 'gzip')).trim();
  if (!/^[a-z_]{1,64}$/.test(type) || !['zip', 'gzip', 'raw'].includes(format)) {
    await cleanup();
    throw apiError(400, '400 Bad request - artifact_type or artifact_format is invalid');
  }
  const expireIn = query.expire_in ?? fields.expire_in;
  let expireAt: Date | null = null;
  if (expireIn && expireIn.trim().toLowerCase() !== 'never') {
    // parseDuration refuses what no date can hold ("999999999999 years"); the range check keeps
    // the answer a 400 whatever the limit becomes.
    const seconds = parseDuration(expireIn);
    const at = seconds === null ? null : new Date(Date.now() + seconds * 1000);
    if (at === null || !inTimestampRange(at)) {
      await cleanup();
      throw apiError(400, '400 Bad request - expire_in is invalid');
    }
    expireAt = at;
  } else if (!expireIn && cairn.config.defaultArtifactsExpireIn > 0) {
    expireAt = new Date(Date.now() + cairn.config.defaultArtifactsExpireIn * 1000);
  }
  const rows = [{ s: file, type, format }];
  const metadata = stored.find((s) => s.field === 'metadata');
  if (metadata && type === 'archive') rows.push({ s: metadata, type: 'metadata', format: 'gzip' });
  try {
    await cairn.db.transaction().execute(async (trx) => {
      for (const r of rows) {
        await trx
          .insertInto('ci_job_artifacts')
          .values({
            job_id: build.id,
            project_id: build.project_id,
            file_type: r.type,
            file_format: r.format,
            file_name: r.s.filename || (r.type === 'archive' ? 'artifacts.zip' : r.type),
            size: r.s.size,
            file_sha256: r.s.sha256,
            store_key: r.s.key,
            expire_at: expireAt as any,
            created_at: sql`now()` as any,
          })
          .execute();
      }
      if (type === 'archive') await trx.updateTable('ci_builds').set({ artifacts_expire_at: expireAt as any }).where('id', '=', build.id).execute();
    });
  } catch (err: any) {
    await cleanup();
    if (err?.code === '23505') throw apiError(400, 'another artifact of the same type already exists');
    throw err;
  }
}
