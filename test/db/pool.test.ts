import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pg from 'pg';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/index.js';

// A PostgreSQL restart or an administrator's pg_terminate_backend kills idle pooled connections;
// that must cost a reconnect, not the process.
describe('database pool', { skip: !process.env.DATABASE_URL && 'PostgreSQL only' }, () => {
  it('survives the server terminating its idle connections', async () => {
    const url = process.env.DATABASE_URL!;
    const opened = await openDatabase({ databaseUrl: url, dataDir: '' });
    const crashes: unknown[] = [];
    const onCrash = (err: unknown) => crashes.push(err);
    process.on('uncaughtException', onCrash);
    try {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(opened.db);
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query('select pg_terminate_backend($1)', [rows[0]!.pid]);
      await admin.end();
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(crashes, []);
      const again = await sql<{ one: number }>`select 1 as one`.execute(opened.db);
      assert.equal(again.rows[0]!.one, 1);
    } finally {
      process.off('uncaughtException', onCrash);
      await opened.close();
    }
  });
});
