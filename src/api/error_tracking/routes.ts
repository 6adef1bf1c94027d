import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { listTrackedErrors } from '../../finders/error_tracking.js';
import { parseEnvelope, parseEvent, reportedError, SentryParseError, sentryKeyOf } from '../../lib/sentry_envelope.js';
import { ApiError, badRequest, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentClientKey, presentErrorTrackingSetting, presentTrackedError, presentTrackedErrorDetail } from '../../presenters/error_tracking.js';
import { projectWebUrl } from '../../presenters/projects.js';
import {
  ErrorStatus,
  ErrorTrackingClientKeySchema,
  ErrorTrackingSettingSchema,
  TrackedErrorDetailSchema,
  TrackedErrorSchema,
} from '../../presenters/schemas/environments.js';
import {
  collectorGate,
  createClientKey,
  deleteClientKey,
  findSetting,
  findTrackedError,
  latestEvent,
  listClientKeys,
  recordErrorEvent,
  saveSetting,
  updateTrackedErrorStatus,
} from '../../services/error_tracking.js';
import { IdParams, RowId } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

const KeyParams = Type.Object({ id: Type.String(), key_id: RowId });
const ErrorParams = Type.Object({ id: Type.String(), error_id: RowId });
const CollectorParams = Type.Object({ id: RowId });

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);

