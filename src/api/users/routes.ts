import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Static } from 'typebox';
import type { User } from '../../db/schema/core.js';
import {
  findCustomAttribute, findCustomAttributes, findFollowUsers, findUserById, findUserByIdOrUsername, findUsers, findUserStatus,
  loadUserExtras, type UserExtras, type UserListParams,
} from '../../finders/users.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, forbidden, invalidParam, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import {
  presentCustomAttribute, presentUserAdmin, presentUserBasic, presentUserSelf, presentUserSingle, presentUserStatus,
  withCustomAttributes, type PresentContext,
} from '../../presenters/users.js';
import { deleteUser } from '../../services/user-deletion.js';
import {
  activateUser, approveUser, banUser, blockUser, deactivateUser, rejectUser, unbanUser, unblockUser,
} from '../../services/user-moderation.js';
import {
  deleteCustomAttribute, followUser, keepStatusExpiry, setCustomAttribute, setUserStatus, unfollowUser,
} from '../../services/user-profile.js';
import { createUserByAdmin, deleteIdentity, updateUserByAdmin, type CreateUserInput } from '../../services/users.js';
import {
  CreateUserBody, CustomAttributeParams, DeleteUserQuery, ListUsersQuery, SetCustomAttributeBody, SetStatusBody,
  UpdateUserBody, WithCustomAttributesQuery,
} from './schemas.js';
import { IdParams } from '../params.js';

const ctxOf = (req: FastifyRequest): PresentContext => ({ baseUrl: req.server.cairn.config.externalUrl, viewer: req.actor?.user ?? null });

function parseTime(name: string, value: string | undefined): Date | undefined {
  if (value === undefined || value === '') return undefined;
  const d = new Date(value);
  if (Number.isNaN(d.getTime()) || d.getUTCFullYear() < 1 || d.getUTCFullYear() > 9999) throw invalidParam(name);
  return d;
}

/** The admin form with everything it shows, from preloaded extras. */
function adminForm(ctx: PresentContext, u: User, x: UserExtras) {
  return presentUserAdmin(ctx, u, x.identities.get(u.id) ?? [], counts(u, x), x.namespaceIds.get(u.id) ?? null);
}

function counts(u: User, x: UserExtras) {
  return { followers: x.followers.get(u.id) ?? 0, following: x.following.get(u.id) ?? 0, isFollowed: x.followedByViewer.has(u.id) };
}

async function userOr404(req: FastifyRequest, id: string): Promise<User> {
  const user = await findUserById(req.server.cairn.db, id);
  if (!user) throw notFound('User');
  return user;
}

/** Grape's `requires`/`at_least_one_of`/`all_or_none_of` messages for POST /users, in declaration order. */
function checkCreateParams(body: Static<typeof CreateUserBody>) {
  const problems: string[] = [];
  const given = (k: keyof typeof body) => body[k] !== undefined && body[k] !== null;
  if (!given('email')) problems.push('email is missing');
  if (!given('password') && !given('reset_password') && !given('force_random_password')) {
    problems.push('password, reset_password, force_random_password are missing, at least one parameter must be provided');
  }
  if (!given('name')) problems.push('name is missing');
  if (!given('username')) problems.push('username is missing');
  if (given('extern_uid') !== given('provider')) problems.push('extern_uid, provider provide all or none of parameters');
  if (problems.length) throw new ApiError(400, { error: problems.join(', ') });
  if (!body.password && !body.reset_password && !body.force_random_password) {
    throw new ApiError(400, { message: { password: ["can't be blank"] } });
  }
}

/** A private profile's followers and followees are for the user and administrators. */
function canReadProfile(viewer: User, user: User) {
  return !user.private_profile || viewer.admin || viewer.id === user.id;
}

