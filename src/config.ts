import path from 'node:path';

export interface Config {
  host: string;
  port: number;
  /** Base URL used in every web_url / *_url_to_repo, without a trailing slash. */
  externalUrl: string;
  dataDir: string;
  /** PostgreSQL connection string; PGlite under dataDir when unset. */
  databaseUrl: string | null;
  rootPassword: string | null;
  rootToken: string | null;
  /** Named repository storages: name -> absolute directory. Always has `default`. */
  storages: Record<string, string>;
  /** Archive downloads per user per minute; 0 = unlimited. */
  archiveRateLimit: number;
  changelogRateLimit: number;
  /** Bytes of generated archives kept on disk under dataDir/cache/archives; 0 = none kept. */
  archiveCacheBytes: number;
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
  /** Proxies whose X-Forwarded-For is believed (addresses or CIDR ranges); the client address comes from it. */
  trustedProxies: string[];
  logLevel: string;
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
  /** Largest artifact file a job may upload, in bytes (413 beyond it). */
  maxArtifactsSize: number;
  /** Artifacts without expire_in expire after this many seconds (0 = never). */
  defaultArtifactsExpireIn: number;
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
}

function int(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${value}"`);
  return n;
}

function positive(n: number, name: string): number {
  if (n <= 0) throw new Error(`${name} must be a positive integer`);
  return n;
}

/**
 * The body limit of the routes that carry file content (commits, files): one file of
 * maxFileSize, base64-encoded (4/3 of its size), plus an ordinary body's worth of the rest.
 */
export function contentBodyLimit(config: Pick<Config, 'maxFileSize' | 'maxBodySize'>): number {
  return Math.ceil((config.maxFileSize * 4) / 3) + config.maxBodySize;
}

