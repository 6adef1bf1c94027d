import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type, type Static } from 'typebox';
import type { CiVariable } from '../../db/schema/ci.js';
import { decryptSecret, encryptSecret } from '../../lib/secrets.js';
import { apiError, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentCiVariable, presentInstanceVariable } from '../../presenters/ci.js';
import { CiVariableSchema, InstanceVariableSchema } from '../../presenters/schemas/ci.js';
import { validateVariable } from '../../services/ci_variables.js';
import { IdParams } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';

// Project and group CI/CD variables (maintainers) and instance variables (administrators), one
// implementation for the three. Values are stored encrypted (lib/secrets).

const KeyParams = Type.Object({ id: Type.String(), key: Type.String() });
const Flag = Type.Optional(Type.Boolean());
const Fields = {
  value: Type.Optional(Type.String()),
  variable_type: Type.Optional(Type.String()),
  protected: Flag,
  masked: Flag,
  raw: Flag,
  environment_scope: Type.Optional(Type.String()),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
};
const CreateBody = Type.Object({ key: Type.String(), ...Fields });
const UpdateBody = Type.Object(Fields);
const FilterQuery = Type.Object({ filter: Type.Optional(Type.Object({ environment_scope: Type.Optional(Type.String()) })) });

/** Whose variables: a project's, a group's, or the instance's (neither). */
type Owner = { project_id: number } | { namespace_id: number } | { instance: true };

function ownerFilter(owner: Owner) {
  if ('project_id' in owner) return sql<boolean>`project_id = ${owner.project_id}`;
  if ('namespace_id' in owner) return sql<boolean>`namespace_id = ${owner.namespace_id}`;
  return sql<boolean>`project_id is null and namespace_id is null`;
}

