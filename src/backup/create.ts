// `cairn backup create`: one archive of everything an instance keeps (GitLab's gitlab-backup).
//
// Consistency. A push (or an API commit, merge, tag...) is two things that are not one
// transaction: refs move in a repository, and rows change in the database (its pipeline, merge
// request refresh, default branch...). Cairn orders them so a crash is recoverable: the write
// takes a write lease (a repository_write_leases row, services/repository_writes.ts), then
// journals its ref updates (journalRefUpdates: a background job row), then moves the refs, then
// runs the post-receive work, then ends the journal and lets the lease go. After a crash the
// journal replays the updates that took effect (recordPush keeps only those).
//
// Neither "database first" nor "repositories first" alone makes a backup consistent:
// - database at T1, refs at T2 > T1: a push journalled after T1 whose refs moved before T2 is in
//   the repository but not in the database, and no journal in the restore replays it (a pushed
//   commit without its pipeline, forever);
// - refs at T1, database at T2 > T1: a push whose refs moved after T1 and whose post-receive work
//   committed before T2 leaves rows (a pipeline, a merge request's new head) naming commits the
//   restored repository does not have.
// So both are taken at one point no ref can move across: the backup waits until no write lease
// is held, then holds off new ones (PostgreSQL: `LOCK TABLE repository_write_leases IN
// EXCLUSIVE MODE` in a transaction of its own, which blocks lease grants but not reads; the
// embedded database: its one connection, which the snapshot transaction holds), starts the
// database snapshot (REPEATABLE READ, read only) and reads every repository's refs and HEAD,
// then lets writes go on. No lease held means no write is between its journal and its end, so
// at that point every repository's refs are exactly what the snapshot's rows describe. A
// journal can still be in the snapshot only for a write whose process died (it is replayed after
// the restore as after a crash, and replaying is idempotent). The window is short: one
// for-each-ref per repository; writes that arrive in it wait (a lease grant blocks), none fail.
//
// On the embedded database the snapshot transaction holds its one connection: the server's own
// database work waits while the tables are dumped too (the repositories are packed after).
//
// After the window the tables are dumped from the snapshot (a cursor, in batches) and each
// repository's objects reachable from its snapshot refs are packed (`pack-objects --revs`); git
// never changes an object, and housekeeping prunes only what has been unreachable for two weeks,
// so those objects are still there whatever was pushed since. A repository deleted (or moved to
// another storage) between the window and its packing fails the backup: run it again.
//
// The object storage (artifacts, CI caches) is copied last. Objects are written before the rows
// that name them and deleted after those rows are, so an object a snapshot row names is there
// unless the row was deleted after the snapshot (expiry, erasure: then the restore has a row
// whose file is gone, as the instance would have had a moment later); objects made after the
// snapshot come along without a row and are swept as leftovers.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { sql, type Kysely } from 'kysely';
import type { Config } from '../config.js';
import { openDatabase, type Database } from '../db/index.js';
import { hashedDiskPath, repositoryExists, repositoryPath } from '../git/repository.js';
import { formatRefsSnapshot, packSnapshot, readRefsSnapshot, type RefsSnapshot } from '../git/snapshot.js';
import { setting } from '../config.js';
import { holderIsDeadHere } from '../services/repository_writes.js';
import { artifactStore } from '../storage/index.js';
import { CAIRN_VERSION } from '../version.js';
import { appliedMigrations, dumpTable, listTables, sequenceValues, TRANSIENT_TABLES } from './database.js';
import { FORMAT, FORMAT_VERSION, MANIFEST, objectEntry, repositoryEntry, SECRET_ENTRY, tableEntry, validComponents, type Manifest, type ManifestEntry, type ManifestRepository } from './manifest.js';
import { TarWriter } from './tar.js';

export interface BackupSource {
  config: Config;
  db: Database;
  dbKind: 'postgres' | 'pglite';
}

