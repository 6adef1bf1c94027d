import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { User } from '../../db/schema/core.js';
import {
  findDeployKeyLinks,
  findKeyByFingerprint,
  findKeyById,
  findUserKey,
  findUserKeys,
} from '../../finders/keys.js';
import { findUserById, findUserByIdOrUsername, findUsersByIds } from '../../finders/users.js';
import { requireUser } from '../../plugins/auth.js';
import { apiError, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentDeployKeyWithUser, presentSshKey, presentSshKeyWithUser } from '../../presenters/keys.js';
import { deleteKey, insertUserKey } from '../../services/keys.js';
import { timestampParam } from '../params.js';
import {
  CreateKeyBody,
  FingerprintQuery,
  KeyIdParams,
  UserIdKeyParams,
  UserKeyParams,
  UserParams,
} from './schemas.js';
import { RowIdParams, UserIdParams } from '../params.js';
import { NoContent, route } from '../route.js';
import { DeployKeyWithUserSchema, SshKeySchema, SshKeyWithUserSchema } from '../../presenters/schemas/keys.js';

type CreateKey = { title: string; key: string; expires_at?: string | null; usage_type?: 'auth' | 'signing' | 'auth_and_signing' };

/**
 * Reads `fingerprint` as GitLab does: "SHA256:<base64>" (any case of the prefix) or MD5 colon hex.
 * A '+' sent unencoded arrives as a space; base64 has no spaces, so it is put back.
 */
function parseFingerprint(raw: string): { kind: 'md5' | 'sha256'; value: string } | null {
  const v = raw.trim();
  const m = /^sha256:(.*)$/i.exec(v);
  if (m) {
    const b64 = m[1].replace(/ /g, '+').replace(/=+$/, '');
    if (!/^[A-Za-z0-9+/]+$/.test(b64) || Buffer.from(b64, 'base64').length !== 32) return null;
    return { kind: 'sha256', value: `SHA256:${b64}` };
  }
  if (!/^([0-9a-f]{2}:){15}[0-9a-f]{2}$/i.test(v)) return null;
  return { kind: 'md5', value: v.toLowerCase() };
}

export default async function keyRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  const ctx = () => ({ baseUrl: app.cairn.config.externalUrl });
  const signedIn = { signedIn: true } as const;
  const admin = { admin: true } as const;
  const readUser = { readUser: true };

  async function createKey(owner: User, body: CreateKey) {
    const result = await insertUserKey(db(), owner.id, {
      title: body.title,
      key: body.key,
      expiresAt: timestampParam('expires_at', body.expires_at ?? undefined) ?? null,
      usageType: body.usage_type,
    });
    if (!result.key) throw validationFailed(result.errors);
    return presentSshKey(ctx(), result.key, owner);
  }

  async function visibleUser(idOrUsername: string) {
    const user = await findUserByIdOrUsername(db(), idOrUsername);
    if (!user) throw notFound('User');
    return user;
  }

  // The caller's own keys.
  app.get('/api/v4/user/keys', route({ matrix: 'signedIn',
    access: signedIn,
    paginated: true,
    config: readUser,
    schema: { response: { 200: Type.Array(SshKeySchema) } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const page = pageParams(request);
    const { rows, total } = await findUserKeys(db(), user.id, page);
    setPaginationHeaders(request, reply, page, total);
    return rows.map((k) => presentSshKey(ctx(), k, user));
  });

  app.get('/api/v4/user/keys/:key_id', route({ matrix: 'signedIn',
    access: signedIn,
    config: readUser,
    schema: { params: KeyIdParams, response: { 200: SshKeySchema } },
  }), async (request) => {
    const user = requireUser(request);
    const key = await findUserKey(db(), user.id, request.params.key_id);
    if (!key) throw notFound('Key');
    return presentSshKey(ctx(), key, user);
  });

  app.post('/api/v4/user/keys', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { body: CreateKeyBody, response: { 201: SshKeySchema } },
  }), async (request, reply) => {
    const user = requireUser(request);
    return reply.code(201).send(await createKey(user, request.body));
  });

  app.delete('/api/v4/user/keys/:key_id', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { params: KeyIdParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const key = await findUserKey(db(), user.id, request.params.key_id);
    if (!key) throw notFound('Key');
    await deleteKey(db(), key.id);
    return reply.code(204).send();
  });

  // Anyone's public keys, by id or username (GitLab serves these without authentication).
  app.get('/api/v4/users/:user_id/keys', route({ matrix: 'public',
    access: { public: true },
    paginated: true,
    config: readUser,
    schema: { params: UserParams, response: { 200: Type.Array(SshKeySchema) } },
  }), async (request, reply) => {
    const user = await visibleUser(request.params.user_id);
    const page = pageParams(request);
    const { rows, total } = await findUserKeys(db(), user.id, page);
    setPaginationHeaders(request, reply, page, total);
    return rows.map((k) => presentSshKey(ctx(), k, user));
  });

  app.get('/api/v4/users/:user_id/keys/:key_id', route({ matrix: 'public',
    access: { public: true },
    config: readUser,
    schema: { params: UserKeyParams, response: { 200: SshKeySchema } },
  }), async (request) => {
    const user = await visibleUser(request.params.user_id);
    const key = await findUserKey(db(), user.id, request.params.key_id);
    if (!key) throw notFound('Key');
    return presentSshKey(ctx(), key, user);
  });

  app.post('/api/v4/users/:user_id/keys', route({ matrix: 'admin',
    access: admin,
    schema: { params: UserIdParams, body: CreateKeyBody, response: { 201: SshKeySchema } },
  }), async (request, reply) => {
    const user = await findUserById(db(), request.params.user_id);
    if (!user) throw notFound('User');
    return reply.code(201).send(await createKey(user, request.body));
  });

  app.delete('/api/v4/users/:user_id/keys/:key_id', route({ matrix: 'admin',
    access: admin,
    schema: { params: UserIdKeyParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const user = await findUserById(db(), request.params.user_id);
    if (!user) throw notFound('User');
    const key = await findUserKey(db(), user.id, request.params.key_id);
    if (!key) throw notFound('Key');
    await deleteKey(db(), key.id);
    return reply.code(204).send();
  });

  // Key lookup for administrators (e.g. an SSH front end resolving a presented key).
  app.get('/api/v4/keys/:id', route({ matrix: 'admin',
    access: admin,
    schema: { params: RowIdParams, response: { 200: SshKeyWithUserSchema } },
  }), async (request) => {
    const key = await findKeyById(db(), request.params.id);
    if (!key) throw notFound();
    const owner = key.user_id ? ((await findUserById(db(), key.user_id)) ?? null) : null;
    return presentSshKeyWithUser(ctx(), key, owner);
  });

  app.get('/api/v4/keys', route({ matrix: 'admin',
    access: admin,
    // A deploy key also says where it is used.
    schema: { querystring: FingerprintQuery, response: { 200: Type.Union([SshKeyWithUserSchema, DeployKeyWithUserSchema]) } },
  }), async (request) => {
    const fp = parseFingerprint(request.query.fingerprint);
    if (!fp) throw apiError(400, 'Failed to return the key');
    const key = await findKeyByFingerprint(db(), fp.kind, fp.value);
    if (!key) throw notFound('Key');
    const owners = await findUsersByIds(db(), key.user_id ? [key.user_id] : []);
    const owner = (key.user_id && owners.get(key.user_id)) || null;
    if (key.type === 'DeployKey') return presentDeployKeyWithUser(ctx(), key, owner, await findDeployKeyLinks(db(), [key.id]));
    return presentSshKeyWithUser(ctx(), key, owner);
  });
}
