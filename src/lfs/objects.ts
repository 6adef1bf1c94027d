import crypto from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import { defineJob, enqueue } from '../jobs/queue.js';
import { artifactStore, ContentMismatchError, type ObjectStore } from '../storage/index.js';

/**
 * Git LFS objects: content-addressed (oid = sha256 of the bytes), stored once in the artifacts'
 * object storage whatever the number of projects holding them, and visible to a project only
 * through a row of lfs_objects_projects. Bytes are verified while they stream in (size and
 * sha256), and the rows appear only after the stored object is complete, so an interrupted or
 * wrong upload never becomes visible.
 */

/** An oid as the client sends it: 64 lowercase hex digits (checked before anything touches storage). */
export const OID_RE = /^[0-9a-f]{64}$/;

export const isOid = (oid: unknown): oid is string => typeof oid === 'string' && OID_RE.test(oid);

/** Where an object's bytes live in the object store. */
export function lfsObjectKey(oid: string): string {
  if (!isOid(oid)) throw new Error(`invalid LFS oid "${oid}"`);
  return `lfs/objects/${oid.slice(0, 2)}/${oid.slice(2, 4)}/${oid}`;
}

export function lfsStore(cairn: Cairn): ObjectStore {
  return artifactStore(cairn.config);
}

/** An expected failure of an LFS request: its status and message (rendered in LFS's JSON error form). */
export class LfsError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** The sizes of those of `oids` the project links (oid -> size). */
export async function linkedObjects(db: Database, projectId: number, oids: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const valid = [...new Set(oids.filter(isOid))];
  if (!valid.length) return out;
  const rows = await db
    .selectFrom('lfs_objects_projects as l')
    .innerJoin('lfs_objects as o', 'o.id', 'l.lfs_object_id')
    .select(['o.oid', 'o.size'])
    .where('l.project_id', '=', projectId)
    .where('o.oid', 'in', valid)
    .execute();
  for (const r of rows) out.set(r.oid, Number(r.size));
  return out;
}

/** Serializes the making and the removal of one oid's row and bytes across processes. */
function lockOid(trx: Database, oid: string) {
  const digest = crypto.createHash('sha256').update(`lfs:${oid}`).digest();
  return sql`select pg_advisory_xact_lock(${digest.readBigInt64BE(0).toString()}::bigint)`.execute(trx);
}

/**
 * Stores an uploaded object for the project: the body streams through the size and sha256 checks
 * into the store (whose put is atomic: a failure leaves nothing behind), then the object's row
 * and the project's link are made. The object's bytes are written again even when another
 * project has them: the client proves it holds the content, and a project never gains an
 * object only by naming its oid.
 */
export async function storeLfsObject(cairn: Cairn, projectId: number, oid: string, size: number, body: Readable): Promise<void> {
  if (!isOid(oid)) throw new LfsError(422, 'The oid must be 64 lowercase hexadecimal digits (a sha256).');
  if (!Number.isSafeInteger(size) || size < 0) throw new LfsError(422, 'The size must be a non-negative integer.');
  if (size > cairn.config.maxLfsObjectSize) throw new LfsError(413, `The object is larger than the limit of ${cairn.config.maxLfsObjectSize} bytes.`);
  const store = lfsStore(cairn);
  const key = lfsObjectKey(oid);
  // The store may destroy what it reads from when the bytes are wrong: a pass-through, so that the
  // request itself is only unpiped and drained (the client then reads the refusal, not a reset).
  const input = new PassThrough({ highWaterMark: 1024 * 1024 });
  body.on('error', (err) => input.destroy(err));
  body.pipe(input);
  try {
    // The store hashes and counts the bytes as they stream in, and keeps them only if they match.
    await store.put(key, input, { expect: { size, sha256: oid } });
  } catch (err) {
    body.unpipe(input);
    body.resume();
    if (err instanceof ContentMismatchError) {
      if (err.reason === 'sha256') throw new LfsError(422, 'The object content does not match its oid (sha256).');
      throw new LfsError(422, err.reason === 'too_large' ? `The object is larger than its declared size of ${size} bytes.` : `The object is not ${size} bytes long (${err.message}).`);
    }
    if (body.errored || (body.destroyed && !body.readableEnded)) throw new LfsError(400, 'The upload was interrupted.');
    throw err;
  }
  await cairn.db.transaction().execute(async (trx) => {
    await lockOid(trx, oid);
    // A prune that ran between the put and this lock took the bytes away: the client retries.
    if ((await store.size(key)) !== size) throw new LfsError(409, 'The object was removed while it was uploaded; please retry.');
    await trx.insertInto('lfs_objects').values({ oid, size }).onConflict((oc) => oc.column('oid').doNothing()).execute();
    const row = await trx.selectFrom('lfs_objects').select('id').where('oid', '=', oid).executeTakeFirstOrThrow();
    await trx
      .insertInto('lfs_objects_projects')
      .values({ lfs_object_id: row.id, project_id: projectId })
      .onConflict((oc) => oc.columns(['project_id', 'lfs_object_id']).doNothing())
      .execute();
  });
}

