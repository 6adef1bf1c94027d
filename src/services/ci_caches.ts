// CI caches on the server: each (project, key) names one archive in the artifacts' object store
// (local disk or S3), so every runner of the instance shares them. Uploads stream into a new
// object under the size limit and only then become the key's archive, in one statement under a
// lock of the key: a reader sees the old archive or the new one, never a part of one; of two
// uploads of one key the one that completes last wins; the replaced object is deleted after the
// commit. An upload under way is recorded (ci_cache_uploads) so that the object of one a crash
// cut short is removed by the hourly sweep, which also removes caches unused for
// CAIRN_CI_CACHE_EXPIRE_IN and those of deleted projects.
import crypto from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import { defineRecurring } from '../jobs/queue.js';
import { ApiError } from '../plugins/errors.js';
import { artifactStore, deleteObjects } from '../storage/index.js';

export const EXPIRE_CACHES_JOB = 'ci.caches.expire';
const EXPIRE_EVERY_SECONDS = 3600;
/** An upload older than this is one a crash or a lost connection left behind. */
const ABANDONED_UPLOAD_SECONDS = 24 * 3600;
/** A restore records the cache's use at most this often (one write an hour, not one per job). */
const TOUCH_EVERY_SECONDS = 3600;
/** Longest key, in characters (gitlab-runner has no limit; keys here are hashed for storage). */
export const MAX_CACHE_KEY_LENGTH = 1024;

/**
 * Why a cache key is refused, or null. Keys are the runner's (variables expanded, so a branch
 * name may bring a `/`); they never name a path here (the object is named by the key's digest),
 * so only what cannot be a sensible key is refused: empty, too long, control characters.
 */
export function cacheKeyProblem(key: unknown): string | null {
  if (typeof key !== 'string' || key === '') return 'key is missing';
  if (key.length > MAX_CACHE_KEY_LENGTH) return `key is longer than ${MAX_CACHE_KEY_LENGTH} characters`;
  if (/[\u0000-\u001f\u007f]/.test(key)) return 'key contains control characters';
  return null;
}

/**
 * gitlab-runner's rule for CACHE_FALLBACK_KEY, applied here to every key: a job of an unprotected
 * ref may not use a key that ends in `-protected` (trailing dots and spaces ignored) while the
 * project keeps protected refs' caches apart. gitlab-runner can only refuse the fallback key it is
 * given; the server sees every key, so a job cannot read or poison a protected ref's cache by
 * naming it in a variable either.
 */
export function protectedKeyRefused(key: string, job: { protected: boolean }, separated: boolean): boolean {
  return separated && !job.protected && /-protected$/.test(key.replace(/[. ]+$/, ''));
}

function objectName(projectId: number, key: string): string {
  const digest = crypto.createHash('sha256').update(key).digest('hex');
  return `ci-caches/${projectId}/${digest}/${crypto.randomBytes(8).toString('hex')}.zip`;
}

/** A lock of one (project, key) for the transaction: two commits of one key take turns. */
function lockKey(trx: Database, projectId: number, key: string) {
  const digest = crypto.createHash('sha256').update(`${projectId}\0${key}`).digest();
  return sql`select pg_advisory_xact_lock(${digest.readBigInt64BE(0).toString()}::bigint)`.execute(trx);
}

export const cacheTooLarge = () => new ApiError(413, { message: 'cache archive has reached maximum size limit' });

/** The archive of a key: a stream of it and its size, or null when the project has none. */
export async function openCacheArchive(cairn: Cairn, projectId: number, key: string): Promise<{ stream: Readable; size: number } | null> {
  const store = artifactStore(cairn.config);
  // An upload may replace (and delete) the object between the read of the row and the open: read again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const row = await cairn.db.selectFrom('ci_caches').select(['id', 'store_key', 'size', 'last_used_at']).where('project_id', '=', projectId).where('key', '=', key).executeTakeFirst();
    if (!row) return null;
    const stream = await store.get(row.store_key);
    if (!stream) continue;
    if (Date.now() - new Date(row.last_used_at).getTime() > TOUCH_EVERY_SECONDS * 1000) {
      await cairn.db.updateTable('ci_caches').set({ last_used_at: sql`now()` as any }).where('id', '=', row.id).execute();
    }
    return { stream, size: Number(row.size) };
  }
  return null;
}

/**
 * Stores `body` as the archive of `key`: streamed into a new object (refused with 413 past
 * CAIRN_MAX_CACHE_SIZE, at once when Content-Length says so), then made the key's archive.
 */
