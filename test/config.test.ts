import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkSettings, ConfigError, loadConfig, SETTINGS, setting, settingsHelp } from '../src/config.js';
import { README, withGeneratedTable } from '../scripts/config-docs.js';
import { runCairn as cairn } from './helpers/cli.js';
import { freePort } from './helpers/serve.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * A bad value of every declared setting. A setting added to src/config.ts without a line here
 * fails the first test.
 */
const BAD: Record<string, string[]> = {
  CAIRN_HOST: ['not a host', 'exa mple.com', '-bad-', '999.1.1.1.1'],
  CAIRN_PORT: ['abc', '99999', '0', '-1', '80.5', '1e3'],
  CAIRN_SSH_PORT: ['ssh', '65536', '-1', '22.5'],
  CAIRN_SSH_HOST: ['not a host', '-bad-', '999.1.1.1.1'],
  CAIRN_EXTERNAL_URL: ['not-a-url', 'ftp://example.com', 'https://example.com/?x=1'],
  CAIRN_DATA_DIR: ['bad\0path'],
  DATABASE_URL: ['not-a-url', 'mysql://user:pw-hidden-42@db/x', 'http://db:5432/x'],
  CAIRN_DB_POOL: ['zero', '0', '1001', '-5'],
  CAIRN_ROOT_PASSWORD: ['short'],
  CAIRN_ROOT_TOKEN: ['short', 'has a space in it'],
  CAIRN_STORAGES: ['nocolon', 'bad name:/x', ':/path', 'a:/x,a:/y', 'name:'],
  CAIRN_ARCHIVE_RATE_LIMIT: ['many', '-1', '2.5'],
  CAIRN_CHANGELOG_RATE_LIMIT: ['x', '-3'],
  CAIRN_ARCHIVE_CACHE_BYTES: ['huge', '10XB', '-1'],
  CAIRN_PACK_OBJECTS_CACHE_MAX_AGE: ['soon', '-5', '5 weeks'],
  CAIRN_RENDER_CACHE_BYTES: ['lots', '5QB', '-2'],
  CAIRN_MAX_FILE_SIZE: ['big', '1.5MB'],
  CAIRN_MAX_BODY_SIZE: ['0', 'big'],
  CAIRN_MAX_LOGIN_ATTEMPTS: ['ten', '-1'],
  CAIRN_LOGIN_LOCK_MINUTES: ['0', 'soon', '90s'],
  CAIRN_FAILED_AUTH_MAX_RETRY: ['lots', '-2'],
  CAIRN_FAILED_AUTH_FIND_TIME: ['0', '3 weeks', '5y'],
  CAIRN_FAILED_AUTH_BAN_TIME: ['-1', 'forever'],
  CAIRN_PROTECTED_PATHS_LIMIT: ['-1', 'ten'],
  CAIRN_PROTECTED_PATHS_PERIOD: ['0', 'a minute'],
  CAIRN_OAUTH_TOKEN_RATE_LIMIT: ['-5', '60/min'],
  CAIRN_OAUTH_TOKEN_TTL: ['0', 'two hours'],
  CAIRN_WORKERS: ['maybe', '2'],
  CAIRN_WEBHOOK_ALLOW_LOCAL_REQUESTS: ['maybe', '2'],
  CAIRN_WEBHOOK_LOCAL_ALLOWLIST: ['localhost', '10.0.0.0/33'],
  CAIRN_WEBHOOK_TIMEOUT: ['0', 'soon', '-1'],
  CAIRN_TRUSTED_PROXIES: ['garbage', '10.0.0.0/33', '10.0.0.1,nope', '1.2.3.4/8/9'],
  CAIRN_MONITORING_ALLOWLIST: ['everyone', '::1/129'],
  CAIRN_CACHE: ['maybe', 'enabled'],
  CAIRN_LOG_LEVEL: ['loud', 'verbose'],
  CAIRN_LOG_FORMAT: ['pretty', 'xml'],
  CAIRN_SHUTDOWN_TIMEOUT: ['soon', '0'],
  CAIRN_SHUTDOWN_BLACKOUT: ['soon', '-1'],
  CAIRN_STORAGE_MOVE_CLEANUP_DELAY: ['soon', '-1'],
  CAIRN_WORKER_CONCURRENCY: ['many', '0', '65', '1.5'],
  CAIRN_GIT_PASSWORD_AUTH: ['sometimes'],
  CAIRN_VALIDATE_RESPONSES: ['always'],
  CAIRN_SECRET_KEY_BASE: ['too-short'],
  CAIRN_SSH_SHELL_COMMAND: ['/usr/bin/cairn "x', 'a\\b'],
  CAIRN_RUNNER_POLL_TIMEOUT: ['0', 'long'],
  CAIRN_MAX_TRACE_SIZE: ['0', 'a lot'],
  CAIRN_MAX_ARTIFACTS_SIZE: ['0', '100 parsecs'],
  CAIRN_MAX_LFS_OBJECT_SIZE: ['0', 'huge'],
  CAIRN_ARTIFACTS_EXPIRE_IN: ['never', '-1'],
  CAIRN_MAX_CACHE_SIZE: ['0', 'huge'],
  CAIRN_CI_CACHE_EXPIRE_IN: ['never', '2 weeks'],
  CAIRN_DEFAULT_BRANCH_PROTECTION: ['5', 'full'],
  CAIRN_SMTP_URL: ['mail.example.com', 'http://user:pw-hidden-42@mail.example.com'],
  CAIRN_MAIL_FROM: ['nobody', 'Cairn <no-at-sign>'],
  CAIRN_OBJECT_STORE_URL: ['bucket', 'http://host/bucket', 's3://KEY:pw-hidden-42@host:9000/'],
  CAIRN_BUILTIN_RUNNER: ['perhaps'],
  CAIRN_BUILTIN_RUNNER_CONCURRENT: ['0', 'two', '65'],
  CAIRN_RUNNER_ALLOW_UNISOLATED: ['please'],
  CAIRN_RUNNER_CONFIG: ['bad\0path'],
  CAIRN_RUNNER_BWRAP: ['bad\0path'],
  CAIRN_RUNNER_DEFAULT_IMAGE: ['-alpine', 'has space:1'],
  CAIRN_RUNNER_DOCKER_AUTH_CONFIG: ['not json'],
  CAIRN_RUNNER_WAIT_FOR_SERVICES_TIMEOUT: ['-2', '3601', 'soon'],
  CAIRN_JOB_PORT: ['-1', '65536', 'any'],
  CAIRN_RUNNER_JOB_NETWORK: ['slirp', 'yes'],
  CAIRN_RUNNER_PASTA: ['bad\0path'],
  CAIRN_RUNNER_FORWARD_PORTS: ['8080', '8080:0', '8080:8081,x:1', '70000:1'],
  CAIRN_RUNNER_JOB_PIDS: ['0', '7', 'many'],
  CAIRN_RUNNER_JOB_MEMORY: ['1MB', 'lots'],
  CAIRN_RUNNER_JOB_FILE_SIZE: ['1KB', 'huge'],
  CAIRN_RUNNER_JOB_UID: ['nobody', '-1'],
  CAIRN_RUNNER_JOB_GID: ['staff', '-1'],
  CAIRN_RUNNER_IMAGE_DIR: ['bad\0path'],
  CAIRN_RUNNER_IMAGE_MAX_SIZE: ['1KB', 'big'],
  CAIRN_RUNNER_IMAGE_CACHE_BYTES: ['-1', 'plenty'],
  CAIRN_RUNNER_INSECURE_REGISTRIES: ['http://reg.lan', 'reg.lan:0', 'reg.lan/group', '-reg.lan'],
  CAIRN_TSX: ['sometimes'],
  CAIRN_SOAK: ['long'],
};

