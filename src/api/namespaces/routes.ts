import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  findGroupFullPath, findNamespace, listNamespaces, namespaceCounts, namespacePathTaken, ownedGroupIds, suggestNamespacePath,
} from '../../finders/namespaces.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { groupAccessLevel } from '../../finders/access_levels.js';
import { requireUser } from '../../plugins/auth.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentNamespace } from '../../presenters/namespaces.js';
import { NamespaceExistsSchema, NamespaceSchema } from '../../presenters/schemas/namespaces.js';
import { presentContext } from '../projects/present.js';
import { IdParams } from '../params.js';
import { route } from '../route.js';

const ListQuery = Type.Object({
  search: Type.Optional(Type.String()),
  owned_only: Type.Optional(Type.Boolean()),
  top_level_only: Type.Optional(Type.Boolean()),
});

export default async function namespaceRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  app.get('/api/v4/namespaces', route({ matrix: 'signedIn',
    access: { signedIn: true },
    paginated: true,
    schema: { querystring: ListQuery, response: { 200: Type.Array(NamespaceSchema) } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const page = pageParams(request);
    const { rows, total } = await listNamespaces(db, user, {
      search: request.query.search || undefined,
      ownedOnly: request.query.owned_only,
      topLevelOnly: request.query.top_level_only,
    }, { limit: page.perPage, offset: page.offset });
    const groupIds = rows.filter((r) => r.type === 'Group').map((r) => r.id);
    const owned = new Set<number>(user.admin ? groupIds : await ownedGroupIds(db, user.id, groupIds));
    const counts = await namespaceCounts(db, rows, owned);
    setPaginationHeaders(request, reply, page, total);
    const ctx = presentContext(request);
    return rows.map((r) => presentNamespace(ctx, r, counts.get(r.id)!));
  });

  // Members only, whatever the group's visibility: 404 to others who see it.
  app.get('/api/v4/namespaces/:id', route({ matrix: { is: 'guest', refused: 404 },
    access: { custom: 'the owner of a personal namespace; read_namespace_via_membership on a group (404 otherwise)', signedIn: true },
    schema: { params: IdParams, response: { 200: NamespaceSchema } },
  }), async (request) => {
    const user = requireUser(request);
    const ns = await findNamespace(db, request.params.id);
    if (!ns) throw notFound('Namespace');
    // Readable through ownership or membership only (GitLab's read_namespace_via_membership).
    let admin = user.admin;
    if (ns.type === 'User') {
      if (!user.admin && ns.owner_id !== user.id) throw notFound('Namespace');
    } else {
      const subject = { group: ns, accessLevel: effectiveLevel(user, await groupAccessLevel(db, user.id, ns)) };
      if (!can(user, 'read_namespace_via_membership', subject)) throw notFound('Namespace');
      admin = can(user, 'admin_group', subject);
    }
    const counts = await namespaceCounts(db, [ns], new Set(admin && ns.type === 'Group' ? [ns.id] : []));
    return presentNamespace(presentContext(request), ns, counts.get(ns.id)!);
  });

  app.get('/api/v4/namespaces/:namespace/exists', route({ matrix: 'signedIn',
    access: { signedIn: true },
    schema: {
      params: Type.Object({ namespace: Type.String() }),
      querystring: Type.Object({ parent_id: Type.Optional(Type.Integer()) }),
      response: { 200: NamespaceExistsSchema },
    },
  }), async (request) => {
    const path = request.params.namespace;
    let prefix = '';
    if (request.query.parent_id !== undefined) {
      const parentPath = await findGroupFullPath(db, request.query.parent_id);
      if (parentPath === undefined) return { exists: false, suggests: [] };
      prefix = `${parentPath}/`;
    }
    const exists = await namespacePathTaken(db, `${prefix}${path}`);
    return { exists, suggests: exists ? [await suggestNamespacePath(db, prefix, path)] : [] };
  });
}
