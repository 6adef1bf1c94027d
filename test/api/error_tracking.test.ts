import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { freePort } from '../helpers/serve.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** An envelope as the SDKs write it: header line, then item header and payload lines. */
function envelope(events: Record<string, unknown>[], opts: { withLength?: boolean; extra?: string } = {}): string {
  const lines = [JSON.stringify({ event_id: 'e'.repeat(32), sent_at: new Date().toISOString() })];
  for (const e of events) {
    const payload = JSON.stringify(e);
    lines.push(JSON.stringify(opts.withLength ? { type: 'event', length: Buffer.byteLength(payload) } : { type: 'event' }));
    lines.push(payload);
  }
  if (opts.extra) lines.push(opts.extra);
  return lines.join('\n') + '\n';
}

function event(type: string, value: string, extra: Record<string, unknown> = {}) {
  return {
    event_id: Math.random().toString(16).slice(2).padEnd(32, '0'),
    timestamp: Date.now() / 1000,
    platform: 'node',
    level: 'error',
    environment: 'production',
    exception: {
      values: [
        {
          type,
          value,
          stacktrace: { frames: [{ function: 'outer', module: 'app' }, { function: 'handler', module: 'app.routes' }] },
        },
      ],
    },
    ...extra,
  };
}

describe('error tracking API and collector', () => {
  let t: TestContext;
  let base: string;
  let project: Project;
  let other: Project;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, outsider: TestUser;
  let key: string;
  const api = (rest: string, p: Project = project) => `/api/v4/projects/${p.id}/error_tracking${rest}`;
  const collector = (kind: 'envelope' | 'store', id = project.id) => `/api/v4/error_tracking/collector/api/${id}/${kind}/`;

  /** A raw POST to the collector, as an SDK sends it (no API token). */
  async function send(url: string, body: string | Buffer, headers: Record<string, string> = {}, query: Record<string, string> = {}) {
    const res = await t.app.inject({ method: 'POST', url, payload: body, headers, query });
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : null };
  }
  const auth = (k: string) => ({ 'x-sentry-auth': `Sentry sentry_version=7, sentry_client=test/1.0, sentry_key=${k}` });

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await createTestContext({ externalUrl: base });
    await t.app.listen({ port, host: '127.0.0.1' });
    project = await t.createProject();
    other = await t.createProject();
    [guest, reporter, developer, maintainer, outsider] = await Promise.all(Array.from({ length: 5 }, () => t.createUser()));
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
  });
  after(async () => {
    await t?.close();
  });

  it('settings: 404 until configured, PATCH and PUT for maintainers', async () => {
    const none = await t.get(api('/settings'), { token: maintainer.token });
    assert.equal(none.status, 404);
    assert.equal(none.body.message, '404 Error Tracking Setting Not Found');
    assert.equal((await t.call('PATCH', api('/settings'), { token: maintainer.token, body: { integrated: true } })).status, 400, 'active is required');
    assert.equal((await t.call('PATCH', api('/settings'), { token: maintainer.token, body: { active: 'maybe' } })).status, 400);
    const patched = await t.call('PATCH', api('/settings'), { token: maintainer.token, body: { active: true, integrated: true } });
    assert.equal(patched.status, 200);
    assert.deepEqual(patched.body, { active: true, project_name: null, sentry_external_url: null, api_url: null, integrated: true });
    const off = await t.call('PATCH', api('/settings'), { token: maintainer.token, form: 'active=false' });
    assert.equal(off.status, 200);
    assert.equal(off.body.active, false);
    assert.equal(off.body.integrated, true, 'integrated is kept when not given');
    assert.equal((await t.get(api('/settings'), { token: maintainer.token })).body.active, false);
    assert.equal((await t.put(api('/settings'), { active: true }, { token: maintainer.token })).status, 400, 'PUT needs integrated too');
    const put = await t.put(api('/settings'), { active: true, integrated: true }, { token: maintainer.token });
    assert.equal(put.status, 200);
    assert.equal(put.body.active, true);

    for (const u of [guest, reporter, developer]) {
      assert.equal((await t.get(api('/settings'), { token: u.token })).status, 403);
      assert.equal((await t.call('PATCH', api('/settings'), { token: u.token, body: { active: false } })).status, 403);
    }
    assert.equal((await t.get(api('/settings'), { token: outsider.token })).status, 404);
    assert.equal((await t.get(api('/settings'), { token: null })).status, 401);
    assert.equal((await t.get(api('/settings'))).status, 200, 'administrators');
  });

  it('client keys: create with a generated key and its DSN, list, delete', async () => {
    const created = await t.post(api('/client_keys'), {}, { token: maintainer.token });
    assert.equal(created.status, 201);
    assert.equal(created.body.active, true);
    assert.match(created.body.public_key, /^glet_[0-9a-f]{32}$/);
    key = created.body.public_key;
    assert.equal(created.body.sentry_dsn, `http://${key}@127.0.0.1:${new URL(base).port}/api/v4/error_tracking/collector/${project.id}`);
    const second = await t.post(api('/client_keys'), {}, { token: maintainer.token });
    assert.notEqual(second.body.public_key, key);
    const list = await t.get(api('/client_keys'), { token: maintainer.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((k: any) => k.id), [created.body.id, second.body.id]);
    assert.equal(list.headers['x-total'], '2');
    const deleted = await t.delete(api(`/client_keys/${second.body.id}`), { token: maintainer.token });
    assert.equal(deleted.status, 200);
    assert.equal(deleted.body.public_key, second.body.public_key);
    assert.equal((await t.delete(api(`/client_keys/${second.body.id}`), { token: maintainer.token })).status, 404);
    assert.equal((await t.delete(api(`/client_keys/${created.body.id}`, other), { token: maintainer.token })).status, 404);
    assert.equal((await t.get(api('/client_keys'), { token: maintainer.token })).body.length, 1);
    // The deleted key no longer reports.
    assert.equal((await send(collector('envelope'), envelope([event('E', 'v')]), auth(second.body.public_key))).status, 401);

    for (const u of [guest, reporter, developer]) {
      assert.equal((await t.get(api('/client_keys'), { token: u.token })).status, 403);
      assert.equal((await t.post(api('/client_keys'), {}, { token: u.token })).status, 403);
      assert.equal((await t.delete(api(`/client_keys/${created.body.id}`), { token: u.token })).status, 403);
    }
    assert.equal((await t.get(api('/client_keys'), { token: outsider.token })).status, 404);
    assert.equal((await t.post(api('/client_keys'), {}, { token: null })).status, 401);
  });

  it('collector: envelope and store events, grouped by fingerprint', async () => {
    const first = await send(collector('envelope'), envelope([event('ZeroDivisionError', 'divided by 0')]), auth(key));
    assert.equal(first.status, 204);
    // Explicit item lengths, and the key in the query string (what @sentry/node sends), a trailing-slash-less path.
    const again = await send(`/api/v4/error_tracking/collector/api/${project.id}/envelope`, envelope([event('ZeroDivisionError', 'divided by 0')], { withLength: true, extra: '{"type":"client_report"}\n{"discarded_events":[]}' }), {}, { sentry_key: key, sentry_version: '7' });
    assert.equal(again.status, 204);
    const stored = event('KeyError', "'missing'", { transaction: 'GET /items' });
    const legacy = await send(collector('store'), JSON.stringify(stored), { ...auth(key), 'content-type': 'application/json' });
    assert.equal(legacy.status, 200);
    assert.deepEqual(legacy.body, { id: stored.event_id });
    const gz = zlib.gzipSync(envelope([event('ZeroDivisionError', 'divided by 0')]));
    assert.equal((await send(collector('envelope'), gz, { ...auth(key), 'content-encoding': 'gzip', 'content-type': 'application/x-sentry-envelope' })).status, 204);

    const list = await t.get(api('/errors'), { token: reporter.token });
    assert.equal(list.status, 200);
    assert.equal(list.body.length, 2);
    const zero = list.body.find((e: any) => e.type === 'error' && e.title.startsWith('ZeroDivisionError'));
    assert.equal(zero.count, 3);
    assert.equal(zero.title, 'ZeroDivisionError: divided by 0');
    assert.equal(zero.message, 'divided by 0');
    assert.equal(zero.culprit, 'handler(app.routes)', 'the last frame when there is no transaction');
    assert.equal(zero.platform, 'node');
    assert.equal(zero.status, 'unresolved');
    const keyError = list.body.find((e: any) => e.title.startsWith('KeyError'));
    assert.equal(keyError.culprit, 'GET /items');
    assert.equal(keyError.count, 1);
    assert.equal(keyError.external_url, `${base}/${(await t.get(`/api/v4/projects/${project.id}`)).body.path_with_namespace}/-/error_tracking/${keyError.id}/details`);
  });

  it('collector: refuses bad keys, disabled tracking and malformed bodies', async () => {
    const body = envelope([event('E', 'v')]);
    assert.equal((await send(collector('envelope'), body)).status, 401, 'no key');
    assert.equal((await send(collector('envelope'), body, auth('glet_' + '0'.repeat(32)))).status, 401, 'unknown key');
    assert.equal((await send(collector('envelope'), body, { 'x-sentry-auth': 'Basic abc' })).status, 401);
    assert.equal((await send(collector('envelope', 2147483000), body, auth(key))).status, 404, 'no such project');
    assert.equal((await send('/api/v4/error_tracking/collector/api/abc/envelope', body, auth(key))).status, 400);
    // A key of this project does not report to another one (whose tracking is on).
    await t.put(api('/settings', other), { active: true, integrated: true });
    assert.equal((await send(collector('envelope', other.id), body, auth(key))).status, 401);
    // Tracking off, or not integrated: 404.
    await t.put(api('/settings', other), { active: false, integrated: true });
    assert.equal((await send(collector('envelope', other.id), body, auth(key))).status, 404);
    await t.call('PATCH', api('/settings'), { token: maintainer.token, body: { active: true, integrated: false } });
    assert.equal((await send(collector('envelope'), body, auth(key))).status, 404);
    await t.call('PATCH', api('/settings'), { token: maintainer.token, body: { active: true, integrated: true } });

    for (const bad of ['', 'not json', '{"event_id":"x"}\n{"no":"type"}\n{}', '{}\n{"type":"event","length":999}\n{}', '{}\n{"type":"event"}\n[1,2]', '[]']) {
      const res = await send(collector('envelope'), bad, auth(key));
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.equal(res.body.message, '400 Bad request - Failed to parse sentry request');
    }
    const noException = await send(collector('envelope'), envelope([{ message: 'hello', level: 'info' }]), auth(key));
    assert.equal(noException.status, 400);
    assert.equal((await send(collector('store'), '{nope', auth(key))).status, 400);
    assert.equal((await send(collector('envelope'), Buffer.from('not gzip'), { ...auth(key), 'content-encoding': 'gzip' })).status, 400);
    assert.equal((await send(collector('envelope'), body, { ...auth(key), 'content-encoding': 'br' })).status, 415);
    // A small gzip body that inflates past the body limit.
    const bomb = zlib.gzipSync(Buffer.alloc(t.config.maxBodySize + 1024, 0x20));
    assert.equal((await send(collector('envelope'), bomb, { ...auth(key), 'content-encoding': 'gzip' })).status, 413);
    // NUL characters in the payload are stored without them (jsonb refuses them).
    assert.equal((await send(collector('envelope'), envelope([event('NulError', 'a\u0000b')]), auth(key))).status, 204);
  });

  it('errors API: filters, sorts, one error with its latest event, status updates; permissions', async () => {
    const all = await t.get(api('/errors'), { token: reporter.token });
    const zero = all.body.find((e: any) => e.title.startsWith('ZeroDivisionError'));
    const byFrequency = await t.get(api('/errors'), { token: reporter.token, query: { sort: 'frequency' } });
    assert.equal(byFrequency.body[0].id, zero.id);
    const search = await t.get(api('/errors'), { token: reporter.token, query: { query: 'missing' } });
    assert.deepEqual(search.body.map((e: any) => e.title), ["KeyError: 'missing'"]);
    assert.equal((await t.get(api('/errors'), { token: reporter.token, query: { search_term: 'DIVIDED' } })).body.length, 1);
    assert.equal((await t.get(api('/errors'), { token: reporter.token, query: { sort: 'nonsense' } })).status, 400);
    assert.equal((await t.get(api('/errors'), { token: reporter.token, query: { status: 'nonsense' } })).status, 400);

    const one = await t.get(api(`/errors/${zero.id}`), { token: reporter.token });
    assert.equal(one.status, 200);
    assert.equal(one.body.count, 3);
    assert.equal(one.body.latest_event.environment, 'production');
    assert.equal(one.body.latest_event.level, 'error');
    assert.equal(one.body.latest_event.payload.exception.values[0].type, 'ZeroDivisionError');
    assert.equal((await t.get(api('/errors/999999'), { token: reporter.token })).status, 404);
    assert.equal((await t.get(api(`/errors/${zero.id}`, other))).status, 404);

    const resolved = await t.put(api(`/errors/${zero.id}`), { status: 'resolved' }, { token: reporter.token });
    assert.equal(resolved.status, 200);
    assert.equal(resolved.body.status, 'resolved');
    assert.equal((await t.put(api(`/errors/${zero.id}`), { status: 'closed' }, { token: reporter.token })).status, 400);
    const onlyResolved = await t.get(api('/errors'), { token: reporter.token, query: { status: 'resolved' } });
    assert.deepEqual(onlyResolved.body.map((e: any) => e.id), [zero.id]);
    const unresolved = await t.get(api('/errors'), { token: reporter.token, query: { status: 'unresolved' } });
    assert.ok(!unresolved.body.some((e: any) => e.id === zero.id));

    assert.equal((await t.get(api('/errors'), { token: guest.token })).status, 403);
    assert.equal((await t.put(api(`/errors/${zero.id}`), { status: 'ignored' }, { token: guest.token })).status, 403);
    assert.equal((await t.get(api('/errors'), { token: outsider.token })).status, 404);
    assert.equal((await t.get(api('/errors'), { token: null })).status, 401);
    assert.equal((await t.get(api('/errors'), { token: developer.token })).status, 200);
  });

  it('stores an error reported by the real @sentry/node SDK through the DSN', async () => {
    const keys = await t.get(api('/client_keys'), { token: maintainer.token });
    const dsn = keys.body[0].sentry_dsn;
    const child = spawn(process.execPath, [path.join(ROOT, 'test/helpers/sentry_report.mjs')], {
      cwd: ROOT,
      env: { ...process.env, SENTRY_DSN: dsn, NODE_OPTIONS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, err);
    const report = JSON.parse(out.trim().split('\n').pop()!);
    assert.equal(report.flushed, true);
    assert.equal(report.sent.length, 2);

    const list = await t.get(api('/errors'), { token: reporter.token, query: { query: 'boom from the Sentry SDK' } });
    assert.equal(list.status, 200);
    assert.equal(list.body.length, 1, JSON.stringify(list.body));
    const reported = list.body[0];
    assert.equal(reported.title, 'TypeError: boom from the Sentry SDK');
    assert.equal(reported.platform, 'node');
    assert.equal(reported.count, 2, 'both reports, the second gzip-encoded by the SDK, grouped as one error');
    assert.match(reported.culprit, /failingOperation/);
    const detail = await t.get(api(`/errors/${reported.id}`), { token: reporter.token });
    assert.equal(detail.body.latest_event.environment, 'ci-test');
    assert.ok(report.sent.includes(detail.body.latest_event.event_id));
    assert.equal(detail.body.latest_event.payload.release, 'cairn-test@1.0.0');
  });
});
