import net from 'node:net';
import path from 'node:path';

/**
 * Cairn's settings: every `CAIRN_*` environment variable and DATABASE_URL is declared once in
 * SETTINGS below (type, default, help text). loadConfig() derives the Config from it and checks
 * every value at start; a bad value is a ConfigError whose message is one line naming the
 * variable, the value and what is accepted. The README's configuration table
 * (`npm run docs:config`) and `cairn serve --help` are generated from the same list.
 *
 * To add a setting: a field in Config (when the server reads it) and one entry in SETTINGS.
 */
export interface Config {
  host: string;
  port: number;
  /** Base URL used in every web_url / *_url_to_repo, without a trailing slash. */
  externalUrl: string;
  dataDir: string;
  /** PostgreSQL connection string; PGlite under dataDir when unset. */
  databaseUrl: string | null;
  /** PostgreSQL connections per process. */
  dbPool: number;
  rootPassword: string | null;
  rootToken: string | null;
  /** Named repository storages: name -> absolute directory. Always has `default`. */
  storages: Record<string, string>;
  /** Archive downloads per user per minute; 0 = unlimited. */
  archiveRateLimit: number;
  changelogRateLimit: number;
  /** Bytes of generated archives kept on disk under dataDir/cache/archives; 0 = none kept. */
  archiveCacheBytes: number;
  /** Seconds a pack generated for a fetch is kept for identical fetches (src/git/pack_objects_hook.mjs); 0 = no pack-objects cache. */
  packObjectsCacheMaxAge: number;
  /** Memory for content-addressed renderings (highlighted files, diffs) kept per process, in bytes (src/cache/lru.ts). */
  renderCacheBytes: number;
  /** Largest file accepted by the commits and files APIs, in bytes. */
  maxFileSize: number;
  /** Largest JSON or form request body, in bytes (the commits and files APIs allow more: contentBodyLimit). */
  maxBodySize: number;
  /** Failed password sign-ins (web form, OAuth password grant, git over HTTP) that lock an account; 0 = never. */
  maxLoginAttempts: number;
  /** How long a locked account stays locked, in minutes. */
  loginLockMinutes: number;
  /** Failed authentications from one IP address within failedAuthFindTime that ban it; 0 = never. */
  failedAuthMaxRetry: number;
  /** The window failedAuthMaxRetry counts in, seconds. */
  failedAuthFindTime: number;
  /** How long a banned IP address stays banned, seconds. */
  failedAuthBanTime: number;
  /**
   * Requests per protectedPathsPeriod to POST /users/sign_in from one IP address, and password
   * attempts (sign-in form, OAuth password grant) naming one account, whatever their outcome
   * (GitLab's protected paths: 10 a minute); 0 = unlimited.
   */
  protectedPathsLimit: number;
  protectedPathsPeriod: number;
  /** Requests per minute to POST /oauth/token and /oauth/revoke from one IP address; 0 = unlimited. */
  oauthTokenRateLimit: number;
  /** OAuth access token lifetime in seconds. */
  oauthAccessTokenTtl: number;
  /** The in-process background worker runs (cairn serve). */
  workers: boolean;
  /** Background jobs one process runs at once. */
  workerConcurrency: number;
  /** Webhooks may target loopback, link-local and private addresses (GitLab's allow_local_requests_from_web_hooks_and_services). */
  webhookAllowLocalRequests: boolean;
  /** Seconds a webhook delivery may take. */
  webhookTimeout: number;
  /** Addresses and ranges webhooks may reach even when local requests are not allowed (GitLab's outbound_local_requests_allowlist). */
  webhookLocalAllowlist: string[];
  /** Proxies whose X-Forwarded-For is believed (addresses or CIDR ranges); the client address comes from it. */
  trustedProxies: string[];
  logLevel: string;
  logFormat: 'auto' | 'text' | 'json';
  /** Seconds a stopping server gives requests in flight. */
  shutdownTimeout: number;
  /** Seconds a stopping server keeps serving with its readiness failing, before it closes. */
  shutdownBlackout: number;
  /** Seconds a finished storage move keeps the source copy for reads that began before the switch. */
  storageMoveCleanupDelay: number;
  /** Git over HTTP accepts a user's password as well as tokens (GitLab's password_authentication_enabled_for_git). */
  gitPasswordAuthentication: boolean;
  /** Keep hot reads (tokens, projects) in memory, invalidated through PostgreSQL notifications (src/cache/). */
  cache: boolean;
  /** Check every JSON answer against its route's response schema and fail loudly on a mismatch (tests). */
  validateResponses: boolean;
  /** How long POST /jobs/request holds a runner's request open when no job is pending, seconds. */
  runnerPollTimeout: number;
  /** Largest job log kept, in bytes: trace appends beyond it are refused (403). */
  maxTraceSize: number;
  /** Largest artifact file a job may upload, in bytes (413 beyond it); also the largest archived file sent inflated (406 beyond it). */
  maxArtifactsSize: number;
  /** Largest Git LFS object a client may upload, in bytes (413 beyond it). */
  maxLfsObjectSize: number;
  /** Artifacts without expire_in expire after this many seconds (0 = never). */
  defaultArtifactsExpireIn: number;
  /** Largest CI cache archive a job may upload, in bytes (413 beyond it). */
  maxCacheSize: number;
  /** CI caches neither restored nor uploaded for this many seconds are removed (0 = never). */
  cacheExpireIn: number;
  /** GitLab's instance default_branch_protection (0 none ... 4 full after the initial push), for namespaces that do not set one. */
  defaultBranchProtection: number;
  /** Outgoing mail server (smtp://host:port, smtps://user:pass@host); null: no notification e-mail is enqueued or sent. */
  smtpUrl: string | null;
  /** The From of notification e-mail. */
  mailFrom: string;
  /** Client addresses and CIDR ranges that may read /-/metrics (GitLab's monitoring whitelist); others get 404. */
  monitoringAllowlist: string[];
  /**
   * S3-compatible object storage for artifacts, as a URL
   * `s3://ACCESS_KEY:SECRET@host:port/bucket?region=us-east-1&path_style=true&tls=false`
   * (src/storage/s3.ts parses it); null = local disk under dataDir/artifacts.
   */
  objectStoreUrl: string | null;
  /**
   * The port of the listener for CI jobs' own requests (127.0.0.1; 0 = any free port): requests
   * on it come from JOB_CLIENT_ADDRESS, so X-Forwarded-For is never believed there and the
   * monitoring allowlist does not let them in (src/plugins/job_listener.ts).
   */
  jobPort: number;
  /** Port of the SSH server for git (src/ssh/); 0 = no SSH server. Also the port in every ssh_url_to_repo. */
  sshPort: number;
  /** Address the SSH server listens on. */
  sshHost: string;
  /** OpenSSH mode: the command authorized-keys lines run (`<it> shell key-N`); null: this node and bin/cairn.mjs. */
  sshShellCommand: string | null;
}

