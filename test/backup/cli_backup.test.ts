// `cairn backup` and `cairn token create` as a user runs them beside a running `cairn serve`: on
// the embedded database the server owns the data directory, so both go through its control
// socket; on PostgreSQL the commands open the database themselves. Restore refuses while the
// server runs, and restores once it is stopped.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { controlSocketPath } from '../../src/cli/control_client.js';
import { openDatabase } from '../../src/db/index.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { runCairn } from '../helpers/cli.js';
import { createEmptyDatabase, openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startServe } from '../helpers/serve.js';

const ROOT_TOKEN = 'cli-backup-root-token-0123456789';
const sourceUrl = process.env.DATABASE_URL ?? null;

describe('cairn backup and cairn token create beside a running server', () => {
  let tmp: string;
  let dataDir: string;
  let source: TestDatabase | null = null;
  let server: { url: string; child: ChildProcess } | null = null;
  const env = () => ({ CAIRN_DATA_DIR: dataDir, CAIRN_LOG_LEVEL: 'error', ...(source?.databaseUrl ? { DATABASE_URL: source.databaseUrl } : {}) });

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bk-'));
    dataDir = path.join(tmp, 'data');
    if (sourceUrl) {
      source = await openTestDatabase();
      await source.database.close();
    } else {
      // The embedded database made here, without startServe's deadline (initdb is slow on a busy machine).
      const made = await openDatabase({ databaseUrl: null, dataDir });
      await migrateToLatest(made.db);
      await made.close();
    }
    server = await startServe({ databaseUrl: source?.databaseUrl ?? undefined, dataDir, rootToken: ROOT_TOKEN });
  });
  after(async () => {
    server?.child.kill('SIGKILL');
    if (source) await source.drop().catch(() => {});
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('answers --help, and bad command lines in one line', async () => {
    const help = await runCairn(['backup', '--help'], env());
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^usage: cairn backup create/);
    assert.equal((await runCairn(['help', 'backup'], env())).stdout, help.stdout);
    const bad = await runCairn(['backup', 'frobnicate'], env());
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr.trim().split('\n').length, 1);
    const missing = await runCairn(['backup', 'restore', path.join(tmp, 'nope.tar')], env());
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^cairn backup: .*nope\.tar is not a readable file\n$/);
  });

  it('token create and backup create work while the server runs; restore refuses until it stops', async () => {
    if (!sourceUrl) {
      // The socket is the user's alone.
      const sock = controlSocketPath(dataDir);
      assert.equal(fs.statSync(path.dirname(sock)).mode & 0o777, 0o700);
      assert.equal(fs.statSync(sock).mode & 0o777, 0o600);
    }
    const made = await runCairn(['token', 'create', '--user', 'root', '--scopes', 'api', '--name', 'made-beside-serve'], env());
    assert.equal(made.code, 0, made.stderr);
    const token = made.stdout.trim();
    const me = await fetch(`${server!.url}/api/v4/user`, { headers: { 'private-token': token } });
    assert.equal(me.status, 200, 'the running server knows the token');

    const file = path.join(tmp, 'beside.tar');
    const backup = await runCairn(['backup', 'create', file], env());
    assert.equal(backup.code, 0, backup.stderr);
    assert.equal(backup.stdout.trim(), file);
    assert.match(backup.stderr, /backup written: \d+ tables/);
    assert.ok(fs.statSync(file).size > 0);
    const again = await runCairn(['backup', 'create', file], env());
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^cairn backup: .* exists already; name a new file\n$/);

    const refused = await runCairn(['backup', 'restore', file], env());
    assert.equal(refused.code, 1);
    assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    assert.match(refused.stderr, sourceUrl ? /database is not empty/ : /in use by a running process .*stop cairn serve first/);

    const stopped = new Promise((r) => server!.child.once('exit', r));
    server!.child.kill('SIGTERM');
    await stopped;
    server = null;
    if (!sourceUrl) assert.ok(!fs.existsSync(controlSocketPath(dataDir)), 'the socket goes with the server');

    // Restored into a new instance, the token is there.
    const target = path.join(tmp, 'restored');
    const empty = sourceUrl ? await createEmptyDatabase(sourceUrl) : null;
    try {
      const restoreEnv = { CAIRN_DATA_DIR: target, CAIRN_LOG_LEVEL: 'error', ...(empty ? { DATABASE_URL: empty.url } : {}) };
      const restored = await runCairn(['backup', 'restore', file], restoreEnv);
      assert.equal(restored.code, 0, restored.stderr);
      assert.match(restored.stderr, /restored the backup of /);
      const db = await openDatabase({ databaseUrl: empty?.url ?? null, dataDir: target });
      try {
        const row = await db.db.selectFrom('personal_access_tokens').select('name').where('name', '=', 'made-beside-serve').executeTakeFirst();
        assert.ok(row, 'the token made through the server is in the backup');
      } finally {
        await db.close();
      }
      // Restoring again into the now used instance is refused.
      const twice = await runCairn(['backup', 'restore', file], restoreEnv);
      assert.equal(twice.code, 1);
      assert.match(twice.stderr, /is not empty/);
    } finally {
      await empty?.drop();
    }
  });
});
