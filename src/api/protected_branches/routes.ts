import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { invalidParam } from '../../plugins/errors.js';
import { paginateArray } from '../../plugins/pagination.js';
import { allParams, toBoolean } from '../../plugins/params.js';
import { presentProtectedBranch } from '../../presenters/protected_branches.js';
import {
  accessLevelNames,
  findProtectedBranch,
  listProtectedBranches,
  protectBranch,
  unprotectBranch,
  updateProtectedBranch,
  type AccessGrant,
  type ProtectParams,
  type RuleWithLevels,
} from '../../services/protected_branches.js';
import { IdParams } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';
import { ProtectedBranchSchema } from '../../presenters/schemas/branches.js';

const NameParams = Type.Object({ id: Type.String(), name: Type.String() });

function int(value: unknown, param: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const n = typeof value === 'number' ? value : /^-?\d+$/.test(String(value).trim()) ? Number(value) : NaN;
  if (!Number.isInteger(n)) throw invalidParam(param, 'is invalid');
  return n;
}

function bool(value: unknown, param: string): boolean | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const b = toBoolean(value);
  if (b === undefined) throw invalidParam(param, 'is invalid');
  return b;
}

function grants(value: unknown, param: string): AccessGrant[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw invalidParam(param, 'is invalid');
  return value.map((g) => {
    if (!g || typeof g !== 'object') throw invalidParam(param, 'is invalid');
    const o = g as Record<string, unknown>;
    return {
      id: int(o.id, `${param}[id]`),
      access_level: int(o.access_level, `${param}[access_level]`),
      user_id: int(o.user_id, `${param}[user_id]`),
      group_id: int(o.group_id, `${param}[group_id]`),
      _destroy: bool(o._destroy, `${param}[_destroy]`),
    };
  });
}

/** Parameters as GitLab reads them (query, form or JSON; nested arrays of grants). */
function protectParams(p: Record<string, unknown>): ProtectParams {
  return {
    name: p.name === undefined ? undefined : String(p.name),
    push_access_level: int(p.push_access_level, 'push_access_level'),
    merge_access_level: int(p.merge_access_level, 'merge_access_level'),
    unprotect_access_level: int(p.unprotect_access_level, 'unprotect_access_level'),
    allow_force_push: bool(p.allow_force_push, 'allow_force_push'),
    code_owner_approval_required: bool(p.code_owner_approval_required, 'code_owner_approval_required'),
    allowed_to_push: grants(p.allowed_to_push, 'allowed_to_push'),
    allowed_to_merge: grants(p.allowed_to_merge, 'allowed_to_merge'),
    allowed_to_unprotect: grants(p.allowed_to_unprotect, 'allowed_to_unprotect'),
  };
}

export default async function protectedBranchRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const present = async (items: RuleWithLevels[]) => {
    const names = await accessLevelNames(cairn, items.flatMap((i) => i.levels));
    return items.map((i) => presentProtectedBranch(i.rule, i.levels, names));
  };
  const manage = { project: 'admin_project' } as const;
  const manageChanges = { project: 'admin_project', signedIn: true } as const;

  app.get('/api/v4/projects/:id/protected_branches', route({ matrix: 'maintainer',
    access: manage,
    paginated: true,
    schema: { params: IdParams, querystring: Type.Object({ search: Type.Optional(Type.String()) }), response: { 200: Type.Array(ProtectedBranchSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    return present(paginateArray(request, reply, await listProtectedBranches(cairn, project.id, request.query.search)));
  });

  app.get('/api/v4/projects/:id/protected_branches/:name', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: NameParams, response: { 200: ProtectedBranchSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return (await present([await findProtectedBranch(cairn, project.id, request.params.name)]))[0];
  });

  app.post('/api/v4/projects/:id/protected_branches', route({ matrix: 'maintainer',
    access: manageChanges,
    schema: { params: IdParams, response: { 201: ProtectedBranchSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const created = await protectBranch(cairn, project.id, protectParams(allParams(request)));
    return reply.code(201).send((await present([created]))[0]);
  });

  app.patch('/api/v4/projects/:id/protected_branches/:name', route({ matrix: 'maintainer',
    access: manageChanges,
    schema: { params: NameParams, response: { 200: ProtectedBranchSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return (await present([await updateProtectedBranch(cairn, project.id, request.params.name, protectParams(allParams(request)))]))[0];
  });

  app.delete('/api/v4/projects/:id/protected_branches/:name', route({ matrix: 'maintainer',
    access: manageChanges,
    schema: { params: NameParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    await unprotectBranch(cairn, project.id, request.params.name, user!, accessLevel);
    return reply.code(204).send();
  });
}
