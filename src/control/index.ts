// The local control channel of `cairn serve`: a Unix socket in the data directory through which
// a `cairn` command asks the running server to do what it would otherwise do itself. On the
// embedded database the server owns the data directory (src/db/data_dir_lock.ts): a second
// process may not open it, so `cairn token create` and `cairn backup create` run inside the
// server instead. Only the same Unix user can connect: the socket (mode 0600) lies in a
// directory of its own (mode 0700, owned by the server's user, checked at every start).
//
// Protocol: the client writes one JSON line {command, argv, cwd}; the server answers with JSON
// lines {out} / {err} (lines for the command's stdout / stderr) and ends with {exit: code}.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Cairn } from '../context.js';
import { controlSocketPath, type CommandIo, type ControlRequest } from '../cli/control_client.js';

/** Unix socket paths longer than this do not fit sockaddr_un on Linux (108 bytes with the NUL). */
const MAX_SOCKET_PATH = 107;
const MAX_REQUEST = 64 * 1024;

/** The control directory, made private to this user (or an error saying why it cannot be). */
function privateDirectory(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) throw new Error(`${dir} belongs to another user (uid ${st.uid})`);
  if ((st.mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
}

async function runCommand(cairn: Cairn, req: ControlRequest, io: CommandIo): Promise<number> {
  if (req.command === 'token') {
    const { tokenCommand } = await import('../cli/token.js');
    return tokenCommand(req.argv, io, { db: cairn.db });
  }
  if (req.command === 'backup') {
    const { backupCommand } = await import('../cli/backup.js');
    return backupCommand(req.argv, io, { source: cairn, cwd: req.cwd });
  }
  io.err(`the server does not run "${String(req.command)}" commands`);
  return 2;
}

function parseRequest(line: string): ControlRequest | null {
  try {
    const r = JSON.parse(line);
    if (!r || typeof r !== 'object' || typeof r.command !== 'string' || !Array.isArray(r.argv) || !r.argv.every((a: unknown) => typeof a === 'string') || typeof r.cwd !== 'string' || !path.isAbsolute(r.cwd)) return null;
    return r as ControlRequest;
  } catch {
    return null;
  }
}

/**
 * Serves the control socket of the data directory. Returns the function that closes it (and
 * removes the socket file); null when the socket cannot be made (the reason is logged).
 */
export async function startControlServer(cairn: Cairn, log: { warn: (msg: string) => void }): Promise<(() => Promise<void>) | null> {
  const file = controlSocketPath(cairn.config.dataDir);
  if (Buffer.byteLength(file) > MAX_SOCKET_PATH) {
    log.warn(`control socket not started: ${file} is longer than a Unix socket path may be; cairn token create and cairn backup create need the server stopped`);
    return null;
  }
  try {
    privateDirectory(path.dirname(file));
    // This process owns the data directory (its lock): a socket file left there is a dead server's.
    fs.rmSync(file, { force: true });
  } catch (err) {
    log.warn(`control socket not started: ${(err as Error).message}`);
    return null;
  }
  const server = net.createServer((socket) => {
    let buffered = '';
    let started = false;
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    const send = (msg: Record<string, unknown>) => {
      if (!socket.destroyed) socket.write(JSON.stringify(msg) + '\n');
    };
    socket.on('data', (chunk: string) => {
      if (started) return;
      buffered += chunk;
      if (buffered.length > MAX_REQUEST) {
        socket.destroy();
        return;
      }
      const nl = buffered.indexOf('\n');
      if (nl < 0) return;
      started = true;
      const req = parseRequest(buffered.slice(0, nl));
      if (!req) {
        send({ err: 'control request not understood' });
        send({ exit: 2 });
        socket.end();
        return;
      }
      runCommand(cairn, req, { out: (line) => send({ out: line }), err: (line) => send({ err: line }) })
        .catch((err) => {
          send({ err: `cairn ${req.command}: ${(err as Error).message.split('\n')[0]}` });
          return 1;
        })
        .then((code) => {
          send({ exit: code });
          socket.end();
        });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const umask = process.umask(0o177);
    try {
      server.listen(file, () => resolve());
    } finally {
      process.umask(umask);
    }
  }).catch((err) => {
    log.warn(`control socket not started: ${(err as Error).message}`);
    return null;
  });
  if (!server.listening) return null;
  fs.chmodSync(file, 0o600);
  return async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    fs.rmSync(file, { force: true });
  };
}
