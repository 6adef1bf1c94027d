import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { dateAfterDays } from '../src/services/tokens.js';
import { insertUser } from '../src/services/users.js';
import { CAIRN_VERSION } from '../src/version.js';
import { createTestContext, type TestContext } from './helpers/app.js';
import { runCairn } from './helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/** Runs `cairn ...` (bin/cairn.mjs) as a user would, with `env` on top of a clean environment; logs only errors. */
const cairn = (args: string[], env: NodeJS.ProcessEnv = {}) => runCairn(args, { CAIRN_LOG_LEVEL: 'error', ...env });

/** The command names `cairn --help` lists. */
function listedCommands(usage: string): string[] {
  const section = usage.split(/\n\s*\n/).find((p) => p.startsWith('commands:'))!;
  return [...section.matchAll(/^  ([a-z][a-z-]*)/gm)].map((m) => m[1]);
}

describe('cairn command line: help and version', () => {
  let tmp: string;
  before(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-cli-')); });
  after(() => { fs.rmSync(tmp, { recursive: true, force: true }); });

  it('cairn --help, -h, help and no command print the usage; an unknown command fails', async () => {
    for (const args of [['--help'], ['-h'], ['help'], []]) {
      const r = await cairn(args);
      assert.equal(r.code, 0, args.join(' '));
      assert.match(r.stdout, /^usage: cairn <command>/);
      assert.match(r.stdout, /--version/);
      assert.equal(r.stderr, '');
    }
    const bad = await cairn(['frobnicate']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown command "frobnicate"/);
  });

  it('cairn --version and -v print the version of the package', async () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    assert.equal(CAIRN_VERSION, pkg.version);
    for (const flag of ['--version', '-v']) {
      const r = await cairn([flag]);
      assert.equal(r.code, 0);
      assert.equal(r.stdout, `cairn ${pkg.version}\n`);
    }
  });

  it('every listed command answers --help with its usage and exit 0, touching nothing', async () => {
    const commands = listedCommands((await cairn(['--help'])).stdout);
    for (const c of ['serve', 'migrate', 'runner', 'registration-token', 'token', 'help']) assert.ok(commands.includes(c), `${c} listed in ${commands}`);
    for (const command of commands) {
      const dataDir = path.join(tmp, `data-${command}`);
      for (const flag of command === 'serve' ? ['--help', '-h'] : ['--help']) {
        const started = Date.now();
        const r = await cairn([command, flag], { CAIRN_DATA_DIR: dataDir, CAIRN_PORT: '1', CAIRN_RUNNER_CONFIG: path.join(dataDir, 'runner.json') });
        assert.equal(r.code, 0, `${command} ${flag}: ${r.stderr}`);
        assert.match(r.stdout, command === 'help' ? /^usage: cairn <command>/ : new RegExp(`^usage: cairn ${command}\\b`), `${command} ${flag}`);
        assert.equal(r.stderr, '', `${command} ${flag}`);
        assert.ok(!fs.existsSync(dataDir), `${command} ${flag} created its data directory`);
        assert.ok(Date.now() - started < 30_000);
      }
    }
    // `cairn help COMMAND` is the same text.
    assert.equal((await cairn(['help', 'serve'])).stdout, (await cairn(['serve', '--help'])).stdout);
    assert.equal((await cairn(['help', 'token'])).stdout, (await cairn(['token', '--help'])).stdout);
  });
});

