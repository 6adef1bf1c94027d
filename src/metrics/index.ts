import client from 'prom-client';

/**
 * Prometheus metrics of this process. There is one registry per process, as metrics are per
 * process by nature: Prometheus scrapes every Cairn process on its own and sums across them.
 * Counters and histograms are updated where things happen (HTTP hooks, the database driver, the
 * git wrapper, the job queue, the cache); gauges of state (pool use, queue depth, pool sizes) are
 * read when scraped (src/metrics/routes.ts). Every label has a bounded set of values: route
 * patterns, never raw URLs.
 */
export const registry = new client.Registry();

// Process memory, CPU, file descriptors, event-loop lag, heap and GC (Node's standard set).
client.collectDefaultMetrics({ register: registry });

const registers = [registry];

export const httpRequests = new client.Counter({
  name: 'http_requests_total',
  help: 'HTTP requests answered, by method, route pattern and status code.',
  labelNames: ['method', 'route', 'status'] as const,
  registers,
});

export const httpRequestDuration = new client.Histogram({
  name: 'http_request_duration_seconds',
  help: 'Time from receiving an HTTP request to finishing its answer, by method, route pattern and status code.',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers,
});

export const dbQueryDuration = new client.Histogram({
  name: 'cairn_db_query_duration_seconds',
  help: 'Database statement run time, by operation (select, insert, update, delete, other).',
  labelNames: ['operation'] as const,
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
  registers,
});

export const dbQueryErrors = new client.Counter({
  name: 'cairn_db_query_errors_total',
  help: 'Database statements that failed, by operation.',
  labelNames: ['operation'] as const,
  registers,
});

export const dbPoolConnections = new client.Gauge({
  name: 'cairn_db_pool_connections',
  help: 'Database connections of this process by state: total open, idle, in use; and callers waiting for one.',
  labelNames: ['state'] as const,
  registers,
});

export const gitProcessesSpawned = new client.Counter({
  name: 'cairn_git_processes_spawned_total',
  help: 'git processes started, by git command.',
  labelNames: ['command'] as const,
  registers,
});

export const catfileProcesses = new client.Gauge({
  name: 'cairn_git_catfile_processes',
  help: 'Long-lived `git cat-file --batch-command` processes in the pool.',
  registers,
});

export const backgroundJobs = new client.Gauge({
  name: 'cairn_background_jobs',
  help: 'Background jobs in the shared queue, by queue and state (pending = due now, scheduled = due later, running).',
  labelNames: ['queue', 'state'] as const,
  registers,
});

export const backgroundJobRuns = new client.Counter({
  name: 'cairn_background_job_runs_total',
  help: 'Background job runs in this process, by kind and outcome (done, retried, failed; lost: reclaimed by another worker while it ran, its result dropped).',
  labelNames: ['kind', 'outcome'] as const,
  registers,
});

export const backgroundJobDuration = new client.Histogram({
  name: 'cairn_background_job_duration_seconds',
  help: 'Background job run time, by kind.',
  labelNames: ['kind'] as const,
  buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900],
  registers,
});

export const cacheRequests = new client.Counter({
  name: 'cairn_cache_requests_total',
  help: 'Reads through the in-memory cache, by result: hit, miss, or bypass (the cache is off or not serving).',
  labelNames: ['result'] as const,
  registers,
});

export const cacheClears = new client.Counter({
  name: 'cairn_cache_clears_total',
  help: 'Times the in-memory cache was cleared (a write somewhere invalidated it).',
  registers,
});

export const cacheEntries = new client.Gauge({
  name: 'cairn_cache_entries',
  help: 'Entries held in the in-memory cache.',
  registers,
});

/** The git command of an argument list (`--git-dir X -c a=b log ...` -> log), for a bounded label. */
export function gitCommandOf(args: readonly string[]): string {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '-c' || a === '-C' || a === '--git-dir' || a === '--work-tree' || a === '--namespace') {
      i++;
      continue;
    }
    if (a.startsWith('-')) continue;
    return /^[a-z][a-z0-9-]{0,39}$/.test(a) ? a : 'other';
  }
  return 'none';
}

/** The kind of a SQL statement, for the operation label. */
export function sqlOperationOf(text: string): string {
  const m = /^\s*(?:with\b[\s\S]*?\)\s*)?(select|insert|update|delete|begin|commit|rollback|savepoint|release)\b/i.exec(text);
  if (!m) return 'other';
  const op = m[1].toLowerCase();
  return ['begin', 'commit', 'rollback', 'savepoint', 'release'].includes(op) ? 'transaction' : op;
}
