import path from 'node:path';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from './config.js';
import type { Cairn } from './context.js';
import { openDatabase, type OpenedDatabase } from './db/index.js';
import { migrateToLatest } from './db/migrate.js';
import { registerRoutes } from './api/index.js';
import { registerErrorHandling } from './plugins/errors.js';
import { registerParams, parseNestedParams } from './plugins/params.js';
import { registerAuth, personalAccessTokenResolver } from './plugins/auth.js';
import { bootstrap } from './services/bootstrap.js';
import { ArchiveCache } from './git/archive.js';
import { CatFilePool } from './git/catfile.js';
import { registerHousekeeping } from './services/housekeeping.js';
import { registerHookEvents } from './hooks/events.js';
import { registerMergeRequestHooks } from './services/merge_requests.js';
import { registerPipelineHooks } from './ci/pipelines/create.js';
import './ci/pipelines/downstream.js';
import './services/notifications.js';
import './ci/jobs/stuck.js';
import './ci/pipelines/schedules.js';
import './ci/pipelines/merge_request_pipelines.js';
import './services/leftovers.js';
import { redactUrl, SECRET_HEADERS } from './lib/redact.js';
import { registerRequestLog, resolveLogFormat, textLogStream } from './plugins/request_log.js';
import { PAGE_HEADERS } from './oauth/html.js';
import { ensureStorages } from './services/storages.js';
import { SharedCache, startCache } from './cache/index.js';
import { startRequestReads } from './cache/read_tracking.js';
import { responseSerializer, type RouteRecord } from './plugins/responses.js';
import { lazyValidation } from './plugins/validation.js';
import { NotificationHub } from './db/notifications.js';
import { renderCache } from './cache/lru.js';
import { registerOpenApi } from './api/openapi/document.js';
import { registerMetrics } from './metrics/routes.js';

export interface BuildOptions {
  config: Config;
  /** An already open database (tests share one); opened from config otherwise. */
  database?: OpenedDatabase;
  /** Apply migrations and create root (default true). */
  prepare?: boolean;
  logger?: boolean | object;
}

export type App = FastifyInstance;