export default async function userRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const readUser = { readUser: true };
  const admin = { admin: true };

  app.get('/api/v4/users', { config: readUser, schema: { querystring: ListUsersQuery } }, async (req, reply) => {
    const q = req.query;
    const viewer = req.actor?.user ?? null;
    if (q.extern_uid && q.provider) {
      if (!viewer) throw unauthorized();
      if (!viewer.admin) throw forbidden();
    }
    if (!viewer && !q.username) throw forbidden('Not authorized to access /api/v4/users');
    const custom = q.custom_attributes;
    const params: UserListParams = {
      ...q,
      created_before: parseTime('created_before', q.created_before),
      created_after: parseTime('created_after', q.created_after),
      custom_attributes: custom && typeof custom === 'object' && !Array.isArray(custom) ? (custom as Record<string, string>) : undefined,
    };
    return sendCachedPage(req, reply, async (headers) => {
      const page = pageParams(req);
      const { rows, total } = await findUsers(req.server.cairn.db, viewer, params, page);
      setPaginationHeaders(req, headers, page, total);
      const ctx = ctxOf(req);
      const withAttrs = !!(q.with_custom_attributes && viewer?.admin);
      if (!viewer?.admin) return { body: rows.map((u) => presentUserBasic(ctx, u)) };
      const extras = await loadUserExtras(req.server.cairn.db, rows.map((u) => u.id), { viewerId: viewer.id, customAttributes: withAttrs });
      return {
        body: rows.map((u) => {
          const form = adminForm(ctx, u, extras);
          return withAttrs ? withCustomAttributes(form, extras.customAttributes.get(u.id) ?? []) : form;
        }),
      };
    });
  });

  app.get('/api/v4/users/:id', { config: readUser, schema: { params: IdParams, querystring: WithCustomAttributesQuery } }, async (req) => {
    const viewer = req.actor?.user;
    if (!viewer) throw forbidden('Not authorized!');
    const user = await userOr404(req, req.params.id);
    const withAttrs = !!(req.query.with_custom_attributes && viewer.admin);
    const extras = await loadUserExtras(req.server.cairn.db, [user.id], { viewerId: viewer.id, customAttributes: withAttrs });
    const ctx = ctxOf(req);
    const form = viewer.admin ? adminForm(ctx, user, extras) : presentUserSingle(ctx, user, counts(user, extras));
    return withAttrs ? withCustomAttributes(form, extras.customAttributes.get(user.id) ?? []) : form;
  });

  app.get('/api/v4/users/:id/status', { config: readUser, schema: { params: IdParams } }, async (req) => {
    const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
    if (!user) throw notFound('User');
    return presentUserStatus(await findUserStatus(req.server.cairn.db, user.id));
  });

  for (const direction of ['followers', 'following'] as const) {
    app.get(`/api/v4/users/:id/${direction}`, { config: readUser, schema: { params: IdParams } }, async (req, reply) => {
      const viewer = req.actor?.user;
      if (!viewer) throw forbidden('Not authorized!');
      const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
      if (!user || !canReadProfile(viewer, user)) throw notFound('User');
      const page = pageParams(req);
      const { rows, total } = await findFollowUsers(req.server.cairn.db, user.id, direction, page);
      setPaginationHeaders(req, reply, page, total);
      const ctx = ctxOf(req);
      return rows.map((u) => presentUserBasic(ctx, u));
    });
  }

  app.post('/api/v4/users/:id/follow', { config: { auth: 'required' }, schema: { params: IdParams } }, async (req, reply) => {
    const viewer = requireUser(req);
    const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
    if (!user) throw notFound('User');
    if ((await followUser(req.server.cairn.db, viewer, user)) === 'unchanged') return reply.code(304).send();
    return reply.code(201).send(presentUserBasic(ctxOf(req), user));
  });

  app.post('/api/v4/users/:id/unfollow', { config: { auth: 'required' }, schema: { params: IdParams } }, async (req, reply) => {
    const viewer = requireUser(req);
    const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
    if (!user) throw notFound('User');
    if (!(await unfollowUser(req.server.cairn.db, viewer, user))) return reply.code(304).send();
    return reply.code(201).send(presentUserBasic(ctxOf(req), user));
  });

  app.post('/api/v4/users', { config: admin, schema: { body: CreateUserBody } }, async (req, reply) => {
    checkCreateParams(req.body);
    const user = await createUserByAdmin(req.server.cairn.db, req.body as CreateUserInput);
    const extras = await loadUserExtras(req.server.cairn.db, [user.id], { viewerId: requireUser(req).id });
    return reply.code(201).send(adminForm(ctxOf(req), user, extras));
  });

  app.put('/api/v4/users/:id', { config: admin, schema: { params: IdParams, body: UpdateUserBody } }, async (req) => {
    const user = await userOr404(req, req.params.id);
    if ((req.body.extern_uid !== undefined) !== (req.body.provider !== undefined)) {
      throw new ApiError(400, { error: 'extern_uid, provider provide all or none of parameters' });
    }
    const updated = await updateUserByAdmin(req.server.cairn.db, requireUser(req), user, req.body);
    const extras = await loadUserExtras(req.server.cairn.db, [user.id], { viewerId: requireUser(req).id });
    return adminForm(ctxOf(req), updated, extras);
  });

  app.delete('/api/v4/users/:id', { config: admin, schema: { params: IdParams, querystring: DeleteUserQuery } }, async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    await deleteUser(req.server.cairn, user, { hardDelete: !!req.query.hard_delete });
    return reply.code(204).send();
  });

  app.delete('/api/v4/users/:id/identities/:provider', { config: admin }, async (req, reply) => {
    const { id, provider } = req.params as { id: string; provider: string };
    const user = await userOr404(req, id);
    if (!(await deleteIdentity(req.server.cairn.db, user.id, provider))) throw notFound('Identity');
    return reply.code(204).send();
  });

  // Custom attributes (administrators only).
  app.get('/api/v4/users/:id/custom_attributes', { config: { ...admin, ...readUser }, schema: { params: IdParams } }, async (req) => {
    const user = await userOr404(req, req.params.id);
    return (await findCustomAttributes(req.server.cairn.db, user.id)).map(presentCustomAttribute);
  });
  app.get('/api/v4/users/:id/custom_attributes/:key', { config: { ...admin, ...readUser }, schema: { params: CustomAttributeParams } }, async (req) => {
    const user = await userOr404(req, req.params.id);
    const attr = await findCustomAttribute(req.server.cairn.db, user.id, req.params.key);
    if (!attr) throw notFound('Custom Attribute');
    return presentCustomAttribute(attr);
  });
  app.put('/api/v4/users/:id/custom_attributes/:key', { config: admin, schema: { params: CustomAttributeParams, body: SetCustomAttributeBody } }, async (req) => {
    const user = await userOr404(req, req.params.id);
    return presentCustomAttribute(await setCustomAttribute(req.server.cairn.db, user.id, req.params.key, req.body.value));
  });
  app.delete('/api/v4/users/:id/custom_attributes/:key', { config: admin, schema: { params: CustomAttributeParams } }, async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    if (!(await deleteCustomAttribute(req.server.cairn.db, user.id, req.params.key))) throw notFound('Custom Attribute');
    return reply.code(204).send();
  });

  // Moderation: each answers 201 with GitLab's body (true, false, null or a message).
  const moderation: Record<string, (req: FastifyRequest, user: User) => Promise<unknown>> = {
    block: (req, user) => blockUser(req.server.cairn.db, requireUser(req), user),
    unblock: (req, user) => unblockUser(req.server.cairn.db, user),
    activate: (req, user) => activateUser(req.server.cairn.db, user),
    deactivate: (req, user) => deactivateUser(req.server.cairn.db, user),
    ban: (req, user) => banUser(req.server.cairn.db, user),
    unban: (req, user) => unbanUser(req.server.cairn.db, user),
  };
  for (const [action, run] of Object.entries(moderation)) {
    app.post(`/api/v4/users/:id/${action}`, { config: admin, schema: { params: IdParams } }, async (req, reply) => {
      const user = await userOr404(req, req.params.id);
      const result = await run(req, user);
      return reply.code(201).type('application/json').send(JSON.stringify(result));
    });
  }
  app.post('/api/v4/users/:id/approve', { config: { auth: 'required' }, schema: { params: IdParams } }, async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    return reply.code(201).send(await approveUser(req.server.cairn.db, requireUser(req), user));
  });
  app.post('/api/v4/users/:id/reject', { config: { auth: 'required' }, schema: { params: IdParams } }, async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    return reply.code(200).send(await rejectUser(req.server.cairn, requireUser(req), user));
  });

  // The current user.
  app.get('/api/v4/user', { config: { auth: 'required', ...readUser } }, async (req) => {
    const viewer = requireUser(req);
    const extras = await loadUserExtras(req.server.cairn.db, [viewer.id]);
    const ctx = ctxOf(req);
    return viewer.admin ? adminForm(ctx, viewer, extras) : presentUserSelf(ctx, viewer, extras.identities.get(viewer.id) ?? [], counts(viewer, extras));
  });

  app.get('/api/v4/user/status', { config: { auth: 'required', ...readUser } }, async (req) => {
    return presentUserStatus(await findUserStatus(req.server.cairn.db, requireUser(req).id));
  });

  app.put('/api/v4/user/status', { config: { auth: 'required' }, schema: { body: SetStatusBody } }, async (req) => {
    const status = await setUserStatus(req.server.cairn.db, requireUser(req), req.body);
    return presentUserStatus(status);
  });

  // PATCH keeps what is not given; with nothing given it changes nothing.
  app.patch('/api/v4/user/status', { config: { auth: 'required' }, schema: { body: SetStatusBody } }, async (req) => {
    const user = requireUser(req);
    const db = req.server.cairn.db;
    const given = Object.fromEntries(Object.entries(req.body).filter(([k, v]) => v !== undefined && k in SetStatusBody.properties));
    const current = await findUserStatus(db, user.id);
    if (Object.keys(given).length === 0) return presentUserStatus(current);
    const live = presentUserStatus(current);
    const status = await setUserStatus(db, user, {
      emoji: live.emoji,
      message: live.message,
      availability: live.availability,
      clear_status_after: undefined,
      ...given,
    });
    if (status && !('clear_status_after' in given) && live.clear_status_at) {
      return presentUserStatus(await keepStatusExpiry(db, user, live.clear_status_at));
    }
    return presentUserStatus(status);
  });
}