/** The error a value of `name` gives, through loadConfig (or setting() for test-only ones). */
function errorOf(name: string, value: string): ConfigError {
  const s = SETTINGS.find((x) => x.env === name)!;
  try {
    if (s.scope === 'test') setting(name, { [name]: value });
    else loadConfig({ [name]: value });
  } catch (err) {
    assert.ok(err instanceof ConfigError, `${name}=${JSON.stringify(value)} threw ${String(err)}, not a ConfigError`);
    return err;
  }
  assert.fail(`${name}=${JSON.stringify(value)} was accepted`);
}

describe('configuration schema', () => {
  it('every declared setting has bad values here, and every CAIRN_* the code reads is declared', () => {
    assert.deepEqual(SETTINGS.map((s) => s.env).sort(), Object.keys(BAD).sort());
    // No CAIRN_* read from the environment outside src/config.ts: everything goes through the schema.
    const reads: string[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (p.endsWith('.ts') && p !== path.join(ROOT, 'src/config.ts')) {
          for (const m of fs.readFileSync(p, 'utf8').matchAll(/\benv\??\.(CAIRN_[A-Z_]+|DATABASE_URL)\b/g)) reads.push(`${path.relative(ROOT, p)}: ${m[1]}`);
        }
      }
    };
    walk(path.join(ROOT, 'src'));
    assert.deepEqual(reads, []);
  });

  it('a bad value of every setting is one line naming the variable, the value and what is accepted', () => {
    for (const s of SETTINGS) {
      for (const value of BAD[s.env]) {
        const err = errorOf(s.env, value);
        const label = `${s.env}=${JSON.stringify(value)}`;
        assert.equal(err.variable, s.env, label);
        assert.doesNotMatch(err.message, /\n/, label);
        assert.ok(err.message.startsWith(`${s.env}: `), `${label}: ${err.message}`);
        assert.ok(err.message.includes(s.type.accepts), `${label}: ${err.message}`);
        if (s.secret) assert.ok(!err.message.includes(value), `${label} repeats a secret: ${err.message}`);
        else if (!/pw-hidden-42/.test(value)) assert.ok(err.message.includes(JSON.stringify(value)), `${label}: ${err.message}`);
        // Passwords in URLs are never repeated.
        assert.doesNotMatch(err.message, /pw-hidden-42/, label);
      }
    }
    assert.equal(errorOf('CAIRN_PORT', 'abc').message, 'CAIRN_PORT: "abc" is not a valid port (an integer from 1 to 65535)');
    assert.equal(errorOf('CAIRN_LOG_LEVEL', 'loud').message, 'CAIRN_LOG_LEVEL: "loud" is not a valid log level (one of trace, debug, info, warn, error, fatal, silent)');
  });

  it('defaults, and the forms each type accepts', () => {
    const c = loadConfig({});
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 8080);
    assert.equal(c.externalUrl, 'http://127.0.0.1:8080');
    assert.equal(c.dataDir, path.resolve('./data'));
    assert.equal(c.databaseUrl, null);
    assert.equal(c.dbPool, 10);
    assert.deepEqual(c.storages, { default: path.resolve('./data/repositories') });
    assert.equal(c.archiveCacheBytes, 1024 ** 3);
    assert.equal(c.maxBodySize, 8 * 1024 ** 2);
    assert.equal(c.defaultArtifactsExpireIn, 30 * 86400);
    assert.deepEqual(c.trustedProxies, ['127.0.0.1', '::1']);
    assert.equal(c.cache, true);
    assert.equal(c.workers, true);
    assert.equal(c.mailFrom, 'Cairn <cairn@127.0.0.1>');
    assert.equal(loadConfig({ CAIRN_HOST: '::1', CAIRN_PORT: '9000' }).externalUrl, 'http://[::1]:9000');
    assert.equal(loadConfig({ CAIRN_EXTERNAL_URL: 'https://git.example.com/' }).externalUrl, 'https://git.example.com');
    assert.equal(loadConfig({ CAIRN_EXTERNAL_URL: 'https://git.example.com/' }).mailFrom, 'Cairn <cairn@git.example.com>');
    for (const [raw, value] of [['1', true], ['true', true], ['YES', true], ['on', true], ['0', false], ['False', false], ['no', false], ['off', false]] as const) {
      assert.equal(loadConfig({ CAIRN_CACHE: raw }).cache, value, raw);
    }
    assert.equal(loadConfig({ CAIRN_MAX_FILE_SIZE: '10MB' }).maxFileSize, 10 * 1024 ** 2);
    assert.equal(loadConfig({ CAIRN_MAX_FILE_SIZE: '512kb' }).maxFileSize, 512 * 1024);
    assert.equal(loadConfig({ CAIRN_MAX_FILE_SIZE: '2048' }).maxFileSize, 2048);
    assert.equal(loadConfig({ CAIRN_ARTIFACTS_EXPIRE_IN: '2h' }).defaultArtifactsExpireIn, 7200);
    assert.equal(loadConfig({ CAIRN_LOGIN_LOCK_MINUTES: '2h' }).loginLockMinutes, 120);
    assert.equal(loadConfig({ CAIRN_LOGIN_LOCK_MINUTES: '15' }).loginLockMinutes, 15);
    assert.deepEqual(loadConfig({ CAIRN_TRUSTED_PROXIES: '' }).trustedProxies, ['127.0.0.1', '::1']);
    assert.deepEqual(loadConfig({ CAIRN_TRUSTED_PROXIES: ' , ' }).trustedProxies, []);
    assert.deepEqual(loadConfig({ CAIRN_STORAGES: 'fast:/srv/fast' }).storages, { fast: '/srv/fast', default: path.resolve('./data/repositories') });
    assert.equal(loadConfig({ CAIRN_LOG_LEVEL: 'WARN' }).logLevel, 'warn');
    assert.equal(setting('CAIRN_RUNNER_JOB_UID', { CAIRN_RUNNER_JOB_UID: 'root' }), 'root');
    assert.equal(setting('CAIRN_BUILTIN_RUNNER', { CAIRN_BUILTIN_RUNNER: '0' }), false);
    assert.equal(setting('CAIRN_BUILTIN_RUNNER_CONCURRENT', {}), 1);
    assert.doesNotThrow(() => checkSettings(['runner'], { CAIRN_RUNNER_JOB_UID: '1000', CAIRN_PORT: 'abc' }));
    assert.throws(() => checkSettings(['runner'], { CAIRN_RUNNER_JOB_UID: 'x' }), ConfigError);
  });

  it("the README's configuration table and `cairn serve --help` are generated from the schema", () => {
    const readme = fs.readFileSync(README, 'utf8');
    assert.equal(readme, withGeneratedTable(readme), 'README.md configuration table is stale: run npm run docs:config');
    const help = settingsHelp();
    for (const s of SETTINGS.filter((x) => !x.hidden)) {
      assert.ok(readme.includes(`| \`${s.env}\` |`), s.env);
      assert.match(help, new RegExp(`^  ${s.env} \\(default: `, 'm'), s.env);
    }
  });
});

