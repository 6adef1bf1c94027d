import type { FastifyContextConfig, FastifyRequest, FastifySchema } from 'fastify';
import { Type, type TSchema } from 'typebox';
import type { GroupAbility, ProjectAbility } from '../policies/abilities.js';
import { assertRepositoryWritable } from '../policies/code.js';
import type { GroupAccess } from '../policies/groups.js';
import { authorizeGroup } from '../finders/authorize.js';
import type { ProjectAccess } from '../policies/projects.js';
import { authorizeProject } from '../finders/authorize.js';
import { PaginationQuery } from '../plugins/pagination.js';
import type { Matrix } from './permissions.js';
import { acquireWriteLease, readOnlyError, releaseWriteLease } from '../services/repository_writes.js';

/**
 * The one way a route is declared. Every route says who may call it (`access`) and what it
 * answers (`schema.response`); the guard below runs the declared check before the handler, so a
 * handler is: finder or service -> presenter. `test/api/route_table.test.ts` refuses a route that
 * declares neither, and `app.routeTable` lists them all (for the permission matrix and OpenAPI).
 *
 *   app.get('/api/v4/projects/:id/things', route({
 *     access: { project: 'read_project' },
 *     paginated: true,
 *     schema: { params: IdParams, response: { 200: Type.Array(ThingSchema) } },
 *   }), async (request, reply) => {
 *     const { project } = projectOf(request);
 *     ...
 *   });
 */
export type Access =
  /** Anyone, anonymous callers too (what the handler shows may still depend on who asks). */
  | { public: true }
  /** A signed-in caller (401 otherwise); what they may do is the handler's finder's business (their own records). */
  | { signedIn: true }
  /** Administrators only: 401 without a credential, 403 for others. */
  | { admin: true }
  /**
   * The project in `:id` (or `param`), loaded for the caller: 404 when they may not see it, 403
   * without the ability. `writable` also refuses archived and read-only (moving) repositories.
   * `signedIn` answers 401 to anonymous callers before the project is looked at.
   * `writable` and `writesRepository` hold a write lease while the handler runs (a storage move
   * waits for it; none is granted while the repository moves: 403 read-only); `writesRepository`
   * leaves every other refusal to the handler and takes no lease for anonymous callers.
   */
  | { project: ProjectAbility; param?: string; writable?: boolean; signedIn?: boolean; writesRepository?: boolean }
  /** The group in `:id` (or `param`), likewise. */
  | { group: GroupAbility; param?: string; signedIn?: boolean }
  /**
   * The handler decides with `can()` (a subject that is a project or a group, a token that must
   * be the caller's own...). The text says what it checks, for whoever reads the route table.
   */
  | { custom: string; signedIn?: boolean; admin?: boolean };

/** A response whose body is not JSON (raw file bytes, an archive, a git pack, an HTML page). */
export const RawBody = (contentType: string) => Type.Unsafe<unknown>({ description: `raw body (${contentType})`, 'x-raw': contentType });
/** An empty answer (204). */
export const NoContent = Type.Null({ description: 'no content' });

interface RouteSpec<S extends FastifySchema> {
  access: Access;
  /**
   * The answer each kind of caller gets (src/api/permissions.ts: a preset such as 'read',
   * 'developer', 'admin', with per-cell overrides), checked by the permission matrix test.
   */
  matrix: Matrix;
  /** TypeBox input schemas and, required, the response schema of each success status. */
  schema: S & { response: Record<number, TSchema> };
  /** Offset pagination: `page` and `per_page` are accepted (see plugins/pagination.ts). */
  paginated?: boolean;
  /** Further route configuration (readUser, allowScopes, skipApiAuth, bodyLimit...). */
  config?: Omit<FastifyContextConfig, 'auth' | 'admin' | 'access'>;
  bodyLimit?: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Who may call the route; set by route(). */
    access?: Access;
    /** The route's permission matrix declaration (api/permissions.ts). */
    matrix?: Matrix;
    paginated?: boolean;
  }
  interface FastifyRequest {
    /** The project a `{ project }` route loaded for the caller. */
    projectAccess?: ProjectAccess;
    /** The group a `{ group }` route loaded for the caller. */
    groupAccess?: GroupAccess;
    /** The write lease a `writable` route holds until its answer is sent (services/repository_writes.ts). */
    writeLease?: number | null;
  }
}

