import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findToken, findTokens, type TokenFilters } from '../../finders/tokens.js';
import { findUserById } from '../../finders/users.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, apiError, badRequest, methodNotAllowed, notFound, unauthorized, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import {
  presentImpersonationToken,
  presentImpersonationTokenWithToken,
  presentPersonalAccessToken,
  presentPersonalAccessTokenWithToken,
} from '../../presenters/tokens.js';
import {
  dateAfterDays,
  fullMessages,
  insertPersonalAccessToken,
  MAX_TOKEN_LIFETIME_DAYS,
  PAT_SCOPES,
  revokeToken,
  rotateToken,
  tokenValidationErrors,
} from '../../services/tokens.js';
import {
  CreateImpersonationTokenBody,
  CreateTokenBody,
  dateParam,
  ImpersonationListQuery,
  ImpersonationTokenParams,
  RotateBody,
  scopeList,
  tokenFilters,
  TokenListQuery,
} from './schemas.js';
import { RowIdParams, UserIdParams } from '../params.js';
import { NoContent, route } from '../route.js';
import {
  ImpersonationTokenSchema,
  ImpersonationTokenWithTokenSchema,
  PersonalAccessTokenSchema,
  PersonalAccessTokenWithTokenSchema,
} from '../../presenters/schemas/tokens.js';

/** Scopes a user may give a token they create for themselves through the API. */
const SELF_SERVICE_SCOPES = ['k8s_proxy', 'self_rotate'];

/** The token that authenticated this request, for the /self endpoints. */
async function currentToken(request: FastifyRequest) {
  const actor = request.actor;
  if (!actor) throw unauthorized();
  if ((actor.kind !== 'personal_access_token' && actor.kind !== 'impersonation_token') || !actor.tokenId) return null;
  return (await findToken(request.server.cairn.db, actor.tokenId)) ?? null;
}

async function rotate(request: FastifyRequest, tokenId: number, expiresAtRaw: string | undefined) {
  const expiresAt = dateParam('expires_at', expiresAtRaw) ?? null;
  const max = dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
  if (expiresAt && expiresAt > max) throw badRequest(`Expires at must be before ${max}`);
  const result = await rotateToken(request.server.cairn.db, tokenId, expiresAt);
  if (!result.row) throw badRequest(result.error ?? 'Token not found');
  return { row: result.row, token: result.token };
}

/**
 * May this user read, rotate or revoke this token through /personal_access_tokens/:id? Their own
 * personal tokens, or any as an administrator. Impersonation tokens belong to administrators
 * even though they name the user: the user may not see or touch them.
 */
function managesToken(user: { id: number; admin: boolean }, token: { user_id: number; impersonation: boolean }): boolean {
  return user.admin || (token.user_id === user.id && !token.impersonation);
}

async function targetUser(request: FastifyRequest, userId: number) {
  const user = await findUserById(request.server.cairn.db, userId);
  if (!user) throw notFound('User');
  return user;
}

