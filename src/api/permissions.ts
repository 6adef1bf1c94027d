/**
 * The permission matrix: who gets what answer from each route, declared beside the route
 * (`route({ matrix, ... })`) and checked by test/reliability/permission_matrix.test.ts, which
 * calls every route of `app.routeTable` as each column below. The rules of the presets are
 * GitLab's and live in this file only:
 *
 * - Private things are 404 to whoever may not see them; a forbidden action on something the
 *   caller sees is 403; a route that needs a signed-in caller answers 401 to anonymous ones.
 * - Blocked users' credentials are refused (401) everywhere the API reads credentials.
 * - Scopes (GitLab's): `api` does everything; `read_api` only reads (GET); `read_user` only the
 *   user endpoints that say so (`config.readUser`); `read_repository` / `write_repository`,
 *   `sudo` and `admin_mode` alone give no API access; a refused scope is 403 insufficient_scope,
 *   decided before anything else. A CI job token is accepted only where `config.jobToken` says
 *   so (401 elsewhere). Routes with their own credential (`config.skipApiAuth`: git over HTTP,
 *   OAuth, sign-in pages, the runner protocol) never look at an API token.
 *
 * An allowed cell means "not 401/403/404 and not 5xx" (a 400 for an empty body is fine: the
 * route checks permissions before it validates its input); a denied cell names its status.
 */

/** Caller kinds, from least to most privileged (the order the matrix calls them in). */
export const USER_COLUMNS = ['anonymous', 'blocked', 'external', 'nonmember', 'guest', 'reporter', 'developer', 'maintainer', 'owner', 'admin'] as const;
export type UserColumn = (typeof USER_COLUMNS)[number];

/**
 * Token columns: a credential of `user` limited to `scopes` (`kind` personal access token,
 * OAuth access token, or the CI_JOB_TOKEN of a running job of the project, started by `user`).
 */
export interface TokenColumn {
  name: string;
  user: 'maintainer' | 'admin' | 'developer';
  kind: 'pat' | 'oauth' | 'job';
  scopes: string[];
}

/** The token columns of every run (the short form: the credentials refused on most routes). */
export const TOKEN_COLUMNS: TokenColumn[] = [
  { name: 'pat:read_user', user: 'maintainer', kind: 'pat', scopes: ['read_user'] },
  { name: 'pat:read_repository', user: 'maintainer', kind: 'pat', scopes: ['read_repository'] },
  { name: 'pat:write_repository', user: 'maintainer', kind: 'pat', scopes: ['write_repository'] },
  { name: 'pat:sudo', user: 'maintainer', kind: 'pat', scopes: ['sudo'] },
  { name: 'pat:admin_mode', user: 'maintainer', kind: 'pat', scopes: ['admin_mode'] },
  { name: 'job', user: 'developer', kind: 'job', scopes: ['api'] },
];

/** More token columns for the long form (credentials that act as their user on many routes). */
export const MORE_TOKEN_COLUMNS: TokenColumn[] = [
  { name: 'pat:read_api', user: 'maintainer', kind: 'pat', scopes: ['read_api'] },
  { name: 'oauth:api', user: 'maintainer', kind: 'oauth', scopes: ['api'] },
  { name: 'oauth:read_api', user: 'maintainer', kind: 'oauth', scopes: ['read_api'] },
  { name: 'oauth:read_user', user: 'maintainer', kind: 'oauth', scopes: ['read_user'] },
  { name: 'oauth:openid', user: 'maintainer', kind: 'oauth', scopes: ['openid', 'profile', 'email'] },
  { name: 'admin:read_api', user: 'admin', kind: 'pat', scopes: ['read_api'] },
  { name: 'admin:api+sudo', user: 'admin', kind: 'pat', scopes: ['api', 'sudo'] },
  { name: 'admin:admin_mode', user: 'admin', kind: 'pat', scopes: ['admin_mode'] },
  { name: 'pat:read_api+read_user', user: 'maintainer', kind: 'pat', scopes: ['read_api', 'read_user'] },
];

/** What a cell expects: allowed ('ok') or one exact refusal. */
export type Expect = 'ok' | 400 | 401 | 403 | 404 | 409 | 422;

export type Role = 'guest' | 'reporter' | 'developer' | 'maintainer' | 'owner';
const ROLE_LEVEL: Record<Role, number> = { guest: 10, reporter: 20, developer: 30, maintainer: 40, owner: 50 };
const COLUMN_LEVEL: Partial<Record<UserColumn, number>> = { guest: 10, reporter: 20, developer: 30, maintainer: 40, owner: 50, admin: 100 };

