import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findNamespace } from '../../finders/namespaces.js';
import { findProjectRow } from '../../finders/projects.js';
import { authorizeProject } from '../../finders/authorize.js';
import { forbidden, notFound } from '../../plugins/errors.js';
import { ProjectSchema, ProjectSimpleSchema, ProjectWithAccessSchema } from '../../presenters/schemas/projects.js';
import { forkProject, linkFork, unlinkFork } from '../../services/forks.js';
import { canCreateProjectIn } from '../../services/projects.js';
import { personalNamespaceOf } from '../../services/users.js';
import { IdParams } from '../params.js';
import { sendProjectList } from '../projects/routes.js';
import { projectFilters } from '../projects/filters.js';
import { renderProject } from '../projects/present.js';
import { ProjectListQuery, VISIBILITY } from '../projects/schemas.js';
import { NoContent, projectOf, route } from '../route.js';

/**
 * Forks (GitLab's Projects API): fork a project, list its forks, mark an existing project as a
 * fork of another or undo that. The relation and its rules are in services/forks.ts.
 */

const IntOrString = Type.Union([Type.Integer(), Type.String()]);
const ForkBody = Type.Object({
  namespace_id: Type.Optional(IntOrString),
  namespace_path: Type.Optional(Type.String()),
  /** Deprecated: an id or a full path. */
  namespace: Type.Optional(IntOrString),
  path: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  visibility: Type.Optional(VISIBILITY),
  branches: Type.Optional(Type.String()),
  mr_default_target_self: Type.Optional(Type.Boolean()),
});
const ProjectListSchema = Type.Union([Type.Array(ProjectWithAccessSchema), Type.Array(ProjectSimpleSchema)]);
const LinkParams = Type.Object({ id: Type.String(), forked_from_id: Type.String() });

export default async function forkRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const db = cairn.db;

  app.post('/api/v4/projects/:id/fork', route({ matrix: 'readCode',
    access: { project: 'fork_project', signedIn: true },
    schema: { params: IdParams, body: ForkBody, response: { 201: ProjectSchema } },
  }), async (request, reply) => {
    const { project: source, user } = projectOf(request);
    const b = request.body;
    const key = [b.namespace_id, b.namespace_path, b.namespace].find((v) => v !== undefined && v !== null && v !== '');
    // A namespace the caller cannot create projects in is not a target, whether they see it or not (GitLab: 404).
    const namespace = key !== undefined ? await findNamespace(db, key) : await personalNamespaceOf(db, user!.id);
    if (!namespace || !(await canCreateProjectIn(db, user!, namespace))) throw notFound('Target Namespace');
    const fork = await forkProject(cairn, { user: user!, source, namespace, params: b });
    return reply.code(201).send(await renderProject(request, (await findProjectRow(db, fork.id))!, 'full'));
  });

  app.get('/api/v4/projects/:id/forks', route({ matrix: 'read',
    access: { project: 'read_project' },
    paginated: true,
    schema: { params: IdParams, querystring: ProjectListQuery, response: { 200: ProjectListSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    return sendProjectList(request, reply, { ...projectFilters(request), forkedFromProjectId: project.id }, request.query.simple);
  });

  app.post('/api/v4/projects/:id/fork/:forked_from_id', route({ matrix: 'owner',
    access: { project: 'link_forked_project', signedIn: true },
    schema: { params: LinkParams, response: { 201: ProjectSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    // The source: 404 when the caller cannot see it, 403 when they may not fork it.
    const source = await authorizeProject(request, request.params.forked_from_id, 'fork_project');
    if (!(await canCreateProjectIn(db, user!, project.namespace))) throw forbidden('Target Namespace');
    await linkFork(db, project, source.project);
    return reply.code(201).send(await renderProject(request, (await findProjectRow(db, project.id))!, 'full'));
  });

  app.delete('/api/v4/projects/:id/fork', route({ matrix: 'owner',
    access: { project: 'remove_fork_project', signedIn: true },
    schema: { params: IdParams, response: { 204: NoContent, 304: NoContent } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const changed = await unlinkFork(cairn, project, user!);
    return reply.code(changed ? 204 : 304).send();
  });
}
