import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { loadConfig } from '../config.js';
import { callControl, ControlError } from './control_client.js';
import { dataDirHolder } from '../db/data_dir_lock.js';
import { openDatabase, type Database } from '../db/index.js';
import { migrateToLatest } from '../db/migrate.js';
import { dateAfterDays, expiryDateError, insertPersonalAccessToken, MAX_TOKEN_LIFETIME_DAYS, PAT_SCOPES, tokenValidationErrors, fullMessages } from '../services/tokens.js';

export const TOKEN_USAGE = `usage: cairn token create --user USERNAME --scopes SCOPES [--name NAME] [--expires-at YYYY-MM-DD] [--description TEXT]

Creates a personal access token for a user and prints it on stdout, once: Cairn keeps only its
digest. Use it for the first token of an instance (root's), for automation, or for a user who
cannot sign in to the web page. It opens the database as \`cairn serve\` does (DATABASE_URL, or
the embedded database in CAIRN_DATA_DIR); while \`cairn serve\` runs on the embedded database,
the server creates the token (asked through its control socket in the data directory).

options:
  --user USERNAME         the user the token belongs to (username, any case)
  --scopes SCOPES         comma-separated scopes: ${PAT_SCOPES.join(', ')}
  --name NAME             the token's name (default "cairn token create")
  --expires-at DATE       the day it expires, YYYY-MM-DD (default and at most ${MAX_TOKEN_LIFETIME_DAYS} days from today)
  --description TEXT      a description shown with the token
  -h, --help              show this text

example:
  cairn token create --user root --scopes api,read_repository --name automation`;

/** A problem with the command line or its values: one line on stderr, exit code 1. */
class UsageError extends Error {}

export interface TokenCommandIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const consoleIo: TokenCommandIo = { out: (l) => console.log(l), err: (l) => console.error(l) };

export interface TokenCommandOptions {
  /** Run against this database (inside `cairn serve`, asked through the control socket). */
  db?: Database;
}

/** `cairn token ...`; returns the exit code. */
export async function tokenCommand(argv: string[], io: TokenCommandIo = consoleIo, opts: TokenCommandOptions = {}): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === 'help' || sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    io.out(TOKEN_USAGE);
    return 0;
  }
  try {
    if (sub !== 'create') throw new UsageError(`unknown command "token ${sub}" (see cairn token --help)`);
    return await create(rest, io, opts);
  } catch (err) {
    if (err instanceof UsageError || err instanceof ControlError) {
      io.err(`cairn token: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

function options(args: string[]) {
  try {
    return parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        user: { type: 'string' },
        scopes: { type: 'string' },
        name: { type: 'string' },
        'expires-at': { type: 'string' },
        description: { type: 'string' },
      },
    }).values;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function create(args: string[], io: TokenCommandIo, opts: TokenCommandOptions): Promise<number> {
  const v = options(args);
  if (!v.user) throw new UsageError('--user is required');
  if (!v.scopes) throw new UsageError(`--scopes is required (some of: ${PAT_SCOPES.join(', ')})`);
  const scopes = [...new Set(v.scopes.split(/[\s,]+/).filter(Boolean))];
  const unknown = scopes.filter((s) => !(PAT_SCOPES as readonly string[]).includes(s));
  if (unknown.length) throw new UsageError(`unknown scope${unknown.length > 1 ? 's' : ''} ${unknown.map((s) => `"${s}"`).join(', ')} (valid: ${PAT_SCOPES.join(', ')})`);
  const name = v.name ?? 'cairn token create';
  let expiresAt = dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
  if (v['expires-at'] !== undefined) {
    const problem = expiryDateError(v['expires-at']);
    if (problem) throw new UsageError(problem);
    expiresAt = v['expires-at'];
  }
  const errors = tokenValidationErrors({ name, scopes, expiresAt });
  if (Object.keys(errors).length) throw new UsageError(fullMessages(errors));

  let db = opts.db;
  let close = async () => {};
  if (!db) {
    const config = loadConfig();
    const server = config.databaseUrl ? null : dataDirHolder(config.dataDir);
    // The running server owns the embedded database: it makes the token.
    if (server !== null) return callControl(config.dataDir, server, { command: 'token', argv: ['create', ...args], cwd: process.cwd() }, io);
    const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    close = () => database.close();
    db = database.db;
    try {
      await migrateToLatest(db);
    } catch (err) {
      await close();
      throw err;
    }
  }
  try {
    const user = await db
      .selectFrom('users')
      .select(['id', 'username', 'state'])
      .where(sql<string>`lower(username)`, '=', v.user.toLowerCase())
      .executeTakeFirst();
    if (!user) throw new UsageError(`no user "${v.user}"`);
    if (user.state !== 'active') throw new UsageError(`user "${user.username}" is ${user.state}: its tokens would not work`);
    const { token } = await insertPersonalAccessToken(db, {
      userId: user.id,
      name,
      description: v.description ?? null,
      scopes,
      expiresAt,
    });
    io.out(token);
    io.err(`personal access token "${name}" for @${user.username} (${scopes.join(', ')}), expires ${expiresAt}; it is not shown again`);
    return 0;
  } finally {
    await close();
  }
}
