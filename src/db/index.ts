import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { PGliteDialect } from './pglite-dialect.js';
import type { DB } from './types.js';

export type Database = Kysely<DB>;
export { sql };

// bigint counts and ids arrive as numbers; dates stay 'YYYY-MM-DD' strings (no time zone shift).
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1082, (v) => v);
const pgliteParsers = { 20: (v: string) => Number(v), 1082: (v: string) => v };

export interface OpenedDatabase {
  db: Database;
  kind: 'postgres' | 'pglite';
  pglite?: PGlite;
  close(): Promise<void>;
}

export interface OpenOptions {
  databaseUrl: string | null;
  dataDir: string;
  /** For tests: start PGlite in memory from a dumped data directory. */
  pgliteTemplate?: Blob | File;
}

export async function openDatabase(opts: OpenOptions): Promise<OpenedDatabase> {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: Number(process.env.CAIRN_DB_POOL || 10) });
    // An idle connection the server closes (restart, failover, pg_terminate_backend) is dropped from the
    // pool and replaced on the next query; unhandled, pg's 'error' event would end the process.
    pool.on('error', () => {});
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  let pglite: PGlite;
  if (opts.pgliteTemplate) {
    pglite = await PGlite.create({ loadDataDir: opts.pgliteTemplate, parsers: pgliteParsers });
  } else {
    const dir = path.join(opts.dataDir, 'pglite');
    fs.mkdirSync(dir, { recursive: true });
    pglite = await PGlite.create(dir, { parsers: pgliteParsers });
  }
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  return { db, kind: 'pglite', pglite, close: () => db.destroy() };
}
