// Git over SSH behind OpenSSH's sshd on port 22 (GitLab's way), instead of the built-in server:
//
//   `cairn ssh authorized-keys %t %k`  sshd's AuthorizedKeysCommand: prints the authorized_keys
//       line of a known, unexpired key (user key or deploy key), forcing `cairn shell key-N`;
//       nothing for any other key. One indexed query (keys.fingerprint_sha256) per connection.
//   `cairn shell key-N`  what that line runs: SSH_ORIGINAL_COMMAND served by ssh/session.ts, the
//       very code the built-in server runs, on this process's stdin/stdout/stderr.
//
// Both need PostgreSQL (DATABASE_URL): each connection is a process of its own beside `cairn
// serve`, and the embedded database can be open in one process only. Everything the shell
// triggers (pipelines, merge request refresh, cache invalidation) goes through PostgreSQL.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { openDatabase } from '../db/index.js';
import { sanitizeGitProtocol } from '../git/http.js';

export const SSH_USAGE = `usage: cairn ssh authorized-keys KEY_TYPE BASE64_KEY

For OpenSSH's sshd (git over SSH on port 22, GitLab's way; the built-in server is the other way).
Prints the authorized_keys line of a Cairn key (user key or deploy key), which makes sshd run
\`cairn shell key-N\` for it; prints nothing for a key Cairn does not know. Needs PostgreSQL
(DATABASE_URL). In sshd_config:

  Match User git
    AuthorizedKeysCommand /path/to/cairn ssh authorized-keys %t %k
    AuthorizedKeysCommandUser git

CAIRN_SSH_SHELL_COMMAND is the program the line names (default: this node and bin/cairn.mjs).`;

export const SHELL_USAGE = `usage: cairn shell key-N

Run by sshd for a key that \`cairn ssh authorized-keys\` let in: serves SSH_ORIGINAL_COMMAND
(git-upload-pack, git-receive-pack, git-upload-archive, git-lfs-authenticate; a welcome line
without one) as key N, as the built-in SSH server would. Needs PostgreSQL (DATABASE_URL).`;

export interface SshCommandIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

const consoleIo: SshCommandIo = { out: (l) => console.log(l), err: (l) => console.error(l) };

const POSTGRES_ONLY =
  'the OpenSSH mode needs PostgreSQL (set DATABASE_URL): each SSH connection runs a cairn process of its own, and the embedded database can be open in one process only. Use the built-in SSH server (CAIRN_SSH_PORT) with the embedded database';

/** A key type as sshd's %t gives it (ssh-ed25519, ecdsa-sha2-nistp256, sk-ssh-ed25519@openssh.com, ...). */
const KEY_TYPE = /^[A-Za-z0-9][A-Za-z0-9@._-]{0,63}$/;
const BASE64 = /^[A-Za-z0-9+/]{16,16384}={0,2}$/;

/** The config of an OpenSSH-mode command; null (after saying why) without PostgreSQL. */
function postgresConfig(io: SshCommandIo, command: string): Config | null {
  let config: Config;
  try {
    config = loadConfig(process.env, { logLevel: 'error' });
  } catch (err) {
    if (err instanceof ConfigError) {
      io.err(`cairn ${command}: ${err.message}`);
      return null;
    }
    throw err;
  }
  if (!config.databaseUrl) {
    io.err(`cairn ${command}: ${POSTGRES_ONLY}`);
    return null;
  }
  return config;
}

