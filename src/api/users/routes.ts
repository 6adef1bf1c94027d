import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static, type TSchema } from 'typebox';
import type { User } from '../../db/schema/core.js';
import {
  findCustomAttribute, findCustomAttributes, findFollowUsers, findUserById, findUserByIdOrUsername, findUsers, findUserStatus,
  loadUserExtras, type UserExtras, type UserListParams,
} from '../../finders/users.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, forbidden, notFound, unauthorized } from '../../plugins/errors.js';
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
  CreateUserBody, CustomAttributeParams, DeleteUserQuery, IdentityParams, ListUsersQuery, SetCustomAttributeBody, SetStatusBody,
  UpdateUserBody, WithCustomAttributesQuery,
} from './schemas.js';
import { IdParams, timestampParam } from '../params.js';
import { capList } from '../list_filters.js';
import { NoContent, route } from '../route.js';
import {
  CustomAttributeSchema, UserActionMessageSchema, UserAdminSchema, UserAdminWithCustomAttributesSchema, UserBasicSchema,
  UserSelfSchema, UserSingleSchema, UserStateChangedOrNotSchema, UserStateChangedOrSkippedSchema, UserStateChangedSchema,
  UserStatusSchema,
} from '../../presenters/schemas/users.js';

const ctxOf = (req: FastifyRequest): PresentContext => ({ baseUrl: req.server.cairn.config.externalUrl, viewer: req.actor?.user ?? null });

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
  const admin = { admin: true } as const;
  const signedIn = { signedIn: true } as const;
  /** GitLab answers anonymous callers 403 "Not authorized!" here (not 401), so the handler checks. */
  const signedInOr403 = { custom: 'signed-in callers; anonymous ones get 403 Not authorized!' } as const;
  /** The form of one user depends on who asks: administrators see the admin form. */
  const OneUser = Type.Union([UserSingleSchema, UserAdminSchema, UserAdminWithCustomAttributesSchema]);

  app.get('/api/v4/users', route({ matrix: { is: 'public', cells: { anonymous: 403 } },
    // Anonymous callers may only look a user up by username (the handler answers 403 otherwise);
    // extern_uid/provider lookups are for administrators.
    access: { public: true },
    paginated: true,
    config: readUser,
    schema: {
      querystring: ListUsersQuery,
      response: { 200: Type.Union([Type.Array(UserBasicSchema), Type.Array(UserAdminSchema), Type.Array(UserAdminWithCustomAttributesSchema)]) },
    },
  }), async (req, reply) => {
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
      created_before: timestampParam('created_before', q.created_before),
      created_after: timestampParam('created_after', q.created_after),
      custom_attributes: custom && typeof custom === 'object' && !Array.isArray(custom)
        ? Object.fromEntries(capList(Object.entries(custom as Record<string, string>), 'custom_attributes'))
        : undefined,
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

  app.get('/api/v4/users/:id', route({ matrix: { is: 'signedIn', cells: { anonymous: 403 } },
    access: signedInOr403,
    config: readUser,
    schema: { params: IdParams, querystring: WithCustomAttributesQuery, response: { 200: OneUser } },
  }), async (req) => {
    const viewer = req.actor?.user;
    if (!viewer) throw forbidden('Not authorized!');
    const user = await userOr404(req, req.params.id);
    const withAttrs = !!(req.query.with_custom_attributes && viewer.admin);
    const extras = await loadUserExtras(req.server.cairn.db, [user.id], { viewerId: viewer.id, customAttributes: withAttrs });
    const ctx = ctxOf(req);
    const form = viewer.admin ? adminForm(ctx, user, extras) : presentUserSingle(ctx, user, counts(user, extras));
    return withAttrs ? withCustomAttributes(form, extras.customAttributes.get(user.id) ?? []) : form;
  });

  app.get('/api/v4/users/:id/status', route({ matrix: 'public',
    access: { public: true },
    config: readUser,
    schema: { params: IdParams, response: { 200: UserStatusSchema } },
  }), async (req) => {
    const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
    if (!user) throw notFound('User');
    return presentUserStatus(await findUserStatus(req.server.cairn.db, user.id));
  });

  for (const direction of ['followers', 'following'] as const) {
    app.get(`/api/v4/users/:id/${direction}`, route({ matrix: { is: 'signedIn', cells: { anonymous: 403 } },
      // A private profile's lists are for the user and administrators (404 for others).
      access: signedInOr403,
      paginated: true,
      config: readUser,
      schema: { params: IdParams, response: { 200: Type.Array(UserBasicSchema) } },
    }), async (req, reply) => {
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

  // 201 with the user followed (or no longer followed); 304 when nothing changed.
  const followAnswer = { 201: UserBasicSchema, 304: NoContent };
  app.post('/api/v4/users/:id/follow', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { params: IdParams, response: followAnswer },
  }), async (req, reply) => {
    const viewer = requireUser(req);
    const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
    if (!user) throw notFound('User');
    if ((await followUser(req.server.cairn.db, viewer, user)) === 'unchanged') return reply.code(304).send();
    return reply.code(201).send(presentUserBasic(ctxOf(req), user));
  });

  app.post('/api/v4/users/:id/unfollow', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { params: IdParams, response: followAnswer },
  }), async (req, reply) => {
    const viewer = requireUser(req);
    const user = await findUserByIdOrUsername(req.server.cairn.db, req.params.id);
    if (!user) throw notFound('User');
    if (!(await unfollowUser(req.server.cairn.db, viewer, user))) return reply.code(304).send();
    return reply.code(201).send(presentUserBasic(ctxOf(req), user));
  });

  app.post('/api/v4/users', route({ matrix: 'admin',
    access: admin,
    schema: { body: CreateUserBody, response: { 201: UserAdminSchema } },
  }), async (req, reply) => {
    checkCreateParams(req.body);
    const user = await createUserByAdmin(req.server.cairn.db, req.body as CreateUserInput);
    const extras = await loadUserExtras(req.server.cairn.db, [user.id], { viewerId: requireUser(req).id });
    return reply.code(201).send(adminForm(ctxOf(req), user, extras));
  });

  app.put('/api/v4/users/:id', route({ matrix: 'admin',
    access: admin,
    schema: { params: IdParams, body: UpdateUserBody, response: { 200: UserAdminSchema } },
  }), async (req) => {
    const user = await userOr404(req, req.params.id);
    if ((req.body.extern_uid !== undefined) !== (req.body.provider !== undefined)) {
      throw new ApiError(400, { error: 'extern_uid, provider provide all or none of parameters' });
    }
    const updated = await updateUserByAdmin(req.server.cairn.db, requireUser(req), user, req.body);
    const extras = await loadUserExtras(req.server.cairn.db, [user.id], { viewerId: requireUser(req).id });
    return adminForm(ctxOf(req), updated, extras);
  });

  app.delete('/api/v4/users/:id', route({ matrix: 'admin',
    access: admin,
    schema: { params: IdParams, querystring: DeleteUserQuery, response: { 204: NoContent } },
  }), async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    await deleteUser(req.server.cairn, user, { hardDelete: !!req.query.hard_delete });
    return reply.code(204).send();
  });

  app.delete('/api/v4/users/:id/identities/:provider', route({ matrix: 'admin',
    access: admin,
    schema: { params: IdentityParams, response: { 204: NoContent } },
  }), async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    if (!(await deleteIdentity(req.server.cairn.db, user.id, req.params.provider))) throw notFound('Identity');
    return reply.code(204).send();
  });

  // Custom attributes (administrators only).
  app.get('/api/v4/users/:id/custom_attributes', route({ matrix: 'admin',
    access: admin,
    config: readUser,
    schema: { params: IdParams, response: { 200: Type.Array(CustomAttributeSchema) } },
  }), async (req) => {
    const user = await userOr404(req, req.params.id);
    return (await findCustomAttributes(req.server.cairn.db, user.id)).map(presentCustomAttribute);
  });
  app.get('/api/v4/users/:id/custom_attributes/:key', route({ matrix: 'admin',
    access: admin,
    config: readUser,
    schema: { params: CustomAttributeParams, response: { 200: CustomAttributeSchema } },
  }), async (req) => {
    const user = await userOr404(req, req.params.id);
    const attr = await findCustomAttribute(req.server.cairn.db, user.id, req.params.key);
    if (!attr) throw notFound('Custom Attribute');
    return presentCustomAttribute(attr);
  });
  app.put('/api/v4/users/:id/custom_attributes/:key', route({ matrix: 'admin',
    access: admin,
    schema: { params: CustomAttributeParams, body: SetCustomAttributeBody, response: { 200: CustomAttributeSchema } },
  }), async (req) => {
    const user = await userOr404(req, req.params.id);
    return presentCustomAttribute(await setCustomAttribute(req.server.cairn.db, user.id, req.params.key, req.body.value));
  });
  app.delete('/api/v4/users/:id/custom_attributes/:key', route({ matrix: 'admin',
    access: admin,
    schema: { params: CustomAttributeParams, response: { 204: NoContent } },
  }), async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    if (!(await deleteCustomAttribute(req.server.cairn.db, user.id, req.params.key))) throw notFound('Custom Attribute');
    return reply.code(204).send();
  });

  // Moderation: each answers 201 with GitLab's body (true, false or null); refusals are 403/409 messages.
  const moderation: Record<string, { run: (req: FastifyRequest, user: User) => Promise<unknown>; answer: TSchema }> = {
    block: { run: (req, user) => blockUser(req.server.cairn.db, requireUser(req), user), answer: UserStateChangedOrSkippedSchema },
    unblock: { run: (req, user) => unblockUser(req.server.cairn.db, user), answer: UserStateChangedOrNotSchema },
    activate: { run: (req, user) => activateUser(req.server.cairn.db, user), answer: UserStateChangedSchema },
    deactivate: { run: (req, user) => deactivateUser(req.server.cairn.db, user), answer: UserStateChangedOrSkippedSchema },
    ban: { run: (req, user) => banUser(req.server.cairn.db, user), answer: UserStateChangedSchema },
    unban: { run: (req, user) => unbanUser(req.server.cairn.db, user), answer: UserStateChangedSchema },
  };
  for (const [action, { run, answer }] of Object.entries(moderation)) {
    // A fresh (active) user each time: unbanning one is refused (403), as GitLab.
    app.post(`/api/v4/users/:id/${action}`, route({ matrix: { is: 'admin', fresh: ['id'], cells: action === 'unban' ? { admin: 403 } : {} },
      access: admin,
      schema: { params: IdParams, response: { 201: answer } },
    }), async (req, reply) => {
      const user = await userOr404(req, req.params.id);
      return reply.code(201).send(await run(req, user));
    });
  }
  // Signed-in callers; the service refuses non-administrators with GitLab's own 403 message.
  const approvers = { custom: 'administrators (the service answers others 403 with GitLab\'s message)', signedIn: true } as const;
  app.post('/api/v4/users/:id/approve', route({ matrix: { is: 'admin', fresh: ['id'] },
    access: approvers,
    schema: { params: IdParams, response: { 201: UserActionMessageSchema } },
  }), async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    return reply.code(201).send(await approveUser(req.server.cairn.db, requireUser(req), user));
  });
  app.post('/api/v4/users/:id/reject', route({ matrix: { is: 'admin', fresh: ['id'] },
    access: approvers,
    schema: { params: IdParams, response: { 200: UserActionMessageSchema } },
  }), async (req, reply) => {
    const user = await userOr404(req, req.params.id);
    return reply.code(200).send(await rejectUser(req.server.cairn, requireUser(req), user));
  });

  // The current user.
  app.get('/api/v4/user', route({ matrix: 'signedIn',
    access: signedIn,
    config: readUser,
    schema: { response: { 200: Type.Union([UserSelfSchema, UserAdminSchema]) } },
  }), async (req) => {
    const viewer = requireUser(req);
    const extras = await loadUserExtras(req.server.cairn.db, [viewer.id]);
    const ctx = ctxOf(req);
    return viewer.admin ? adminForm(ctx, viewer, extras) : presentUserSelf(ctx, viewer, extras.identities.get(viewer.id) ?? [], counts(viewer, extras));
  });

  app.get('/api/v4/user/status', route({ matrix: 'signedIn',
    access: signedIn,
    config: readUser,
    schema: { response: { 200: UserStatusSchema } },
  }), async (req) => {
    return presentUserStatus(await findUserStatus(req.server.cairn.db, requireUser(req).id));
  });

  app.put('/api/v4/user/status', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { body: SetStatusBody, response: { 200: UserStatusSchema } },
  }), async (req) => {
    const status = await setUserStatus(req.server.cairn.db, requireUser(req), req.body);
    return presentUserStatus(status);
  });

  // PATCH keeps what is not given; with nothing given it changes nothing.
  app.patch('/api/v4/user/status', route({ matrix: 'signedIn',
    access: signedIn,
    schema: { body: SetStatusBody, response: { 200: UserStatusSchema } },
  }), async (req) => {
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
