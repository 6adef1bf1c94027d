import type { Config } from './config.js';
import type { Database } from './db/index.js';
import type { User } from './db/schema/core.js';
import type { ArchiveCache } from './git/archive.js';
import type { CatFilePool } from './git/catfile.js';
import type { SharedCache } from './cache/shared_cache.js';
import type { NotificationHub } from './db/notifications.js';

/** How a request proved who it is. */
export type CredentialKind = 'personal_access_token' | 'impersonation_token' | 'oauth' | 'job_token' | 'session';

export interface Credential {
  kind: CredentialKind;
  user: User;
  scopes: string[];
  /** Row id of the token (personal access token, OAuth token, job). */
  tokenId?: number;
  /** Extra facts a resolver knows (e.g. the job id of a job token, the OAuth application). */
  meta?: Record<string, unknown>;
}

export interface Actor extends Credential {
  /** The user whose credential was used; differs from `user` under sudo. */
  authUser: User;
  sudo: boolean;
}

/** Where a token was found: PRIVATE-TOKEN, Authorization: Bearer / access_token, JOB-TOKEN / job_token. */
export type TokenChannel = 'private' | 'bearer' | 'job';

/**
 * Turns a raw token into a credential. Personal access tokens register one; OAuth and
 * CI job tokens plug theirs into the same list. Returning null means "not mine".
 */
export interface TokenResolver {
  channels: TokenChannel[];
  resolve(cairn: Cairn, token: string): Promise<Credential | null>;
}

export interface PostReceiveEvent {
  projectId: number;
  userId: number | null;
  /** One entry per updated ref: old and new object ids (zeros for create/delete). */
  changes: { ref: string; oldSha: string; newSha: string }[];
  /** `git push -o` values (`ci.skip`, `ci.variable=...`); empty for writes through the API. */
  pushOptions: string[];
  /**
   * Set when the event is replayed after a crash (services/post_receive.ts): some hooks may have
   * run for it already, so hooks that create things (pipelines) skip what exists.
   */
  resumed?: boolean;
}

/** Everything a request handler may reach; one per Cairn process, holding no state other processes could disagree with. */
export interface Cairn {
  config: Config;
  db: Database;
  dbKind: 'postgres' | 'pglite';
  tokenResolvers: TokenResolver[];
  /** Long-lived git object readers, shared by every request of this process. */
  catfile: CatFilePool;
  /** Generated repository archives kept on disk (shared with every process using the same data directory). */
  archives: ArchiveCache;
  /** Hot reads kept in memory and dropped on every write to the tables behind them (src/cache/). */
  cache: SharedCache;
  /** The process's one LISTEN connection; what waits for another process subscribes to a channel on it. */
  notifications: NotificationHub;
  /** Called after a push has updated refs (CI subscribes here). */
  postReceiveHooks: ((event: PostReceiveEvent) => Promise<void>)[];
  /** Closed when the app closes (git process pools, workers). */
  closers: (() => Promise<void>)[];
  /**
   * Set when the process starts to stop: readiness fails (load balancers take it out) while it
   * still serves for CAIRN_SHUTDOWN_BLACKOUT, answering with `Connection: close` (src/server.ts).
   */
  draining: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    cairn: Cairn;
  }
  interface FastifyRequest {
    actor: Actor | null;
    /** The cache's generation when the request arrived (SharedCache LoadOptions.since). */
    cacheGeneration: number;
  }
  interface FastifyContextConfig {
    /** 'required': 401 without a credential. Default: optional (public reads). */
    auth?: 'required' | 'optional';
    /** Only administrators (403 for others). */
    admin?: boolean;
    /** A read_user token may call this route (GET only). */
    readUser?: boolean;
    /** Skip the API token handling entirely (git HTTP, OAuth and HTML pages do their own). */
    skipApiAuth?: boolean;
    /** Token scopes accepted here besides api/read_api ('any': every scope, e.g. a token reading itself). */
    allowScopes?: string[] | 'any';
    /** A CI job token (JOB-TOKEN, job_token, Bearer) authenticates here; elsewhere it is refused (401). */
    jobToken?: boolean;
  }
}
