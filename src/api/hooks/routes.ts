import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { WebHook } from '../../db/schema/webhooks.js';
import { executeHook, hookSecrets, type HookTrigger } from '../../hooks/delivery.js';
import { samplePayload, SAMPLE_TRIGGERS } from '../../hooks/samples.js';
import { saveProjectHook, type HookInput } from '../../hooks/service.js';
import { apiError, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentHookLog, presentProjectHook } from '../../presenters/hooks.js';
import { HookLogSchema, ProjectHookSchema } from '../../presenters/schemas/hooks.js';
import { RowId } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

// Project webhooks (GitLab's Project webhooks API): CRUD, the delivery log and test deliveries.
// Maintainers manage them. The secret token, URL variable values and custom header values are
// write-only: the API shows the names, never the values.

const IdParams = Type.Object({ id: Type.String() });
const HookParams = Type.Object({ id: Type.String(), hook_id: RowId });
const TestParams = Type.Object({ id: Type.String(), hook_id: RowId, trigger: Type.String() });

const KeyValue = Type.Object({ key: Type.String(), value: Type.String() });
const flags = {
  push_events: Type.Optional(Type.Boolean()),
  tag_push_events: Type.Optional(Type.Boolean()),
  issues_events: Type.Optional(Type.Boolean()),
  confidential_issues_events: Type.Optional(Type.Boolean()),
  merge_requests_events: Type.Optional(Type.Boolean()),
  note_events: Type.Optional(Type.Boolean()),
  confidential_note_events: Type.Optional(Type.Boolean()),
  job_events: Type.Optional(Type.Boolean()),
  pipeline_events: Type.Optional(Type.Boolean()),
  wiki_page_events: Type.Optional(Type.Boolean()),
  deployment_events: Type.Optional(Type.Boolean()),
  releases_events: Type.Optional(Type.Boolean()),
  milestone_events: Type.Optional(Type.Boolean()),
  feature_flag_events: Type.Optional(Type.Boolean()),
  emoji_events: Type.Optional(Type.Boolean()),
  resource_access_token_events: Type.Optional(Type.Boolean()),
  repository_update_events: Type.Optional(Type.Boolean()),
};
const HookBody = Type.Object({
  url: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  description: Type.Optional(Type.String()),
  token: Type.Optional(Type.String()),
  enable_ssl_verification: Type.Optional(Type.Boolean()),
  push_events_branch_filter: Type.Optional(Type.String()),
  branch_filter_strategy: Type.Optional(Type.String()),
  url_variables: Type.Optional(Type.Array(KeyValue)),
  custom_headers: Type.Optional(Type.Array(KeyValue)),
  ...flags,
});
const EventsQuery = Type.Object({ status: Type.Optional(Type.Union([Type.Array(Type.String()), Type.String()])) });

/** The log's status filter: HTTP codes or GitLab's names for ranges. */
const STATUS_NAMES: Record<string, [number, number]> = { successful: [200, 299], client_failure: [400, 499], server_failure: [500, 599] };

