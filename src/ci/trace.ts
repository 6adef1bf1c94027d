import type { Database } from '../db/index.js';

// Minimal reader of a job's log (the ciprotocol branch owns this module and its writer,
// appendTrace; this is the same reader with the agreed signature).

/** The whole log of a job, its chunks joined in order; null when it has none. */
export async function readTrace(db: Database, buildId: number): Promise<Buffer | null> {
  const chunks = await db.selectFrom('ci_build_trace_chunks').select('data').where('build_id', '=', buildId).orderBy('chunk_index').execute();
  if (!chunks.length) return null;
  return Buffer.concat(chunks.map((c) => Buffer.from(c.data)));
}
