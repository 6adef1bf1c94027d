import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type, type Static } from 'typebox';
import type { CiVariable } from '../../db/schema/ci.js';
import { decryptSecret, encryptSecret } from '../../lib/secrets.js';
import { apiError, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentCiVariable } from '../../presenters/ci.js';
import { CiVariableSchema } from '../../presenters/schemas/ci.js';
import { IdParams } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';

// Project and group CI/CD variables (maintainers). Values are stored encrypted (lib/secrets).

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

/** GitLab's mask rules: one line of at least 8 characters from the Base64 alphabet and @ : . ~ - _ */
const MASKABLE = /^[a-zA-Z0-9_+=/@:.~-]{8,}$/;

type Owner = { project_id: number } | { namespace_id: number };

function validate(v: { key?: string; value: string; variable_type: string; masked: boolean; environment_scope: string }) {
  const errors: Record<string, string[]> = {};
  if (v.key !== undefined) {
    if (!v.key) errors.key = ["can't be blank"];
    else if (v.key.length > 255) errors.key = ['is too long (maximum is 255 characters)'];
    else if (!/^[a-zA-Z0-9_]+$/.test(v.key)) errors.key = ["can contain only letters, digits and '_'."];
  }
  if (v.masked && !MASKABLE.test(v.value)) errors.value = ['is invalid'];
  if (v.value.length > 10000) errors.value = ['is too long (maximum is 10000 characters)'];
  if (v.variable_type !== 'env_var' && v.variable_type !== 'file') errors.variable_type = ['is not included in the list'];
  if (!v.environment_scope || v.environment_scope.length > 255) errors.environment_scope = ['is invalid'];
  if (Object.keys(errors).length) throw validationFailed(errors);
}

export default async function ciVariableRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const valueOf = (v: CiVariable) => decryptSecret(cairn.config, v.value_encrypted) ?? '';
  const present = (v: CiVariable) => presentCiVariable(v, valueOf(v));

  function ownerWhere(owner: Owner) {
    return 'project_id' in owner ? (['project_id', owner.project_id] as const) : (['namespace_id', owner.namespace_id] as const);
  }

  async function list(owner: Owner, request: any, reply: any) {
    const [col, id] = ownerWhere(owner);
    const page = pageParams(request);
    const q = cairn.db.selectFrom('ci_variables').where(col, '=', id);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return rows.map(present);
  }

  /** The variable `key` of the owner; several environment scopes need filter[environment_scope]. */
  async function find(owner: Owner, key: string, scope: string | undefined): Promise<CiVariable> {
    const [col, id] = ownerWhere(owner);
    let q = cairn.db.selectFrom('ci_variables').selectAll().where(col, '=', id).where('key', '=', key);
    if (scope !== undefined) q = q.where('environment_scope', '=', scope);
    const rows = await q.execute();
    if (!rows.length) throw notFound('Variable');
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
    validate(v);
    const [col, id] = ownerWhere(owner);
    const dup = await cairn.db.selectFrom('ci_variables').select('id').where(col, '=', id).where('key', '=', v.key).where('environment_scope', '=', v.environment_scope).executeTakeFirst();
    if (dup) throw validationFailed({ key: [`(${v.key}) has already been taken`] });
    return cairn.db
      .insertInto('ci_variables')
      .values({
        ...('project_id' in owner ? { project_id: owner.project_id } : { namespace_id: owner.namespace_id }),
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
    validate(next);
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
      list(ownerOf(request), request, reply));

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
}
