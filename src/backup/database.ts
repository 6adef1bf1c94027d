// The database part of a backup: a logical dump, one NDJSON file per table (each line one row as
// PostgreSQL's row_to_json writes it, so timestamps keep their microseconds, bytea its bytes and
// json its structure), read through a cursor in batches inside the snapshot transaction; and its
// load, inside one transaction on an empty database: the backup's own migrations build the schema
// it was taken with, rows go in through json_populate_recordset in batches, foreign keys are
// dropped for the load and added back after it (which checks them), user triggers are off while
// rows go in, and every sequence is set to the value it had.
import fs from 'node:fs';
import readline from 'node:readline';
import { Readable } from 'node:stream';
import { once } from 'node:events';
import { sql, type Kysely, type Transaction } from 'kysely';
import { migrations } from '../db/migrations/index.js';

/** Kysely's own bookkeeping: rebuilt from the manifest's migration list, never dumped. */
const MIGRATION_TABLES = new Set(['kysely_migration', 'kysely_migration_lock']);
/**
 * Held by processes of the instance that was backed up, none of which exists after a restore
 * (and the backup is taken when none is held: see create.ts).
 */
export const TRANSIENT_TABLES = new Set(['repository_write_leases']);

const FETCH_ROWS = 1000;
const LOAD_ROWS = 1000;
const LOAD_BYTES = 4 << 20;

type Db = Kysely<any>;

export interface SequenceValue {
  name: string;
  value: number;
}

/** The schema's tables (not partitions, not Kysely's), by name. */
export async function listTables(db: Db): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = current_schema() and c.relkind in ('r', 'p') and not c.relispartition
    order by c.relname`.execute(db);
  return rows.map((r) => r.name).filter((t) => !MIGRATION_TABLES.has(t));
}

/** The migrations recorded as applied, by name. */
export async function appliedMigrations(db: Db): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return rows.map((r) => r.name);
}

export async function sequenceValues(db: Db): Promise<SequenceValue[]> {
  const { rows } = await sql<{ name: string; value: string | number | null }>`
    select sequencename as name, last_value as value from pg_sequences
    where schemaname = current_schema() order by sequencename`.execute(db);
  return rows.filter((r) => r.value !== null).map((r) => ({ name: r.name, value: Number(r.value) }));
}

/**
 * Writes every row of `table` to `file`, one JSON object a line, FETCH_ROWS at a time through a
 * cursor (the caller's transaction keeps the snapshot). Returns the number of rows.
 */
export async function dumpTable(db: Db, table: string, file: string): Promise<number> {
  const out = fs.createWriteStream(file, { mode: 0o600 });
  const closed = once(out, 'close');
  let rows = 0;
  try {
    await sql`declare cairn_backup_rows no scroll cursor for select row_to_json(cairn_backup_row)::text as r from ${sql.table(table)} cairn_backup_row`.execute(db);
    for (;;) {
      const batch = await sql<{ r: string }>`fetch ${sql.raw(String(FETCH_ROWS))} from cairn_backup_rows`.execute(db);
      if (!batch.rows.length) break;
      rows += batch.rows.length;
      if (!out.write(batch.rows.map((r) => r.r).join('\n') + '\n')) await once(out, 'drain');
    }
    await sql`close cairn_backup_rows`.execute(db);
  } finally {
    out.end();
    await closed;
  }
  return rows;
}

/** No table of the current schema exists: a database a restore may fill. */
export async function databaseIsEmpty(db: Db): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = current_schema() and c.relkind in ('r', 'p', 'v', 'm', 'S')`.execute(db);
  return Number(rows[0]?.n ?? 0) === 0;
}

