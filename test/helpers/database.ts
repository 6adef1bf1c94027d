import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { openDatabase, type OpenedDatabase } from '../../src/db/index.js';
import { migrateToLatest } from '../../src/db/migrate.js';

/**
 * Each test file gets its own fresh, migrated database, cloned from a template made once per
 * set of migrations: a dumped PGlite data directory, or a PostgreSQL template database.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const CACHE = path.join(ROOT, '.cache');

export function migrationsHash(): string {
  const dir = path.join(ROOT, 'src/db/migrations');
  const h = crypto.createHash('sha256');
  for (const f of fs.readdirSync(dir).sort()) h.update(f).update(fs.readFileSync(path.join(dir, f)));
  return h.digest('hex').slice(0, 12);
}

// Uncompressed (45 MB): a test process then loads it without gunzipping it first, about 0.3 s of
// CPU less for each test file.
function templatePath() {
  return path.join(CACHE, `pglite-template-${migrationsHash()}.tar`);
}

async function withFileLock<T>(lockPath: string, fn: () => Promise<T>): Promise<T> {
  fs.mkdirSync(path.dirname(lockPath), { recursive: true });
  for (let i = 0; ; i++) {
    try {
      fs.mkdirSync(lockPath);
      break;
    } catch {
      // A lock older than two minutes belongs to a process that died.
      try {
        if (Date.now() - fs.statSync(lockPath).mtimeMs > 120_000) fs.rmSync(lockPath, { recursive: true, force: true });
      } catch {}
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockPath, { recursive: true, force: true });
  }
}

export async function preparePgliteTemplate(): Promise<string> {
  const file = templatePath();
  if (fs.existsSync(file)) return file;
  return withFileLock(file + '.lock', async () => {
    if (fs.existsSync(file)) return file;
    const tmpDir = fs.mkdtempSync(path.join(CACHE, 'pglite-build-'));
    const database = await openDatabase({ databaseUrl: null, dataDir: tmpDir });
    await migrateToLatest(database.db);
    const dump = await database.pglite!.dumpDataDir('none');
    fs.writeFileSync(file + '.tmp', Buffer.from(await dump.arrayBuffer()));
    fs.renameSync(file + '.tmp', file);
    await database.close();
    fs.rmSync(tmpDir, { recursive: true, force: true });
    return file;
  });
}

function adminUrl(databaseUrl: string, dbName?: string): string {
  const u = new URL(databaseUrl);
  if (dbName) u.pathname = '/' + dbName;
  return u.toString();
}

async function withAdmin<T>(databaseUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock(4711)');
    return await fn(client);
  } finally {
    await client.query('select pg_advisory_unlock(4711)').catch(() => {});
    await client.end();
  }
}

export async function preparePostgresTemplate(databaseUrl: string): Promise<string> {
  const name = `cairn_tpl_${migrationsHash()}`;
  await withAdmin(databaseUrl, async (client) => {
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount) return;
    // Templates of older migration sets are no use any more, once a day old: until then another
    // checkout (a branch with other migrations) may be running its suite on this server.
    const stale = await client.query(
      `select datname from pg_database where datname like 'cairn\\_tpl\\_%' and datname <> $1
         and coalesce(nullif(shobj_description(oid, 'pg_database'), '')::bigint, 0) < extract(epoch from now()) - 86400`,
      [name],
    );
    for (const row of stale.rows) await client.query(`drop database if exists "${row.datname}"`).catch(() => {});
    await client.query(`create database "${name}"`);
    await client.query(`comment on database "${name}" is '${Math.floor(Date.now() / 1000)}'`);
    const database = await openDatabase({ databaseUrl: adminUrl(databaseUrl, name), dataDir: '' });
    try {
      await migrateToLatest(database.db);
    } catch (err) {
      await database.close();
      await client.query(`drop database "${name}"`);
      throw err;
    }
    await database.close();
  });
  return name;
}

export interface TestDatabase {
  database: OpenedDatabase;
  databaseUrl: string | null;
  drop(): Promise<void>;
}

export async function openTestDatabase(): Promise<TestDatabase> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    const file = await preparePgliteTemplate();
    const blob = await fs.openAsBlob(file);
    const database = await openDatabase({ databaseUrl: null, dataDir: '', pgliteTemplate: blob });
    return { database, databaseUrl: null, drop: () => database.close() };
  }
  const template = await preparePostgresTemplate(databaseUrl);
  const name = `cairn_t_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  await withAdmin(databaseUrl, (c) => c.query(`create database "${name}" template "${template}"`));
  const url = adminUrl(databaseUrl, name);
  const database = await openDatabase({ databaseUrl: url, dataDir: '' });
  return {
    database,
    databaseUrl: url,
    drop: async () => {
      await database.close();
      await withAdmin(databaseUrl, (c) => c.query(`drop database if exists "${name}" with (force)`));
    },
  };
}

/** A new, empty PostgreSQL database beside DATABASE_URL's (never migrated): a restore's target. */
export async function createEmptyDatabase(databaseUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `cairn_empty_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  await withAdmin(databaseUrl, (c) => c.query(`create database "${name}"`));
  return {
    url: adminUrl(databaseUrl, name),
    drop: () => withAdmin(databaseUrl, (c) => c.query(`drop database if exists "${name}" with (force)`)).then(() => {}),
  };
}