/** A setting's bad value: `message` is the one line `cairn` prints before exiting 1. */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly variable: string,
  ) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Thrown by a type's parse: what is wrong, when more than "not <noun>" is worth saying. */
class Invalid extends Error {}

export interface SettingType<T> {
  /** "a valid port": the error says `"abc" is not a valid port`. */
  noun: string;
  /** What is accepted, for the error and the help: "an integer from 1 to 65535". */
  accepts: string;
  parse(raw: string): T;
}

// ---- types -----------------------------------------------------------------------------------

const INT = /^[+]?\d+$/;

function integer(opts: { min?: number; max?: number; noun?: string } = {}): SettingType<number> {
  const min = opts.min ?? 0;
  const max = opts.max ?? Number.MAX_SAFE_INTEGER;
  const accepts =
    max !== Number.MAX_SAFE_INTEGER ? `an integer from ${min} to ${max}` : min === 0 ? 'an integer, 0 or more' : `an integer, ${min} or more`;
  return {
    noun: opts.noun ?? 'a valid number',
    accepts,
    parse(raw) {
      const s = raw.trim();
      if (!INT.test(s)) throw new Invalid();
      const n = Number(s);
      if (!Number.isSafeInteger(n) || n < min || n > max) throw new Invalid();
      return n;
    },
  };
}

const port = (): SettingType<number> => integer({ min: 1, max: 65535, noun: 'a valid port' });

const BYTE_UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3 };

/** A size: bytes, or a number with a binary unit (10MB = 10 MiB). */
function bytes(opts: { min?: number } = {}): SettingType<number> {
  const min = opts.min ?? 0;
  return {
    noun: 'a valid size',
    accepts: `a number of bytes${min ? ` of ${min} or more` : ''}, optionally with a unit: 512KB, 10MB, 1GB`,
    parse(raw) {
      const m = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(raw);
      const unit = m ? BYTE_UNITS[m[2].toLowerCase()] : undefined;
      if (!m || unit === undefined) throw new Invalid();
      const n = Number(m[1]) * unit;
      if (!Number.isSafeInteger(n) || n < min) throw new Invalid();
      return n;
    },
  };
}

const DURATION_UNITS: Record<string, number> = { '': 1, s: 1, m: 60, min: 60, h: 3600, d: 86400 };

/** A duration in `unit`s (seconds or minutes): a number, or one with a unit (90s, 10m, 2h, 30d). */
function duration(opts: { min?: number; unit?: 'seconds' | 'minutes' } = {}): SettingType<number> {
  const min = opts.min ?? 0;
  const unit = opts.unit ?? 'seconds';
  const scale = unit === 'minutes' ? 60 : 1;
  return {
    noun: 'a valid duration',
    accepts: `a number of ${unit}${min ? ` of ${min} or more` : ''}, or one with a unit: 90s, 10m, 2h, 30d`,
    parse(raw) {
      const m = /^\s*(\d+)\s*([a-z]*)\s*$/i.exec(raw);
      const factor = m ? DURATION_UNITS[m[2].toLowerCase()] : undefined;
      if (!m || factor === undefined) throw new Invalid();
      const seconds = Number(m[1]) * (m[2] ? factor : scale);
      if (seconds % scale !== 0) throw new Invalid(`not a whole number of ${unit}`);
      const n = seconds / scale;
      if (!Number.isSafeInteger(n) || n < min) throw new Invalid();
      return n;
    },
  };
}

/** GitLab's settings take true/false; 1/0, yes/no and on/off too. */
function bool(): SettingType<boolean> {
  return {
    noun: 'a valid boolean',
    accepts: 'true or false; also 1/0, yes/no, on/off',
    parse(raw) {
      const s = raw.trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(s)) return true;
      if (['0', 'false', 'no', 'off'].includes(s)) return false;
      throw new Invalid();
    },
  };
}

function oneOf<T extends string>(values: readonly T[], noun: string): SettingType<T> {
  return {
    noun,
    accepts: `one of ${values.join(', ')}`,
    parse(raw) {
      const s = raw.trim().toLowerCase();
      if (!(values as readonly string[]).includes(s)) throw new Invalid();
      return s as T;
    },
  };
}

function text(opts: { noun?: string; accepts?: string; minLength?: number; pattern?: RegExp } = {}): SettingType<string> {
  const minLength = opts.minLength ?? 1;
  return {
    noun: opts.noun ?? 'a valid value',
    accepts: opts.accepts ?? (minLength > 1 ? `at least ${minLength} characters` : 'any text'),
    parse(raw) {
      if (raw.length < minLength || (opts.pattern && !opts.pattern.test(raw))) throw new Invalid();
      return raw;
    },
  };
}

function url(protocols: string[], opts: { noun?: string; accepts?: string; check?: (u: URL) => void } = {}): SettingType<string> {
  const list = protocols.map((p) => `${p}//`).join(' or ');
  return {
    noun: opts.noun ?? 'a valid URL',
    accepts: opts.accepts ?? `a URL starting with ${list}`,
    parse(raw) {
      let u: URL;
      try {
        u = new URL(raw.trim());
      } catch {
        throw new Invalid();
      }
      if (!protocols.includes(u.protocol)) throw new Invalid(`it does not start with ${list}`);
      opts.check?.(u);
      return raw.trim();
    },
  };
}

/** A host name or an IP address to listen on. */
function listenHost(): SettingType<string> {
  return {
    noun: 'a valid host',
    accepts: 'an IP address or a host name such as 0.0.0.0, ::, localhost',
    parse(raw) {
      const s = raw.trim().replace(/^\[(.*)\]$/, '$1');
      if (net.isIP(s)) return s;
      // A host name's last label is never all digits (999.1.1.1 is a bad address, not a name).
      if (/^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$/.test(s) && !/(^|\.)\d+\.?$/.test(s)) return s;
      throw new Invalid();
    },
  };
}

/** Why `entry` is not an IP address or CIDR range, or null when it is one. */
export function addressEntryProblem(entry: string): string | null {
  const [address, bits, extra] = entry.split('/');
  const family = net.isIP(address);
  if (!family || extra !== undefined) return `"${entry}" is not an IP address or CIDR range`;
  if (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > (family === 4 ? 32 : 128))) return `"${entry}" has an invalid prefix length`;
  return null;
}