export interface BackupOptions {
  gzip?: boolean;
  /** Progress lines (stderr of the command). */
  log?: (line: string) => void;
  /** How long to wait for running writes before giving up (ms). */
  quiesceTimeoutMs?: number;
  /** For tests: called inside the window where no ref can move. */
  inWindow?: () => Promise<void>;
}

export interface BackupResult {
  file: string;
  bytes: number;
  manifest: Manifest;
}

/** A failure the command reports in one line (no stack). */
export class BackupError extends Error {}

/** A connection held until released, for a transaction that spans other work. */
async function holdConnection(db: Kysely<any>): Promise<{ conn: Kysely<any>; release: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    let handed = false;
    const held = db.connection().execute(async (conn) => {
      handed = true;
      resolve({
        conn,
        release: async () => {
          done();
          await held;
        },
      });
      await finished;
    });
    held.catch((err) => {
      if (!handed) reject(err);
    });
  });
}

/** Leases held by writers that still exist (expired ones and those of dead local processes do not count). */
async function liveLeases(db: Kysely<any>): Promise<number> {
  const { rows } = await sql<{ holder: string }>`select holder from repository_write_leases where expires_at > now()`.execute(db);
  return rows.filter((r) => !holderIsDeadHere(r.holder)).length;
}

async function waitForNoLeases(db: Kysely<any>, deadline: number): Promise<void> {
  for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
    if ((await liveLeases(db)) === 0) return;
    if (Date.now() >= deadline) throw new BackupError('repository writes kept running for the whole wait; nothing was written, try again');
    await new Promise((r) => setTimeout(r, delay));
  }
}

/**
 * Runs `inWindow` at a point where no write holds a lease and none can start, with the database
 * snapshot taken at that point, then `after` in the same snapshot once writes may go on.
 */
async function atQuietPoint<T>(db: Database, kind: 'postgres' | 'pglite', databaseUrl: string | null, deadline: number, inWindow: (snap: Kysely<any>) => Promise<void>, after: (snap: Kysely<any>) => Promise<T>): Promise<T> {
  for (;;) {
    if (kind === 'pglite') {
      // One connection: whoever holds it is the only one using the database.
      const snap = await holdConnection(db);
      let ok = false;
      try {
        await sql`begin isolation level repeatable read`.execute(snap.conn);
        if ((await liveLeases(snap.conn)) === 0) {
          await inWindow(snap.conn);
          const result = await after(snap.conn);
          ok = true;
          return result;
        }
      } finally {
        await sql.raw(ok ? 'commit' : 'rollback').execute(snap.conn).catch(() => {});
        await snap.release();
      }
    } else {
      // The gate on a connection of its own: with the snapshot's, the backup never needs two of one pool.
      if (!databaseUrl) throw new BackupError('a PostgreSQL backup needs DATABASE_URL');
      const gateDb = await openDatabase({ databaseUrl, dataDir: '' });
      const gate = await holdConnection(gateDb.db).catch(async (err) => {
        await gateDb.close();
        throw err;
      });
      let snap: Awaited<ReturnType<typeof holdConnection>> | null = null;
      try {
        await sql`begin`.execute(gate.conn);
        await sql`lock table repository_write_leases in exclusive mode`.execute(gate.conn);
        if ((await liveLeases(gate.conn)) === 0) {
          snap = await holdConnection(db);
          await sql`begin isolation level repeatable read read only`.execute(snap.conn);
          await sql`select 1 from repository_write_leases limit 1`.execute(snap.conn); // the snapshot is taken here
          await inWindow(snap.conn);
        }
      } catch (err) {
        if (snap) {
          await sql`rollback`.execute(snap.conn).catch(() => {});
          await snap.release();
        }
        throw err;
      } finally {
        await sql`rollback`.execute(gate.conn).catch(() => {});
        await gate.release();
        await gateDb.close();
      }
      if (snap) {
        let ok = false;
        try {
          const result = await after(snap.conn);
          ok = true;
          return result;
        } finally {
          await sql.raw(ok ? 'commit' : 'rollback').execute(snap.conn).catch(() => {});
          await snap.release();
        }
      }
    }
    await waitForNoLeases(db, deadline);
  }
}