export function parseStorages(spec: string | undefined, dataDir: string): Record<string, string> {
  const storages: Record<string, string> = {};
  for (const part of (spec ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    const i = part.indexOf(':');
    if (i <= 0) throw new Error(`CAIRN_STORAGES entry "${part}" must be name:/path`);
    const name = part.slice(0, i);
    if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new Error(`invalid storage name "${name}"`);
    storages[name] = path.resolve(part.slice(i + 1));
  }
  if (!storages.default) storages.default = path.resolve(dataDir, 'repositories');
  return storages;
}

function smtpUrl(value: string | undefined): string | null {
  if (!value) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error('CAIRN_SMTP_URL must be a URL such as smtp://host:25 or smtps://user:password@host');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') throw new Error('CAIRN_SMTP_URL must start with smtp:// or smtps://');
  return value;
}

/** The host name of the external URL, for the default sender address. */
function mailHost(externalUrl: string): string {
  try {
    return new URL(externalUrl).hostname.replace(/^\[|\]$/g, '') || 'localhost';
  } catch {
    return 'localhost';
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const host = env.CAIRN_HOST || '127.0.0.1';
  const port = int(env.CAIRN_PORT, 8080, 'CAIRN_PORT');
  const dataDir = path.resolve(env.CAIRN_DATA_DIR || './data');
  const externalUrl = (env.CAIRN_EXTERNAL_URL || `http://${host.includes(':') ? `[${host}]` : host}:${port}`).replace(/\/+$/, '');
  const cfg: Config = {
    host,
    port,
    externalUrl,
    dataDir,
    databaseUrl: env.DATABASE_URL || null,
    rootPassword: env.CAIRN_ROOT_PASSWORD || null,
    rootToken: env.CAIRN_ROOT_TOKEN || null,
    storages: parseStorages(env.CAIRN_STORAGES, dataDir),
    archiveRateLimit: int(env.CAIRN_ARCHIVE_RATE_LIMIT, 5, 'CAIRN_ARCHIVE_RATE_LIMIT'),
    changelogRateLimit: int(env.CAIRN_CHANGELOG_RATE_LIMIT, 5, 'CAIRN_CHANGELOG_RATE_LIMIT'),
    archiveCacheBytes: int(env.CAIRN_ARCHIVE_CACHE_BYTES, 1024 * 1024 * 1024, 'CAIRN_ARCHIVE_CACHE_BYTES'),
    maxFileSize: int(env.CAIRN_MAX_FILE_SIZE, 10 * 1024 * 1024, 'CAIRN_MAX_FILE_SIZE'),
    maxBodySize: positive(int(env.CAIRN_MAX_BODY_SIZE, 8 * 1024 * 1024, 'CAIRN_MAX_BODY_SIZE'), 'CAIRN_MAX_BODY_SIZE'),
    maxLoginAttempts: int(env.CAIRN_MAX_LOGIN_ATTEMPTS, 10, 'CAIRN_MAX_LOGIN_ATTEMPTS'),
    loginLockMinutes: positive(int(env.CAIRN_LOGIN_LOCK_MINUTES, 10, 'CAIRN_LOGIN_LOCK_MINUTES'), 'CAIRN_LOGIN_LOCK_MINUTES'),
    failedAuthMaxRetry: int(env.CAIRN_FAILED_AUTH_MAX_RETRY, 30, 'CAIRN_FAILED_AUTH_MAX_RETRY'),
    failedAuthFindTime: positive(int(env.CAIRN_FAILED_AUTH_FIND_TIME, 180, 'CAIRN_FAILED_AUTH_FIND_TIME'), 'CAIRN_FAILED_AUTH_FIND_TIME'),
    failedAuthBanTime: positive(int(env.CAIRN_FAILED_AUTH_BAN_TIME, 3600, 'CAIRN_FAILED_AUTH_BAN_TIME'), 'CAIRN_FAILED_AUTH_BAN_TIME'),
    protectedPathsLimit: int(env.CAIRN_PROTECTED_PATHS_LIMIT, 10, 'CAIRN_PROTECTED_PATHS_LIMIT'),
    protectedPathsPeriod: positive(int(env.CAIRN_PROTECTED_PATHS_PERIOD, 60, 'CAIRN_PROTECTED_PATHS_PERIOD'), 'CAIRN_PROTECTED_PATHS_PERIOD'),
    oauthTokenRateLimit: int(env.CAIRN_OAUTH_TOKEN_RATE_LIMIT, 60, 'CAIRN_OAUTH_TOKEN_RATE_LIMIT'),
    oauthAccessTokenTtl: int(env.CAIRN_OAUTH_TOKEN_TTL, 7200, 'CAIRN_OAUTH_TOKEN_TTL'),
    trustedProxies: (env.CAIRN_TRUSTED_PROXIES ?? '127.0.0.1,::1').split(',').map((s) => s.trim()).filter(Boolean),
    logLevel: env.CAIRN_LOG_LEVEL || 'info',
    gitPasswordAuthentication: !/^(0|false|no|off)$/i.test(env.CAIRN_GIT_PASSWORD_AUTH ?? ''),
    cache: !/^(0|false|no|off)$/i.test(env.CAIRN_CACHE ?? ''),
    validateResponses: /^(1|true|yes|on)$/i.test(env.CAIRN_VALIDATE_RESPONSES ?? (env.NODE_ENV === 'test' ? '1' : '')),
    runnerPollTimeout: int(env.CAIRN_RUNNER_POLL_TIMEOUT, 50, 'CAIRN_RUNNER_POLL_TIMEOUT'),
    maxTraceSize: positive(int(env.CAIRN_MAX_TRACE_SIZE, 100 * 1024 * 1024, 'CAIRN_MAX_TRACE_SIZE'), 'CAIRN_MAX_TRACE_SIZE'),
    maxArtifactsSize: positive(int(env.CAIRN_MAX_ARTIFACTS_SIZE, 100 * 1024 * 1024, 'CAIRN_MAX_ARTIFACTS_SIZE'), 'CAIRN_MAX_ARTIFACTS_SIZE'),
    defaultArtifactsExpireIn: int(env.CAIRN_ARTIFACTS_EXPIRE_IN, 30 * 24 * 3600, 'CAIRN_ARTIFACTS_EXPIRE_IN'),
    smtpUrl: smtpUrl(env.CAIRN_SMTP_URL),
    mailFrom: env.CAIRN_MAIL_FROM || `Cairn <cairn@${mailHost(externalUrl)}>`,
    monitoringAllowlist: (env.CAIRN_MONITORING_ALLOWLIST ?? '127.0.0.0/8,::1/128').split(',').map((s) => s.trim()).filter(Boolean),
    objectStoreUrl: env.CAIRN_OBJECT_STORE_URL || null,
  };
  return { ...cfg, ...overrides };
}