export async function storeCacheArchive(cairn: Cairn, projectId: number, key: string, body: Readable, contentLength?: number): Promise<{ size: number }> {
  const max = cairn.config.maxCacheSize;
  if (contentLength !== undefined && Number.isFinite(contentLength) && contentLength > max) throw cacheTooLarge();
  const store = artifactStore(cairn.config);
  const name = objectName(projectId, key);
  const upload = await cairn.db.insertInto('ci_cache_uploads').values({ project_id: projectId, store_key: name }).returning('id').executeTakeFirstOrThrow();
  let committed = false;
  try {
    let seen = 0;
    const limit = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        seen += chunk.length;
        if (seen > max) cb(cacheTooLarge());
        else cb(null, chunk);
      },
    });
    // Not pipeline(): a refusal must not destroy the request (the client would get no answer);
    // the rest of the body stays unread and the connection closes after the 413.
    body.on('error', (err) => limit.destroy(err));
    limit.on('error', () => body.unpipe(limit));
    body.pipe(limit);
    const put = await store.put(name, limit);
    if (contentLength !== undefined && Number.isFinite(contentLength) && put.size !== contentLength) {
      throw new ApiError(400, { message: '400 Bad request - the body is shorter than its Content-Length' });
    }
    const replaced = await cairn.db.transaction().execute(async (trx) => {
      await lockKey(trx, projectId, key);
      const old = await trx.selectFrom('ci_caches').select('store_key').where('project_id', '=', projectId).where('key', '=', key).executeTakeFirst();
      await trx
        .insertInto('ci_caches')
        .values({ project_id: projectId, key, store_key: name, size: put.size })
        .onConflict((oc) => oc.columns(['project_id', 'key']).doUpdateSet({ store_key: name, size: put.size, updated_at: sql`now()` as any, last_used_at: sql`now()` as any }))
        .execute();
      await trx.deleteFrom('ci_cache_uploads').where('id', '=', upload.id).execute();
      return old?.store_key ?? null;
    });
    committed = true;
    if (replaced) await deleteObjects(store, [replaced]);
    return { size: put.size };
  } finally {
    if (!committed) {
      await store.delete(name).catch(() => {});
      await cairn.db.deleteFrom('ci_cache_uploads').where('id', '=', upload.id).execute().catch(() => {});
    }
  }
}

/**
 * GitLab's "Clear runner caches": the project's jobs_cache_index goes up by one (nil becomes 1),
 * so every key of the jobs created from now on differs; the archives stored so far are deleted.
 */
export async function clearProjectCaches(cairn: Cairn, projectId: number): Promise<number> {
  const row = await cairn.db
    .updateTable('projects')
    .set({ jobs_cache_index: sql`coalesce(jobs_cache_index, 0) + 1` as any })
    .where('id', '=', projectId)
    .returning('jobs_cache_index')
    .executeTakeFirstOrThrow();
  const rows = await cairn.db.deleteFrom('ci_caches').where('project_id', '=', projectId).returning('store_key').execute();
  await deleteObjects(artifactStore(cairn.config), rows.map((r) => r.store_key));
  return row.jobs_cache_index ?? 1;
}

/**
 * The hourly sweep: caches unused for CAIRN_CI_CACHE_EXPIRE_IN, caches of projects that no longer
 * exist, and uploads abandoned a day ago; rows first, then their objects. In batches.
 */
export async function destroyExpiredCaches(cairn: Cairn, opts: { maxBatches?: number } = {}): Promise<number> {
  const db = cairn.db;
  const store = artifactStore(cairn.config);
  const expireIn = cairn.config.cacheExpireIn;
  let removed = 0;
  for (let i = 0; i < (opts.maxBatches ?? 100); i++) {
    const rows = await sql<{ store_key: string }>`
      delete from ci_caches where id in (
        select c.id from ci_caches c
         where not exists (select 1 from projects p where p.id = c.project_id)
            ${expireIn > 0 ? sql`or c.last_used_at < now() - ${`${expireIn} seconds`}::interval` : sql``}
         limit 100)
      returning store_key`.execute(db);
    if (!rows.rows.length) break;
    removed += rows.rows.length;
    await deleteObjects(store, rows.rows.map((r) => r.store_key));
  }
  for (let i = 0; i < (opts.maxBatches ?? 100); i++) {
    const rows = await sql<{ store_key: string }>`
      delete from ci_cache_uploads where id in (
        select id from ci_cache_uploads where created_at < now() - ${`${ABANDONED_UPLOAD_SECONDS} seconds`}::interval limit 100)
      returning store_key`.execute(db);
    if (!rows.rows.length) break;
    await deleteObjects(store, rows.rows.map((r) => r.store_key));
  }
  return removed;
}

defineRecurring(EXPIRE_CACHES_JOB, EXPIRE_EVERY_SECONDS, async (cairn) => {
  await destroyExpiredCaches(cairn);
});