/**
 * The presets. For a project or group route (the private one of the matrix, or the public and
 * internal ones of the long form), the world decides who sees it: a private one its members and
 * administrators, an internal one every signed-in user but external ones, a public one everyone;
 * who does not see it gets 404. Then:
 * - 'read': whoever sees it (a private one: its members).
 * - 'readCode': whoever sees it, but on a private project only reporters and up (code, merge
 *   requests, pipelines and jobs: GitLab's guests of private projects do not see them).
 * - 'contribute': signed-in callers who see it (issues, comments, emoji, stars; a private one: its members).
 * - a role: members of at least that role (admins always; others who see it 403, or `refused`).
 * For the rest:
 * - 'public': everyone (anonymous callers too).
 * - 'signedIn': any signed-in caller (their own records; a `self` param is the caller's own).
 * - 'admin': administrators (401 anonymous, 403 others).
 * - 'git:read' / 'git:write': git over HTTP (HTTP Basic credentials: fetch / push).
 * - { own }: a route with its own credential (a runner token, a session cookie, a Sentry key):
 *   API credentials are not looked at, every column gets `own`.
 */
export type Preset = 'read' | 'readCode' | 'contribute' | Role | 'public' | 'signedIn' | 'admin' | 'git:read' | 'git:write';

export interface MatrixSpec {
  is?: Preset;
  /**
   * Who may see the thing the route acts on, where that is not everyone who sees the project or
   * group: callers this preset refuses get its answer, those it lets in but `is` does not get
   * `refused` (e.g. merging: `{ is: 'developer', reads: 'readCode', refused: 401 }`; removing an
   * award: `{ is: 'admin', reads: 'contribute' }`, only its author and administrators may).
   */
  reads?: Preset;
  /**
   * What a signed-in caller who sees the project or group (and the thing, see `reads`) but lacks
   * the role of `is` gets, in every world: 403 unless GitLab answers otherwise there (400 where
   * it calls bad_request!, 401 unauthorized!, 404 where membership itself is the condition).
   */
  refused?: Expect;
  own?: Expect;
  /** Cells that differ from the preset (every world). */
  cells?: Partial<Record<string, Expect>>;
  /** Cells that differ in a world of the long form only. */
  worlds?: Partial<Record<WorldName, Partial<Record<string, Expect>>>>;
  /**
   * Params the test must create anew for each allowed call (the route consumes or changes them
   * for good: a deletion, an archive, a transfer), or 'token' for a fresh credential of the caller.
   */
  fresh?: string[];
  /** What a job token of the project (started by a developer) gets where `config.jobToken` accepts it. */
  job?: Expect;
}

/** A route's declaration: a preset name, or a spec with overrides. */
export type Matrix = Preset | MatrixSpec;

export type WorldName = 'private' | 'internal' | 'public';

export interface RouteFacts {
  method: string;
  access: unknown;
  matrix: Matrix | undefined;
  config?: { skipApiAuth?: boolean; readUser?: boolean; allowScopes?: string[] | 'any'; jobToken?: boolean };
}

export function specOf(matrix: Matrix): MatrixSpec {
  return typeof matrix === 'string' ? { is: matrix } : matrix;
}

/** The columns of a run. */
export function columnsOf(long: boolean): string[] {
  return [...USER_COLUMNS, ...TOKEN_COLUMNS.map((c) => c.name), ...(long ? MORE_TOKEN_COLUMNS.map((c) => c.name) : [])];
}

export function tokenColumn(name: string): TokenColumn | undefined {
  return [...TOKEN_COLUMNS, ...MORE_TOKEN_COLUMNS].find((c) => c.name === name);
}

/** Does a credential with these scopes get past the scope check of this route? */
export function scopeAllows(route: RouteFacts, scopes: string[]): boolean {
  if (scopes.includes('api')) return true;
  const allowed = route.config?.allowScopes;
  if (allowed === 'any' || (Array.isArray(allowed) && allowed.some((s) => scopes.includes(s)))) return true;
  const reading = route.method === 'GET' || route.method === 'HEAD';
  if (reading && scopes.includes('read_api')) return true;
  if (reading && route.config?.readUser && scopes.includes('read_user')) return true;
  return false;
}

function signedInRoute(access: any): boolean {
  return !!(access && (access.signedIn || access.admin));
}

/** The expected answer of one cell. */
export function expectedCell(route: RouteFacts, column: string, world: WorldName = 'private'): Expect {
  if (!route.matrix) throw new Error('no matrix declared');
  const spec = specOf(route.matrix);
  const override = spec.worlds?.[world]?.[column] ?? spec.cells?.[column];
  if (override !== undefined) return override;
  const token = tokenColumn(column);
  if (token?.kind === 'job' && route.config?.jobToken) return spec.job ?? 'ok';
  // The scope check comes first wherever the API reads the credential.
  if (token && token.kind !== 'job' && !route.config?.skipApiAuth && !scopeAllows(route, token.scopes)) return 403;
  if (spec.own !== undefined) return spec.own;

  if (token) {
    const preset = spec.is!;
    if (preset === 'git:read' || preset === 'git:write') return gitCell(preset, token.user, world, token);
    if (route.config?.skipApiAuth) return expectedCell(route, 'anonymous', world);
    if (token.kind === 'job') return 401;
    if (!scopeAllows(route, token.scopes)) return 403;
    return expectedCell(route, token.user, world);
  }
  return userCell(route, spec, column as UserColumn, world);
}

