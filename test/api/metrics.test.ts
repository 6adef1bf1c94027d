import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { defineJob, drainJobs, enqueue } from '../../src/jobs/queue.js';
import { loadConfig } from '../../src/config.js';
import { AddressList } from '../../src/lib/address_list.js';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text exposition format 0.0.4: HELP/TYPE comments and `name{l="v",...} value` lines. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    if (line.startsWith('#')) {
      const m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
      if (m) types.set(m[1], m[2]);
      else assert.match(line, /^# HELP \S+ /, `comment line: ${line}`);
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/.exec(line);
    assert.ok(m, `sample line: ${line}`);
    const labels: Record<string, string> = {};
    const labelText = m[2] ?? '';
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/y;
    let lm: RegExpExecArray | null;
    let end = 0;
    while ((lm = re.exec(labelText))) {
      labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
      end = re.lastIndex;
    }
    assert.equal(end, labelText.length, `labels of ${line}`);
    // Values are Go floats: NaN and Inf in any case.
    const word = m[3].toLowerCase();
    const value = word === '+inf' || word === 'inf' ? Infinity : word === '-inf' ? -Infinity : Number(m[3]);
    assert.ok(!Number.isNaN(value) || word === 'nan', `value of ${line}`);
    samples.push({ name: m[1], labels, value });
  }
  return { samples, types };
}

const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
const total = (samples: Sample[], name: string, labels: Record<string, string> = {}) => find(samples, name, labels).reduce((n, s) => n + s.value, 0);

defineJob('test_metrics_ok', async () => {});
defineJob('test_metrics_fails', async () => { throw new Error('boom'); });