export default async function ciVariableRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const valueOf = (v: CiVariable) => decryptSecret(cairn.config, v.value_encrypted) ?? '';
  const present = (v: CiVariable) => presentCiVariable(v, valueOf(v));
  const presentInstance = (v: CiVariable) => presentInstanceVariable(v, valueOf(v));

  async function list(owner: Owner, request: any, reply: any) {
    const page = pageParams(request);
    const q = cairn.db.selectFrom('ci_variables').where(ownerFilter(owner));
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return rows;
  }

  /** The variable `key` of the owner; several environment scopes need filter[environment_scope]. */
  async function find(owner: Owner, key: string, scope: string | undefined): Promise<CiVariable> {
    let q = cairn.db.selectFrom('ci_variables').selectAll().where(ownerFilter(owner)).where('key', '=', key);
    if (scope !== undefined) q = q.where('environment_scope', '=', scope);
    const rows = await q.execute();
    if (!rows.length) throw notFound('instance' in owner ? 'InstanceVariable' : 'Variable');
    if (rows.length > 1) throw apiError(409, 'There are multiple variables with provided parameters. Please use \'filter[environment_scope]\'');
    return rows[0];
  }

  async function create(owner: Owner, body: Static<typeof CreateBody>): Promise<CiVariable> {
    const v = {
      key: body.key,
      value: body.value ?? '',
      variable_type: body.variable_type ?? 'env_var',
      masked: body.masked ?? false,
      environment_scope: 'project_id' in owner ? (body.environment_scope ?? '*') : '*',
    };
    if (body.value === undefined) throw validationFailed({ value: ["can't be blank"] });
    validateVariable(v);
    const dup = await cairn.db.selectFrom('ci_variables').select('id').where(ownerFilter(owner)).where('key', '=', v.key).where('environment_scope', '=', v.environment_scope).executeTakeFirst();
    if (dup) throw validationFailed({ key: [`(${v.key}) has already been taken`] });
    return cairn.db
      .insertInto('ci_variables')
      .values({
        ...('project_id' in owner ? { project_id: owner.project_id } : 'namespace_id' in owner ? { namespace_id: owner.namespace_id } : {}),
        key: v.key,
        value_encrypted: encryptSecret(cairn.config, v.value),
        variable_type: v.variable_type as 'env_var' | 'file',
        protected: body.protected ?? false,
        masked: v.masked,
        raw: body.raw ?? false,
        environment_scope: v.environment_scope,
        description: body.description ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
      .catch((e) => {
        if (String(e?.code) === '23505') throw validationFailed({ key: [`(${v.key}) has already been taken`] });
        throw e;
      });
  }

  async function update(owner: Owner, current: CiVariable, body: Static<typeof UpdateBody>): Promise<CiVariable> {
    const value = body.value ?? valueOf(current);
    const next = {
      value,
      variable_type: body.variable_type ?? current.variable_type,
      masked: body.masked ?? current.masked,
      environment_scope: 'project_id' in owner ? (body.environment_scope ?? current.environment_scope) : '*',
    };
    validateVariable(next);
    return cairn.db
      .updateTable('ci_variables')
      .set({
        value_encrypted: encryptSecret(cairn.config, value),
        variable_type: next.variable_type as 'env_var' | 'file',
        masked: next.masked,
        protected: body.protected ?? current.protected,
        raw: body.raw ?? current.raw,
        environment_scope: next.environment_scope,
        description: body.description === undefined ? current.description : body.description,
        updated_at: sql`now()` as any,
      })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow()
      .catch((e) => {
        if (String(e?.code) === '23505') throw validationFailed({ key: [`(${current.key}) has already been taken`] });
        throw e;
      });
  }

  const projectAccess = { project: 'admin_cicd_variables', signedIn: true } as const;
  const groupAccess = { group: 'admin_cicd_variables', signedIn: true } as const;
  const projectOwner = (request: any): Owner => ({ project_id: projectOf(request).project.id });
  const groupOwner = (request: any): Owner => ({ namespace_id: groupOf(request).group.id });

  for (const [base, access, ownerOf] of [
    ['/api/v4/projects/:id/variables', projectAccess, projectOwner],
    ['/api/v4/groups/:id/variables', groupAccess, groupOwner],
  ] as const) {
    app.get(base, route({ matrix: 'maintainer',  access, paginated: true, schema: { params: IdParams, response: { 200: Type.Array(CiVariableSchema) } } }), async (request, reply) =>
      (await list(ownerOf(request), request, reply)).map(present));

    app.get(`${base}/:key`, route({ matrix: 'maintainer',  access, schema: { params: KeyParams, querystring: FilterQuery, response: { 200: CiVariableSchema } } }), async (request) =>
      present(await find(ownerOf(request), request.params.key, request.query.filter?.environment_scope)));

    app.post(base, route({ matrix: 'maintainer',  access, schema: { params: IdParams, body: CreateBody, response: { 201: CiVariableSchema } } }), async (request, reply) =>
      reply.code(201).send(present(await create(ownerOf(request), request.body))));

    app.put(`${base}/:key`, route({ matrix: 'maintainer',
      access,
      schema: { params: KeyParams, body: Type.Object({ ...UpdateBody.properties, filter: Type.Optional(Type.Object({ environment_scope: Type.Optional(Type.String()) })) }), response: { 200: CiVariableSchema } },
    }), async (request) => {
      const owner = ownerOf(request);
      const current = await find(owner, request.params.key, request.body.filter?.environment_scope);
      return present(await update(owner, current, request.body));
    });

    app.delete(`${base}/:key`, route({ matrix: 'maintainer',  access, schema: { params: KeyParams, querystring: FilterQuery, response: { 204: NoContent } } }), async (request, reply) => {
      const current = await find(ownerOf(request), request.params.key, request.query.filter?.environment_scope);
      await cairn.db.deleteFrom('ci_variables').where('id', '=', current.id).execute();
      return reply.code(204).send();
    });
  }

  // Instance variables (GitLab's /admin/ci/variables): administrators; no environment scope.
  const instance: Owner = { instance: true };
  const admin = { admin: true } as const;
  const ADMIN_BASE = '/api/v4/admin/ci/variables';
  const InstanceKeyParams = Type.Object({ key: Type.String() });
  const { environment_scope: _scope, ...instanceFields } = Fields;
  const InstanceCreateBody = Type.Object({ key: Type.String(), ...instanceFields });
  const InstanceUpdateBody = Type.Object(instanceFields);

  app.get(ADMIN_BASE, route({ matrix: 'admin', access: admin, paginated: true, schema: { response: { 200: Type.Array(InstanceVariableSchema) } } }), async (request, reply) =>
    (await list(instance, request, reply)).map(presentInstance));

  app.get(`${ADMIN_BASE}/:key`, route({ matrix: 'admin', access: admin, schema: { params: InstanceKeyParams, response: { 200: InstanceVariableSchema } } }), async (request) =>
    presentInstance(await find(instance, request.params.key, undefined)));

  app.post(ADMIN_BASE, route({ matrix: 'admin', access: admin, schema: { body: InstanceCreateBody, response: { 201: InstanceVariableSchema } } }), async (request, reply) =>
    reply.code(201).send(presentInstance(await create(instance, request.body))));

  app.put(`${ADMIN_BASE}/:key`, route({ matrix: 'admin', access: admin, schema: { params: InstanceKeyParams, body: InstanceUpdateBody, response: { 200: InstanceVariableSchema } } }), async (request) =>
    presentInstance(await update(instance, await find(instance, request.params.key, undefined), request.body)));

  app.delete(`${ADMIN_BASE}/:key`, route({ matrix: 'admin', access: admin, schema: { params: InstanceKeyParams, response: { 204: NoContent } } }), async (request, reply) => {
    const current = await find(instance, request.params.key, undefined);
    await cairn.db.deleteFrom('ci_variables').where('id', '=', current.id).execute();
    return reply.code(204).send();
  });
}
