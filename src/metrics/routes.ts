import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { OpenedDatabase } from '../db/index.js';
import { RawBody, route } from '../api/route.js';
import { AddressList } from '../lib/address_list.js';
import { notFound } from '../plugins/errors.js';
import { isJobRequest } from '../plugins/job_listener.js';
import {
  backgroundJobs,
  cacheEntries,
  catfileProcesses,
  dbPoolConnections,
  httpRequestDuration,
  httpRequests,
  registry,
} from './index.js';

/** Requests no route matched share one label (their URLs are unbounded). */
const UNMATCHED = 'unmatched';

/** The queue's depth by queue and state, read from the shared table. */
async function collectQueueDepth(database: OpenedDatabase) {
  const rows = await sql<{ queue: string; state: string; n: number }>`
    select queue,
           case when state = 'pending' and run_at > now() then 'scheduled' else state end as state,
           count(*)::int as n
      from background_jobs
     where state in ('pending', 'running')
     group by 1, 2`.execute(database.db);
  backgroundJobs.reset();
  for (const queue of new Set(['default', ...rows.rows.map((r) => r.queue)])) {
    for (const state of ['pending', 'scheduled', 'running']) backgroundJobs.set({ queue, state }, 0);
  }
  for (const r of rows.rows) backgroundJobs.set({ queue: r.queue, state: r.state }, Number(r.n));
}

/**
 * Prometheus metrics at /-/metrics: HTTP requests counted and timed per route pattern and status
 * (onResponse), and the gauges of this process's state read at scrape time. Only clients in
 * CAIRN_MONITORING_ALLOWLIST may read it (the address Fastify derives with the trusted proxies),
 * never a CI job (plugins/job_listener.ts); anyone else gets 404, as GitLab answers outside its monitoring whitelist. Registered before the
 * routes so that its hook sees every one of them.
 */
export function registerMetrics(app: FastifyInstance, database: OpenedDatabase) {
  const allowed = new AddressList(app.cairn.config.monitoringAllowlist, 'CAIRN_MONITORING_ALLOWLIST');

  app.addHook('onResponse', (request, reply, done) => {
    const labels = { method: request.method, route: request.routeOptions.url ?? UNMATCHED, status: String(reply.statusCode) };
    httpRequests.inc(labels);
    httpRequestDuration.observe(labels, reply.elapsedTime / 1000);
    done();
  });

  app.get('/-/metrics', route({ matrix: { own: 'ok' },
    access: { custom: 'client addresses in CAIRN_MONITORING_ALLOWLIST (404 to others); no credential is looked at' },
    config: { skipApiAuth: true },
    schema: { response: { 200: RawBody('text/plain; version=0.0.4') } },
  }), async (request, reply) => {
    // A CI job's requests (the job listener) never read metrics, whatever the allowlist says.
    if (isJobRequest(request.raw) || !allowed.includes(request.ip)) throw notFound();
    const stats = database.poolStats?.();
    if (stats) {
      dbPoolConnections.set({ state: 'total' }, stats.total);
      dbPoolConnections.set({ state: 'idle' }, stats.idle);
      dbPoolConnections.set({ state: 'in_use' }, stats.total - stats.idle);
      dbPoolConnections.set({ state: 'waiting' }, stats.waiting);
    }
    catfileProcesses.set(app.cairn.catfile.size);
    cacheEntries.set(app.cairn.cache.size);
    try {
      await collectQueueDepth(database);
    } catch (err) {
      // The rest of the metrics are still worth having while the database is away.
      request.log.warn({ err }, 'metrics: queue depth unavailable');
    }
    const body = await registry.metrics();
    return reply.type(registry.contentType).header('cache-control', 'no-store').send(body);
  });
}