/** Comma-separated IP addresses and CIDR ranges; empty = none. */
function addressList(): SettingType<string[]> {
  return {
    noun: 'a valid address list',
    accepts: 'comma-separated IP addresses or CIDR ranges such as 10.0.0.0/8,::1, or empty for none',
    parse(raw) {
      const entries = raw.split(',').map((s) => s.trim()).filter(Boolean);
      for (const e of entries) {
        const problem = addressEntryProblem(e);
        if (problem) throw new Invalid(`entry ${problem}`);
      }
      return entries;
    },
  };
}

/** `name:/path,name2:/path2`; `default` is added under the data directory when not named. */
function storagesSpec(): SettingType<Record<string, string>> {
  return {
    noun: 'a valid storage list',
    accepts: 'comma-separated name:/path entries, names of letters, digits, _ . -',
    parse(raw) {
      const storages: Record<string, string> = {};
      for (const part of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
        const i = part.indexOf(':');
        if (i <= 0 || i === part.length - 1) throw new Invalid(`entry "${part}" is not name:/path`);
        const name = part.slice(0, i);
        if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new Invalid(`"${name}" is not a valid storage name`);
        if (storages[name]) throw new Invalid(`storage "${name}" is named twice`);
        storages[name] = path.resolve(part.slice(i + 1));
      }
      return storages;
    },
  };
}

const directory = (): SettingType<string> => ({
  noun: 'a valid path',
  accepts: 'a directory path',
  parse: (raw) => {
    if (raw.includes('\0')) throw new Invalid();
    return path.resolve(raw);
  },
});

const filePath = (): SettingType<string> => ({
  noun: 'a valid path',
  accepts: 'a file path',
  parse: (raw) => {
    if (raw.includes('\0')) throw new Invalid();
    return path.resolve(raw);
  },
});

/** `8080:8081,22:2222`: job port to host loopback port pairs (CAIRN_RUNNER_FORWARD_PORTS). */
function portPairs(): SettingType<{ jobPort: number; hostPort: number }[]> {
  const p = port();
  return {
    noun: 'a valid port list',
    accepts: 'comma-separated JOBPORT:HOSTPORT pairs such as 8080:8081, or empty for none',
    parse(raw) {
      return raw.split(',').map((s) => s.trim()).filter(Boolean).map((pair) => {
        const m = /^(\d+):(\d+)$/.exec(pair);
        if (!m) throw new Invalid(`entry "${pair}" is not JOBPORT:HOSTPORT`);
        return { jobPort: p.parse(m[1]), hostPort: p.parse(m[2]) };
      });
    },
  };
}

/** Registry hosts, `host` or `host:port` (CAIRN_RUNNER_INSECURE_REGISTRIES). */
function registryList(): SettingType<string[]> {
  const host = /^(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)(?::(\d{1,5}))?$/;
  return {
    noun: 'a valid registry list',
    accepts: 'comma-separated registry hosts, host or host:port, such as registry.lan:5000, or empty for none',
    parse(raw) {
      return raw.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean).map((entry) => {
        const m = host.exec(entry);
        if (!m || (m[1] !== undefined && (Number(m[1]) < 1 || Number(m[1]) > 65535))) throw new Invalid(`entry "${entry}" is not a registry host`);
        return entry;
      });
    },
  };
}

/** A numeric user id, or `root` (CAIRN_RUNNER_JOB_UID). */
function userId(): SettingType<number | 'root'> {
  const n = integer({ min: 0, max: 2 ** 32 - 2 });
  return {
    noun: 'a valid user id',
    accepts: 'a numeric user id, or root',
    parse: (raw) => (raw.trim() === 'root' ? 'root' : n.parse(raw)),
  };
}

// ---- the settings ------------------------------------------------------------------------------

/** Where a setting is read: the server's Config, `cairn runner` (and the built-in runner), or tests only. */
export type SettingScope = 'server' | 'runner' | 'test';

export interface Setting<T = unknown> {
  env: string;
  /** The Config field, for settings the server reads through its Config. */
  key?: keyof Config;
  type: SettingType<T>;
  /** The value when the variable is unset or empty; a function for derived defaults. */
  default: T | ((config: Partial<Config>, env: NodeJS.ProcessEnv) => T);
  /** The default as the README and --help show it. */
  defaultText: string;
  help: string;
  scope: SettingScope;
  /** Values are secrets: never repeated in an error. */
  secret?: boolean;
  /** Only in the schema (tests, development): not in the README table. */
  hidden?: boolean;
}

function def<K extends keyof Config>(s: Omit<Setting<Config[K]>, 'scope' | 'key'> & { key: K; scope?: SettingScope }): Setting {
  return { scope: 'server', ...s } as Setting;
}

