// Cairn's git spawner: a small process that starts git on behalf of the server.
//
// Forking costs time in proportion to the forking process's memory (page tables, then copy-on-
// write faults): ~2 ms from a small process, 25-45 ms from a server holding an embedded
// PostgreSQL heap. This process stays small, so git starts fast. Plain JavaScript with
// builtins only, so it runs without a TypeScript loader.
//
// Protocol: the parent sends {type:'spawn', id, args, cwd, env} over the IPC channel and opens
// a connection to this process's Unix socket, writing `<id>\n`. git then gets that socket as
// its stdin and stdout (the parent reads and writes the other end directly, no relaying here);
// stderr and the exit status come back as IPC messages. {type:'kill', id} kills it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-spawner-'));
fs.chmodSync(dir, 0o700);
const socketPath = path.join(dir, 's');
const requests = new Map(); // id -> spawn message, waiting for its socket
const sockets = new Map(); // id -> socket, waiting for its spawn message
const children = new Map(); // id -> running git
const ID_RE = /^[0-9a-f]{32}$/;

function send(msg) {
  // The parent may be gone between the check and the write; that ends this process (below).
  if (process.connected) process.send(msg, () => {});
}

function start(id) {
  const req = requests.get(id);
  const socket = sockets.get(id);
  if (!req || !socket) return;
  requests.delete(id);
  sockets.delete(id);
  let child;
  try {
    child = spawn('git', req.args, { cwd: req.cwd, env: req.env, stdio: [socket, socket, 'pipe'] });
  } catch (err) {
    socket.destroy();
    send({ type: 'error', id, message: String(err) });
    return;
  }
  // git holds its own copies of the socket now; ours must go, or the parent never sees EOF.
  socket.destroy();
  children.set(id, child);
  child.stderr.on('data', (b) => send({ type: 'stderr', id, data: b.toString('base64') }));
  child.on('error', (err) => {
    children.delete(id);
    send({ type: 'error', id, message: String(err) });
  });
  child.on('close', (code, signal) => {
    children.delete(id);
    send({ type: 'exit', id, code, signal });
  });
  send({ type: 'spawned', id, pid: child.pid });
}

const server = net.createServer({ pauseOnConnect: true }, (socket) => {
  // Read exactly the id line; the parent sends nothing else before 'spawned'.
  let buf = '';
  const onData = (chunk) => {
    buf += chunk.toString('latin1');
    const nl = buf.indexOf('\n');
    if (nl < 0) {
      if (buf.length > 64) socket.destroy();
      return;
    }
    socket.off('data', onData);
    socket.pause();
    const id = buf.slice(0, nl);
    if (!ID_RE.test(id) || nl !== buf.length - 1) return socket.destroy();
    sockets.set(id, socket);
    start(id);
  };
  socket.on('data', onData);
  socket.on('error', () => {});
  socket.resume();
});

process.on('message', (msg) => {
  if (!msg || typeof msg !== 'object') return;
  if (msg.type === 'spawn' && ID_RE.test(msg.id)) {
    requests.set(msg.id, msg);
    start(msg.id);
  } else if (msg.type === 'kill') {
    children.get(msg.id)?.kill('SIGKILL');
    requests.delete(msg.id);
    sockets.get(msg.id)?.destroy();
    sockets.delete(msg.id);
  }
});

function shutdown() {
  for (const child of children.values()) child.kill('SIGKILL');
  try {
    fs.rmSync(dir, { recursive: true, force: true });
  } catch {}
  process.exit(0);
}
process.on('disconnect', shutdown);
// An IPC write to a parent that has exited (EPIPE): nothing is left to serve.
process.on('error', shutdown);
process.on('SIGTERM', shutdown);

server.listen(socketPath, () => {
  fs.chmodSync(socketPath, 0o600);
  send({ type: 'ready', socketPath });
});
