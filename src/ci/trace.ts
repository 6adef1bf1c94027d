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