function extra<T>(s: Setting<T>): Setting {
  return s as Setting;
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

function postgresUrl(): SettingType<string> {
  return url(['postgres:', 'postgresql:'], { noun: 'a valid PostgreSQL URL', accepts: 'a URL such as postgres://user:password@host:5432/database' });
}

function bracketed(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** The host name of the external URL, for the default sender address. */
function mailHost(externalUrl: string): string {
  try {
    return new URL(externalUrl).hostname.replace(/^\[|\]$/g, '') || 'localhost';
  } catch {
    return 'localhost';
  }
}

function checkObjectStoreUrl(u: URL) {
  if (!decodeURIComponent(u.pathname).split('/').filter(Boolean).length) throw new Invalid('it names no bucket (s3://host/bucket)');
}

export const SETTINGS: Setting[] = [
  def({ env: 'CAIRN_HOST', key: 'host', type: listenHost(), default: '127.0.0.1', defaultText: '`127.0.0.1`', help: 'address to listen on' }),
  def({ env: 'CAIRN_PORT', key: 'port', type: port(), default: 8080, defaultText: '`8080`', help: 'port to listen on' }),
  def({
    env: 'CAIRN_SSH_PORT',
    key: 'sshPort',
    type: integer({ min: 0, max: 65535, noun: 'a valid port' }),
    default: 2222,
    defaultText: '`2222`',
    help: "port of the SSH server for git (`git clone ssh://git@HOST:PORT/group/project.git`, user keys and deploy keys); `0` turns it off. It is the port shown in every `ssh_url_to_repo` (`git@HOST:group/project.git` when it is 22 or 0). Host keys are made at first start under `CAIRN_DATA_DIR/ssh`",
  }),
  def({
    env: 'CAIRN_SSH_HOST',
    key: 'sshHost',
    type: listenHost(),
    default: (c) => c.host!,
    defaultText: 'as `CAIRN_HOST`',
    help: 'address the SSH server listens on',
  }),
  def({
    env: 'CAIRN_SSH_SHELL_COMMAND',
    key: 'sshShellCommand',
    type: text({ noun: 'a valid command', accepts: 'a command line without double quotes, backslashes or line breaks', pattern: /^[^"\\\r\n\0]+$/ }),
    default: null,
    defaultText: 'this `node` and `bin/cairn.mjs`',
    help: "OpenSSH mode: the program `cairn ssh authorized-keys` names in each key's `command=\"... shell key-N\"` for sshd to run (as the SSH user, with sshd's environment: point it at a script that sets `DATABASE_URL` and the other settings, then runs `cairn \"$@\"`)",
  }),
  def({
    env: 'CAIRN_EXTERNAL_URL',
    key: 'externalUrl',
    type: url(['http:', 'https:'], { check: (u) => void (u.search || u.hash ? (() => { throw new Invalid('it has a query or fragment'); })() : 0) }),
    default: (c) => `http://${bracketed(c.host!)}:${c.port}`,
    defaultText: '`http://HOST:PORT`',
    help: 'base URL used in every `web_url` and clone URL; `https://…` makes session cookies Secure',
  }),
  def({ env: 'CAIRN_DATA_DIR', key: 'dataDir', type: directory(), default: () => path.resolve('./data'), defaultText: '`./data`', help: 'embedded database (`pglite/`) and the default repository storage (`repositories/`)' }),
  def({ env: 'DATABASE_URL', key: 'databaseUrl', type: postgresUrl(), default: null, defaultText: 'unset', help: 'PostgreSQL connection string; the embedded PGlite database when unset', secret: false }),
  def({ env: 'CAIRN_DB_POOL', key: 'dbPool', type: integer({ min: 1, max: 1000 }), default: 10, defaultText: '`10`', help: 'PostgreSQL connections per process' }),
  def({ env: 'CAIRN_ROOT_PASSWORD', key: 'rootPassword', type: text({ noun: 'a valid password', minLength: 8 }), default: null, defaultText: 'generated, printed once', help: 'password of the administrator `root`', secret: true }),
  def({
    env: 'CAIRN_ROOT_TOKEN',
    key: 'rootToken',
    type: text({ noun: 'a valid token', accepts: '8 or more printable characters, no spaces', minLength: 8, pattern: /^[\x21-\x7e]+$/ }),
    default: null,
    defaultText: 'unset',
    help: 'root gets a personal access token with exactly this value (scopes api, read_api, read_user, read_repository, write_repository, sudo, admin_mode)',
    secret: true,
  }),
  def({
    env: 'CAIRN_STORAGES',
    key: 'storages',
    type: storagesSpec(),
    default: {},
    defaultText: '`default:$CAIRN_DATA_DIR/repositories`',
    help: 'named repository storages, `name:/path,name2:/path2` (`default` is added under the data directory when not named)',
  }),
  def({ env: 'CAIRN_ARCHIVE_RATE_LIMIT', key: 'archiveRateLimit', type: integer(), default: 5, defaultText: '`5`', help: 'archive downloads per user per minute (`0` = unlimited), shared by all processes' }),
  def({
    env: 'CAIRN_CHANGELOG_RATE_LIMIT',
    key: 'changelogRateLimit',
    type: integer(),
    default: 5,
    defaultText: '`5`',
    help: 'changelog generations (`GET` and `POST /projects/:id/repository/changelog`) per user and project per minute (`0` = unlimited), shared by all processes',
  }),
  def({
    env: 'CAIRN_ARCHIVE_CACHE_BYTES',
    key: 'archiveCacheBytes',
    type: bytes(),
    default: 1024 ** 3,
    defaultText: '`1GB`',
    help: 'generated archives kept on disk under `$CAIRN_DATA_DIR/cache/archives` (`0` = none), least recently used first out; processes sharing the directory share them',
  }),
  def({
    env: 'CAIRN_PACK_OBJECTS_CACHE_MAX_AGE',
    key: 'packObjectsCacheMaxAge',
    type: duration(),
    default: 300,
    defaultText: '`5m`',
    help: "how long a pack generated for a fetch or clone is kept under `$CAIRN_DATA_DIR/cache/pack-objects` and sent again to identical fetches (Gitaly's pack-objects cache: a CI storm of clones of one commit makes one pack); fetches arriving while it is generated stream it as it grows; `0` = off",
  }),
  def({
    env: 'CAIRN_STORAGE_MOVE_CLEANUP_DELAY',
    key: 'storageMoveCleanupDelay',
    type: duration(),
    default: 10,
    defaultText: '`10s`',
    help: 'how long a repository storage move keeps the source copy after switching the repository to its destination, for reads (clones, API reads) that began before the switch; the move is `replicated` meanwhile, then `finished`',
  }),
  def({
    env: 'CAIRN_RENDER_CACHE_BYTES',
    key: 'renderCacheBytes',
    type: bytes(),
    default: 64 * 1024 ** 2,
    defaultText: '`64MB`',
    help: 'memory each process keeps for rendered pages\' parts that never go stale (highlighted files, diffs by commit ids), one budget for all of them, least recently used first out (`0` = none)',
  }),
  def({ env: 'CAIRN_MAX_FILE_SIZE', key: 'maxFileSize', type: bytes(), default: 10 * 1024 ** 2, defaultText: '`10MB`', help: 'largest file accepted by the commits and files APIs' }),
  def({
    env: 'CAIRN_MAX_BODY_SIZE',
    key: 'maxBodySize',
    type: bytes({ min: 1 }),
    default: 8 * 1024 ** 2,
    defaultText: '`8MB`',
    help: 'largest JSON or form request body (413 beyond it); the commits and files APIs accept one base64-encoded file of `CAIRN_MAX_FILE_SIZE` on top; git over HTTP is not limited',
  }),
  def({
    env: 'CAIRN_MAX_LOGIN_ATTEMPTS',
    key: 'maxLoginAttempts',
    type: integer(),
    default: 10,
    defaultText: '`10`',
    help: 'wrong passwords (sign-in form, OAuth password grant, git over HTTP) since the last successful sign-in, within a day, that lock the account for password sign-in (`0` = never); tokens keep working',
  }),
  def({ env: 'CAIRN_LOGIN_LOCK_MINUTES', key: 'loginLockMinutes', type: duration({ min: 1, unit: 'minutes' }), default: 10, defaultText: '`10`', help: 'how long a locked account stays locked, minutes' }),
  def({
    env: 'CAIRN_FAILED_AUTH_MAX_RETRY',
    key: 'failedAuthMaxRetry',
    type: integer(),
    default: 30,
    defaultText: '`30`',
    help: 'failed authentications from one IP address within `CAIRN_FAILED_AUTH_FIND_TIME` that ban it (`0` = never): sign-in then answers 429, git over HTTP 403. Sign-in and git count separately; a successful git authentication resets the git count. Behind a proxy the client address comes from `X-Forwarded-For`',
  }),
  def({ env: 'CAIRN_FAILED_AUTH_FIND_TIME', key: 'failedAuthFindTime', type: duration({ min: 1 }), default: 180, defaultText: '`180`', help: 'the window those failures are counted in, seconds' }),
  def({ env: 'CAIRN_FAILED_AUTH_BAN_TIME', key: 'failedAuthBanTime', type: duration({ min: 1 }), default: 3600, defaultText: '`3600`', help: 'how long a banned address stays banned, seconds' }),
  def({
    env: 'CAIRN_PROTECTED_PATHS_LIMIT',
    key: 'protectedPathsLimit',
    type: integer(),
    default: 10,
    defaultText: '`10`',
    help: "GitLab's protected paths throttle: `POST /users/sign_in` requests per `CAIRN_PROTECTED_PATHS_PERIOD` from one address, and password attempts (sign-in form and OAuth password grant together) naming one account, whatever their outcome; past it 429 with `Retry-After` (`0` = unlimited). Counted in the database, shared by all processes",
  }),
  def({ env: 'CAIRN_PROTECTED_PATHS_PERIOD', key: 'protectedPathsPeriod', type: duration({ min: 1 }), default: 60, defaultText: '`60`', help: 'the window of that throttle, seconds' }),
  def({
    env: 'CAIRN_OAUTH_TOKEN_RATE_LIMIT',
    key: 'oauthTokenRateLimit',
    type: integer(),
    default: 60,
    defaultText: '`60`',
    help: '`POST /oauth/token` and `/oauth/revoke` requests per minute from one address (`0` = unlimited); past it 429 `too_many_requests` with `Retry-After`, shared by all processes',
  }),
  def({ env: 'CAIRN_OAUTH_TOKEN_TTL', key: 'oauthAccessTokenTtl', type: duration({ min: 1 }), default: 7200, defaultText: '`7200`', help: 'OAuth access token lifetime, seconds' }),
  def({
    env: 'CAIRN_SHUTDOWN_BLACKOUT',
    key: 'shutdownBlackout',
    type: duration(),
    default: 0,
    defaultText: '`0`',
    help: "on SIGINT/SIGTERM, how long the server keeps serving, answering `/-/readiness` with 503 and every request with `Connection: close`, before it stops taking requests (GitLab's `shutdown_blackout_seconds`); behind a load balancer, longer than its health check takes to mark the node down, so no request is sent to a closing connection",
  }),
  def({ env: 'CAIRN_SHUTDOWN_TIMEOUT', key: 'shutdownTimeout', type: duration({ min: 1 }), default: 30, defaultText: '`30`', help: 'on SIGINT/SIGTERM, how long requests in flight may take to finish, seconds (the built-in runner reports its running jobs failed first); past it the process exits anyway. An idle server stops at once; a second signal stops it at once' }),
  def({
    env: 'CAIRN_WEBHOOK_ALLOW_LOCAL_REQUESTS',
    key: 'webhookAllowLocalRequests',
    type: bool(),
    default: false,
    defaultText: '`false`',
    help: "`true` lets webhooks reach loopback, link-local and private addresses (GitLab's `allow_local_requests_from_web_hooks_and_services`); otherwise such a hook is refused when saved and its deliveries are refused after DNS resolution and at every redirect",
  }),
  def({
    env: 'CAIRN_WEBHOOK_LOCAL_ALLOWLIST',
    key: 'webhookLocalAllowlist',
    type: addressList(),
    default: [],
    defaultText: 'empty',
    help: "local addresses and CIDR ranges webhooks may reach even when `CAIRN_WEBHOOK_ALLOW_LOCAL_REQUESTS` is `false` (GitLab's `outbound_local_requests_allowlist`)",
  }),
  def({ env: 'CAIRN_WEBHOOK_TIMEOUT', key: 'webhookTimeout', type: duration({ min: 1 }), default: 10, defaultText: '`10`', help: 'how long a webhook delivery may take, seconds (a delivery that takes longer fails)' }),
  def({ env: 'CAIRN_WORKERS', key: 'workers', type: bool(), default: true, defaultText: '`true`', help: '`false` disables the in-process background worker (run workers elsewhere)' }),
  def({
    env: 'CAIRN_WORKER_CONCURRENCY',
    key: 'workerConcurrency',
    type: integer({ min: 1, max: 64 }),
    default: 4,
    defaultText: '`4`',
    help: 'background jobs (mails, housekeeping, storage moves, pipeline schedules, ...) each process runs at once; a long job does not hold up the others',
  }),
  def({
    env: 'CAIRN_TRUSTED_PROXIES',
    key: 'trustedProxies',
    type: addressList(),
    default: ['127.0.0.1', '::1'],
    defaultText: '`127.0.0.1,::1`',
    help: 'reverse proxies whose `X-Forwarded-For` gives the client address (comma-separated addresses or CIDRs; empty = none)',
  }),
  def({
    env: 'CAIRN_MONITORING_ALLOWLIST',
    key: 'monitoringAllowlist',
    type: addressList(),
    default: ['127.0.0.0/8', '::1/128'],
    defaultText: '`127.0.0.0/8,::1/128`',
    help: "client addresses and CIDR ranges that may read the Prometheus metrics at `/-/metrics` (GitLab's monitoring whitelist); others get 404. The client address is the one `CAIRN_TRUSTED_PROXIES` gives",
  }),
  def({ env: 'CAIRN_CACHE', key: 'cache', type: bool(), default: true, defaultText: '`true`', help: '`false` turns off the in-memory cache of hot reads (see below)' }),
  def({ env: 'CAIRN_LOG_LEVEL', key: 'logLevel', type: oneOf(LOG_LEVELS, 'a valid log level'), default: 'info', defaultText: '`info`', help: '`trace` … `fatal`, or `silent`' }),
  def({ env: 'CAIRN_LOG_FORMAT', key: 'logFormat', type: oneOf(['auto', 'text', 'json'] as const, 'a valid log format'), default: 'auto', defaultText: '`auto`', help: '`text`: one line of words per request and event; `json`: JSON lines for a log collector; `auto`: text on a terminal, JSON otherwise' }),
  def({
    env: 'CAIRN_GIT_PASSWORD_AUTH',
    key: 'gitPasswordAuthentication',
    type: bool(),
    default: true,
    defaultText: '`true`',
    help: "git over HTTP accepts a user's password as well as tokens (GitLab's `password_authentication_enabled_for_git`)",
  }),
  def({
    env: 'CAIRN_VALIDATE_RESPONSES',
    key: 'validateResponses',
    type: bool(),
    default: (_c, env) => env.NODE_ENV === 'test',
    defaultText: '`true` under `NODE_ENV=test`, `false` otherwise',
    help: "check every JSON answer against its route's response schema; a mismatch answers 500 (for tests and development)",
  }),
  extra({
    env: 'CAIRN_SECRET_KEY_BASE',
    type: text({ noun: 'a valid key', minLength: 32, accepts: 'at least 32 characters, such as the output of openssl rand -hex 32' }),
    default: null as unknown as string,
    defaultText: '`$CAIRN_DATA_DIR/secret_key_base` (made once)',
    help: 'the key CI variables and registration tokens are encrypted with; processes that do not share a data directory must set the same value',
    scope: 'server',
    secret: true,
  }),
  def({
    env: 'CAIRN_RUNNER_POLL_TIMEOUT',
    key: 'runnerPollTimeout',
    type: duration({ min: 1 }),
    default: 50,
    defaultText: '`50`',
    help: "seconds `POST /api/v4/jobs/request` holds a runner's request open when no job is pending (GitLab Workhorse's long poll); a job becoming pending in any process answers it at once",
  }),
  def({
    env: 'CAIRN_MAX_TRACE_SIZE',
    key: 'maxTraceSize',
    type: bytes({ min: 1 }),
    default: 100 * 1024 ** 2,
    defaultText: '`100MB`',
    help: "largest job log (GitLab's default 100 MiB); an append beyond it fails the job (`trace_size_exceeded`) and answers 403",
  }),
  def({
    env: 'CAIRN_MAX_ARTIFACTS_SIZE',
    key: 'maxArtifactsSize',
    type: bytes({ min: 1 }),
    default: 100 * 1024 ** 2,
    defaultText: '`100MB`',
    help: "largest artifact file a job may upload (GitLab's default 100 MiB); 413 beyond it. Also the largest file of an archive inflated for a client that does not take gzip (a client that does gets it as stored); 406 beyond it",
  }),
  def({
    env: 'CAIRN_MAX_LFS_OBJECT_SIZE',
    key: 'maxLfsObjectSize',
    type: bytes({ min: 1 }),
    default: 5 * 1024 ** 3,
    defaultText: '`5GB`',
    help: 'largest Git LFS object a client may upload (kept in the artifacts object storage); the batch API refuses a larger one per object, an upload beyond it answers 413',
  }),
  def({
    env: 'CAIRN_ARTIFACTS_EXPIRE_IN',
    key: 'defaultArtifactsExpireIn',
    type: duration(),
    default: 30 * 24 * 3600,
    defaultText: '`30d`',
    help: "how long artifacts uploaded without `expire_in` are kept, seconds (GitLab's default 30 days; `0` = forever)",
  }),
  def({
    env: 'CAIRN_MAX_CACHE_SIZE',
    key: 'maxCacheSize',
    type: bytes({ min: 1 }),
    default: 5 * 1024 ** 3,
    defaultText: '`5GB`',
    help: 'largest CI cache archive (`cache:`) a job may upload to the shared cache storage (the artifacts store); 413 beyond it, which the runner reports as a warning',
  }),
  def({
    env: 'CAIRN_CI_CACHE_EXPIRE_IN',
    key: 'cacheExpireIn',
    type: duration(),
    default: 14 * 24 * 3600,
    defaultText: '`14d`',
    help: 'CI caches neither restored nor uploaded for this long are removed (hourly); `0` = kept until their project clears its runner caches',
  }),
  def({
    env: 'CAIRN_DEFAULT_BRANCH_PROTECTION',
    key: 'defaultBranchProtection',
    type: integer({ min: 0, max: 4 }),
    default: 2,
    defaultText: '`2`',
    help: "how a new project's default branch is protected when its group sets nothing (GitLab's `default_branch_protection`): `0` not protected, `1` developers push, `2` maintainers push and merge, `3` developers merge, `4` as 2 after a developer's initial push",
  }),
  def({
    env: 'CAIRN_SMTP_URL',
    key: 'smtpUrl',
    type: url(['smtp:', 'smtps:'], { accepts: 'a URL such as smtp://host:25 or smtps://user:password@host' }),
    default: null,
    defaultText: 'unset',
    help: 'outgoing mail server for notification e-mail, `smtp://host:port` or `smtps://user:password@host` (URL-encode user and password); unset: no notification e-mail is enqueued or sent',
  }),
  def({
    env: 'CAIRN_MAIL_FROM',
    key: 'mailFrom',
    type: {
      noun: 'a valid sender',
      accepts: 'an e-mail address, optionally with a name: Cairn <cairn@example.com>',
      parse(raw) {
        const s = raw.trim();
        if (!/^(?:[^<>\r\n]*<[^<>@\s]+@[^<>@\s]+>|[^<>@\s]+@[^<>@\s]+)$/.test(s)) throw new Invalid();
        return s;
      },
    },
    default: (c) => `Cairn <cairn@${mailHost(c.externalUrl!)}>`,
    defaultText: '`Cairn <cairn@HOST>`',
    help: 'sender of notification e-mail (HOST: the host of `CAIRN_EXTERNAL_URL`)',
  }),
  def({
    env: 'CAIRN_OBJECT_STORE_URL',
    key: 'objectStoreUrl',
    type: url(['s3:'], { noun: 'a valid object store URL', accepts: 'a URL such as s3://KEY:SECRET@host:port/bucket?region=us-east-1', check: checkObjectStoreUrl }),
    default: null,
    defaultText: 'unset (local disk, `$CAIRN_DATA_DIR/artifacts`)',
    help: "S3-compatible object storage for job artifacts: `s3://ACCESS_KEY:SECRET@host:port/bucket[/prefix]?region=us-east-1&path_style=true&tls=false` (key and secret URL-encoded; without them the AWS SDK's credential chain; `s3:///bucket?region=..` is AWS itself). Uploads and downloads are streamed; single files are read out of archives with ranged GETs",
  }),
  def({
    env: 'CAIRN_JOB_PORT',
    key: 'jobPort',
    type: integer({ min: 0, max: 65535, noun: 'a valid port' }),
    default: 0,
    defaultText: '`0` (any free port)',
    help: "port of the second listener, on 127.0.0.1, for CI jobs' own requests (API calls and clones with the job token): the built-in runner forwards the server's port into each job's network namespace to it. Requests on it come from the address `100::1` whatever their `X-Forwarded-For`, so they never get a trusted proxy's say and never read `/-/metrics`. Set it when a separate `cairn runner` on this machine forwards to it (`CAIRN_RUNNER_FORWARD_PORTS`)",
  }),
  extra({ env: 'CAIRN_BUILTIN_RUNNER', type: bool(), default: true, defaultText: '`true`', help: '`false`: `cairn serve` starts no built-in runner', scope: 'server' }),
  extra({ env: 'CAIRN_BUILTIN_RUNNER_CONCURRENT', type: integer({ min: 1, max: 64 }), default: 1, defaultText: '`1`', help: 'jobs the built-in runner runs at once', scope: 'server' }),
  extra({
    env: 'CAIRN_RUNNER_ALLOW_UNISOLATED',
    type: bool(),
    default: false,
    defaultText: '`false`',
    help: '`true`: runners (`cairn runner run` and the built-in one) run jobs even without bubblewrap; otherwise they refuse to',
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_CONFIG',
    type: filePath(),
    default: null as unknown as string,
    defaultText: '`$CAIRN_DATA_DIR/runner/config.json`',
    help: "where `cairn runner register` saves (mode 0600) and `run` reads the runner's configuration",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_JOB_NETWORK',
    type: oneOf(['pasta', 'none', 'host'] as const, 'a valid network mode'),
    default: 'pasta',
    defaultText: '`pasta`',
    help: "a job's network: `pasta`: a network namespace of its own with outbound connections through pasta (`apt-get install passt`), the machine's loopback not reachable except the ports `CAIRN_RUNNER_FORWARD_PORTS` (and the built-in runner's server port) name; without pasta, no network; `none`: no network at all; `host`: the machine's network, loopback services included (unsafe with untrusted jobs)",
    scope: 'runner',
  }),
  extra({ env: 'CAIRN_RUNNER_PASTA', type: filePath(), default: null as unknown as string, defaultText: '`pasta` on `PATH`', help: 'the pasta binary (package passt) that connects jobs to the network', scope: 'runner' }),
  extra({
    env: 'CAIRN_RUNNER_FORWARD_PORTS',
    type: portPairs(),
    default: [],
    defaultText: 'none',
    help: "loopback ports of this machine a job may still reach, `JOBPORT:HOSTPORT` pairs: the job's connection to its 127.0.0.1:JOBPORT goes to the machine's 127.0.0.1:HOSTPORT. For a `cairn runner` whose server URL is on loopback: `8080:8081` with the server's `CAIRN_PORT=8080` and `CAIRN_JOB_PORT=8081` (the built-in runner does this itself)",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_JOB_PIDS',
    type: integer({ min: 8, max: 4194304 }),
    default: 1024,
    defaultText: '`1024`',
    help: "most processes and threads one job has at once (its cgroup's `pids.max`; without cgroups, RLIMIT_NPROC of the job's user, shared by all its jobs)",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_JOB_MEMORY',
    type: bytes({ min: 16 * 1024 ** 2 }),
    default: 2 * 1024 ** 3,
    defaultText: '`2GB`',
    help: "memory of one job (its cgroup's memory limit, its private /tmp included); without cgroups, RLIMIT_DATA of each of its processes",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_JOB_FILE_SIZE',
    type: bytes({ min: 1024 ** 2 }),
    default: 1024 ** 3,
    defaultText: '`1GB`',
    help: "largest file a job writes (RLIMIT_FSIZE), and the size of its private /tmp",
    scope: 'runner',
  }),
  extra({ env: 'CAIRN_RUNNER_BWRAP', type: filePath(), default: null as unknown as string, defaultText: '`bwrap` on `PATH`', help: 'the bubblewrap binary runners isolate jobs with', scope: 'runner' }),
  extra({
    env: 'CAIRN_RUNNER_DEFAULT_IMAGE',
    type: text({ noun: 'a valid image name', accepts: 'an image name such as `alpine:3.20` or `registry.example.com/group/image:tag`', pattern: /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,511}$/ }),
    default: null as unknown as string,
    defaultText: 'none',
    help: "with the image executor, the image jobs that name none run in (as gitlab-runner's `[runners.docker] image`); unset: such jobs run in the shell sandbox, on the machine's filesystem",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_DOCKER_AUTH_CONFIG',
    type: text({ noun: 'a valid Docker auth configuration', accepts: 'the JSON of a docker config.json (`{"auths":{"registry.example.com":{"auth":"<base64 user:password>"}}}`)', pattern: /^\s*\{[\s\S]*\}\s*$/ }),
    default: null as unknown as string,
    defaultText: 'none',
    help: "registry credentials for jobs' images and services, as gitlab-runner's `DOCKER_AUTH_CONFIG` in its environment; a job's own `DOCKER_AUTH_CONFIG` variable comes first",
    scope: 'runner',
    secret: true,
  }),
  extra({
    env: 'CAIRN_RUNNER_WAIT_FOR_SERVICES_TIMEOUT',
    type: integer({ min: -1, max: 3600 }),
    default: 30,
    defaultText: '`30`',
    help: "seconds a job's services get to accept connections on their image's exposed ports before the job goes on with a warning (gitlab-runner's `wait_for_services_timeout`); `0` or `-1`: no wait",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_JOB_UID',
    type: userId(),
    default: 65534,
    defaultText: '`65534`',
    help: 'when a runner runs as root, the user id its jobs run as (`root`: as root)',
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_JOB_GID',
    type: integer({ min: 0, max: 2 ** 32 - 2, noun: 'a valid group id' }),
    default: null as unknown as number,
    defaultText: 'the job user id',
    help: 'when a runner runs as root, the group id its jobs run as',
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_IMAGE_DIR',
    type: directory(),
    default: null as unknown as string,
    defaultText: '`$CAIRN_DATA_DIR/runner/images`',
    help: "where a runner keeps the images jobs run in, unpacked (one directory per image digest; mode 0700, root's)",
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_IMAGE_MAX_SIZE',
    type: bytes({ min: 1024 ** 2 }),
    default: 10 * 1024 ** 3,
    defaultText: '`10GB`',
    help: 'largest image a runner pulls, compressed layers and unpacked files each (the layers are measured before they are unpacked); a bigger one fails the job',
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_IMAGE_CACHE_BYTES',
    type: bytes(),
    default: 20 * 1024 ** 3,
    defaultText: '`20GB`',
    help: 'disk the unpacked images may use together: beyond it, the least recently used ones that no job has used for a day are removed',
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_RUNNER_INSECURE_REGISTRIES',
    type: registryList(),
    default: [],
    defaultText: 'none (loopback registries always)',
    help: 'registries pulled from without TLS certificate checks, or over plain HTTP (as docker\'s `insecure-registries`); `localhost`, `127.0.0.0/8` and `::1` registries are always treated so',
    scope: 'runner',
  }),
  extra({
    env: 'CAIRN_TSX',
    type: bool(),
    default: false,
    defaultText: '`false`',
    help: '`true`: `bin/cairn.mjs` runs the TypeScript sources through tsx instead of the esbuild bundle it builds in `.cache/dist/` (development; uses ~100 MB more memory)',
    scope: 'server',
  }),
  extra({ env: 'CAIRN_SOAK', type: bool(), default: false, defaultText: '`false`', help: 'tests: the long forms of the permission matrix, fuzzing and crash tests (`npm run test:soak`)', scope: 'test', hidden: true }),
];

const BY_ENV = new Map(SETTINGS.map((s) => [s.env, s]));

/** A value as an error may repeat it: secrets hidden, URL passwords redacted. */
export function shownValue(setting: Pick<Setting, 'secret'>, raw: string): string {
  if (setting.secret) return `(${raw.length} characters, hidden)`;
  return JSON.stringify(redactUrlPassword(raw));
}

export function redactUrlPassword(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) {
      u.password = '***';
      return u.toString();
    }
    return raw;
  } catch {
    return raw.replace(/(\/\/[^:/@\s]*:)[^@\s]*@/, '$1***@');
  }
}

function parseValue<T>(setting: Setting<T>, raw: string): T {
  try {
    return setting.type.parse(raw);
  } catch (err) {
    if (!(err instanceof Invalid)) throw err;
    const why = err.message ? `: ${err.message}` : '';
    throw new ConfigError(`${setting.env}: ${shownValue(setting, raw)} is not ${setting.type.noun}${why} (${setting.type.accepts})`, setting.env);
  }
}

/** The value of one declared setting (unset or empty: its default; a function default gets {}). */
export function setting<T = unknown>(name: string, env: NodeJS.ProcessEnv = process.env): T {
  const s = BY_ENV.get(name) as Setting<T> | undefined;
  if (!s) throw new Error(`${name} is not a declared setting (src/config.ts)`);
  const raw = env[name];
  if (raw === undefined || raw === '') return typeof s.default === 'function' ? (s.default as (c: Partial<Config>, e: NodeJS.ProcessEnv) => T)({}, env) : s.default;
  return parseValue(s, raw);
}

/** Checks every setting of these scopes in env (the runner's, at `cairn runner` start). */
export function checkSettings(scopes: SettingScope[], env: NodeJS.ProcessEnv = process.env): void {
  for (const s of SETTINGS) if (scopes.includes(s.scope) && env[s.env] !== undefined && env[s.env] !== '') parseValue(s, env[s.env]!);
}

/**
 * The body limit of the routes that carry file content (commits, files): one file of
 * maxFileSize, base64-encoded (4/3 of its size), plus an ordinary body's worth of the rest.
 */
export function contentBodyLimit(config: Pick<Config, 'maxFileSize' | 'maxBodySize'>): number {
  return Math.ceil((config.maxFileSize * 4) / 3) + config.maxBodySize;
}

/** CAIRN_STORAGES as a storage map; `default` under dataDir when not named. */
export function parseStorages(spec: string | undefined, dataDir: string): Record<string, string> {
  const storages = spec ? parseValue(BY_ENV.get('CAIRN_STORAGES') as Setting<Record<string, string>>, spec) : {};
  if (!storages.default) storages.default = path.resolve(dataDir, 'repositories');
  return storages;
}

/**
 * The Config of this process from its environment: every server and runner setting is checked
 * (a ConfigError on the first bad one), then `overrides` (tests) are applied.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const cfg: Partial<Config> = {};
  for (const s of SETTINGS) {
    if (s.scope === 'test') continue;
    const raw = env[s.env];
    let value: unknown;
    if (raw === undefined || raw === '') value = typeof s.default === 'function' ? (s.default as (c: Partial<Config>, e: NodeJS.ProcessEnv) => unknown)(cfg, env) : s.default;
    else value = parseValue(s, raw);
    if (s.key) (cfg as Record<string, unknown>)[s.key] = value;
  }
  cfg.externalUrl = cfg.externalUrl!.replace(/\/+$/, '');
  cfg.storages = { ...cfg.storages };
  if (!cfg.storages.default) cfg.storages.default = path.resolve(cfg.dataDir!, 'repositories');
  return { ...(cfg as Config), ...overrides };
}

/** A setting's command-line flag: CAIRN_PORT is `--port`, DATABASE_URL `--database-url`. */
export function settingFlag(env: string): string {
  return `--${env.replace(/^CAIRN_/, '').toLowerCase().replace(/_/g, '-')}`;
}

/**
 * Command-line flags (`--port 8080` or `--port=8080`) for the settings of these scopes, as the
 * environment variables they stand for; a flag outranks the variable. A ConfigError names an
 * unknown flag, a missing value or an argument that is not a flag.
 */
export function settingsFromFlags(argv: string[], scopes: SettingScope[] = ['server', 'runner']): Record<string, string> {
  const byFlag = new Map(SETTINGS.filter((s) => scopes.includes(s.scope)).map((s) => [settingFlag(s.env), s]));
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const s = byFlag.get(flag);
    if (!s) {
      const what = arg.startsWith('-') ? `unknown option ${flag}` : `unexpected argument ${JSON.stringify(arg)}`;
      throw new ConfigError(`${what} (each setting is a flag: ${settingFlag('CAIRN_PORT')} 8080 for CAIRN_PORT; see --help)`, flag);
    }
    let value: string;
    if (eq > 0) value = arg.slice(eq + 1);
    else {
      if (i + 1 >= argv.length) throw new ConfigError(`${flag} needs a value (${s.type.accepts})`, s.env);
      value = argv[++i];
    }
    try {
      parseValue(s, value);
    } catch (err) {
      if (err instanceof ConfigError) throw new ConfigError(`${flag}${err.message.slice(s.env.length)}`, s.env);
      throw err;
    }
    out[s.env] = value;
  }
  return out;
}

// ---- documentation -------------------------------------------------------------------------------

/** The README's configuration table (between its config-table markers), from SETTINGS. */
export function configTableMarkdown(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const rows = SETTINGS.filter((s) => !s.hidden).map((s) => `| \`${s.env}\` | ${cell(s.defaultText)} | ${cell(s.type.accepts)} | ${cell(s.help)} |`);
  return ['| variable | default | accepted | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** The settings part of `cairn serve --help`, from SETTINGS. */
export function settingsHelp(width = 100): string {
  const strip = (s: string) => s.replace(/`/g, '');
  const wrap = (s: string, indent: string) => {
    const lines: string[] = [];
    let line = '';
    for (const word of s.split(/\s+/)) {
      if (line && indent.length + line.length + 1 + word.length > width) {
        lines.push(indent + line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    if (line) lines.push(indent + line);
    return lines.join('\n');
  };
  return SETTINGS.filter((s) => !s.hidden)
    .map((s) => `  ${s.env} (default: ${strip(s.defaultText)})\n${wrap(`${strip(s.help)}. Accepted: ${s.type.accepts}.`, '      ')}`)
    .join('\n');
}
