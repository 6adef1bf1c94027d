import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findResourceToken, findResourceTokens } from '../../finders/tokens.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, badRequest, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentResourceAccessToken, presentResourceAccessTokenWithToken } from '../../presenters/tokens.js';
import { ResourceAccessTokenSchema, ResourceAccessTokenWithTokenSchema } from '../../presenters/schemas/tokens.js';
import {
  createResourceAccessToken,
  RESOURCE_TOKEN_LEVELS,
  RESOURCE_TOKEN_SCOPES,
  resourceRef,
  revokeResourceAccessToken,
  rotateResourceAccessToken,
} from '../../services/resource_access_tokens.js';
import { dateAfterDays, MAX_TOKEN_LIFETIME_DAYS } from '../../services/tokens.js';
import { rowId } from '../../lib/ids.js';
import { sourceAccess, sourceOf, type SourceKind } from '../members/params.js';
import { dateParam, RotateBody, scopeList, StringList, TokenFilterFields, tokenFilters } from '../personal_access_tokens/schemas.js';
import { IdParams } from '../params.js';
import { NoContent, route } from '../route.js';

const Str = Type.String();

const TokenParams = Type.Object({ id: Str, token_id: Str });

/** GET .../access_tokens: GitLab's PersonalAccessTokensFinder filters over the resource's bots. */
const ListQuery = Type.Object({
  ...TokenFilterFields,
  sort: Type.Optional(Type.Union(['created_asc', 'created_desc', 'expires_asc', 'expires_desc', 'last_used_asc', 'last_used_desc', 'name_asc', 'name_desc'].map((s) => Type.Literal(s)))),
});

const CreateBody = Type.Object({
  name: Str,
  scopes: StringList,
  description: Type.Optional(Type.Union([Str, Type.Null()])),
  expires_at: Type.Optional(Type.Union([Str, Type.Null()])),
  access_level: Type.Optional(Type.Union([Type.Integer(), Str])),
});

const KINDS: SourceKind[] = ['projects', 'groups'];
const kindWord = (kind: SourceKind) => (kind === 'projects' ? 'project' : 'group');

/** `:token_id`: GitLab looks it up among the resource's bots' tokens; anything else is not there. */
function tokenIdOf(value: string): number | undefined {
  return rowId(value);
}

function accessLevelParam(v: number | string | undefined): number {
  if (v === undefined || v === '') return 40;
  const n = typeof v === 'number' ? v : /^\d+$/.test(v) ? Number(v) : NaN;
  if (!(RESOURCE_TOKEN_LEVELS as readonly number[]).includes(n)) throw new ApiError(400, { error: 'access_level does not have a valid value' });
  return n;
}

function hostOf(request: FastifyRequest): string {
  try {
    return new URL(request.server.cairn.config.externalUrl).hostname.replace(/^\[|\]$/g, '') || 'localhost';
  } catch {
    return 'localhost';
  }
}

export default async function resourceAccessTokenRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;

  for (const kind of KINDS) {
    const base = `/api/v4/${kind}/:id/access_tokens`;
    // Project maintainers, group owners (and administrators).
    const access = sourceAccess(kind, 'manage_resource_access_tokens', 'manage_resource_access_tokens');
    const role = kind === 'projects' ? 'maintainer' : 'owner';
    const notFoundToken = (id: string) => notFound(`Could not find ${kindWord(kind)} access token with token_id: ${id}`);

    app.get(base, route({ matrix: role,
      access,
      paginated: true,
      schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(ResourceAccessTokenSchema) } },
    }), async (request, reply) => {
      const { source } = sourceOf(request, kind);
      const q = request.query;
      const page = pageParams(request);
      const { rows, total } = await findResourceTokens(db(), resourceRef(source), tokenFilters(q), page);
      setPaginationHeaders(request, reply, page, total);
      return rows.map(presentResourceAccessToken);
    });

    app.get(`${base}/:token_id`, route({ matrix: role,
      access,
      schema: { params: TokenParams, response: { 200: ResourceAccessTokenSchema } },
    }), async (request) => {
      const { source } = sourceOf(request, kind);
      const id = tokenIdOf(request.params.token_id);
      const token = id === undefined ? undefined : await findResourceToken(db(), resourceRef(source), id);
      if (!token) throw notFoundToken(request.params.token_id);
      return presentResourceAccessToken(token);
    });

    app.post(base, route({ matrix: role,
      access,
      schema: { params: IdParams, body: CreateBody, response: { 201: ResourceAccessTokenWithTokenSchema } },
    }), async (request, reply) => {
      const { source, level } = sourceOf(request, kind);
      const user = requireUser(request);
      const body = request.body;
      const scopes = scopeList(body.scopes);
      if (!scopes.every((s) => (RESOURCE_TOKEN_SCOPES as readonly string[]).includes(s))) throw new ApiError(400, { error: 'scopes does not have a valid value' });
      const accessLevel = accessLevelParam(body.access_level);
      // GitLab's default: the longest lifetime a token may have.
      const expiresAt = dateParam('expires_at', body.expires_at) ?? dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
      const { row, token } = await createResourceAccessToken(
        db(),
        { source, creator: user, creatorLevel: user.admin ? 50 : level, host: hostOf(request) },
        { name: body.name, scopes, description: body.description ?? null, accessLevel, expiresAt },
      );
      return reply.code(201).send(presentResourceAccessTokenWithToken(row, token));
    });

    app.post(`${base}/:token_id/rotate`, route({ matrix: { is: role, fresh: ['token_id'] },
      access,
      schema: { params: TokenParams, body: RotateBody, response: { 200: ResourceAccessTokenWithTokenSchema } },
    }), async (request) => {
      const { source, level } = sourceOf(request, kind);
      const user = requireUser(request);
      const ref = resourceRef(source);
      const id = tokenIdOf(request.params.token_id);
      const token = id === undefined ? undefined : await findResourceToken(db(), ref, id);
      // As GitLab: only administrators learn that a token does not exist.
      if (!token) throw user.admin ? notFound() : unauthorized();
      const expiresAt = dateParam('expires_at', request.body?.expires_at) ?? null;
      const max = dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
      if (expiresAt && expiresAt > max) throw badRequest(`Expires at must be before ${max}`);
      const rotated = await rotateResourceAccessToken(db(), ref, token, user.admin ? 50 : level, expiresAt);
      return presentResourceAccessTokenWithToken(rotated.row, rotated.token);
    });

    app.delete(`${base}/:token_id`, route({ matrix: role,
      access,
      schema: { params: TokenParams, response: { 204: NoContent } },
    }), async (request, reply) => {
      const { source } = sourceOf(request, kind);
      const id = tokenIdOf(request.params.token_id);
      const token = id === undefined ? undefined : await findResourceToken(db(), resourceRef(source), id);
      if (!token) throw notFoundToken(request.params.token_id);
      await revokeResourceAccessToken(db(), token);
      return reply.code(204).send();
    });
  }
}
