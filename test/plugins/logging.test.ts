import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { ROOT_TOKEN } from '../helpers/app.js';
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