function userCell(route: RouteFacts, spec: MatrixSpec, column: UserColumn, world: WorldName): Expect {
  const preset = spec.is!;
  const access = route.access as any;
  if (preset === 'git:read' || preset === 'git:write') return gitCell(preset, column, world);
  if (route.config?.skipApiAuth) column = 'anonymous';
  const anonymous = column === 'anonymous';
  if (anonymous && signedInRoute(access)) return 401;
  if (column === 'blocked') return 401;
  if (spec.reads) {
    // First whether the caller sees the thing, then whether they may do this to it.
    const reads = userCell(route, { is: spec.reads }, column, world);
    if (reads !== 'ok') return reads;
    const allowed = preset === 'admin' ? column === 'admin' : userCell(route, { is: preset }, column, world) === 'ok';
    if (allowed) return 'ok';
    return anonymous && route.method !== 'GET' ? 401 : (spec.refused ?? 403);
  }
  switch (preset) {
    case 'public':
      return 'ok';
    case 'signedIn':
      return anonymous ? 401 : 'ok';
    case 'admin':
      return anonymous ? 401 : column === 'admin' ? 'ok' : 403;
  }
  // A project or group of the world.
  const level = COLUMN_LEVEL[column] ?? 0;
  const sees = level > 0 || world === 'public' || (world === 'internal' && !anonymous && column !== 'external');
  if (!sees) return 404;
  let needed: number | 'anyone' | 'signedIn';
  if (preset === 'read') needed = world === 'private' ? ROLE_LEVEL.guest : 'anyone';
  else if (preset === 'readCode') needed = world === 'private' ? ROLE_LEVEL.reporter : 'anyone';
  else if (preset === 'contribute') needed = world === 'private' ? ROLE_LEVEL.guest : 'signedIn';
  else needed = ROLE_LEVEL[preset as Role];
  if (needed === 'anyone') return 'ok';
  if (needed === 'signedIn') return anonymous ? 401 : 'ok';
  if (level >= needed) return 'ok';
  return anonymous && route.method !== 'GET' ? 401 : (spec.refused ?? 403);
}

/**
 * Git over HTTP (GitLab's GitAccess): anonymous callers get 401 (git then asks for a
 * credential) where one could help; a user who cannot see the project 404; one who sees it
 * but may not fetch or push, or whose token's scopes do not allow it, 403.
 */
function gitCell(preset: 'git:read' | 'git:write', column: string, world: WorldName, token?: TokenColumn): Expect {
  if (token?.kind === 'job') {
    // A job token fetches the repository of its own project (as its user); it never pushes.
    return preset === 'git:read' ? 'ok' : 403;
  }
  const user = column as UserColumn;
  if (user === 'anonymous') return preset === 'git:read' && world === 'public' ? 'ok' : 401;
  if (user === 'blocked') return 401;
  const level = COLUMN_LEVEL[user] ?? 0;
  const sees = level > 0 || world === 'public' || (world === 'internal' && user !== 'external');
  if (!sees) return 404;
  if (token) {
    const scopes = token.scopes;
    const download = scopes.some((s) => s === 'api' || s === 'read_repository' || s === 'write_repository');
    const push = scopes.some((s) => s === 'api' || s === 'write_repository');
    if (preset === 'git:read' && !download) return 403;
    if (preset === 'git:write' && !push) return 403;
  }
  if (preset === 'git:read') return world === 'private' && level < ROLE_LEVEL.reporter ? 403 : 'ok';
  return level >= ROLE_LEVEL.developer ? 'ok' : 403;
}

/** Abilities whose subject shows the repository: a private project's guests do not get them. */
const CODE_ABILITIES = new Set(['download_code', 'read_commit_note', 'create_commit_note', 'read_merge_request', 'read_build', 'read_pipeline']);

/** The read preset of a route guarded by a read ability (routes registered per kind of thing). */
export function readPreset(ability: string): Preset {
  return CODE_ABILITIES.has(ability) ? 'readCode' : 'read';
}

/** The preset of a route where whoever reads the thing may add to it (comments, emoji). */
export function contributePreset(ability: string): Preset {
  return CODE_ABILITIES.has(ability) ? 'readCode' : 'contribute';
}
