import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { invalidParam } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { allParams } from '../../plugins/params.js';
import { presentProtectedEnvironment } from '../../presenters/environments.js';
import { ProtectedEnvironmentSchema } from '../../presenters/schemas/environments.js';
import {
  deployLevelNames,
  findProtectedEnvironment,
  listProtectedEnvironments,
  protectEnvironment,
  unprotectEnvironment,
  type DeployGrant,
  type EnvironmentWithLevels,
  type ProtectEnvironmentParams,
} from '../../services/protected_environments.js';
import { IdParams } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

const NameParams = Type.Object({ id: Type.String(), name: Type.String() });

function int(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'number' ? value : /^-?\d{1,10}$/.test(String(value).trim()) ? Number(value) : NaN;
  if (!Number.isInteger(n) || Math.abs(n) > 2147483647) throw invalidParam(param, 'is invalid');
  return n;
}

/** deploy_access_levels as GitLab reads it: an array of hashes (JSON, or form fields `deploy_access_levels[][user_id]`). */
function grants(value: unknown): DeployGrant[] | undefined {
  if (value === undefined || value === null) return undefined;
  const list = Array.isArray(value) ? value : typeof value === 'object' ? Object.values(value as object) : null;
  if (!list) throw invalidParam('deploy_access_levels', 'is invalid');
  return list.map((g) => {
    if (!g || typeof g !== 'object' || Array.isArray(g)) throw invalidParam('deploy_access_levels', 'is invalid');
    const o = g as Record<string, unknown>;
    return {
      access_level: int(o.access_level, 'deploy_access_levels[access_level]'),
      user_id: int(o.user_id, 'deploy_access_levels[user_id]'),
      group_id: int(o.group_id, 'deploy_access_levels[group_id]'),
      group_inheritance_type: int(o.group_inheritance_type, 'deploy_access_levels[group_inheritance_type]'),
    };
  });
}

function protectParams(p: Record<string, unknown>): ProtectEnvironmentParams {
  if (p.name !== undefined && typeof p.name !== 'string' && typeof p.name !== 'number') throw invalidParam('name');
  return {
    name: p.name === undefined ? undefined : String(p.name),
    deploy_access_levels: grants(p.deploy_access_levels),
    required_approval_count: int(p.required_approval_count, 'required_approval_count'),
  };
}

export default async function protectedEnvironmentRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const present = async (items: EnvironmentWithLevels[]) => {
    const names = await deployLevelNames(cairn, items.flatMap((i) => i.levels));
    return items.map((i) => presentProtectedEnvironment(i.environment, i.levels, names));
  };
  // GitLab: maintainers (admin_project) read and change protected environments.
  const manage = { project: 'admin_project', signedIn: true } as const;

  app.get('/api/v4/projects/:id/protected_environments', route({ matrix: 'maintainer',
    access: manage,
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(ProtectedEnvironmentSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const { items, total } = await listProtectedEnvironments(cairn, project.id, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return present(items);
  });

  app.get('/api/v4/projects/:id/protected_environments/:name', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: NameParams, response: { 200: ProtectedEnvironmentSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return (await present([await findProtectedEnvironment(cairn, project.id, request.params.name)]))[0];
  });

  app.post('/api/v4/projects/:id/protected_environments', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: IdParams, response: { 201: ProtectedEnvironmentSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const created = await protectEnvironment(cairn, project.id, protectParams(allParams(request)));
    return reply.code(201).send((await present([created]))[0]);
  });

  app.delete('/api/v4/projects/:id/protected_environments/:name', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: NameParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    await unprotectEnvironment(cairn, project.id, request.params.name);
    return reply.code(204).send();
  });
}
