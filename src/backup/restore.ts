// `cairn backup restore FILE`: an instance back from a backup archive, into an empty one only.
//
// The archive is untrusted input. It is read twice: the first pass touches nothing and checks
// everything (every entry a regular file under a name a backup writes, no entry twice, each
// entry's size and SHA-256 as the manifest lists them, the format and schema versions readable by
// this Cairn, the repositories' storages configured here); the second pass restores, checking the
// checksums again as it goes. Names are matched against the shapes a backup writes (no absolute
// path, no `..`, no odd component) and never resolved as paths to decide anything; links,
// directories and devices are refused outright, so nothing can be written through a link.
//
// Nothing half-restored is left: the database is loaded in one transaction (schema included: the
// backup's own migrations run inside it), and what was written to the empty data directory,
// repository storages and object storage is removed again when anything fails.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import type { Config } from '../config.js';
import { LOCK_FILE, dataDirHolder } from '../db/data_dir_lock.js';
import { openDatabase, type OpenedDatabase } from '../db/index.js';
import { migrateToLatest } from '../db/migrate.js';
import { migrations } from '../db/migrations/index.js';
import { repositoryPath } from '../git/repository.js';
import { parseRefsSnapshot, restoreSnapshot, type RefsSnapshot } from '../git/snapshot.js';
import { artifactStore } from '../storage/index.js';
import { databaseIsEmpty, listTables, loadTable, migrateTo, prepareLoad, setSequences } from './database.js';
import { FORMAT, FORMAT_VERSION, MANIFEST, parseEntryName, tableEntry, repositoryEntry, type Manifest, type ManifestEntry } from './manifest.js';
import { archiveBytes, readTar, TarError } from './tar.js';
import { BackupError } from './create.js';

/** Entries read whole into memory (the manifest, a repository's refs) are at most this big. */
const MAX_IN_MEMORY = 256 << 20;

export interface RestoreOptions {
  log?: (line: string) => void;
}

async function* hashing(body: AsyncIterable<Buffer>, hash: crypto.Hash): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    hash.update(chunk);
    yield chunk;
  }
}

async function readAll(body: AsyncIterable<Buffer>, size: number, name: string): Promise<Buffer> {
  if (size > MAX_IN_MEMORY) throw new BackupError(`${name} is too large (${size} bytes)`);
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(c);
  return Buffer.concat(parts);
}

function entries(file: string) {
  return readTar(archiveBytes(fs.createReadStream(file)));
}

/** Regular files only ('0', or NUL in old archives); anything else is refused. */
const REGULAR = new Set(['0', '\0', '7']);

/**
 * The first pass: every check, nothing written. Returns the manifest when the archive is whole,
 * a backup, and readable by this Cairn; throws a BackupError naming the first problem otherwise.
 */
function readableFile(file: string): void {
  try {
    if (!fs.statSync(file).isFile()) throw new Error();
    fs.accessSync(file, fs.constants.R_OK);
  } catch {
    throw new BackupError(`${file} is not a readable file`);
  }
}