/** The raw request body, at most `limit` bytes (413 beyond). */
async function readBody(body: unknown, limit: number): Promise<Buffer> {
  if (body === undefined || body === null) return Buffer.alloc(0);
  if (Buffer.isBuffer(body)) return body;
  if (typeof body === 'string') return Buffer.from(body);
  // No body at all (Fastify leaves its placeholder): nothing to read.
  if (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] !== 'function') return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as Readable) {
    size += chunk.length;
    if (size > limit) throw new ApiError(413, { message: '413 Request Entity Too Large' });
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The body as the SDK meant it: gzip and deflate are undone, bounded by the same limit. */
async function decodedBody(request: FastifyRequest, limit: number): Promise<Buffer> {
  const raw = await readBody(request.body, limit);
  const encoding = String(request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  try {
    if (encoding === 'gzip' || encoding === 'x-gzip') return await gunzip(raw, { maxOutputLength: limit });
    if (encoding === 'deflate') return await inflate(raw, { maxOutputLength: limit });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new ApiError(413, { message: '413 Request Entity Too Large' });
    throw badRequest('Failed to parse sentry request');
  }
  if (encoding !== 'identity' && encoding !== '') throw new ApiError(415, { message: '415 Unsupported Media Type' });
  return raw;
}

export default async function errorTrackingRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const externalUrl = cairn.config.externalUrl;
  // GitLab: settings and client keys are for maintainers (admin_operations).
  const manage = { project: 'admin_operations', signedIn: true } as const;

  // ---- settings ---------------------------------------------------------------------------------

  app.get('/api/v4/projects/:id/error_tracking/settings', route({ matrix: { is: 'maintainer', cells: { maintainer: 404, owner: 404, admin: 404 } },
    access: manage,
    schema: { params: IdParams, response: { 200: ErrorTrackingSettingSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const setting = await findSetting(cairn, project.id);
    if (!setting) throw notFound('Error Tracking Setting');
    return presentErrorTrackingSetting(setting);
  });

  const SettingBody = (integratedRequired: boolean) =>
    Type.Object({
      active: Type.Boolean(),
      integrated: integratedRequired ? Type.Boolean() : Type.Optional(Type.Boolean()),
    });

  // PATCH (the spec's): active required, integrated optional. Cairn's tracker is the integrated
  // one, so a project without settings gets them here rather than a 404 (GitLab needs a Sentry
  // project configured in its UI first; Cairn has no such step).
  app.patch('/api/v4/projects/:id/error_tracking/settings', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: IdParams, body: SettingBody(false), response: { 200: ErrorTrackingSettingSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return presentErrorTrackingSetting(await saveSetting(cairn, project.id, request.body));
  });

  // PUT (GitLab 15.10): both required; creates or updates.
  app.put('/api/v4/projects/:id/error_tracking/settings', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: IdParams, body: SettingBody(true), response: { 200: ErrorTrackingSettingSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return presentErrorTrackingSetting(await saveSetting(cairn, project.id, request.body));
  });

  // ---- client keys ------------------------------------------------------------------------------

  app.get('/api/v4/projects/:id/error_tracking/client_keys', route({ matrix: 'maintainer',
    access: manage,
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(ErrorTrackingClientKeySchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const { items, total } = await listClientKeys(cairn, project.id, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return items.map((k) => presentClientKey(externalUrl, k));
  });

  app.post('/api/v4/projects/:id/error_tracking/client_keys', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: IdParams, response: { 201: ErrorTrackingClientKeySchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    return reply.code(201).send(presentClientKey(externalUrl, await createClientKey(cairn, project.id)));
  });

  // GitLab answers the deleted key.
  app.delete('/api/v4/projects/:id/error_tracking/client_keys/:key_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: KeyParams, response: { 200: ErrorTrackingClientKeySchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return presentClientKey(externalUrl, await deleteClientKey(cairn, project.id, request.params.key_id));
  });

  // ---- errors of the integrated tracker ---------------------------------------------------------

  const ctx = { baseUrl: externalUrl };

  app.get('/api/v4/projects/:id/error_tracking/errors', route({ matrix: 'reporter',
    access: { project: 'read_sentry_issue', signedIn: true },
    paginated: true,
    schema: {
      params: IdParams,
      querystring: Type.Object({
        status: Type.Optional(ErrorStatus),
        query: Type.Optional(Type.String({ maxLength: 1024 })),
        search_term: Type.Optional(Type.String({ maxLength: 1024 })),
        sort: Type.Optional(Type.Union([Type.Literal('last_seen'), Type.Literal('first_seen'), Type.Literal('frequency')])),
      }),
      response: { 200: Type.Array(TrackedErrorSchema) },
    },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const q = request.query;
    const { items, total } = await listTrackedErrors(cairn.db, project.id, {
      status: q.status,
      query: q.query ?? q.search_term,
      sort: q.sort,
      limit: page.perPage,
      offset: page.offset,
    });
    setPaginationHeaders(request, reply, page, total);
    const web = projectWebUrl(ctx as any, project as any);
    return items.map((e) => presentTrackedError(web, e));
  });

  app.get('/api/v4/projects/:id/error_tracking/errors/:error_id', route({ matrix: { is: 'reporter', cells: { reporter: 404, developer: 404, maintainer: 404, owner: 404, admin: 404 } },
    access: { project: 'read_sentry_issue', signedIn: true },
    schema: { params: ErrorParams, response: { 200: TrackedErrorDetailSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const error = await findTrackedError(cairn, project.id, request.params.error_id);
    return presentTrackedErrorDetail(projectWebUrl(ctx as any, project as any), error, await latestEvent(cairn, error.id));
  });

  app.put('/api/v4/projects/:id/error_tracking/errors/:error_id', route({ matrix: 'reporter',
    access: { project: 'update_sentry_issue', signedIn: true },
    schema: { params: ErrorParams, body: Type.Object({ status: ErrorStatus }), response: { 200: TrackedErrorSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const error = await updateTrackedErrorStatus(cairn, project.id, request.params.error_id, request.body.status);
    return presentTrackedError(projectWebUrl(ctx as any, project as any), error);
  });

  // ---- the collector the DSN points at (Sentry SDK protocol) ------------------------------------

  await app.register(async (scoped) => {
    const collector = scoped.withTypeProvider<TypeBoxTypeProvider>();
    // The SDKs send envelopes without a content type (or application/x-sentry-envelope), store
    // bodies as JSON, either possibly gzip-encoded: the body is taken raw and decoded here.
    collector.removeAllContentTypeParsers();
    collector.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    const limit = cairn.config.maxBodySize;
    const access = { custom: 'a Sentry client key (sentry_key or X-Sentry-Auth) active on the project, whose error tracking is active and integrated' };
    const config = { skipApiAuth: true };

    async function admit(request: FastifyRequest) {
      const gate = await collectorGate(cairn, (request.params as { id: number }).id, sentryKeyOf(request.query as Record<string, unknown>, request.headers));
      if (!gate.ok) throw gate.status === 401 ? unauthorized() : notFound(gate.what);
    }

    const envelope = route({ matrix: { own: 404 },
      access,
      config,
      schema: { params: CollectorParams, response: { 204: NoContent } },
    });
    const envelopeHandler = async (request: FastifyRequest, reply: FastifyReply) => {
      await admit(request);
      const body = await decodedBody(request, limit);
      let events: Record<string, unknown>[];
      try {
        events = parseEnvelope(body).items.filter((i) => i.type === 'event').map((i) => parseEvent(i.payload));
      } catch (err) {
        if (err instanceof SentryParseError) throw badRequest('Failed to parse sentry request');
        throw err;
      }
      // Other items (transactions, sessions, client reports) are accepted and not kept, as GitLab.
      const reported = events.map((e) => ({ event: e, error: reportedError(e) }));
      if (reported.some((r) => !r.error)) throw badRequest('Unsupported sentry payload');
      for (const r of reported) await recordErrorEvent(cairn, (request.params as { id: number }).id, r.error!, r.event);
      return reply.code(204).send();
    };
    collector.post('/api/v4/error_tracking/collector/api/:id/envelope', envelope, envelopeHandler);
    collector.post('/api/v4/error_tracking/collector/api/:id/envelope/', envelope, envelopeHandler);

    const store = route({ matrix: { own: 404 },
      access,
      config,
      schema: { params: CollectorParams, response: { 200: Type.Object({ id: Type.Union([Type.String(), Type.Null()]) }) } },
    });
    const storeHandler = async (request: FastifyRequest) => {
      await admit(request);
      const body = await decodedBody(request, limit);
      let event: Record<string, unknown>;
      try {
        event = parseEvent(body);
      } catch (err) {
        if (err instanceof SentryParseError) throw badRequest('Failed to parse sentry request');
        throw err;
      }
      const error = reportedError(event);
      if (!error) throw badRequest('Unsupported sentry payload');
      await recordErrorEvent(cairn, (request.params as { id: number }).id, error, event);
      return { id: error.eventId };
    };
    collector.post('/api/v4/error_tracking/collector/api/:id/store', store, storeHandler);
    collector.post('/api/v4/error_tracking/collector/api/:id/store/', store, storeHandler);
  });
}
