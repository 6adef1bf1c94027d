import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Namespace, Project, User } from '../../src/db/schema/core.js';
import { usePasswordHashParams } from '../../src/lib/secrets.js';
import { insertGroup } from '../../src/services/groups.js';
import { insertProject } from '../../src/services/projects.js';
import { personalNamespaceOf } from '../../src/services/users.js';
import { insertPersonalAccessToken } from '../../src/services/tokens.js';
import { insertUser } from '../../src/services/users.js';
import { openTestDatabase } from './database.js';

export const ROOT_TOKEN = 'root-test-token-0123456789';

export interface TestUser {
  user: User;
  token: string;
  password: string;
}

export interface CallOptions {
  token?: string | null;
  query?: Record<string, unknown>;
  body?: unknown;
  /** Send the body as application/x-www-form-urlencoded (a string, already encoded). */
  form?: string;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  body: any;
  text: string;
  headers: Record<string, any>;
}

/** One app on a fresh database, for one test file. */
export class TestContext {
  private seq = 0;
  constructor(
    readonly app: App,
    readonly config: Config,
    readonly databaseUrl: string | null,
    readonly tmpDir: string,
    private readonly dropDb: () => Promise<void>,
  ) {}

  get db() {
    return this.app.cairn.db;
  }

  unique(prefix = 'u'): string {
    return `${prefix}${process.pid.toString(36)}${(++this.seq).toString(36)}`;
  }

  /** An HTTP call through app.inject; `token` defaults to root's. */
  async call(method: string, url: string, opts: CallOptions = {}): Promise<CallResult> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const token = opts.token === undefined ? ROOT_TOKEN : opts.token;
    if (token) headers['private-token'] = token;
    let payload: string | undefined;
    if (opts.form !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      payload = opts.form;
    } else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(opts.body);
    }
    const res = await this.app.inject({ method: method as any, url, headers, payload, query: opts.query as any });
    let body: any = res.body;
    if (String(res.headers['content-type'] ?? '').startsWith('application/json') && res.body) {
      try {
        body = JSON.parse(res.body);
      } catch {}
    }
    return { status: res.statusCode, body, text: res.body, headers: res.headers };
  }

  get = (url: string, opts?: CallOptions) => this.call('GET', url, opts);
  post = (url: string, body?: unknown, opts?: CallOptions) => this.call('POST', url, { ...opts, body: body ?? {} });
  put = (url: string, body?: unknown, opts?: CallOptions) => this.call('PUT', url, { ...opts, body: body ?? {} });
  delete = (url: string, opts?: CallOptions) => this.call('DELETE', url, opts);

  /** A user with a personal access token (scope api unless given). */
  async createUser(attrs: Partial<User> & { scopes?: string[]; expiresAt?: string | null } = {}): Promise<TestUser> {
    const { scopes, expiresAt, ...rest } = attrs;
    const username = rest.username ?? this.unique('user');
    const password = 'Pa55w0rd-' + username;
    const user = await insertUser(this.db, {
      name: rest.name ?? `User ${username}`,
      email: rest.email ?? `${username}@example.com`,
      confirmed_at: new Date(),
      ...rest,
      username,
      password,
    });
    const { token } = await insertPersonalAccessToken(this.db, {
      userId: user.id,
      name: 'test',
      scopes: scopes ?? ['api'],
      expiresAt: expiresAt ?? null,
    });
    return { user, token, password };
  }

  /** A group; `owner` (if given) becomes an Owner member. */
  async createGroup(attrs: { path?: string; name?: string; parent?: Namespace; visibility?: number; owner?: User } = {}): Promise<Namespace> {
    const path = attrs.path ?? this.unique('group');
    const group = await insertGroup(this.app.cairn, { name: attrs.name ?? path, path, parent: attrs.parent, visibility_level: attrs.visibility ?? 0 });
    if (attrs.owner) await this.addMember(group, attrs.owner, 50);
    return group;
  }

  /** A project with an empty bare repository, in a group or in `owner`'s personal namespace (root's by default). */
  async createProject(attrs: { path?: string; name?: string; group?: Namespace; owner?: User; visibility?: number; defaultBranch?: string } = {}): Promise<Project> {
    const path = attrs.path ?? this.unique('project');
    let namespace = attrs.group;
    if (!namespace) {
      const ownerId = attrs.owner?.id ?? (await this.db.selectFrom('users').select('id').where('username', '=', 'root').executeTakeFirstOrThrow()).id;
      namespace = (await personalNamespaceOf(this.db, ownerId))!;
    }
    return insertProject(this.app.cairn, {
      name: attrs.name ?? path,
      path,
      namespace_id: namespace.id,
      creator_id: attrs.owner?.id ?? null,
      visibility_level: attrs.visibility ?? 0,
      default_branch: attrs.defaultBranch ?? 'main',
    });
  }

  async addMember(source: Namespace | Project, user: User, accessLevel: number, extra: { expires_at?: string | null } = {}) {
    const sourceType = 'traversal_ids' in source ? 'Namespace' : 'Project';
    await this.db
      .insertInto('members')
      .values({ source_type: sourceType, source_id: source.id, user_id: user.id, access_level: accessLevel, expires_at: extra.expires_at ?? null })
      .execute();
  }

  async close() {
    await this.app.close();
    await this.dropDb();
    fs.rmSync(this.tmpDir, { recursive: true, force: true });
  }
}

/**
 * Password hashes of test users: scrypt at a lower cost (N=2^10, about 1 ms) than production's
 * (N=2^15, about 90 ms of CPU), as Devise's stretches are 1 under Rails' test environment. The
 * suite hashes over a thousand passwords; test/api/password_hashes.test.ts checks the real cost.
 */
export const TEST_PASSWORD_HASH_PARAMS = { N: 1024, r: 8, p: 1 };

export async function createTestContext(overrides: Partial<Config> = {}, setup?: (app: App) => void | Promise<void>): Promise<TestContext> {
  usePasswordHashParams(TEST_PASSWORD_HASH_PARAMS);
  const { database, databaseUrl, drop } = await openTestDatabase();
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-test-'));
  const config = loadConfig(
    { CAIRN_DATA_DIR: tmpDir, CAIRN_ROOT_TOKEN: ROOT_TOKEN, CAIRN_ROOT_PASSWORD: 'root-password-123' },
    // Sign-in and token endpoint throttles off unless a test sets them (many sign-ins come from one
    // address here); a storage move's cleanup runs in the same drainJobs as the move.
    { databaseUrl, logLevel: 'silent', validateResponses: true, protectedPathsLimit: 0, oauthTokenRateLimit: 0, storageMoveCleanupDelay: 0, ...overrides },
  );
  const app = await buildApp({ config, database, logger: process.env.TEST_LOG ? { level: "error" } : false });
  await setup?.(app);
  await app.ready();
  return new TestContext(app, config, databaseUrl, tmpDir, drop);
}