describe('Prometheus metrics at /-/metrics', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  const scrape = async (remoteAddress = '127.0.0.1', headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'GET', url: '/-/metrics', remoteAddress, headers });

  it('scraped after traffic: requests by route pattern and status, durations, database, git, jobs, cache, process', async () => {
    const before = parseExposition((await scrape()).body).samples;
    const project = await t.post('/api/v4/projects', { name: t.unique('metrics'), initialize_with_readme: true });
    assert.equal(project.status, 201);
    const id = project.body.id;
    for (let i = 0; i < 3; i++) assert.equal((await t.get(`/api/v4/projects/${id}`)).status, 200);
    assert.equal((await t.get('/api/v4/projects/999999')).status, 404);
    assert.equal((await t.get(`/api/v4/projects/${id}/repository/files/README.md/raw`, { query: { ref: project.body.default_branch } })).status, 200);
    assert.equal((await t.get('/api/v4/no/such/page/at/all')).status, 404);
    await enqueue(t.db, 'test_metrics_ok');
    await enqueue(t.db, 'test_metrics_fails', {}, { maxAttempts: 1 });
    await enqueue(t.db, 'test_metrics_fails', {}, { maxAttempts: 3 });
    await enqueue(t.db, 'test_metrics_ok', {}, { runAt: new Date(Date.now() + 3600_000), queue: 'metrics_later' });
    await drainJobs(t.app.cairn);

    const res = await scrape();
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const { samples, types } = parseExposition(res.body);
    const grew = (name: string, labels: Record<string, string> = {}) => total(samples, name, labels) - total(before, name, labels);

    // HTTP: labelled with the route pattern, never the URL.
    assert.equal(types.get('http_requests_total'), 'counter');
    assert.equal(grew('http_requests_total', { method: 'GET', route: '/api/v4/projects/:id', status: '200' }), 3);
    assert.equal(grew('http_requests_total', { method: 'GET', route: '/api/v4/projects/:id', status: '404' }), 1);
    assert.equal(grew('http_requests_total', { method: 'POST', route: '/api/v4/projects', status: '201' }), 1);
    assert.equal(grew('http_requests_total', { route: 'unmatched', status: '404' }), 1);
    assert.ok(!samples.some((s) => s.labels.route?.includes(String(id)) || s.labels.route?.includes('/no/such')), 'no raw URL as a label');
    assert.equal(types.get('http_request_duration_seconds'), 'histogram');
    const durationCount = find(samples, 'http_request_duration_seconds_count', { route: '/api/v4/projects/:id', status: '200' })[0];
    assert.ok(durationCount.value >= 3);
    const inf = find(samples, 'http_request_duration_seconds_bucket', { route: '/api/v4/projects/:id', status: '200', le: '+Inf' })[0];
    assert.equal(inf.value, durationCount.value);
    assert.ok(find(samples, 'http_request_duration_seconds_sum', { route: '/api/v4/projects/:id', status: '200' })[0].value > 0);

    // Database: statements timed by operation; the pool's connections.
    assert.ok(grew('cairn_db_query_duration_seconds_count', { operation: 'select' }) > 5);
    assert.ok(grew('cairn_db_query_duration_seconds_count', { operation: 'insert' }) >= 1);
    const pool = Object.fromEntries(find(samples, 'cairn_db_pool_connections').map((s) => [s.labels.state, s.value]));
    assert.ok(pool.total >= 1, JSON.stringify(pool));
    assert.equal(pool.in_use, pool.total - pool.idle);
    assert.ok(pool.waiting >= 0);

    // git: processes started by command (the README commit), and the cat-file pool serving the raw read.
    assert.ok(grew('cairn_git_processes_spawned_total') >= 2, 'git processes counted');
    assert.ok(find(samples, 'cairn_git_processes_spawned_total').every((s) => /^[a-z][a-z0-9-]*$/.test(s.labels.command)));
    assert.ok(grew('cairn_git_processes_spawned_total', { command: 'cat-file' }) >= 1);
    assert.equal(find(samples, 'cairn_git_catfile_processes')[0].value, t.app.cairn.catfile.size);
    assert.ok(t.app.cairn.catfile.size >= 1);

    // Background jobs: outcomes of the runs and the depth of the queue at scrape time.
    assert.equal(grew('cairn_background_job_runs_total', { kind: 'test_metrics_ok', outcome: 'done' }), 1);
    assert.equal(grew('cairn_background_job_runs_total', { kind: 'test_metrics_fails', outcome: 'failed' }), 1);
    assert.equal(grew('cairn_background_job_runs_total', { kind: 'test_metrics_fails', outcome: 'retried' }), 1);
    assert.ok(find(samples, 'cairn_background_job_duration_seconds_count', { kind: 'test_metrics_ok' })[0].value >= 1);
    assert.equal(types.get('cairn_background_jobs'), 'gauge');
    assert.equal(total(samples, 'cairn_background_jobs', { queue: 'metrics_later', state: 'scheduled' }), 1);
    // The retried job waits for its backoff.
    assert.ok(total(samples, 'cairn_background_jobs', { queue: 'default', state: 'scheduled' }) >= 1);
    const pending = await t.db.selectFrom('background_jobs').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', 'pending').executeTakeFirstOrThrow();
    assert.equal(total(samples, 'cairn_background_jobs', { state: 'pending' }) + total(samples, 'cairn_background_jobs', { state: 'scheduled' }), Number(pending.n));

    // Cache: the token and project reads of the repeated requests were hits.
    assert.ok(grew('cairn_cache_requests_total', { result: 'hit' }) >= 2, 'cache hits');
    assert.ok(grew('cairn_cache_requests_total', { result: 'miss' }) >= 1, 'cache misses');
    assert.ok(grew('cairn_cache_clears_total') >= 1, 'the writes cleared the cache');
    assert.equal(find(samples, 'cairn_cache_entries').length, 1);

    // The process: memory and event-loop lag (Node's standard metrics).
    assert.ok(find(samples, 'process_resident_memory_bytes')[0].value > 10 * 1024 * 1024);
    assert.ok(find(samples, 'nodejs_heap_size_used_bytes')[0].value > 0);
    assert.ok(find(samples, 'nodejs_eventloop_lag_seconds').length === 1);
    assert.ok(find(samples, 'nodejs_eventloop_lag_p99_seconds').length === 1);
  });

  it('a cache clear is counted', async () => {
    const count = async () => total(parseExposition((await scrape()).body).samples, 'cairn_cache_clears_total');
    const was = await count();
    t.app.cairn.cache.clear();
    assert.equal(await count(), was + 1);
  });

  it('refuses clients outside CAIRN_MONITORING_ALLOWLIST with 404, whatever their credentials', async () => {
    for (const address of ['10.1.2.3', '203.0.113.9', '2001:db8::1', '::ffff:192.0.2.1']) {
      const res = await scrape(address, { 'private-token': ROOT_TOKEN });
      assert.equal(res.statusCode, 404, address);
      assert.deepEqual(res.json(), { message: '404 Not found' });
      assert.doesNotMatch(res.body, /http_requests_total/);
    }
    // Loopback in both families (and IPv4 seen as mapped IPv6) is allowed by default.
    for (const address of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) assert.equal((await scrape(address)).statusCode, 200, address);
    // Behind a trusted proxy the client is the forwarded address, not the proxy's.
    assert.equal((await scrape('127.0.0.1', { 'x-forwarded-for': '203.0.113.9' })).statusCode, 404);
    // A spoofed X-Forwarded-For from an untrusted peer changes nothing.
    assert.equal((await scrape('10.9.9.9', { 'x-forwarded-for': '127.0.0.1' })).statusCode, 404);
    // Refusals are themselves counted, under the route pattern.
    const samples = parseExposition((await scrape()).body).samples;
    assert.ok(total(samples, 'http_requests_total', { route: '/-/metrics', status: '404' }) >= 6);
  });

  it('scraped over real HTTP by a configured monitoring address', async () => {
    const other = await createTestContext({ monitoringAllowlist: ['192.0.2.0/24', '127.0.0.1'] });
    try {
      await other.app.listen({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${(other.app.server.address() as AddressInfo).port}`;
      assert.equal((await fetch(`${base}/api/v4/version`, { headers: { 'private-token': ROOT_TOKEN } })).status, 200);
      const res = await fetch(`${base}/-/metrics`);
      assert.equal(res.status, 200);
      const { samples } = parseExposition(await res.text());
      assert.ok(total(samples, 'http_requests_total', { route: '/api/v4/version', status: '200' }) >= 1);
      // From ::1, which this list leaves out.
      const ipv6 = await other.app.inject({ method: 'GET', url: '/-/metrics', remoteAddress: '::1' });
      assert.equal(ipv6.statusCode, 404);
      assert.equal((await other.app.inject({ method: 'GET', url: '/-/metrics', remoteAddress: '192.0.2.77' })).statusCode, 200);
    } finally {
      await other.close();
    }
  });

  it('the allowlist: addresses and CIDR ranges, invalid entries refused at start', () => {
    assert.deepEqual(loadConfig({}).monitoringAllowlist, ['127.0.0.0/8', '::1/128']);
    assert.deepEqual(loadConfig({ CAIRN_MONITORING_ALLOWLIST: ' 10.0.0.0/8, fd00::/8 ,' }).monitoringAllowlist, ['10.0.0.0/8', 'fd00::/8']);
    const list = new AddressList(['10.0.0.0/8', 'fd00::/8', '192.0.2.7']);
    assert.ok(list.includes('10.200.0.1'));
    assert.ok(list.includes('fd12::5'));
    assert.ok(list.includes('192.0.2.7'));
    assert.ok(!list.includes('192.0.2.8'));
    assert.ok(!list.includes('11.0.0.1'));
    assert.ok(!list.includes(undefined));
    assert.ok(!list.includes('not an address'));
    for (const bad of ['10.0.0.0/33', 'localhost', '10.0.0.0/8/1', '::1/129', '10.0.0.0/x']) assert.throws(() => new AddressList([bad], 'CAIRN_MONITORING_ALLOWLIST'), /CAIRN_MONITORING_ALLOWLIST/, bad);
  });
});