function pathParam(request: FastifyRequest, name: string): string {
  const value = (request.params as Record<string, unknown>)[name];
  return String(value ?? '');
}

/**
 * Route options from a declaration. The response schemas stay out of the handler's types (the
 * presenters' return types are the check there); at run time Fastify has them, and the
 * serializer validates every answer against them when responses are checked (tests).
 */
export function route<S extends FastifySchema>(spec: RouteSpec<S>) {
  const { access } = spec;
  const schema: FastifySchema = { ...spec.schema };
  if (spec.paginated) {
    const qs = (schema.querystring ?? Type.Object({})) as any;
    schema.querystring = Type.Object({ ...PaginationQuery, ...(qs.properties ?? {}) }, qs.additionalProperties === false ? { additionalProperties: false } : {});
  }
  const config: FastifyContextConfig = { ...spec.config, access, matrix: spec.matrix, paginated: !!spec.paginated };
  if ('signedIn' in access && access.signedIn) config.auth = 'required';
  if ('admin' in access && access.admin) config.admin = true;

  let preHandler: ((request: FastifyRequest) => Promise<void>) | undefined;
  if ('project' in access) {
    preHandler = async (request) => {
      const loaded = await authorizeProject(request, pathParam(request, access.param ?? 'id'), access.project);
      if (access.writable || (access.writesRepository && request.actor)) {
        if (access.writable) assertRepositoryWritable(loaded.project);
        // Held until the answer is sent, so a storage move waits for this write; the storage it
        // reports is where the repository is now, whatever the (cached) row said.
        const lease = await acquireWriteLease(request.server.cairn.db, { type: 'Project', id: loaded.project.id });
        if (!lease) throw readOnlyError();
        request.writeLease = lease.id;
        request.projectAccess = { ...loaded, project: { ...loaded.project, repository_storage: lease.storage } };
        return;
      }
      request.projectAccess = loaded;
    };
  } else if ('group' in access) {
    preHandler = async (request) => {
      request.groupAccess = await authorizeGroup(request, pathParam(request, access.param ?? 'id'), access.group);
    };
  }
  const releaseLease = async (request: FastifyRequest) => {
    const lease = request.writeLease;
    if (lease === undefined || lease === null) return;
    request.writeLease = null;
    await releaseWriteLease(request.server.cairn.db, lease).catch(() => {});
  };
  const leaseHooks =
    'project' in access && (access.writable || access.writesRepository)
      ? {
          // onSend runs once the handler has answered (also with an error); onResponse is the fallback.
          onSend: async (request: FastifyRequest, _reply: unknown, payload: unknown) => {
            await releaseLease(request);
            return payload;
          },
          onResponse: async (request: FastifyRequest) => releaseLease(request),
        }
      : {};
  return {
    ...leaseHooks,
    schema: schema as Omit<S, 'response'>,
    config,
    ...(spec.bodyLimit !== undefined ? { bodyLimit: spec.bodyLimit } : {}),
    // Before the input is validated, as GitLab: an outsider learns nothing from a 400.
    ...(preHandler ? { preValidation: preHandler } : {}),
  };
}

/** The project the route's guard loaded (routes declared with `{ project }`). */
export function projectOf(request: FastifyRequest): ProjectAccess {
  if (!request.projectAccess) throw new Error(`${request.routeOptions.url}: no project access declared`);
  return request.projectAccess;
}

/** The group the route's guard loaded (routes declared with `{ group }`). */
export function groupOf(request: FastifyRequest): GroupAccess {
  if (!request.groupAccess) throw new Error(`${request.routeOptions.url}: no group access declared`);
  return request.groupAccess;
}
