import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { listProjects } from '../../finders/projects.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { authorizeGroup } from '../../finders/authorize.js';
import { authorizeProject } from '../../finders/authorize.js';
import { presentBasicGroupDetails, presentJobTokenScope } from '../../presenters/job_token_scope.js';
import { ProjectSimpleSchema } from '../../presenters/schemas/projects.js';
import { BasicGroupDetailsSchema, GroupScopeLinkSchema, JobTokenScopeSchema, ProjectScopeLinkSchema } from '../../presenters/schemas/job_token_scope.js';
import { allowedGroups, allowedProjectIds, allowGroup, allowProject, disallowGroup, disallowProject, setInboundScope } from '../../services/job_token_scope.js';
import { presentContext, presentProjects } from '../projects/present.js';
import { IdParams, RowId } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

// The CI job token's inbound scope of a project (GitLab's API::Ci::JobTokenScope): maintainers
// turn it on or off and keep the allowlist of projects and groups whose job tokens may reach it.
const TargetProjectParams = Type.Object({ id: Type.String(), target_project_id: RowId });
const TargetGroupParams = Type.Object({ id: Type.String(), target_group_id: RowId });

export default async function jobTokenScopeRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const maintainers = { project: 'admin_project', signedIn: true } as const;

  app.get('/api/v4/projects/:id/job_token_scope', route({ matrix: 'maintainer',
    access: maintainers,
    schema: { params: IdParams, response: { 200: JobTokenScopeSchema } },
  }), async (request) => presentJobTokenScope(projectOf(request).project));

  app.patch('/api/v4/projects/:id/job_token_scope', route({ matrix: 'maintainer',
    access: maintainers,
    schema: { params: IdParams, body: Type.Object({ enabled: Type.Boolean() }), response: { 204: NoContent } },
  }), async (request, reply) => {
    await setInboundScope(cairn, projectOf(request).project.id, request.body.enabled);
    return reply.code(204).send();
  });

  app.get('/api/v4/projects/:id/job_token_scope/allowlist', route({ matrix: 'maintainer',
    access: maintainers,
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(ProjectSimpleSchema) } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const page = pageParams(request);
    // The projects of the allowlist the caller can see (adding one takes seeing it).
    const ids = await allowedProjectIds(cairn, project.id);
    const { rows, total } = await listProjects(cairn.db, user, { ids }, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    const order = new Map(ids.map((id, i) => [id, i]));
    rows.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
    return (await presentProjects(request, rows, 'simple')).bodies;
  });

  app.post('/api/v4/projects/:id/job_token_scope/allowlist', route({ matrix: 'maintainer',
    access: maintainers,
    schema: { params: IdParams, body: Type.Object({ target_project_id: RowId }), response: { 201: ProjectScopeLinkSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const target = await authorizeProject(request, request.body.target_project_id, 'read_project');
    return reply.code(201).send(await allowProject(cairn, project.id, target.project.id, user!));
  });

  app.delete('/api/v4/projects/:id/job_token_scope/allowlist/:target_project_id', route({ matrix: { is: 'maintainer', fresh: ['target_project_id'] },
    access: maintainers,
    schema: { params: TargetProjectParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    await disallowProject(cairn, project.id, request.params.target_project_id);
    return reply.code(204).send();
  });

  app.get('/api/v4/projects/:id/job_token_scope/groups_allowlist', route({ matrix: 'maintainer',
    access: maintainers,
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(BasicGroupDetailsSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const { rows, total } = await allowedGroups(cairn, project.id, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    const ctx = presentContext(request);
    return rows.map((g) => presentBasicGroupDetails(ctx, g));
  });

  app.post('/api/v4/projects/:id/job_token_scope/groups_allowlist', route({ matrix: 'maintainer',
    access: maintainers,
    schema: { params: IdParams, body: Type.Object({ target_group_id: RowId }), response: { 201: GroupScopeLinkSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const target = await authorizeGroup(request, request.body.target_group_id, 'read_group');
    return reply.code(201).send(await allowGroup(cairn, project.id, target.group.id, user!));
  });

  app.delete('/api/v4/projects/:id/job_token_scope/groups_allowlist/:target_group_id', route({ matrix: { is: 'maintainer', fresh: ['target_group_id'] },
    access: maintainers,
    schema: { params: TargetGroupParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    await disallowGroup(cairn, project.id, request.params.target_group_id);
    return reply.code(204).send();
  });
}
