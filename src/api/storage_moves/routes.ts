import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findStorageMove, listStorageMoves } from '../../finders/storage_moves.js';
import { rowId } from '../../lib/ids.js';
import { notFound } from '../../plugins/errors.js';
import { externalBase, pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentStorageMove, type StorageMove } from '../../presenters/storage_moves.js';
import { AcceptedSchema } from '../../presenters/schemas/projects.js';
import { storageMoveSchema } from '../../presenters/schemas/storage_moves.js';
import { containerKind, enqueueBulkMove, scheduleMove, type ContainerKindName } from '../../services/storage_moves/index.js';
import { route } from '../route.js';

/**
 * GitLab's project_, snippet_ and group_repository_storage_moves APIs, administrators only: one
 * route table per container kind, all served by the kind registry (services/storage_moves/kinds.ts).
 * A kind not registered in this build (snippets, until they plug in) answers 404 on every route.
 */
const KINDS: { name: ContainerKindName; plural: string }[] = [
  { name: 'project', plural: 'projects' },
  { name: 'snippet', plural: 'snippets' },
  { name: 'group', plural: 'groups' },
];

const MoveIdParams = Type.Object({ repository_storage_move_id: Type.String() });
const ContainerParams = Type.Object({ id: Type.String() });
const ContainerMoveParams = Type.Object({ id: Type.String(), repository_storage_move_id: Type.String() });
const BulkBody = Type.Object({ source_storage_name: Type.String(), destination_storage_name: Type.Optional(Type.String()) });
const SingleBody = Type.Object({ destination_storage_name: Type.Optional(Type.String()) });

export default async function storageMoveRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const admin = { admin: true } as const;

  for (const { name, plural } of KINDS) {
    const registered = containerKind(name);
    const label = registered?.label ?? name[0].toUpperCase() + name.slice(1);
    const Move = storageMoveSchema(name, registered?.schema ?? Type.Record(Type.String(), Type.Unknown()));
    const base = `/api/v4/${name}_repository_storage_moves`;
    const kindOrNotFound = () => {
      const kind = containerKind(name);
      if (!kind) throw notFound(label);
      return kind;
    };
    const present = async (request: FastifyRequest, moves: StorageMove[]) => {
      const kind = kindOrNotFound();
      const containers = await kind.present(request.server.cairn.db, { baseUrl: externalBase(request), sshPort: request.server.cairn.config.sshPort }, [...new Set(moves.map((m) => Number(m.container_id)))]);
      return moves.map((m) => presentStorageMove(m, name, containers.get(Number(m.container_id)) ?? null));
    };
    const containerOf = async (request: FastifyRequest, idOrPath: string) => {
      const kind = kindOrNotFound();
      const id = await kind.find(request.server.cairn.db, idOrPath);
      if (id === null) throw notFound(label);
      return { kind, id };
    };
    const moveOf = async (request: FastifyRequest, moveId: string, containerId: number | null) => {
      const kind = kindOrNotFound();
      const id = rowId(moveId);
      const move = id === undefined ? undefined : await findStorageMove(request.server.cairn.db, kind.type, id, containerId);
      if (!move) throw notFound(`${label} Repository Storage Move`);
      return move;
    };

    app.get(base, route({ matrix: 'admin',  access: admin, paginated: true, schema: { response: { 200: Type.Array(Move) } } }), async (request, reply) => {
      const kind = kindOrNotFound();
      const page = pageParams(request);
      const { rows, total } = await listStorageMoves(request.server.cairn.db, kind.type, null, { limit: page.perPage, offset: page.offset });
      setPaginationHeaders(request, reply, page, total);
      return present(request, rows);
    });

    app.get(`${base}/:repository_storage_move_id`, route({ matrix: { is: 'admin', cells: { admin: 404 } },  access: admin, schema: { params: MoveIdParams, response: { 200: Move } } }), async (request) => {
      const move = await moveOf(request, request.params.repository_storage_move_id, null);
      return (await present(request, [move]))[0];
    });

    app.post(base, route({ matrix: 'admin',  access: admin, schema: { body: BulkBody, response: { 202: AcceptedSchema } } }), async (request, reply) => {
      const kind = kindOrNotFound();
      await enqueueBulkMove(request.server.cairn, kind, request.body.source_storage_name, request.body.destination_storage_name);
      return reply.code(202).send({ message: '202 Accepted' as const });
    });

    const containerBase = `/api/v4/${plural}/:id/repository_storage_moves`;
    app.get(containerBase, route({ matrix: 'admin',  access: admin, paginated: true, schema: { params: ContainerParams, response: { 200: Type.Array(Move) } } }), async (request, reply) => {
      const { kind, id } = await containerOf(request, request.params.id);
      const page = pageParams(request);
      const { rows, total } = await listStorageMoves(request.server.cairn.db, kind.type, id, { limit: page.perPage, offset: page.offset });
      setPaginationHeaders(request, reply, page, total);
      return present(request, rows);
    });

    app.get(`${containerBase}/:repository_storage_move_id`, route({ matrix: { is: 'admin', cells: { admin: 404 } },  access: admin, schema: { params: ContainerMoveParams, response: { 200: Move } } }), async (request) => {
      const { id } = await containerOf(request, request.params.id);
      const move = await moveOf(request, request.params.repository_storage_move_id, id);
      return (await present(request, [move]))[0];
    });

    app.post(containerBase, route({ matrix: 'admin',  access: admin, schema: { params: ContainerParams, body: SingleBody, response: { 201: Move } } }), async (request, reply) => {
      const { kind, id } = await containerOf(request, request.params.id);
      const move = await scheduleMove(request.server.cairn, kind, id, request.body?.destination_storage_name);
      return reply.code(201).send((await present(request, [move]))[0]);
    });
  }
}
