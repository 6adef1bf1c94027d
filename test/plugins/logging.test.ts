import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { ROOT_TOKEN } from '../helpers/app.js';
import { formatLogLine, resolveLogFormat } from '../../src/plugins/request_log.js';
import { openTestDatabase } from '../helpers/database.js';

describe('request logs', () => {
  let app: App;
  let drop: () => Promise<void>;
  let tmpDir: string;
  const lines: string[] = [];
  before(async () => {
    const opened = await openTestDatabase();
    drop = opened.drop;
    tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-log-'));
    const config = loadConfig({ CAIRN_DATA_DIR: tmpDir, CAIRN_ROOT_TOKEN: ROOT_TOKEN, CAIRN_ROOT_PASSWORD: 'root-password-123' }, { databaseUrl: opened.databaseUrl, logLevel: 'info' });
    const stream = new Writable({ write(chunk, _enc, done) { lines.push(String(chunk)); done(); } });
    app = await buildApp({ config, database: opened.database, logger: { level: 'info', stream } });
    await app.ready();
  });
  after(async () => {
    await app.close();
    await drop();
    fs.rmSync(tmpDir, { recursive: true, force: true });
  });

  it('one line per request: method, path (credentials redacted), status, duration; runner long polls without a job only at debug', async () => {
    lines.length = 0;
    await app.inject({ method: 'GET', url: '/api/v4/projects?private_token=secret-value&per_page=2' });
    await app.inject({ method: 'GET', url: '/api/v4/no-such-route' });
    await app.inject({ method: 'POST', url: '/api/v4/jobs/request', payload: { token: 'nope' } });
    const parsed = lines.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const requests = parsed.filter((l) => l.request).map((l) => l.request);
    assert.equal(requests.length, 3, JSON.stringify(parsed));
    assert.equal(parsed.filter((l) => /incoming request|request completed/.test(l.msg)).length, 0, 'no second line per request');
    const [list, missing, poll] = requests;
    assert.deepEqual([list.method, list.status, missing.status, poll.status], ['GET', 401, 404, 403]);
    assert.equal(list.url, '/api/v4/projects?private_token=[FILTERED]&per_page=2');
    assert.equal(typeof list.ms, 'number');
  });

  it('in words for a terminal (CAIRN_LOG_FORMAT=text, the default on a TTY): time, level, method, path, status, milliseconds; events with their error', () => {
    const time = new Date(2026, 10, 28, 4, 5, 6, 7).getTime();
    const line = (o: object) => formatLogLine(JSON.stringify({ time, ...o }));
    assert.equal(line({ level: 30, request: { method: 'GET', url: '/api/v4/version', status: 200, ms: 3.25 }, msg: 'request' }), '04:05:06.007 INFO  GET /api/v4/version 200 3.3 ms\n');
    assert.equal(line({ level: 30, request: { method: 'POST', url: '/g/p.git/git-receive-pack', status: 200, ms: 1234.5 }, msg: 'request' }), '04:05:06.007 INFO  POST /g/p.git/git-receive-pack 200 1235 ms\n');
    assert.equal(line({ level: 40, msg: 'scheduling failed', err: { message: 'boom', stack: 'Error: boom\n    at x' } }), '04:05:06.007 WARN  scheduling failed: boom\n');
    assert.equal(line({ level: 50, msg: 'unhandled error', err: { message: 'boom', stack: 'Error: boom\n    at x' } }), '04:05:06.007 ERROR unhandled error\nError: boom\n    at x\n');
    assert.equal(formatLogLine('not json'), 'not json\n');
    assert.equal(resolveLogFormat('auto', { isTTY: true }), 'text');
    assert.equal(resolveLogFormat('auto', { isTTY: false }), 'json');
    assert.equal(resolveLogFormat('json', { isTTY: true }), 'json');
  });

  it('never show a token sent as a query parameter', async () => {
    const res = await app.inject({ method: 'GET', url: `/api/v4/user?private_token=${ROOT_TOKEN}&per_page=5` });
    assert.equal(res.statusCode, 200);
    await app.inject({ method: 'GET', url: '/oauth/token/info?access_token=secret-oauth-token-value' });
    const log = lines.join('');
    assert.match(log, /private_token=\[FILTERED\]&per_page=5/);
    assert.match(log, /access_token=\[FILTERED\]/);
    assert.ok(!log.includes(ROOT_TOKEN), 'the personal access token is in the log');
    assert.ok(!log.includes('secret-oauth-token-value'), 'the OAuth token is in the log');
  });

  it('never show a credential in any form: headers, bearer, job and runner tokens, cookies, bracketed and encoded parameters, failed requests', async () => {
    const secrets = ['hdr-private-token-SECRET1', 'bearer-token-SECRET2', 'job-token-SECRET3', 'cookie-session-SECRET4', 'bracket-token-SECRET5', 'encoded-token-SECRET6',
      'runner-token-SECRET7', 'password-SECRET8', 'client-secret-SECRET9'];
    await app.inject({ method: 'GET', url: '/api/v4/user', headers: { 'private-token': secrets[0] } });
    await app.inject({ method: 'GET', url: '/api/v4/projects/999', headers: { authorization: `Bearer ${secrets[1]}` } });
    await app.inject({ method: 'GET', url: '/api/v4/job', headers: { 'job-token': secrets[2] } });
    await app.inject({ method: 'GET', url: '/-/user_settings/applications', headers: { cookie: `_cairn_session=${secrets[3]}` } });
    await app.inject({ method: 'GET', url: `/api/v4/user?private_token[]=${secrets[4]}` });
    await app.inject({ method: 'GET', url: `/api/v4/user?private%5Ftoken=${secrets[5]}&job_token=${secrets[2]}` });
    await app.inject({ method: 'POST', url: `/api/v4/runners/verify?token=${secrets[6]}` });
    await app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: `grant_type=password&username=root&password=${secrets[7]}&client_secret=${secrets[8]}` });
    await app.inject({ method: 'POST', url: `/oauth/token?grant_type=password&username=root&password=${secrets[7]}&client_secret=${secrets[8]}` });
    await app.inject({ method: 'GET', url: `/api/v4/projects/%ZZ?access_token=${secrets[1]}` });
    const log = lines.join('');
    assert.ok(log.length > 0, 'something was logged');
    for (const secret of secrets) assert.ok(!log.includes(secret), `${secret} is in the log`);
    assert.ok(!log.includes(ROOT_TOKEN));
  });

  it('censors credential headers in any log line that carries them', () => {
    const before = lines.length;
    app.log.info({ req: { method: 'GET', url: '/x', headers: { authorization: 'Bearer direct-SECRET', cookie: 'c=direct-SECRET' } } }, 'with headers');
    app.log.info({ headers: { 'private-token': 'direct-SECRET', 'job-token': 'direct-SECRET' } }, 'bare headers');
    const logged = lines.slice(before).join('');
    assert.match(logged, /bare headers/);
    assert.ok(!logged.includes('direct-SECRET'), logged);
  });
});