export async function buildApp(opts: BuildOptions): Promise<App> {
  const { config } = opts;
  await ensureStorages(config);
  const database = opts.database ?? (await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }));
  if (opts.prepare !== false) await migrateToLatest(database.db);

  const validation = lazyValidation();
  const app = Fastify({
    logger: opts.logger === false ? false : {
      level: config.logLevel,
      ...(resolveLogFormat(config.logFormat ?? 'auto') === 'text' ? { stream: textLogStream() } : {}),
      ...(typeof opts.logger === 'object' ? opts.logger : {}),
      // Tokens may come as query parameters; the logged URL must not carry them. Credential headers
      // are censored wherever a log line carries request or response headers.
      redact: {
        paths: SECRET_HEADERS.flatMap((h) => [`req.headers["${h}"]`, `request.headers["${h}"]`, `headers["${h}"]`, `res.headers["${h}"]`]),
        censor: '[FILTERED]',
      },
      serializers: {
        req: (req: { method: string; url: string; host?: string; ip?: string; socket?: { remotePort?: number } }) => ({
          method: req.method, url: redactUrl(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort,
        }),
      },
    },
    // One line per request, written when it is answered (plugins/request_log.ts).
    logController: new LogController({ disableRequestLogging: true }),
    // Ordinary JSON and form bodies; the commits and files routes set their own (contentBodyLimit).
    // Git HTTP streams its bodies straight to git and is not limited here.
    bodyLimit: config.maxBodySize,
    // X-Forwarded-For only from configured proxies: otherwise any client could pick its address
    // (and slip past per-IP limits).
    trustProxy: config.trustedProxies.length ? config.trustedProxies : false,
    // GitLab paths carry URL-encoded slashes (project paths, file paths); keep them as given.
    routerOptions: { maxParamLength: 4096, ignoreDuplicateSlashes: false, querystringParser: (qs: string) => parseNestedParams(qs) },
    ajv: { customOptions: { coerceTypes: 'array', useDefaults: true, removeAdditional: false, allErrors: false } },
    // Request validators compile on each route's first request (plugins/validation.ts).
    schemaController: validation.controller,
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Content-addressed renderings: one memory budget for the process (cache/lru.ts).
  renderCache.setBudget(config.renderCacheBytes);
  const cairn: Cairn = {
    config,
    db: database.db,
    dbKind: database.kind,
    tokenResolvers: [personalAccessTokenResolver],
    catfile: new CatFilePool(),
    archives: new ArchiveCache(path.join(config.dataDir, 'cache', 'archives'), config.archiveCacheBytes),
    cache: new SharedCache({ off: !config.cache }),
    // The process's one LISTEN connection: cache invalidation, runner long polls, the worker and
    // live job logs wait on its channels (db/notifications.ts).
    notifications: await NotificationHub.start(database, app.log),
    postReceiveHooks: [],
    closers: [],
    draining: false,
  };
  // Closers run last-registered first: the listening connection closes after all that waits on it.
  cairn.closers.push(() => cairn.notifications.close());
  cairn.closers.push(() => cairn.catfile.close());
  cairn.closers.push(await startCache(cairn.cache, database, cairn.notifications, app.log));
  registerHousekeeping(cairn);
  registerHookEvents(cairn);
  // A push's branch pipelines first, then the merge requests of the branch (refreshed, then their
  // merge request pipelines): the newest pipeline at a head is the merge request's, as GitLab's.
  registerPipelineHooks(cairn);
  registerMergeRequestHooks(cairn);
  app.decorate('cairn', cairn);

  // python-gitlab compares the whole Content-Type header: JSON goes out without a charset.
  // No answer is sniffed into another type (a JSON error or raw file rendered as HTML); answers
  // that are not pages set their own policy (pages: oauth/routes.ts sendPage) and get a CSP that
  // allows nothing, so even a browser that renders one runs nothing in it.
  app.addHook('onSend', async (_request, reply, payload) => {
    const type = reply.getHeader('content-type');
    if (typeof type === 'string' && type.startsWith('application/json;')) reply.header('content-type', 'application/json');
    reply.header('x-content-type-options', 'nosniff');
    if (typeof type === 'string' && type.startsWith('text/html')) {
      for (const [name, value] of Object.entries(PAGE_HEADERS)) if (!reply.hasHeader(name)) reply.header(name, value);
    } else if (!reply.hasHeader('content-security-policy')) {
      reply.header('content-security-policy', "default-src 'none'; frame-ancestors 'none'; sandbox");
    }
    // Stopping: no keep-alive connection is left for a client or balancer to send a request on.
    if (cairn.draining) reply.header('connection', 'close');
    return payload;
  });

  // Fastify runs onClose while the server still drains: requests in flight finish on an open database.
  const inFlight = new Set<unknown>();
  app.decorateRequest('cacheGeneration', 0);
  app.addHook('onRequest', (request, reply, done) => {
    inFlight.add(request);
    // A client that went away (a runner's aborted long poll) gets neither onResponse nor, once the
    // handler has begun, onRequestAbort: the response's close ends it in every case.
    reply.raw.once('close', () => inFlight.delete(request));
    request.cacheGeneration = cairn.cache.generation;
    // What the request reads from here on, for the values it caches (src/cache/read_tracking.ts).
    startRequestReads();
    done();
  });
  app.addHook('onResponse', (request, _reply, done) => { inFlight.delete(request); done(); });
  registerRequestLog(app);
  app.addHook('onRequestAbort', (request, done) => { inFlight.delete(request); done(); });

  // Every route's declaration, in registration order: the route table test and the permission
  // matrix walk it.
  const routeTable: RouteRecord[] = [];
  app.decorate('routeTable', routeTable);
  app.decorate('compileAllValidators', validation.compileAll);
  app.addHook('onRoute', (options) => {
    for (const method of [options.method].flat()) {
      const schema = options.schema as any;
      const c = options.config ?? {};
      const config = { skipApiAuth: c.skipApiAuth, readUser: c.readUser, allowScopes: c.allowScopes, jobToken: c.jobToken };
      routeTable.push({ method, url: options.url, access: c.access, matrix: c.matrix, config, response: schema?.response, params: schema?.params, querystring: schema?.querystring, body: schema?.body });
    }
  });
  app.setSerializerCompiler(responseSerializer(config.validateResponses));

  registerErrorHandling(app);
  registerParams(app);
  registerAuth(app);
  // Before the routes: it records each as it is registered.
  await registerOpenApi(app);
  registerMetrics(app, database);
  await registerRoutes(app);

  app.addHook('onClose', async () => {
    const drainMs = (config.shutdownTimeout ?? 30) * 1000;
    for (let waited = 0; inFlight.size && waited < drainMs; waited += 20) await new Promise((r) => setTimeout(r, 20));
    for (const close of cairn.closers.reverse()) await close();
    if (!opts.database) await database.close();
  });

  // The generated root password is shown once, on stdout, whatever the log level.
  if (opts.prepare !== false) await bootstrap(cairn, (m) => console.log(m));
  return app;
}
