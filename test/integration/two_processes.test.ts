import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TOKEN = 'two-process-root-token-123';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function startServe(databaseUrl: string, dataDir: string): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/cairn.mjs'), 'serve'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, CAIRN_PORT: String(port), CAIRN_DATA_DIR: dataDir, CAIRN_ROOT_TOKEN: TOKEN, CAIRN_LOG_LEVEL: 'error' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/-/readiness`)).ok) return { url, child };
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error('cairn serve did not start');
}

// Two Cairn processes share one PostgreSQL (PGlite is one process by nature, so this runs on PostgreSQL only).
describe('two cairn serve processes on one PostgreSQL', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL' }, () => {
  let testDb: TestDatabase;
  let dataDir: string;
  let a: { url: string; child: ChildProcess };
  let b: { url: string; child: ChildProcess };

  before(async () => {
    testDb = await openTestDatabase();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-two-'));
    // Started together: migrations and root's bootstrap must not race.
    [a, b] = await Promise.all([startServe(testDb.databaseUrl!, dataDir), startServe(testDb.databaseUrl!, dataDir)]);
  });
  after(async () => {
    for (const s of [a, b]) s?.child.kill('SIGTERM');
    await Promise.all([a, b].map((s) => s && new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)))));
    await testDb?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const call = (base: string, method: string, p: string, body?: unknown) =>
    fetch(`${base}/api/v4${p}`, {
      method,
      headers: { 'private-token': TOKEN, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  it('a write through one process is read through the other', async () => {
    const created = await call(a.url, 'POST', '/users', { username: 'twoproc', name: 'Two Proc', email: 'twoproc@example.com', password: 'two-proc-pass-1' });
    assert.equal(created.status, 201);
    const user = (await created.json()) as { id: number };
    const read = await call(b.url, 'GET', `/users/${user.id}`);
    assert.equal(read.status, 200);
    assert.equal(((await read.json()) as { username: string }).username, 'twoproc');
    const root = await call(b.url, 'GET', '/user');
    assert.equal(((await root.json()) as { username: string }).username, 'root');
  });

  it('a token revoked through one process is refused by the other', async () => {
    const created = await call(a.url, 'POST', '/users/1/personal_access_tokens', { name: 'short', scopes: ['api'] });
    assert.equal(created.status, 201);
    const { id, token } = (await created.json()) as { id: number; token: string };
    const ok = await fetch(`${b.url}/api/v4/user`, { headers: { 'private-token': token } });
    assert.equal(ok.status, 200);
    assert.equal((await call(a.url, 'DELETE', `/personal_access_tokens/${id}`)).status, 204);
    const refused = await fetch(`${b.url}/api/v4/user`, { headers: { 'private-token': token } });
    assert.equal(refused.status, 401);
  });
});