/** The stored bytes of an object the project links, or null (not linked, or the bytes are gone). */
export async function openLfsObject(cairn: Cairn, projectId: number, oid: string): Promise<{ size: number; stream: Readable } | null> {
  if (!isOid(oid)) return null;
  const size = (await linkedObjects(cairn.db, projectId, [oid])).get(oid);
  if (size === undefined) return null;
  const stream = await lfsStore(cairn).get(lfsObjectKey(oid));
  return stream ? { size, stream } : null;
}

/** The bytes of all LFS objects a project links (its statistics' lfs_objects_size). */
export async function lfsObjectsSize(db: Database, projectId: number): Promise<number> {
  const row = await db
    .selectFrom('lfs_objects_projects as l')
    .innerJoin('lfs_objects as o', 'o.id', 'l.lfs_object_id')
    .select(sql<string>`coalesce(sum(o.size), 0)`.as('total'))
    .where('l.project_id', '=', projectId)
    .executeTakeFirstOrThrow();
  return Number(row.total);
}

/** A fork links every object of its source (GitLab's fork does the same); inside the fork's transaction. */
export async function linkForkLfsObjects(trx: Database, sourceId: number, forkId: number): Promise<void> {
  await sql`
    insert into lfs_objects_projects (lfs_object_id, project_id)
    select lfs_object_id, ${forkId}::int from lfs_objects_projects where project_id = ${sourceId}::int
    on conflict (project_id, lfs_object_id) do nothing`.execute(trx);
}

const PRUNE_JOB = 'lfs.prune';

/**
 * Queues the removal of the objects these projects link, for when no other project links them;
 * call it in the transaction that deletes the projects (their links go by cascade).
 */
export async function scheduleLfsPrune(trx: Database, projectIds: number[]): Promise<void> {
  if (!projectIds.length) return;
  const rows = await trx
    .selectFrom('lfs_objects_projects as l')
    .innerJoin('lfs_objects as o', 'o.id', 'l.lfs_object_id')
    .select('o.oid')
    .distinct()
    .where('l.project_id', 'in', projectIds)
    .execute();
  if (rows.length) await enqueue(trx, PRUNE_JOB, { oids: rows.map((r) => r.oid) });
}

/** Removes the rows and bytes of those objects no project links any more; returns the oids removed. */
export async function pruneLfsObjects(cairn: Cairn, oids: string[]): Promise<string[]> {
  const store = lfsStore(cairn);
  const removed: string[] = [];
  for (const oid of new Set(oids.filter(isOid))) {
    await cairn.db.transaction().execute(async (trx) => {
      await lockOid(trx, oid);
      const gone = await trx
        .deleteFrom('lfs_objects')
        .where('oid', '=', oid)
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('lfs_objects_projects').select('id').whereRef('lfs_objects_projects.lfs_object_id', '=', 'lfs_objects.id'))))
        .returning('id')
        .executeTakeFirst();
      // Deleted under the lock: an upload of the same oid waits, then finds the bytes gone and is retried.
      if (gone) {
        await store.delete(lfsObjectKey(oid));
        removed.push(oid);
      }
    });
  }
  return removed;
}

defineJob(PRUNE_JOB, async (cairn, payload) => {
  await pruneLfsObjects(cairn, (payload.oids as string[]) ?? []);
});

/** The oid and size of a Git LFS pointer file (spec v1), or null when the bytes are not one. */
export function parseLfsPointer(content: Buffer): { oid: string; size: number } | null {
  if (content.length > 1024) return null;
  const text = content.toString('utf8');
  if (!text.startsWith('version https://git-lfs.github.com/spec/v1\n')) return null;
  const oid = /^oid sha256:([0-9a-f]{64})$/m.exec(text)?.[1];
  const size = /^size (\d{1,16})$/m.exec(text)?.[1];
  return oid && size ? { oid, size: Number(size) } : null;
}
