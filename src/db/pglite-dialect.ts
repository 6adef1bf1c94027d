import type { PGlite } from '@electric-sql/pglite';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely';

/**
 * Kysely dialect for the embedded PGlite database. PGlite is a single connection, so
 * a connection is handed to one user at a time: a transaction holds it until it ends,
 * and statements of concurrent requests can never interleave inside it.
 */
export class PGliteDialect implements Dialect {
  private driver: PGliteDriver | null = null;
  constructor(private readonly pg: PGlite) {}
  createAdapter() { return new PostgresAdapter(); }
  createDriver(): Driver { return (this.driver = new PGliteDriver(this.pg)); }
  /** The one connection: in use or idle, and how many callers wait for it (metrics). */
  stats() {
    const d = this.driver;
    return { total: 1, idle: d && (d.holders > 0) ? 0 : 1, waiting: d ? Math.max(0, d.holders - 1) : 0 };
  }
  createIntrospector(db: Kysely<any>) { return new PostgresIntrospector(db); }
  createQueryCompiler() { return new PostgresQueryCompiler(); }
}

class PGliteConnection implements DatabaseConnection {
  constructor(private readonly pg: PGlite) {}
  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const res = await this.pg.query<R>(query.sql, query.parameters as any[], { rowMode: 'object' });
    const affected = res.affectedRows;
    return {
      rows: res.rows,
      ...(affected !== undefined ? { numAffectedRows: BigInt(affected) } : {}),
    };
  }
  async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    yield await this.executeQuery<R>(query);
  }
}

class PGliteDriver implements Driver {
  private queue: Promise<void> = Promise.resolve();
  private readonly connection: PGliteConnection;
  private release: (() => void) | null = null;
  /** Callers holding or waiting for the connection. */
  holders = 0;
  constructor(private readonly pg: PGlite) { this.connection = new PGliteConnection(pg); }
  async init() {}
  async acquireConnection(): Promise<DatabaseConnection> {
    this.holders++;
    const previous = this.queue;
    let release!: () => void;
    this.queue = new Promise<void>((resolve) => { release = resolve; });
    await previous;
    this.release = release;
    return this.connection;
  }
  async beginTransaction(conn: DatabaseConnection) { await conn.executeQuery(CompiledQuery.raw('begin')); }
  async commitTransaction(conn: DatabaseConnection) { await conn.executeQuery(CompiledQuery.raw('commit')); }
  async rollbackTransaction(conn: DatabaseConnection) { await conn.executeQuery(CompiledQuery.raw('rollback')); }
  async savepoint(conn: DatabaseConnection, name: string) { await conn.executeQuery(CompiledQuery.raw(`savepoint "${name}"`)); }
  async rollbackToSavepoint(conn: DatabaseConnection, name: string) { await conn.executeQuery(CompiledQuery.raw(`rollback to savepoint "${name}"`)); }
  async releaseSavepoint(conn: DatabaseConnection, name: string) { await conn.executeQuery(CompiledQuery.raw(`release savepoint "${name}"`)); }
  async releaseConnection() { this.holders--; const r = this.release; this.release = null; r?.(); }
  async destroy() { await this.pg.close(); }
}