describe('cairn token create', () => {
  // On PostgreSQL the test database is shared with the CLI; on the embedded database the CLI
  // opens the data directory of an app that is closed meanwhile (PGlite is one process's).
  let t: TestContext | null = null;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let app: App | null = null;
  const onPostgres = !!process.env.DATABASE_URL;

  async function openApp(): Promise<App> {
    if (t) return t.app;
    app = await buildApp({ config: loadConfig({ CAIRN_DATA_DIR: dataDir, CAIRN_ROOT_PASSWORD: 'root-password-123' }, { logLevel: 'silent', validateResponses: true }), logger: false });
    await app.ready();
    return app;
  }
  async function closeApp() {
    if (!t && app) await app.close();
    app = null;
  }
  /** Runs `fn` with the app open (and closes it after on the embedded database). */
  async function withApp<T>(fn: (a: App) => Promise<T>): Promise<T> {
    const a = await openApp();
    try {
      return await fn(a);
    } finally {
      await closeApp();
    }
  }
  const call = (a: App, token: string, url: string) => a.inject({ method: 'GET', url, headers: { 'private-token': token } });

  before(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-cli-db-'));
    if (onPostgres) {
      t = await createTestContext();
      env = { DATABASE_URL: t.databaseUrl!, CAIRN_DATA_DIR: t.tmpDir };
    } else {
      env = { CAIRN_DATA_DIR: dataDir };
    }
    await withApp(async (a) => {
      await insertUser(a.cairn.db, { username: 'Alice-CLI', name: 'Alice', email: 'alice-cli@example.com', password: 'Pa55w0rd-alice', confirmed_at: new Date() });
      await insertUser(a.cairn.db, { username: 'blocked-cli', name: 'Blocked', email: 'blocked-cli@example.com', password: 'Pa55w0rd-blocked', state: 'blocked' });
    });
  });
  after(async () => {
    await t?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("creates root's first token: printed once on stdout, and it works", async () => {
    const r = await cairn(['token', 'create', '--user', 'root', '--scopes', 'api'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^glpat-[A-Za-z0-9_-]{20,}\n$/);
    const token = r.stdout.trim();
    assert.match(r.stderr, /@root/);
    assert.ok(!r.stderr.includes(token), 'the token is printed once');
    await withApp(async (a) => {
      const me = await call(a, token, '/api/v4/user');
      assert.equal(me.statusCode, 200);
      assert.equal(me.json().username, 'root');
      const self = (await call(a, token, '/api/v4/personal_access_tokens/self')).json();
      assert.equal(self.name, 'cairn token create');
      assert.deepEqual(self.scopes, ['api']);
      assert.equal(self.expires_at, dateAfterDays(365));
      // Only the digest is stored.
      const rows = await a.cairn.db.selectFrom('personal_access_tokens').select('token_digest').execute();
      assert.ok(rows.every((row) => row.token_digest !== token));
    });
  });

  it('name, scopes, expiry and description as given; the username in any case', async () => {
    const expires = dateAfterDays(30);
    const r = await cairn(['token', 'create', '--user', 'alice-cli', '--scopes', 'read_api,read_repository', '--name', 'backup job', '--expires-at', expires, '--description', 'nightly'], env);
    assert.equal(r.code, 0, r.stderr);
    const token = r.stdout.trim();
    await withApp(async (a) => {
      const self = (await call(a, token, '/api/v4/personal_access_tokens/self')).json();
      assert.equal(self.name, 'backup job');
      assert.deepEqual(self.scopes, ['read_api', 'read_repository']);
      assert.equal(self.expires_at, expires);
      assert.equal(self.description, 'nightly');
      assert.equal((await call(a, token, '/api/v4/user')).json().username, 'Alice-CLI');
      // read_api does not write.
      const write = await a.inject({ method: 'POST', url: '/api/v4/projects', headers: { 'private-token': token }, payload: { name: 'x' } });
      assert.equal(write.statusCode, 403);
    });
  });

  // The embedded database is one process's: the CLI beside a running server used to print a
  // token that answered 401 and was gone after a restart (both wrote the same files).
  it('refuses, in one line and before touching anything, while another process holds the embedded database', { skip: onPostgres ? 'PostgreSQL is shared by design' : false }, async () => {
    await withApp(async (a) => {
      const before = (await a.cairn.db.selectFrom('personal_access_tokens').select('id').execute()).length;
      for (const args of [['token', 'create', '--user', 'root', '--scopes', 'api'], ['migrate'], ['registration-token']]) {
        const r = await cairn(args, env);
        assert.equal(r.code, 1, args.join(' '));
        assert.equal(r.stdout, '', 'no token printed');
        // token create asks the holder through its control socket, which a process other than cairn serve lacks.
        assert.match(r.stderr, /^(CAIRN_DATA_DIR|cairn token): the embedded database in .* is in use by another process \(pid \d+\)[^\n]*; stop it first/);
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      }
      assert.equal((await a.cairn.db.selectFrom('personal_access_tokens').select('id').execute()).length, before);
    });
    // Once the server has stopped, the same command works.
    const r = await cairn(['token', 'create', '--user', 'root', '--scopes', 'api'], env);
    assert.equal(r.code, 0, r.stderr);
  });

  it('errors are one line on stderr with exit code 1, and nothing is created', async () => {
    const count = () => withApp(async (a) => (await a.cairn.db.selectFrom('personal_access_tokens').select('id').execute()).length);
    const before = await count();
    const cases: [string[], RegExp][] = [
      [['--user', 'nobody-here', '--scopes', 'api'], /no user "nobody-here"/],
      [['--user', 'root', '--scopes', 'api,superpowers'], /unknown scope "superpowers"/],
      [['--user', 'root', '--scopes', 'api', '--expires-at', '2025-02-30'], /not a date/],
      [['--user', 'root', '--scopes', 'api', '--expires-at', 'tomorrow'], /not a date/],
      [['--user', 'root', '--scopes', 'api', '--expires-at', '2001-01-01'], /must be in the future/],
      [['--user', 'root', '--scopes', 'api', '--expires-at', dateAfterDays(400)], /must be before/],
      [['--user', 'root', '--scopes', 'api', '--name', '   '], /Name can't be blank/],
      [['--scopes', 'api'], /--user is required/],
      [['--user', 'root'], /--scopes is required/],
      [['--user', 'root', '--scopes', 'api', '--admin'], /Unknown option '--admin'/],
      [['--user', 'blocked-cli', '--scopes', 'api'], /"blocked-cli" is blocked/],
    ];
    for (const [args, message] of cases) {
      const r = await cairn(['token', 'create', ...args], env);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, '', args.join(' '));
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, `one line: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.match(r.stderr, /^cairn token: /);
    }
    const unknownSub = await cairn(['token', 'mint', '--user', 'root'], env);
    assert.equal(unknownSub.code, 1);
    assert.match(unknownSub.stderr, /unknown command "token mint"/);
    assert.equal(await count(), before);
  });
});

describe('cairn serve: settings as flags, and a prompt stop', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-serve-flags-'));
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses an unknown flag, a flag without its value and a bad value, in one line, before it opens anything', async () => {
    const dataDir = path.join(dir, 'untouched');
    const cases: [string[], RegExp][] = [
      [['--bogus', '1'], /^unknown option --bogus \(each setting is a flag: --port 8080 for CAIRN_PORT; see --help\)$/],
      [['--port'], /^--port needs a value/],
      [['--port', 'eighty'], /^--port: "eighty" is not a valid port/],
      [['--port=70000'], /^--port: "70000" is not a valid port/],
      [['stray'], /^unexpected argument "stray"/],
    ];
    for (const [args, message] of cases) {
      const r = await cairn(['serve', '--data-dir', dataDir, ...args]);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, `one line: ${r.stderr}`);
      assert.match(r.stderr.trimEnd(), message, args.join(' '));
    }
    assert.equal(fs.existsSync(dataDir), false, 'nothing was created');
  });

  it('listens where the flags say (they outrank the variables) and stops promptly on SIGINT when idle', async () => {
    const { spawn } = await import('node:child_process');
    const { freePort } = await import('./helpers/serve.js');
    const [port, other] = [await freePort(), await freePort()];
    const dataDir = path.join(dir, 'served');
    const env: NodeJS.ProcessEnv = { ...process.env, CAIRN_PORT: String(other), CAIRN_LOG_LEVEL: 'error', CAIRN_BUILTIN_RUNNER: '0' };
    delete env.DATABASE_URL;
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/cairn.mjs'), 'serve', '--port', String(port), `--data-dir=${dataDir}`], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b) => (stderr += b));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      let up = false;
      for (let i = 0; i < 600 && !up; i++) {
        up = await fetch(`http://127.0.0.1:${port}/-/readiness`).then((r) => r.ok, () => false);
        if (!up) await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(up, `serving on --port ${port}: ${stderr}`);
      assert.equal(await fetch(`http://127.0.0.1:${other}/-/readiness`).then(() => 'answered', () => 'refused'), 'refused', 'not on CAIRN_PORT');
      assert.ok(fs.existsSync(path.join(dataDir, 'pglite')), 'the embedded database is in --data-dir');
      const started = Date.now();
      child.kill('SIGINT');
      assert.equal(await exited, 0, stderr);
      const took = Date.now() - started;
      // An idle server has nothing to wait for (GitLab's and Gitea's stop at once); the bound is loose for loaded CI machines.
      assert.ok(took < 5_000, `stopped in ${took} ms`);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('cairn check', () => {
  const onPostgres = !!process.env.DATABASE_URL;
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-check-'));
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('one line per check; a database without its migrations, an unwritable storage or an unreachable mail server fail it (exit 1), then it passes', { skip: onPostgres ? 'checks the embedded database' : false }, async () => {
    const dataDir = path.join(dir, 'data');
    const fresh = await cairn(['check', '--data-dir', dataDir]);
    assert.equal(fresh.code, 1, fresh.stdout + fresh.stderr);
    assert.match(fresh.stdout, /^FAILED {3}migrations: \d+ not applied \(0001_core, .*\): run cairn migrate, or start cairn serve$/m);
    assert.match(fresh.stdout, /^ok {7}git: git 2\.\d+/m);
    assert.match(fresh.stdout, /^1 check failed$/m);
    assert.equal((await cairn(['migrate', '--data-dir', dataDir])).code, 0);
    const good = await cairn(['check', '--deep', '--data-dir', dataDir]);
    assert.equal(good.code, 0, good.stdout + good.stderr);
    for (const name of ['settings', 'database', 'migrations', 'storage', 'git', 'secrets', 'object storage', 'external URL', 'CI sandbox', 'repositories']) {
      assert.match(good.stdout, new RegExp(`^(ok {7}|warning {1})${name}: `, 'm'), name);
    }
    assert.match(good.stdout, /^all checks passed$/m);
    // A storage under a regular file cannot be written; a mail server that answers nothing.
    fs.writeFileSync(path.join(dir, 'a-file'), 'x');
    const { freePort } = await import('./helpers/serve.js');
    const bad = await cairn(['check', '--data-dir', dataDir, '--storages', `default:${path.join(dataDir, 'repositories')},broken:${path.join(dir, 'a-file', 'repos')}`, '--smtp-url', `smtp://127.0.0.1:${await freePort()}`]);
    assert.equal(bad.code, 1, bad.stdout);
    assert.match(bad.stdout, /^FAILED {3}storage: broken: .*a-file\/repos is not writable by this user \(ENOTDIR\)$/m);
    assert.match(bad.stdout, /^FAILED {3}mail: 127\.0\.0\.1:\d+ does not accept connections \(ECONNREFUSED\)$/m);
    assert.match(bad.stdout, /^2 checks failed$/m);
  });
});
