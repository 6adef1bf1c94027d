// `cairn check [--deep]` (GitLab's gitlab:check): is this installation able to run? One line per
// check (ok, warning or FAILED, with what to do), exit code 1 when any failed. It reads the same
// settings as `cairn serve` and writes nothing but probe files it removes again.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Readable } from 'node:stream';
import { sql } from 'kysely';
import { ConfigError, loadConfig, setting, settingsFromFlags, type Config } from '../config.js';
import { openDatabase, type OpenedDatabase } from '../db/index.js';
import { pendingMigrations } from '../db/migrate.js';
import { decryptSecret } from '../lib/secrets.js';
import { artifactStore } from '../storage/index.js';

export const CHECK_HELP = `usage: cairn check [--deep] [--SETTING VALUE]...

Checks that this installation can run, with the settings \`cairn serve\` would use: the database
(reachable, migrated), every repository storage (writable), git (2.39+), the stored secrets (they
decrypt), the object storage (a probe object written, read and removed), the mail server when
CAIRN_SMTP_URL is set, the external URL, and the CI job sandbox of the built-in runner. One line
per check; the exit code is 1 when one failed. On the embedded database, stop the server first.

options:
  --deep       also check every repository's integrity (git fsck --connectivity-only)
  -h, --help   show this text`;

type Outcome = { status: 'ok' | 'warning' | 'failed'; detail: string };
const ok = (detail: string): Outcome => ({ status: 'ok', detail });
const warning = (detail: string): Outcome => ({ status: 'warning', detail });
const failed = (detail: string): Outcome => ({ status: 'failed', detail });

function gitVersion(): Outcome {
  const r = spawnSync('git', ['--version'], { encoding: 'utf8', timeout: 10_000 });
  const m = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(r.stdout ?? '');
  if (r.error || !m) return failed(`git is not on the PATH (${r.error?.message ?? (r.stderr || 'no version')}); install git 2.39 or later`);
  const [major, minor] = [Number(m[1]), Number(m[2])];
  const version = m[0];
  return major > 2 || (major === 2 && minor >= 39) ? ok(`git ${version}`) : failed(`git ${version} is older than 2.39; install a newer git`);
}