export default async function hookRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  const present = (hook: WebHook) => {
    const s = hookSecrets(cairn, hook);
    return presentProjectHook(hook, { urlVariables: Object.keys(s.urlVariables), customHeaders: Object.keys(s.customHeaders) });
  };

  async function findHook(projectId: number, id: number): Promise<WebHook> {
    const hook = await cairn.db.selectFrom('web_hooks').selectAll().where('id', '=', id).where('project_id', '=', projectId).where('type', '=', 'ProjectHook').executeTakeFirst();
    if (!hook) throw notFound('Hook');
    return hook;
  }

  const manage = { project: 'admin_project', signedIn: true } as const;

  app.get('/api/v4/projects/:id/hooks', route({ matrix: 'maintainer',
    access: manage,
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(ProjectHookSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const rows = await cairn.db
      .selectFrom('web_hooks')
      .selectAll()
      .select(sql<number>`count(*) over ()`.as('total'))
      .where('project_id', '=', project.id)
      .where('type', '=', 'ProjectHook')
      .orderBy('id')
      .limit(page.perPage)
      .offset(page.offset)
      .execute();
    setPaginationHeaders(request, reply, page, rows.length ? Number(rows[0].total) : 0);
    return rows.map(({ total: _t, ...hook }) => present(hook as WebHook));
  });

  app.get('/api/v4/projects/:id/hooks/:hook_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: HookParams, response: { 200: ProjectHookSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return present(await findHook(project.id, request.params.hook_id));
  });

  app.post('/api/v4/projects/:id/hooks', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: IdParams, body: HookBody, response: { 201: ProjectHookSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const hook = await saveProjectHook(cairn, project.id, null, request.body as HookInput);
    return reply.code(201).send(present(hook));
  });

  app.put('/api/v4/projects/:id/hooks/:hook_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: HookParams, body: HookBody, response: { 200: ProjectHookSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const current = await findHook(project.id, request.params.hook_id);
    return present(await saveProjectHook(cairn, project.id, current, request.body as HookInput));
  });

  app.delete('/api/v4/projects/:id/hooks/:hook_id', route({ matrix: { is: 'maintainer', fresh: ['hook_id'] },
    access: manage,
    schema: { params: HookParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const hook = await findHook(project.id, request.params.hook_id);
    // Its log goes with it; deliveries still queued find no hook and are dropped.
    await cairn.db.deleteFrom('web_hooks').where('id', '=', hook.id).execute();
    return reply.code(204).send();
  });

  app.get('/api/v4/projects/:id/hooks/:hook_id/events', route({ matrix: 'maintainer',
    access: manage,
    paginated: true,
    schema: { params: HookParams, querystring: EventsQuery, response: { 200: Type.Array(HookLogSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const hook = await findHook(project.id, request.params.hook_id);
    const page = pageParams(request);
    const wanted = request.query.status === undefined ? [] : Array.isArray(request.query.status) ? request.query.status : [request.query.status];
    const ranges: [number, number][] = [];
    for (const s of wanted) {
      if (STATUS_NAMES[s]) ranges.push(STATUS_NAMES[s]);
      else if (/^\d{3}$/.test(s) && Number(s) >= 100 && Number(s) <= 599) ranges.push([Number(s), Number(s)]);
      else throw apiError(400, 'status does not have a valid value');
    }
    let q = cairn.db.selectFrom('web_hook_logs').selectAll().select(sql<number>`count(*) over ()`.as('total')).where('web_hook_id', '=', hook.id);
    if (ranges.length) {
      q = q.where(sql<boolean>`response_status ~ '^[0-9]+$'`).where((eb) =>
        eb.or(ranges.map(([lo, hi]) => eb.and([eb(sql`response_status::int`, '>=', lo), eb(sql`response_status::int`, '<=', hi)]))),
      );
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(page.perPage).offset(page.offset).execute();
    setPaginationHeaders(request, reply, page, rows.length ? Number(rows[0].total) : 0);
    return rows.map(({ total: _t, ...log }) => presentHookLog(log as any));
  });

  app.post('/api/v4/projects/:id/hooks/:hook_id/test/:trigger', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: TestParams, response: { 201: Type.Object({ message: Type.String() }) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const hook = await findHook(project.id, request.params.hook_id);
    const trigger = request.params.trigger;
    if (!(SAMPLE_TRIGGERS as readonly string[]).includes(trigger)) throw apiError(400, 'trigger does not have a valid value');
    const sample = await samplePayload(cairn, project.id, request.actor!.user!.id, trigger as (typeof SAMPLE_TRIGGERS)[number]);
    if ('error' in sample) throw apiError(422, sample.error);
    const uuid = crypto.randomUUID();
    // A test is delivered at once, disabled or not; its success enables the hook again.
    const result = await executeHook(cairn, hook, { trigger: sample.trigger as HookTrigger, data: sample.data, eventUuid: uuid, idempotencyKey: crypto.randomUUID() });
    if (result.status === null || result.status < 200 || result.status >= 300) {
      throw apiError(422, result.error ?? `Error: hook answered ${result.status}`);
    }
    return reply.code(201).send({ message: '201 Created' });
  });
}