interface RepositoryRow {
  kind: ManifestRepository['kind'];
  id: number;
  storage: string;
  diskPath: string;
}

/** Every repository the snapshot's rows name: projects, their wikis, snippets, groups. */
async function repositoryRows(db: Kysely<any>): Promise<RepositoryRow[]> {
  const out: RepositoryRow[] = [];
  const projects = await sql<{ id: number; storage: string; disk_path: string }>`select id, repository_storage as storage, disk_path from projects order by id`.execute(db);
  for (const p of projects.rows) {
    out.push({ kind: 'project', id: Number(p.id), storage: p.storage, diskPath: p.disk_path });
    out.push({ kind: 'wiki', id: Number(p.id), storage: p.storage, diskPath: p.disk_path.replace(/\.git$/, '.wiki.git') });
  }
  const snippets = await sql<{ id: number; storage: string; disk_path: string }>`select id, repository_storage as storage, disk_path from snippets order by id`.execute(db);
  for (const s of snippets.rows) out.push({ kind: 'snippet', id: Number(s.id), storage: s.storage, diskPath: s.disk_path });
  const groups = await sql<{ id: number; storage: string }>`select id, repository_storage as storage from namespaces where type = 'Group' order by id`.execute(db);
  for (const g of groups.rows) out.push({ kind: 'group', id: Number(g.id), storage: g.storage, diskPath: hashedDiskPath('group', Number(g.id)) });
  return out;
}

function secretKeySource(config: Config): { source: Manifest['secretKeyBase']; file: string } {
  const file = path.join(config.dataDir, 'secret_key_base');
  if (setting<string | null>('CAIRN_SECRET_KEY_BASE')) return { source: 'environment', file };
  return { source: fs.existsSync(file) ? 'file' : 'none', file };
}

/**
 * Writes a backup of the instance to `file` (which must not exist): written under a temporary
 * name beside it and renamed when complete, so `file` is whole or absent.
 */
