// `cairn backup create` and `cairn backup restore` (GitLab's gitlab-backup): the commands; the
// archive's making and reading are src/backup/'s.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { callControl, ControlError, type CommandIo } from './control_client.js';
import { dataDirHolder } from '../db/data_dir_lock.js';
import { openDatabase } from '../db/index.js';
import { CAIRN_VERSION } from '../version.js';
import { BackupError, createBackup, type BackupSource } from '../backup/create.js';

export const BACKUP_USAGE = `usage: cairn backup create [FILE] [--gzip]
       cairn backup restore FILE

create   writes one archive (tar; gzipped with --gzip or when FILE ends in .gz or .tgz) of the
         database, every repository (projects, wikis, snippets, on every storage), the object
         storage (job artifacts, CI caches) and the secret key file of the data directory. FILE
         defaults to cairn_backup_<time>_<version>.tar in the current directory, and must not
         exist. Taken while the server runs: writes wait a moment while the refs of every
         repository are read with the database snapshot, so a push is wholly in the backup or
         wholly not. On the embedded database the running \`cairn serve\` writes it (asked
         through its control socket); otherwise this command opens the database itself.
restore  restores an archive into an empty instance (an empty data directory, or an empty
         PostgreSQL database, and empty repository storages and object storage), after checking
         every entry's checksum; the server must be stopped. A backup made by a newer Cairn is
         refused; one made by an older Cairn is migrated after it is restored.

The archive holds secrets (the key that encrypts CI variables, token digests): keep it safe.
With CAIRN_SECRET_KEY_BASE set, the key is not in the archive: set the same value on restore.

options:
  --gzip       compress the archive
  -h, --help   show this text`;

/** A problem with the command line: one line on stderr, exit code 2. */
class UsageError extends Error {}

export interface BackupCommandOptions {
  /** Inside `cairn serve` (asked through the control socket): its database and settings. */
  source?: BackupSource;
  /** The caller's working directory (relative paths are its). */
  cwd?: string;
}

const consoleIo: CommandIo = { out: (l) => console.log(l), err: (l) => console.error(l) };

function defaultName(gzip: boolean): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  return `cairn_backup_${stamp}_${CAIRN_VERSION}.tar${gzip ? '.gz' : ''}`;
}

function options(args: string[]) {
  try {
    return parseArgs({ args, strict: true, allowPositionals: true, options: { gzip: { type: 'boolean' } } });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

const mib = (n: number) => `${(n / (1 << 20)).toFixed(1)} MiB`;

async function create(args: string[], io: CommandIo, opts: BackupCommandOptions): Promise<number> {
  const { values, positionals } = options(args);
  if (positionals.length > 1) throw new UsageError('create takes one FILE');
  const gzip = !!values.gzip || /\.(t?gz)$/.test(positionals[0] ?? '');
  const file = path.resolve(opts.cwd ?? process.cwd(), positionals[0] ?? defaultName(gzip));
  let source = opts.source;
  let close = async () => {};
  if (!source) {
    const config = loadConfig(process.env, { logLevel: 'error' });
    const server = config.databaseUrl ? null : dataDirHolder(config.dataDir);
    if (server !== null) {
      // The running server owns the embedded database: it writes the archive.
      return callControl(config.dataDir, server, { command: 'backup', argv: ['create', file, ...(gzip ? ['--gzip'] : [])], cwd: process.cwd() }, io);
    }
    const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    source = { config, db: database.db, dbKind: database.kind };
    close = () => database.close();
  }
  try {
    const result = await createBackup(source, file, { gzip, log: (l) => io.err(l) });
    const m = result.manifest;
    io.err(`backup written: ${m.database.tables.length} tables, ${m.repositories.length} repositories, ${m.objects} objects, ${mib(result.bytes)}${m.secretKeyBase === 'environment' ? ' (CAIRN_SECRET_KEY_BASE is not in it: keep it with the backup)' : ''}`);
    io.out(result.file);
    return 0;
  } finally {
    await close();
  }
}

async function restore(args: string[], io: CommandIo): Promise<number> {
  const { positionals } = options(args);
  if (positionals.length !== 1) throw new UsageError('restore takes the archive FILE');
  const file = path.resolve(positionals[0]);
  const config = loadConfig(process.env, { logLevel: 'error' });
  const { restoreBackup } = await import('../backup/restore.js');
  const m = await restoreBackup(config, file, { log: (l) => io.err(l) });
  io.err(`restored the backup of ${m.createdAt} (Cairn ${m.cairnVersion})${m.secretKeyBase === 'environment' ? '; it was made with CAIRN_SECRET_KEY_BASE set: set the same value here, or CI variables will not decrypt' : ''}`);
  return 0;
}

/** `cairn backup ...`; returns the exit code. */
export async function backupCommand(argv: string[], io: CommandIo = consoleIo, opts: BackupCommandOptions = {}): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === 'help' || sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    io.out(BACKUP_USAGE);
    return 0;
  }
  try {
    if (sub === 'create') return await create(rest, io, opts);
    if (sub === 'restore' && !opts.source) return await restore(rest, io);
    throw new UsageError(`unknown command "backup ${sub}" (see cairn backup --help)`);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`cairn backup: ${err.message}`);
      return 2;
    }
    if (err instanceof BackupError || err instanceof ControlError || err instanceof ConfigError) {
      io.err(`cairn backup: ${err.message}`);
      return 1;
    }
    // Unexpected (a disk full, a git failure): still one line, the cause's first.
    io.err(`cairn backup: ${(err as Error).message?.split('\n')[0] ?? String(err)}`);
    return 1;
  }
}
