import { sql } from 'kysely';
import type { Database } from '../db/index.js';

/**
 * A job's log: chunks in ci_build_trace_chunks, appended in order; ci_builds.trace_size is the
 * offset the next append must start at. Appends lock the job row, so two appends (two
 * processes, a retried PATCH) never interleave.
 */
export type AppendResult = { ok: true; size: number } | { ok: false; size: number; reason: 'range' | 'missing' };

export async function appendTrace(db: Database, buildId: number, offset: number, bytes: Buffer): Promise<AppendResult> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('ci_builds').select('trace_size').where('id', '=', buildId).forUpdate().executeTakeFirst();
    if (!row) return { ok: false, size: 0, reason: 'missing' };
    const size = Number(row.trace_size);
    if (offset !== size) return { ok: false, size, reason: 'range' };
    if (!bytes.length) return { ok: true, size };
    await sql`insert into ci_build_trace_chunks (build_id, chunk_index, data)
              select ${buildId}, coalesce(max(chunk_index) + 1, 0), ${bytes} from ci_build_trace_chunks where build_id = ${buildId}`.execute(trx);
    await trx.updateTable('ci_builds').set({ trace_size: size + bytes.length, updated_at: sql`now()` as any }).where('id', '=', buildId).execute();
    return { ok: true, size: size + bytes.length };
  });
}

/** The whole log, or null when the job has none. */
export async function readTrace(db: Database, buildId: number): Promise<Buffer | null> {
  const rows = await db.selectFrom('ci_build_trace_chunks').select('data').where('build_id', '=', buildId).orderBy('chunk_index').execute();
  if (!rows.length) return null;
  return Buffer.concat(rows.map((r) => Buffer.from(r.data)));
}

/**
 * Part of the log from byte `offset` on (at most `limit` bytes): the chunks' lengths first (no
 * data read), then only the chunks that hold the bytes asked for. What pages and the live log
 * stream read, so a long log is never loaded whole to show its end.
 */
export async function readTraceFrom(db: Database, buildId: number, offset: number, limit = Number.MAX_SAFE_INTEGER): Promise<Buffer> {
  const sizes = await sql<{ chunk_index: number; len: number }>`
    select chunk_index, octet_length(data)::int as len from ci_build_trace_chunks where build_id = ${buildId} order by chunk_index`.execute(db);
  let start = 0;
  let first: number | null = null;
  let skip = 0;
  let last: number | null = null;
  let wanted = 0;
  for (const c of sizes.rows) {
    const end = start + Number(c.len);
    if (end > offset && wanted < limit) {
      if (first === null) {
        first = c.chunk_index;
        skip = Math.max(0, offset - start);
      }
      last = c.chunk_index;
      wanted = end - offset;
    }
    start = end;
  }
  if (first === null || last === null) return Buffer.alloc(0);
  const rows = await db.selectFrom('ci_build_trace_chunks').select('data')
    .where('build_id', '=', buildId).where('chunk_index', '>=', first).where('chunk_index', '<=', last)
    .orderBy('chunk_index').execute();
  const all = Buffer.concat(rows.map((r) => Buffer.from(r.data)));
  return all.subarray(skip, skip + Math.min(limit, all.length - skip));
}

/** The log's length in bytes, from its chunks (the chunks' data is not read). */
export async function traceLength(db: Database, buildId: number): Promise<number> {
  const r = await sql<{ n: number }>`select coalesce(sum(octet_length(data)), 0)::bigint as n from ci_build_trace_chunks where build_id = ${buildId}`.execute(db);
  return Number(r.rows[0]?.n ?? 0);
}