/** The schema of `names` (a backup's migrations), built in `trx` as Kysely's migrator would. */
export async function migrateTo(trx: Transaction<any>, names: string[]): Promise<void> {
  await sql`create table kysely_migration (name varchar(255) not null primary key, timestamp varchar(255) not null)`.execute(trx);
  await sql`create table kysely_migration_lock (id varchar(255) not null primary key, is_locked integer not null default 0)`.execute(trx);
  await sql`insert into kysely_migration_lock (id, is_locked) values ('migration_lock', 0)`.execute(trx);
  for (const name of [...names].sort()) {
    const migration = migrations[name];
    if (!migration) throw new Error(`unknown migration ${name}`);
    await migration.up(trx);
    await sql`insert into kysely_migration (name, timestamp) values (${name}, ${new Date().toISOString()})`.execute(trx);
  }
}

interface ForeignKey {
  table: string;
  name: string;
  definition: string;
}

async function foreignKeys(db: Db): Promise<ForeignKey[]> {
  const { rows } = await sql<ForeignKey>`
    select cl.relname as "table", co.conname as name, pg_get_constraintdef(co.oid) as definition
    from pg_constraint co join pg_class cl on cl.oid = co.conrelid join pg_namespace n on n.oid = cl.relnamespace
    where co.contype = 'f' and n.nspname = current_schema() order by cl.relname, co.conname`.execute(db);
  return rows;
}

/** Columns a row may be inserted with (generated ones are computed), in table order. */
async function insertableColumns(db: Db, table: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select a.attname as name from pg_attribute a
    where a.attrelid = (select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = current_schema() and c.relname = ${table})
      and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
    order by a.attnum`.execute(db);
  return rows.map((r) => r.name);
}

/**
 * Prepares an empty schema's tables for loading (inside `trx`): removes what migrations seeded,
 * drops the foreign keys and turns user triggers off. Returns the finishing step, which puts
 * them back (adding a foreign key checks every row against it).
 */
export async function prepareLoad(trx: Transaction<any>, tables: string[]): Promise<() => Promise<void>> {
  const fks = await foreignKeys(trx);
  for (const fk of fks) await sql`alter table ${sql.table(fk.table)} drop constraint ${sql.id(fk.name)}`.execute(trx);
  if (tables.length) await sql`truncate ${sql.join(tables.map((t) => sql.table(t)))}`.execute(trx);
  for (const t of tables) await sql`alter table ${sql.table(t)} disable trigger user`.execute(trx);
  return async () => {
    for (const t of tables) await sql`alter table ${sql.table(t)} enable trigger user`.execute(trx);
    for (const fk of fks) await sql`alter table ${sql.table(fk.table)} add constraint ${sql.id(fk.name)} ${sql.raw(fk.definition)}`.execute(trx);
  };
}

/** Inserts the rows of an NDJSON stream into `table`, in batches. Returns how many. */
export async function loadTable(trx: Transaction<any>, table: string, lines: AsyncIterable<Buffer>): Promise<number> {
  const columns = await insertableColumns(trx, table);
  if (!columns.length) throw new Error(`table ${table} has no columns`);
  const cols = sql.join(columns.map((c) => sql.id(c)));
  let batch: string[] = [];
  let bytes = 0;
  let rows = 0;
  const flush = async () => {
    if (!batch.length) return;
    const json = `[${batch.join(',')}]`;
    await sql`insert into ${sql.table(table)} (${cols}) overriding system value
      select ${cols} from json_populate_recordset(null::${sql.table(table)}, ${json}::json)`.execute(trx);
    rows += batch.length;
    batch = [];
    bytes = 0;
  };
  const rl = readline.createInterface({ input: Readable.from(lines), crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line) continue;
    if (line[0] !== '{') throw new Error(`a row of ${table} is not a JSON object`);
    batch.push(line);
    bytes += line.length;
    if (batch.length >= LOAD_ROWS || bytes >= LOAD_BYTES) await flush();
  }
  await flush();
  return rows;
}

export async function setSequences(trx: Transaction<any>, values: SequenceValue[]): Promise<void> {
  for (const s of values) await sql`select setval(quote_ident(${s.name})::regclass, ${s.value}, true)`.execute(trx);
}