export async function createBackup(src: BackupSource, file: string, opts: BackupOptions = {}): Promise<BackupResult> {
  const log = opts.log ?? (() => {});
  const target = path.resolve(file);
  const dir = path.dirname(target);
  if (fs.existsSync(target)) throw new BackupError(`${target} exists already; name a new file`);
  try {
    if (!fs.statSync(dir).isDirectory()) throw new Error();
  } catch {
    throw new BackupError(`${dir} is not a directory`);
  }
  const staging = await fs.promises.mkdtemp(path.join(dir, '.cairn-backup-'));
  const partial = path.join(staging, 'archive.partial');
  const out = fs.createWriteStream(partial, { mode: 0o600, flags: 'wx' });
  const gzip = opts.gzip ? createGzip({ level: 6 }) : null;
  const sink = gzip ?? out;
  const written = gzip ? pipeline(gzip, out) : new Promise<void>((resolve, reject) => out.on('close', resolve).on('error', reject));
  written.catch(() => {});
  const tar = new TarWriter(sink);
  const entries: ManifestEntry[] = [];
  const deadline = Date.now() + (opts.quiesceTimeoutMs ?? 10 * 60_000);
  try {
    const snapshots: { row: RepositoryRow; dir: string; refs: RefsSnapshot }[] = [];
    let migrationsApplied: string[] = [];
    const tables: { name: string; rows: number }[] = [];
    let sequences: Manifest['database']['sequences'] = [];
    await atQuietPoint(
      src.db,
      src.dbKind,
      src.config.databaseUrl,
      deadline,
      async (snap) => {
        snapshots.length = 0;
        for (const row of await repositoryRows(snap)) {
          const root = src.config.storages[row.storage];
          if (!root) throw new BackupError(`${row.kind} ${row.id} is on storage "${row.storage}", which CAIRN_STORAGES does not name`);
          const repoDir = repositoryPath(root, row.diskPath);
          if (!(await repositoryExists(repoDir))) continue;
          snapshots.push({ row, dir: repoDir, refs: await readRefsSnapshot(repoDir) });
        }
        await opts.inWindow?.();
      },
      async (snap) => {
        log(`database: snapshot taken, ${snapshots.length} repositories' refs read`);
        migrationsApplied = await appliedMigrations(snap);
        sequences = await sequenceValues(snap);
        for (const table of await listTables(snap)) {
          const staged = path.join(staging, 'table.ndjson');
          const rows = TRANSIENT_TABLES.has(table) ? (fs.writeFileSync(staged, ''), 0) : await dumpTable(snap, table, staged);
          entries.push(await tar.addFile(tableEntry(table), staged));
          fs.rmSync(staged, { force: true });
          tables.push({ name: table, rows });
        }
        log(`database: ${tables.length} tables, ${tables.reduce((n, t) => n + t.rows, 0)} rows`);
      },
    );

    const repositories: ManifestRepository[] = [];
    for (const { row, dir: repoDir, refs } of snapshots) {
      if (!validComponents(row.diskPath) || !validComponents(row.storage)) throw new BackupError(`${row.kind} ${row.id} has a repository path a backup cannot name (${row.storage}:${row.diskPath})`);
      entries.push(await tar.addBuffer(repositoryEntry(row.storage, row.diskPath, 'refs'), Buffer.from(formatRefsSnapshot(refs))));
      const pack = path.join(staging, 'repository.pack');
      try {
        if (!(await packSnapshot(repoDir, refs, pack))) fs.writeFileSync(pack, '');
      } catch (err) {
        throw new BackupError(`${row.kind} ${row.id}: its repository changed under the backup (${(err as Error).message.split('\n')[0]}); run the backup again`);
      }
      entries.push(await tar.addFile(repositoryEntry(row.storage, row.diskPath, 'pack'), pack));
      fs.rmSync(pack, { force: true });
      repositories.push({ ...row, refs: refs.refs.length });
    }
    log(`repositories: ${repositories.length}`);

    const store = artifactStore(src.config);
    let objects = 0;
    for await (const key of store.keys()) {
      if (!validComponents(key)) {
        log(`object storage: skipped "${key}" (not a name Cairn writes)`);
        continue;
      }
      const body = await store.get(key);
      if (!body) continue; // deleted since it was listed
      const staged = path.join(staging, 'object');
      await pipeline(body, fs.createWriteStream(staged, { mode: 0o600 }));
      entries.push(await tar.addFile(objectEntry(key), staged));
      fs.rmSync(staged, { force: true });
      objects++;
    }
    log(`object storage: ${objects} objects`);

    const secret = secretKeySource(src.config);
    if (secret.source === 'file') entries.push(await tar.addFile(SECRET_ENTRY, secret.file));

    const manifest: Manifest = {
      format: FORMAT,
      formatVersion: FORMAT_VERSION,
      cairnVersion: CAIRN_VERSION,
      createdAt: new Date().toISOString(),
      database: { kind: src.dbKind, migrations: migrationsApplied, tables, sequences },
      repositories,
      objects,
      secretKeyBase: secret.source,
      entries,
    };
    await tar.addBuffer(MANIFEST, Buffer.from(JSON.stringify(manifest, null, 1)));
    await tar.finish();
    sink.end();
    await written;
    const fd = fs.openSync(partial, 'r');
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    // link, not rename: never replaces a file that appeared meanwhile.
    try {
      fs.linkSync(partial, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new BackupError(`${target} appeared while the backup was written; the backup was not kept`);
      throw err;
    }
    const bytes = fs.statSync(target).size;
    return { file: target, bytes, manifest };
  } catch (err) {
    sink.destroy();
    out.destroy();
    throw err;
  } finally {
    await fs.promises.rm(staging, { recursive: true, force: true });
  }
}
