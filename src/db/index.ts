import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, sql, type LogEvent } from 'kysely';
import type pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { lockDataDir } from './data_dir_lock.js';
import { PGliteDialect } from './pglite-dialect.js';
import type { DB } from './types.js';
import { observeWrites, type WriteObserver } from './write_observer.js';
import { dbQueryDuration, dbQueryErrors, sqlOperationOf } from '../metrics/index.js';
import { ConfigError, redactUrlPassword, setting } from '../config.js';

export type Database = Kysely<DB>;
export { sql };

// bigint counts and ids arrive as numbers; dates stay 'YYYY-MM-DD' strings (no time zone shift).
const pgliteParsers = { 20: (v: string) => Number(v), 1082: (v: string) => v };

/**
 * A pg client that turns every parameterized query into a named prepared statement (named by
 * a hash of its text), so each connection parses and plans a statement once instead of on every
 * request. When a statement's cached plan no longer fits the schema (another process migrated),
 * the query is retried unprepared.
 */
const statementNames = new Map<string, string>();
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (!name) {
    name = 'c' + crypto.createHash('sha1').update(text).digest('hex').slice(0, 20);
    if (statementNames.size < 10_000) statementNames.set(text, name);
  }
  return name;
}

function preparingClient(base: typeof pg.Client) {
  return class PreparingClient extends base {
    override query(config: any, values?: any, callback?: any): any {
      if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined) {
        return (super.query({ name: statementName(config), text: config, values }) as unknown as Promise<pg.QueryResult>).catch((err: any) => {
          if (err?.code === '0A000' || err?.code === '26000') return super.query(config, values);
          throw err;
        });
      }
      return super.query(config, values, callback);
    }
  };
}

/**
 * The driver of the database in use, loaded when it is opened: the pg driver (about 15 MB of
 * memory) is never loaded on the embedded database, nor PGlite's module on PostgreSQL.
 */
let pgDriver: Promise<{ pg: typeof pg; Client: typeof pg.Client }> | null = null;
function loadPg() {
  pgDriver ??= import('pg').then(({ default: pg }) => {
    pg.types.setTypeParser(20, (v) => Number(v));
    pg.types.setTypeParser(1082, (v) => v);
    return { pg, Client: preparingClient(pg.Client) };
  });
  return pgDriver;
}

export interface OpenedDatabase {
  db: Database;
  kind: 'postgres' | 'pglite';
  /** The connection string, on PostgreSQL. */
  url?: string;
  pglite?: PGlite;
  /** Called after each committed write to a watched table (src/db/write_observer.ts). */
  writeObservers: Set<WriteObserver>;
  /** Connections of this process's pool right now (PGlite has one), for the metrics. */
  poolStats?(): PoolStats;
  close(): Promise<void>;
}

export interface PoolStats {
  total: number;
  idle: number;
  /** Callers waiting for a connection. */
  waiting: number;
}

const OPERATIONS: Record<string, string> = { SelectQueryNode: 'select', InsertQueryNode: 'insert', UpdateQueryNode: 'update', DeleteQueryNode: 'delete' };

/** Kysely's log hook: every statement's run time (and failures) into the metrics. */
function observeQuery(event: LogEvent) {
  const operation = OPERATIONS[event.query.query.kind] ?? sqlOperationOf(event.query.sql);
  dbQueryDuration.observe({ operation }, event.queryDurationMillis / 1000);
  if (event.level === 'error') dbQueryErrors.inc({ operation });
}

/** pg lets a URL's `options` replace the pool's: keep both, the URL's last (it may override ours). */
export function withSessionOptions(databaseUrl: string, ours: string): { connectionString: string; options: string } {
  try {
    const url = new URL(databaseUrl);
    const theirs = url.searchParams.get('options');
    if (theirs === null) return { connectionString: databaseUrl, options: ours };
    url.searchParams.delete('options');
    return { connectionString: url.toString(), options: `${ours} ${theirs}` };
  } catch {
    return { connectionString: databaseUrl, options: ours };
  }
}

/** Network and server answers that mean DATABASE_URL cannot be used as it is. */
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', '28P01', '28000', '3D000', '57P03']);

/**
 * One connection at start, so an unreachable or refusing DATABASE_URL stops the process with one
 * line (host, port, database, the error code; never the password) instead of a driver stack.
 */
async function checkConnection(pool: pg.Pool, databaseUrl: string) {
  try {
    const client = await pool.connect();
    client.release();
  } catch (err: any) {
    await pool.end().catch(() => {});
    const code: string | undefined = err?.code ?? (/timeout/i.test(err?.message ?? '') ? 'ETIMEDOUT' : undefined);
    if (!code || !CONNECTION_CODES.has(code)) throw err;
    let where = redactUrlPassword(databaseUrl);
    try {
      const u = new URL(databaseUrl);
      where = `${u.hostname || 'localhost'}:${u.port || 5432}${u.pathname && u.pathname !== '/' ? `, database ${decodeURIComponent(u.pathname.slice(1))}` : ''}${u.username ? `, user ${decodeURIComponent(u.username)}` : ''}`;
    } catch {}
    const detail = /^\d|^[0-9A-Z]{5}$/.test(code) && err.message ? `: ${err.message}` : '';
    throw new ConfigError(`DATABASE_URL: cannot connect to PostgreSQL at ${where} (${code}${detail})`, 'DATABASE_URL');
  }
}