export default async function personalAccessTokenRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  // The caller's own tokens (administrators: anyone's); the handlers look the token up for the caller.
  const signedIn = { signedIn: true } as const;
  const admin = { admin: true } as const;

  app.get('/api/v4/personal_access_tokens', route({ matrix: 'signedIn',
    access: signedIn,
    paginated: true,
    schema: { querystring: TokenListQuery, response: { 200: Type.Array(PersonalAccessTokenSchema) } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const q = request.query;
    const filters: TokenFilters = tokenFilters(q);
    if (user.admin) {
      if (q.user_id !== undefined) {
        if (q.user_id === '') throw notFound();
        filters.userId = (await targetUser(request, q.user_id)).id;
      }
    } else {
      // GitLab answers 401 when a non-administrator asks for someone else's tokens.
      if (q.user_id !== undefined && q.user_id !== '' && q.user_id !== user.id) throw unauthorized();
      filters.userId = user.id;
      filters.impersonation = false;
    }
    const page = pageParams(request);
    const { rows, total } = await findTokens(db(), filters, page);
    setPaginationHeaders(request, reply, page, total);
    return rows.map(presentPersonalAccessToken);
  });

  // Any token may read and revoke itself, whatever its scopes.
  app.get('/api/v4/personal_access_tokens/self', route({ matrix: 'signedIn',
    access: signedIn,
    config: { allowScopes: 'any' },
    schema: { response: { 200: PersonalAccessTokenSchema } },
  }), async (request) => {
    const token = await currentToken(request);
    if (!token) throw badRequest('This endpoint requires token type to be a personal access token');
    return presentPersonalAccessToken(token);
  });

  app.delete('/api/v4/personal_access_tokens/self', route({ matrix: { is: 'signedIn', fresh: ['token'] },
    access: signedIn,
    config: { allowScopes: 'any' },
    schema: { response: { 204: NoContent } },
  }), async (request, reply) => {
    const token = await currentToken(request);
    if (!token) throw badRequest('This endpoint requires token type to be a personal access token');
    await revokeToken(db(), token.id);
    return reply.code(204).send();
  });

  app.post(
    '/api/v4/personal_access_tokens/self/rotate',
    route({ matrix: { is: 'signedIn', fresh: ['token'] },
      access: signedIn,
      config: { allowScopes: ['self_rotate'] },
      schema: { body: RotateBody, response: { 200: PersonalAccessTokenWithTokenSchema } },
    }),
    async (request) => {
      const token = await currentToken(request);
      if (!token) throw methodNotAllowed();
      const { row, token: plain } = await rotate(request, token.id, request.body.expires_at);
      return presentPersonalAccessTokenWithToken(row, plain);
    },
  );

  app.get('/api/v4/personal_access_tokens/:id', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { params: RowIdParams, response: { 200: PersonalAccessTokenSchema } },
  }), async (request) => {
    const user = requireUser(request);
    const token = await findToken(db(), request.params.id);
    if (token && managesToken(user, token)) return presentPersonalAccessToken(token);
    // Only administrators learn whether a token exists.
    throw user.admin ? notFound() : unauthorized();
  });

  app.post(
    '/api/v4/personal_access_tokens/:id/rotate',
    route({ matrix: { is: 'signedIn', fresh: ['id'] },
      access: signedIn,
      schema: { params: RowIdParams, body: RotateBody, response: { 200: PersonalAccessTokenWithTokenSchema } },
    }),
    async (request) => {
      const user = requireUser(request);
      const token = await findToken(db(), request.params.id);
      if (!token || !managesToken(user, token)) throw user.admin ? notFound() : unauthorized();
      const { row, token: plain } = await rotate(request, token.id, request.body.expires_at);
      return presentPersonalAccessTokenWithToken(row, plain);
    },
  );

  app.delete('/api/v4/personal_access_tokens/:id', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { params: RowIdParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const token = await findToken(db(), request.params.id);
    if (!token) throw notFound();
    if (!managesToken(user, token)) throw badRequest('Not permitted to revoke');
    await revokeToken(db(), token.id);
    return reply.code(204).send();
  });

  app.post(
    '/api/v4/users/:user_id/personal_access_tokens',
    route({ matrix: 'admin',
      access: admin,
      schema: { params: UserIdParams, body: CreateTokenBody, response: { 201: PersonalAccessTokenWithTokenSchema } },
    }),
    async (request, reply) => {
      const target = await targetUser(request, request.params.user_id);
      const body = request.body;
      const scopes = scopeList(body.scopes);
      if (!scopes.every((s) => (PAT_SCOPES as readonly string[]).includes(s))) throw new ApiError(400, { error: 'scopes does not have a valid value' });
      const expiresAt = dateParam('expires_at', body.expires_at) ?? dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
      const errors = tokenValidationErrors({ name: body.name, scopes, expiresAt });
      if (Object.keys(errors).length) throw apiError(422, fullMessages(errors));
      const { row, token } = await insertPersonalAccessToken(db(), {
        userId: target.id, name: body.name, description: body.description ?? null, scopes, expiresAt,
      });
      return reply.code(201).send(presentPersonalAccessTokenWithToken(row, token));
    },
  );

  app.post('/api/v4/user/personal_access_tokens', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { body: CreateTokenBody, response: { 201: PersonalAccessTokenWithTokenSchema } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const body = request.body;
    const scopes = scopeList(body.scopes);
    if (!scopes.every((s) => SELF_SERVICE_SCOPES.includes(s))) throw new ApiError(400, { error: 'scopes does not have a valid value' });
    const expiresAt = dateParam('expires_at', body.expires_at) ?? dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
    const errors = tokenValidationErrors({ name: body.name, scopes, expiresAt });
    if (Object.keys(errors).length) throw apiError(422, fullMessages(errors));
    const { row, token } = await insertPersonalAccessToken(db(), {
      userId: user.id, name: body.name, description: body.description ?? null, scopes, expiresAt,
    });
    return reply.code(201).send(presentPersonalAccessTokenWithToken(row, token));
  });

  // Impersonation tokens: administrators act as a user through them; the user never sees them.
  app.get(
    '/api/v4/users/:user_id/impersonation_tokens',
    route({ matrix: 'admin',
      access: admin,
      paginated: true,
      schema: { params: UserIdParams, querystring: ImpersonationListQuery, response: { 200: Type.Array(ImpersonationTokenSchema) } },
    }),
    async (request, reply) => {
      const target = await targetUser(request, request.params.user_id);
      const page = pageParams(request);
      const { rows, total } = await findTokens(db(), { userId: target.id, impersonation: true, state: request.query.state ?? 'all' }, page);
      setPaginationHeaders(request, reply, page, total);
      return rows.map(presentImpersonationToken);
    },
  );

  app.post(
    '/api/v4/users/:user_id/impersonation_tokens',
    route({ matrix: 'admin',
      access: admin,
      schema: { params: UserIdParams, body: CreateImpersonationTokenBody, response: { 201: ImpersonationTokenWithTokenSchema } },
    }),
    async (request, reply) => {
      const target = await targetUser(request, request.params.user_id);
      const body = request.body;
      const scopes = scopeList(body.scopes);
      const expiresAt = dateParam('expires_at', body.expires_at) ?? dateAfterDays(MAX_TOKEN_LIFETIME_DAYS);
      const errors = tokenValidationErrors({ name: body.name, scopes, expiresAt });
      if (Object.keys(errors).length) throw validationFailed(errors);
      const { row, token } = await insertPersonalAccessToken(db(), {
        userId: target.id, name: body.name, description: body.description ?? null, scopes, expiresAt, impersonation: true,
      });
      return reply.code(201).send(presentImpersonationTokenWithToken(row, token));
    },
  );

  const findImpersonationToken = async (request: FastifyRequest, userId: number, tokenId: number) => {
    const target = await targetUser(request, userId);
    const token = await findToken(db(), tokenId);
    if (!token || token.user_id !== target.id || !token.impersonation) throw notFound('Impersonation Token');
    return token;
  };

  app.get(
    '/api/v4/users/:user_id/impersonation_tokens/:impersonation_token_id',
    route({ matrix: 'admin',  access: admin, schema: { params: ImpersonationTokenParams, response: { 200: ImpersonationTokenSchema } } }),
    async (request) => presentImpersonationToken(await findImpersonationToken(request, request.params.user_id, request.params.impersonation_token_id)),
  );

  app.delete(
    '/api/v4/users/:user_id/impersonation_tokens/:impersonation_token_id',
    route({ matrix: 'admin',  access: admin, schema: { params: ImpersonationTokenParams, response: { 204: NoContent } } }),
    async (request, reply) => {
      const token = await findImpersonationToken(request, request.params.user_id, request.params.impersonation_token_id);
      await revokeToken(db(), token.id);
      return reply.code(204).send();
    },
  );
}