export async function verifyArchive(file: string, config: Config): Promise<Manifest> {
  readableFile(file);
  const seen: ManifestEntry[] = [];
  const names = new Set<string>();
  let manifestText: Buffer | null = null;
  try {
    for await (const e of entries(file)) {
      if (!REGULAR.has(e.type)) throw new BackupError(`archive entry "${e.name}" is not a regular file (type ${JSON.stringify(e.type)}): refused`);
      const parsed = parseEntryName(e.name);
      if (!parsed) throw new BackupError(`archive entry "${e.name}" is not a name a Cairn backup has: refused`);
      if (names.has(e.name)) throw new BackupError(`archive entry "${e.name}" appears twice: refused`);
      names.add(e.name);
      if (parsed.kind === 'manifest') {
        manifestText = await readAll(e.body, e.size, e.name);
        continue;
      }
      if (manifestText) throw new BackupError(`archive entry "${e.name}" follows the manifest: refused`);
      const hash = crypto.createHash('sha256');
      let size = 0;
      for await (const c of e.body) {
        hash.update(c);
        size += c.length;
      }
      seen.push({ name: e.name, size, sha256: hash.digest('hex') });
    }
  } catch (err) {
    if (err instanceof TarError) throw new BackupError(`${file} is not a readable backup archive: ${err.message}`);
    if ((err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' || (err as NodeJS.ErrnoException).code === 'Z_BUF_ERROR') throw new BackupError(`${file} is not a readable backup archive: its gzip stream is damaged`);
    throw err;
  }
  if (!manifestText) throw new BackupError(`${file} has no ${MANIFEST}: not a Cairn backup, or cut short`);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(manifestText.toString('utf8'));
  } catch {
    throw new BackupError(`${MANIFEST} is not JSON`);
  }
  if (manifest?.format !== FORMAT) throw new BackupError(`${file} is not a Cairn backup (its manifest says format ${JSON.stringify(manifest?.format)})`);
  if (!Number.isInteger(manifest.formatVersion) || manifest.formatVersion > FORMAT_VERSION) {
    throw new BackupError(`this backup has format version ${manifest.formatVersion} (Cairn ${manifest.cairnVersion}); this Cairn reads up to version ${FORMAT_VERSION}: restore it with a newer Cairn`);
  }
  const unknown = (manifest.database?.migrations ?? []).filter((m) => typeof m !== 'string' || !Object.hasOwn(migrations, m));
  if (unknown.length) {
    throw new BackupError(`this backup's database schema is newer than this Cairn's (made by Cairn ${manifest.cairnVersion}; unknown migrations: ${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? '...' : ''}): restore it with that version or a newer one`);
  }
  const listed = Array.isArray(manifest.entries) ? manifest.entries : [];
  const byName = new Map(listed.map((e) => [e.name, e]));
  for (const e of seen) {
    const m = byName.get(e.name);
    if (!m) throw new BackupError(`archive entry "${e.name}" is not in the manifest: refused`);
    if (m.size !== e.size || m.sha256 !== e.sha256) throw new BackupError(`archive entry "${e.name}" fails its checksum: the archive is damaged`);
  }
  if (listed.length !== seen.length) throw new BackupError(`the archive lacks ${listed.length - seen.length} entries its manifest lists (cut short?)`);
  for (const t of manifest.database.tables ?? []) if (!names.has(tableEntry(t.name))) throw new BackupError(`the archive lacks the table ${t.name}`);
  for (const r of manifest.repositories ?? []) {
    if (!names.has(repositoryEntry(r.storage, r.diskPath, 'refs')) || !names.has(repositoryEntry(r.storage, r.diskPath, 'pack'))) throw new BackupError(`the archive lacks the repository ${r.storage}:${r.diskPath}`);
    if (!Object.hasOwn(config.storages, r.storage)) throw new BackupError(`the backup has repositories on storage "${r.storage}", which CAIRN_STORAGES does not name here`);
  }
  return manifest;
}

/** Is `dir` absent or an empty directory? */
function emptyOrAbsent(dir: string): boolean {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return false;
    throw err;
  }
  return names.length === 0;
}