/** The command sshd runs for key `id`: CAIRN_SSH_SHELL_COMMAND, or this node running this cairn. */
export function shellCommandLine(config: Pick<Config, 'sshShellCommand'>, id: number): string {
  const quote = (s: string) => (/^[A-Za-z0-9/._+:=@-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  const program = config.sshShellCommand ?? `${quote(process.execPath)} ${quote(path.resolve(process.argv[1] ?? 'bin/cairn.mjs'))}`;
  return `${program} shell key-${id}`;
}

/** The authorized_keys line of a key: only `cairn shell key-N`, no forwarding, no terminal. */
export function authorizedKeysLine(config: Pick<Config, 'sshShellCommand'>, id: number, type: string, blob: string): string {
  return `command="${shellCommandLine(config, id)}",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty ${type} ${blob}`;
}

/** `cairn ssh ...`; returns the exit code. */
export async function sshCommand(argv: string[], io: SshCommandIo = consoleIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === 'help' || sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    io.out(SSH_USAGE);
    return sub ? 0 : 2;
  }
  if (sub !== 'authorized-keys') {
    io.err(`cairn ssh: unknown command "ssh ${sub}" (see cairn ssh --help)`);
    return 2;
  }
  if (rest.length !== 2) {
    io.err('cairn ssh authorized-keys: give the key type and the base64 key, as sshd does with %t %k (see cairn ssh --help)');
    return 2;
  }
  const [type, blob] = rest;
  // Not a key Cairn could have: no line, as for an unknown key (sshd then tries its other sources).
  if (!KEY_TYPE.test(type) || !BASE64.test(blob)) return 0;
  const raw = Buffer.from(blob, 'base64');
  // The blob starts with its own type (an SSH string): it must be the one sshd named.
  if (raw.length < 4 || raw.readUInt32BE(0) !== Buffer.byteLength(type) || raw.subarray(4, 4 + raw.readUInt32BE(0)).toString('latin1') !== type) return 0;
  const config = postgresConfig(io, 'ssh authorized-keys');
  if (!config) return 1;
  const fingerprint = 'SHA256:' + crypto.createHash('sha256').update(raw).digest('base64').replace(/=+$/, '');
  let database: Awaited<ReturnType<typeof openDatabase>> | null = null;
  try {
    database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    const key = await database.db
      .selectFrom('keys')
      .select(['id', 'expires_at', 'usage_type'])
      .where('fingerprint_sha256', '=', fingerprint)
      .executeTakeFirst();
    if (!key || key.usage_type === 'signing') return 0;
    if (key.expires_at && new Date(key.expires_at).getTime() <= Date.now()) return 0;
    io.out(authorizedKeysLine(config, Number(key.id), type, blob));
    return 0;
  } catch (err) {
    // sshd logs this line; the key is not let in.
    io.err(`cairn ssh authorized-keys: the key could not be looked up: ${(err as Error).message.split('\n')[0]}`);
    return 1;
  } finally {
    await database?.close();
  }
}

/** Errors of a shell session go to a log file: its stderr is the SSH client's. */
function shellLog(config: Config) {
  const file = path.join(config.dataDir, 'log', 'cairn-shell.log');
  const write = (level: string, obj: unknown, msg?: string) => {
    try {
      const err = (obj as { err?: Error })?.err;
      const entry = { time: new Date().toISOString(), level, pid: process.pid, msg, ...(err instanceof Error ? { err: err.stack ?? err.message } : { detail: obj }) };
      fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      fs.appendFileSync(file, JSON.stringify(entry) + '\n', { mode: 0o600 });
    } catch {
      /* logging is best effort */
    }
  };
  return { info: () => {}, warn: (obj: unknown, msg?: string) => write('warn', obj, msg), error: (obj: unknown, msg?: string) => write('error', obj, msg) };
}

/** Resolves once everything written so far to `stream` has been handed to the OS. */
const drained = (stream: NodeJS.WritableStream) =>
  new Promise<void>((resolve) => {
    stream.write('', () => resolve());
  });

/** `cairn shell key-N` (sshd's forced command); returns the exit code for the SSH client. */
export async function shellCommand(argv: string[]): Promise<number> {
  const say = (line: string) => process.stderr.write(`ERROR: ${line}\n`);
  if (argv[0] === '--help' || argv[0] === '-h') {
    console.log(SHELL_USAGE);
    return 0;
  }
  const m = argv.length === 1 ? /^key-(\d{1,10})$/.exec(argv[0]) : null;
  if (!m) {
    say('cairn shell takes one argument, key-N (the authorized_keys line of cairn ssh authorized-keys names it).');
    return 2;
  }
  const config = postgresConfig({ out: () => {}, err: (l) => say(l) }, 'shell');
  if (!config) return 1;
  const log = shellLog(config);
  const { buildApp } = await import('../app.js');
  const { findAuthKeyById } = await import('../services/git_transport.js');
  const { runSshSession } = await import('../ssh/session.js');
  // The same application as the server's (its post-receive hooks, cache, notifications), without migrating or listening.
  const app = await buildApp({ config, logger: false, prepare: false });
  let code = 1;
  try {
    const key = await findAuthKeyById(app.cairn, Number(m[1]));
    if (!key) {
      say('This SSH key is not known to Cairn (any more).');
      return 1;
    }
    const original = process.env.SSH_ORIGINAL_COMMAND;
    const hangups = new Set<() => void>();
    const hangup = () => {
      for (const cb of hangups) cb();
    };
    process.stdout.on('error', hangup);
    process.once('SIGHUP', hangup);
    process.once('SIGPIPE', hangup);
    code = await runSshSession(
      app.cairn,
      { key, command: original ? original : null, gitProtocol: sanitizeGitProtocol(process.env.GIT_PROTOCOL) },
      {
        input: process.stdin,
        output: process.stdout,
        errors: process.stderr,
        onHangup: (cb) => {
          hangups.add(cb);
          return () => void hangups.delete(cb);
        },
      },
      log,
    );
  } catch (err) {
    log.error({ err }, 'cairn shell failed');
    say('The command failed on the server.');
    code = 1;
  } finally {
    await app.close();
  }
  await drained(process.stderr);
  await drained(process.stdout);
  return code;
}