/**
 * PGlite's PostgreSQL runs inside the process's WebAssembly memory, which never shrinks: its
 * default shared_buffers (128 MB, and the WAL buffers sized from it) alone took about 100 MB of
 * the process's memory once touched. Its pages come from files the operating system caches
 * anyway, so a small buffer pool costs reads little (see the README's memory benchmark).
 */
const pgliteStartParams = (PGlite: { defaultStartParams: string[] }) => [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];

/**
 * Creates a new embedded database (PostgreSQL's initdb, inside PGlite) in a short-lived child
 * process. The WebAssembly memory initdb grows to (several hundred MB) is never given back, so
 * done in the server's own process it stayed in the server's memory for its life; the server
 * then opens the created directory as on any later start (about 200 MB less). Only on the first
 * start; if the child fails, the server creates the database itself, as before.
 */
const PGLITE_INIT_SCRIPT =
  'const { PGlite } = await import(process.env.PGLITE_INIT_MODULE);' +
  'const db = await PGlite.create(process.env.PGLITE_INIT_DIR, { startParams: JSON.parse(process.env.PGLITE_INIT_PARAMS) });' +
  'await db.close();';

async function initializePgliteInChild(dir: string, startParams: string[]): Promise<void> {
  if (fs.existsSync(path.join(dir, 'PG_VERSION'))) return;
  try {
    const env = { ...process.env, PGLITE_INIT_MODULE: import.meta.resolve('@electric-sql/pglite'), PGLITE_INIT_DIR: dir, PGLITE_INIT_PARAMS: JSON.stringify(startParams) };
    await new Promise<void>((resolve, reject) =>
      execFile(process.execPath, ['--input-type=module', '-e', PGLITE_INIT_SCRIPT], { env, maxBuffer: 1 << 20 }, (err) => (err ? reject(err) : resolve())),
    );
  } catch {
    // The server's own PGlite.create() initializes the directory instead.
  }
}

export interface OpenOptions {
  databaseUrl: string | null;
  dataDir: string;
  /** For tests: start PGlite in memory from a dumped data directory. */
  pgliteTemplate?: Blob | File;
}

export async function openDatabase(opts: OpenOptions): Promise<OpenedDatabase> {
  if (opts.databaseUrl) {
    // Generic plans: statements are prepared once per connection and planned once, not per call.
    // Dates compare in UTC (current_date), as the code and the cache's expiry do.
    const { connectionString, options } = withSessionOptions(opts.databaseUrl, '-c plan_cache_mode=force_generic_plan -c TimeZone=UTC');
    const { pg, Client } = await loadPg();
    const pool = new pg.Pool({ connectionString, options, max: setting<number>('CAIRN_DB_POOL'), Client });
    // An idle connection the server closes (restart, failover, pg_terminate_backend) is dropped from the
    // pool and replaced on the next query; unhandled, pg's 'error' event would end the process.
    pool.on('error', () => {});
    const writeObservers = new Set<WriteObserver>();
    const db = new Kysely<DB>({ dialect: observeWrites(new PostgresDialect({ pool }), writeObservers), log: observeQuery });
    const poolStats = () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount });
    await checkConnection(pool, opts.databaseUrl);
    return { db, kind: 'postgres', url: opts.databaseUrl, writeObservers, poolStats, close: () => db.destroy() };
  }
  // The data directory is this process's before anything in it is read or made.
  const unlock = opts.pgliteTemplate ? () => {} : lockDataDir(opts.dataDir);
  let pglite: PGlite;
  try {
    const { PGlite } = await import('@electric-sql/pglite');
    const options = { parsers: pgliteParsers, startParams: pgliteStartParams(PGlite) };
    if (opts.pgliteTemplate) {
      pglite = await PGlite.create({ loadDataDir: opts.pgliteTemplate, ...options });
    } else {
      const dir = path.join(opts.dataDir, 'pglite');
      fs.mkdirSync(dir, { recursive: true });
      await initializePgliteInChild(dir, options.startParams);
      pglite = await PGlite.create(dir, options);
    }
  } catch (err) {
    unlock();
    throw err;
  }
  const writeObservers = new Set<WriteObserver>();
  const dialect = new PGliteDialect(pglite);
  const db = new Kysely<DB>({ dialect: observeWrites(dialect, writeObservers), log: observeQuery });
  const close = async () => {
    try {
      await db.destroy();
    } finally {
      unlock();
    }
  };
  return { db, kind: 'pglite', pglite, writeObservers, poolStats: () => dialect.stats(), close };
}