describe('cairn stops at start on a bad setting, with one line', () => {
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-config-'));
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const cases: [string[], Record<string, string>, RegExp][] = [
    [['serve'], { CAIRN_PORT: 'abc' }, /^CAIRN_PORT: "abc" is not a valid port \(an integer from 1 to 65535\)$/],
    [['serve'], { CAIRN_PORT: '99999' }, /^CAIRN_PORT: "99999" is not a valid port/],
    [['serve'], { CAIRN_LOG_LEVEL: 'loud' }, /^CAIRN_LOG_LEVEL: "loud" is not a valid log level/],
    [['serve'], { CAIRN_TRUSTED_PROXIES: 'garbage' }, /^CAIRN_TRUSTED_PROXIES: "garbage" is not a valid address list/],
    [['serve'], { CAIRN_DB_POOL: 'zero' }, /^CAIRN_DB_POOL: "zero" is not a valid number/],
    [['serve'], { CAIRN_CACHE: 'maybe' }, /^CAIRN_CACHE: "maybe" is not a valid boolean/],
    [['serve'], { CAIRN_EXTERNAL_URL: 'not-a-url' }, /^CAIRN_EXTERNAL_URL: "not-a-url" is not a valid URL/],
    [['migrate'], { CAIRN_ROOT_PASSWORD: 'short' }, /^CAIRN_ROOT_PASSWORD: \(5 characters, hidden\) is not a valid password/],
    [['runner', 'verify'], { CAIRN_RUNNER_JOB_UID: 'nobody' }, /^CAIRN_RUNNER_JOB_UID: "nobody" is not a valid user id/],
  ];
  for (const [args, env, expected] of cases) {
    it(`cairn ${args.join(' ')} with ${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')}`, async () => {
      const r = await cairn(args, { CAIRN_DATA_DIR: tmp, ...env });
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stdout, '');
      assert.match(r.stderr.trimEnd(), expected);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    });
  }

  it('an unreachable DATABASE_URL: one line with host, port and the error code, no password', async () => {
    const port = await freePort();
    const r = await cairn(['serve'], { CAIRN_DATA_DIR: tmp, DATABASE_URL: `postgres://cairn:s3cr3t-pw@127.0.0.1:${port}/cairn` });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr.trimEnd(), `DATABASE_URL: cannot connect to PostgreSQL at 127.0.0.1:${port}, database cairn, user cairn (ECONNREFUSED)`);
    assert.doesNotMatch(r.stderr, /s3cr3t/);
  });

  it('cairn serve --help lists every setting from the schema', async () => {
    const r = await cairn(['serve', '--help'], {});
    assert.equal(r.code, 0);
    assert.ok(r.stdout.includes(settingsHelp()));
    assert.match(r.stdout, /^  CAIRN_PORT \(default: 8080\)\n      port to listen on\. Accepted: an integer from 1 to 65535\.$/m);
  });
});
