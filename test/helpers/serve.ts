import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A real `cairn serve` process on `databaseUrl` and `dataDir`, with root's token `rootToken`,
 * answering once its readiness probe does. The built-in runner is off unless `env` turns it on.
 */
export async function startServe(opts: { databaseUrl?: string; dataDir: string; rootToken: string; env?: NodeJS.ProcessEnv; /** Default: a free one. */ port?: number }): Promise<{ url: string; child: ChildProcess }> {
  const port = opts.port ?? (await freePort());
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/cairn.mjs'), 'serve'], {
    env: {
      ...process.env,
      ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
      CAIRN_PORT: String(port),
      CAIRN_DATA_DIR: opts.dataDir,
      CAIRN_ROOT_TOKEN: opts.rootToken,
      CAIRN_LOG_LEVEL: 'error',
      CAIRN_BUILTIN_RUNNER: '0',
      // No SSH server on the fixed default port unless a test asks for one (on a free port).
      CAIRN_SSH_PORT: '0',
      ...opts.env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  // A fresh embedded database is made first (initdb, then every migration): tens of seconds on a
  // machine busy with the rest of the suite, so up to two minutes before giving up.
  for (let i = 0; i < 1200; i++) {
    try {
      if ((await fetch(`${url}/-/readiness`)).ok) return { url, child };
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error('cairn serve did not start');
}