/** Restores the archive into this (empty) instance. */
export async function restoreBackup(config: Config, file: string, opts: RestoreOptions = {}): Promise<Manifest> {
  const log = opts.log ?? (() => {});
  readableFile(file);
  if (!config.databaseUrl) {
    const holder = dataDirHolder(config.dataDir);
    if (holder !== null) throw new BackupError(`the embedded database in ${config.dataDir} is in use by a running process (pid ${holder}); stop cairn serve first`);
  }
  // The places a restore writes must be empty: the embedded database's data directory (which
  // holds the default storage and local objects), every storage, the object storage, the
  // database. Checked before the archive is read: a refusal costs nothing.
  const dirs = [...new Set([...(config.databaseUrl ? [] : [config.dataDir]), ...Object.values(config.storages)])];
  const wasAbsent = new Map<string, boolean>();
  for (const dir of dirs) {
    if (!emptyOrAbsent(dir)) throw new BackupError(`${dir} is not empty: restore only into an empty ${dir === config.dataDir ? 'data directory' : 'repository storage'}`);
    wasAbsent.set(dir, !fs.existsSync(dir));
  }
  const store = artifactStore(config);
  for await (const key of store.keys()) throw new BackupError(`the object storage is not empty (it holds ${key}): restore only into an empty one`);
  let database: OpenedDatabase | null = null;
  if (config.databaseUrl) {
    database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    const empty = await databaseIsEmpty(database.db).catch(async (err) => {
      await database!.close();
      throw err;
    });
    if (!empty) {
      await database.close();
      throw new BackupError('the database is not empty: restore only into an empty database (a new one, never migrated)');
    }
  }

  let manifest: Manifest;
  const secretFile = path.join(config.dataDir, 'secret_key_base');
  try {
    manifest = await verifyArchive(file, config);
    if (manifest.secretKeyBase === 'file' && fs.existsSync(secretFile)) throw new BackupError(`${secretFile} exists: restore only into an empty data directory`);
  } catch (err) {
    await database?.close();
    throw err;
  }
  log(`archive verified: Cairn ${manifest.cairnVersion}, made ${manifest.createdAt}, ${manifest.entries.length} entries`);

  const putKeys: string[] = [];
  let wroteSecret = false;
  let ok = false;
  try {
    database ??= await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    const db = database.db;
    await db.transaction().execute(async (trx) => {
      await migrateTo(trx, manifest.database.migrations);
      const tables = await listTables(trx);
      const finish = await prepareLoad(trx, tables);
      const known = new Set(tables);
      const listed = new Map(manifest.entries.map((e) => [e.name, e]));
      const pendingRefs = new Map<string, RefsSnapshot>();
      for await (const e of entries(file)) {
        const parsed = parseEntryName(e.name)!;
        if (parsed.kind === 'manifest') continue;
        const expected = listed.get(e.name);
        if (!expected || !REGULAR.has(e.type)) throw new BackupError(`the archive changed since it was verified (${e.name})`);
        const hash = crypto.createHash('sha256');
        const body = hashing(e.body, hash);
        switch (parsed.kind) {
          case 'table': {
            if (!known.has(parsed.table)) throw new BackupError(`the backup has a table "${parsed.table}" its schema does not`);
            await loadTable(trx, parsed.table, body);
            break;
          }
          case 'repository': {
            const id = `${parsed.storage}\0${parsed.diskPath}`;
            if (parsed.part === 'refs') {
              try {
                pendingRefs.set(id, parseRefsSnapshot((await readAll(body, e.size, e.name)).toString('utf8')));
              } catch (err) {
                throw new BackupError(`${e.name}: ${(err as Error).message}`);
              }
              break;
            }
            const refs = pendingRefs.get(id);
            if (!refs) throw new BackupError(`${e.name} comes without its refs`);
            pendingRefs.delete(id);
            const root = config.storages[parsed.storage];
            if (!root) throw new BackupError(`storage "${parsed.storage}" is not configured here`);
            const dir = repositoryPath(root, parsed.diskPath);
            if (fs.existsSync(dir)) throw new BackupError(`${e.name}: the repository is in the archive twice`);
            await restoreSnapshot(dir, refs, e.size > 0 ? body : null);
            if (e.size === 0) for await (const _ of body);
            break;
          }
          case 'object': {
            putKeys.push(parsed.key);
            await store.put(parsed.key, Readable.from(body));
            break;
          }
          case 'secret': {
            const content = await readAll(body, e.size, e.name);
            fs.mkdirSync(config.dataDir, { recursive: true });
            fs.writeFileSync(secretFile, content, { mode: 0o600, flag: 'wx' });
            wroteSecret = true;
            break;
          }
        }
        for await (const _ of body); // what a step did not read still counts for the checksum
        if (hash.digest('hex') !== expected.sha256) throw new BackupError(`archive entry "${e.name}" fails its checksum: the archive changed since it was verified`);
      }
      await finish();
      await setSequences(trx, manifest.database.sequences ?? []);
    });
    log(`database: ${manifest.database.tables.length} tables, ${manifest.database.tables.reduce((n, t) => n + t.rows, 0)} rows; repositories: ${manifest.repositories.length}; objects: ${manifest.objects}`);
    const applied = await migrateToLatest(db);
    if (applied.length) log(`migrated from the backup's schema: ${applied.length} migrations applied`);
    await sql`select 1`.execute(db);
    ok = true;
    return manifest;
  } finally {
    await database?.close().catch(() => {});
    if (!ok) {
      // Put the empty places back as they were.
      for (const key of putKeys) await store.delete(key).catch(() => {});
      if (wroteSecret) fs.rmSync(secretFile, { force: true });
      for (const dir of dirs) {
        if (wasAbsent.get(dir)) fs.rmSync(dir, { recursive: true, force: true });
        else for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) if (name !== LOCK_FILE) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
      }
    }
  }
}


