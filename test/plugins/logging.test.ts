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
});