function storageWritable(name: string, dir: string): Outcome {
  const probe = path.join(dir, `.cairn-check-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);
  try {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(probe, 'x', { flag: 'wx' });
    fs.rmSync(probe);
    return ok(`${name}: ${dir}`);
  } catch (err) {
    return failed(`${name}: ${dir} is not writable by this user (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

async function objectStorage(config: Config): Promise<Outcome> {
  const store = artifactStore(config);
  const key = `cairn-check/${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
  const where = config.objectStoreUrl ? new URL(config.objectStoreUrl).host : path.join(config.dataDir, 'artifacts');
  try {
    const body = crypto.randomBytes(1024);
    await store.put(key, Readable.from([body]));
    const back = await store.get(key);
    const chunks: Buffer[] = [];
    if (back) for await (const c of back) chunks.push(c as Buffer);
    await store.delete(key);
    if (!Buffer.concat(chunks).equals(body)) return failed(`${where}: a probe object came back different`);
    return ok(`${config.objectStoreUrl ? 'S3' : 'local disk'}: ${where}`);
  } catch (err) {
    await store.delete(key).catch(() => undefined);
    return failed(`${where}: ${(err as Error).message}`);
  }
}

function reachable(host: string, port: number, timeoutMs = 5_000): Promise<string | null> {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (why: string | null) => {
      s.destroy();
      resolve(why);
    };
    s.setTimeout(timeoutMs, () => done('no answer'));
    s.once('connect', () => done(null));
    s.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
  });
}

async function mailServer(config: Config): Promise<Outcome | null> {
  if (!config.smtpUrl) return null;
  const u = new URL(config.smtpUrl);
  const port = Number(u.port || (u.protocol === 'smtps:' ? 465 : 25));
  const why = await reachable(u.hostname, port);
  return why ? failed(`${u.hostname}:${port} does not accept connections (${why})`) : ok(`${u.hostname}:${port} accepts connections`);
}

function externalUrl(config: Config): Outcome {
  const u = new URL(config.externalUrl);
  if (/^(0\.0\.0\.0|\[::\])$/.test(u.hostname)) return warning(`${config.externalUrl} is not an address clients can reach: clone URLs and web_url links will not work; set CAIRN_EXTERNAL_URL`);
  const loopback = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/.test(u.hostname);
  const listensEverywhere = config.host === '0.0.0.0' || config.host === '::';
  if (loopback && listensEverywhere) return warning(`${config.externalUrl} is a loopback address while Cairn listens on ${config.host}: clone URLs and web_url links will not work from other machines; set CAIRN_EXTERNAL_URL`);
  return ok(config.externalUrl);
}

async function sandbox(): Promise<Outcome> {
  if (!setting<boolean>('CAIRN_BUILTIN_RUNNER')) return ok('the built-in runner is off (CAIRN_BUILTIN_RUNNER)');
  const { detectSandbox } = await import('../runner/sandbox.js');
  const s = detectSandbox();
  return s.available ? ok(`bubblewrap (${s.bwrap}): CI jobs are isolated`) : warning(`the built-in runner will not run jobs: ${s.reason}`);
}

async function secrets(config: Config, db: OpenedDatabase['db']): Promise<Outcome> {
  const row = await db.selectFrom('ci_variables').select('value_encrypted').limit(1).executeTakeFirst().catch(() => undefined);
  if (!row) return ok('no stored secret to try yet');
  return decryptSecret(config, row.value_encrypted) === null
    ? failed('stored secrets do not decrypt: CAIRN_SECRET_KEY_BASE (or $CAIRN_DATA_DIR/secret_key_base) is not the one they were written with')
    : ok('stored secrets decrypt');
}

async function repositories(config: Config, db: OpenedDatabase['db']): Promise<Outcome> {
  const { projectRepoPath } = await import('../services/projects.js');
  const projects = await db.selectFrom('projects').select(['id', 'disk_path', 'repository_storage']).execute();
  const broken: string[] = [];
  for (const p of projects) {
    const dir = projectRepoPath({ config } as Parameters<typeof projectRepoPath>[0], p);
    if (!fs.existsSync(dir)) continue;
    const r = spawnSync('git', ['--git-dir', dir, 'fsck', '--connectivity-only', '--no-progress'], { encoding: 'utf8', timeout: 600_000 });
    if (r.status !== 0) broken.push(`project ${p.id} (${dir}): ${(r.stderr || r.stdout).trim().split('\n')[0]}`);
  }
  return broken.length ? failed(`${broken.length} of ${projects.length} repositories fail git fsck: ${broken.slice(0, 5).join('; ')}`) : ok(`${projects.length} repositories pass git fsck`);
}

/** Runs the checks, printing each as it ends; resolves to the exit code. */
export async function checkCommand(argv: string[], out: (line: string) => void = (l) => console.log(l)): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    out(CHECK_HELP);
    return 0;
  }
  const deep = argv.includes('--deep');
  Object.assign(process.env, settingsFromFlags(argv.filter((a) => a !== '--deep')));
  let failures = 0;
  const report = (name: string, o: Outcome) => {
    if (o.status === 'failed') failures++;
    out(`${o.status === 'ok' ? 'ok      ' : o.status === 'warning' ? 'warning ' : 'FAILED  '} ${name}: ${o.detail}`);
  };
  const config = loadConfig();
  report('settings', ok('every setting is valid'));
  let database: OpenedDatabase | null = null;
  try {
    database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
    report('database', ok(config.databaseUrl ? `PostgreSQL at ${new URL(config.databaseUrl).host}` : `embedded, in ${config.dataDir}`));
    const pending = await pendingMigrations(database.db);
    report('migrations', pending.length ? failed(`${pending.length} not applied (${pending.slice(0, 3).join(', ')}${pending.length > 3 ? '...' : ''}): run cairn migrate, or start cairn serve`) : ok('all applied'));
  } catch (err) {
    const inUse = err instanceof ConfigError && /in use by another process/.test(err.message);
    report('database', inUse ? warning(`${err.message.replace(/^CAIRN_DATA_DIR: /, '')} (not checked)`) : failed(err instanceof ConfigError ? err.message : String((err as Error).message)));
  }
  for (const [name, dir] of Object.entries(config.storages)) report('storage', storageWritable(name, dir));
  report('git', gitVersion());
  if (database) report('secrets', await secrets(config, database.db));
  report('object storage', await objectStorage(config));
  const mail = await mailServer(config);
  if (mail) report('mail', mail);
  report('external URL', externalUrl(config));
  report('CI sandbox', await sandbox());
  if (deep && database) report('repositories', await repositories(config, database.db));
  if (database) {
    await sql`select 1`.execute(database.db).catch(() => undefined);
    await database.close();
  }
  out(failures ? `${failures} check${failures === 1 ? '' : 's'} failed` : 'all checks passed');
  return failures ? 1 : 0;
}
