import { fork, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import net from 'node:net';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/**
 * Starts git through a small helper process (spawner_helper.mjs) instead of forking this one:
 * a fork costs time in proportion to the forking process's memory, and a Cairn server with an
 * embedded PGlite heap pays 25-45 ms per spawn where the helper pays ~2 ms. git's stdin and
 * stdout are a Unix socket whose other end is returned here, so no byte is relayed.
 */
export interface GitProcess {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Resolves once git has exited and everything it wrote to stdout has been read. */
  exited: Promise<{ code: number | null; signal: string | null }>;
  /** Kills git (SIGKILL) if it is still running. */
  kill(): void;
}

interface Waiter {
  spawned: (pid: number) => void;
  failed: (err: Error) => void;
  stderr: PassThrough;
  exit: (code: number | null, signal: string | null) => void;
}

const HELPER = fileURLToPath(new URL('./spawner_helper.mjs', import.meta.url));

class Spawner {
  private child: ChildProcess | null = null;
  private ready: Promise<string> | null = null;
  private readonly waiters = new Map<string, Waiter>();
  /** Operations in flight; while there are any, the IPC channel keeps this process alive. */
  private active = 0;

  private hold<T>(promise: Promise<T>): Promise<T> {
    if (this.active++ === 0) this.channel()?.ref?.();
    const release = () => {
      if (--this.active === 0) this.channel()?.unref?.();
    };
    promise.then(release, release);
    return promise;
  }

  private channel() {
    return this.child?.channel as unknown as { ref?: () => void; unref?: () => void } | undefined;
  }

  private start(): Promise<string> {
    if (this.ready) return this.ready;
    const child = fork(HELPER, [], { execArgv: [], stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'json' });
    this.child = child;
    this.ready = new Promise<string>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', () => reject(new Error('git spawner exited before it was ready')));
      child.on('message', (msg: any) => {
        if (msg?.type === 'ready') resolve(msg.socketPath);
        else this.onMessage(msg);
      });
    });
    child.on('exit', () => {
      if (this.child === child) {
        this.child = null;
        this.ready = null;
      }
      for (const [id, w] of this.waiters) {
        this.waiters.delete(id);
        w.failed(new Error('git spawner exited'));
        w.exit(null, 'SIGKILL');
      }
    });
    // An idle helper must not keep this process alive; it exits when we do.
    child.unref();
    this.channel()?.unref?.();
    this.ready.catch(() => {});
    return this.hold(this.ready);
  }

  private onMessage(msg: any) {
    const w = msg && typeof msg.id === 'string' ? this.waiters.get(msg.id) : undefined;
    if (!w) return;
    if (msg.type === 'spawned') w.spawned(msg.pid);
    else if (msg.type === 'stderr') w.stderr.write(Buffer.from(msg.data, 'base64'));
    else if (msg.type === 'error') {
      this.waiters.delete(msg.id);
      w.failed(new Error(msg.message));
      w.exit(null, null);
    } else if (msg.type === 'exit') {
      this.waiters.delete(msg.id);
      w.exit(msg.code, msg.signal);
    }
  }

  async spawn(args: string[], cwd: string | undefined, env: NodeJS.ProcessEnv): Promise<GitProcess> {
    const socketPath = await this.start();
    const child = this.child!;
    const id = crypto.randomBytes(16).toString('hex');
    const stderr = new PassThrough();
    let exitResult: { code: number | null; signal: string | null } | null = null;
    let stdoutDone = false;
    let settle!: (v: { code: number | null; signal: string | null }) => void;
    const exited = this.hold(new Promise<{ code: number | null; signal: string | null }>((r) => (settle = r)));
    const maybeSettle = () => {
      if (exitResult && stdoutDone) settle(exitResult);
    };
    const socket = net.connect(socketPath);
    socket.on('error', () => {});
    socket.once('end', () => ((stdoutDone = true), maybeSettle()));
    socket.once('close', () => ((stdoutDone = true), maybeSettle()));
    const spawned = new Promise<void>((resolve, reject) => {
      this.waiters.set(id, {
        spawned: () => resolve(),
        failed: reject,
        stderr,
        exit: (code, signal) => {
          stderr.end();
          exitResult = { code, signal };
          maybeSettle();
        },
      });
    });
    socket.write(`${id}\n`);
    child.send({ type: 'spawn', id, args, cwd, env });
    try {
      await spawned;
    } catch (err) {
      socket.destroy();
      throw err;
    }
    return {
      stdin: socket,
      stdout: socket,
      stderr,
      exited,
      kill: () => {
        if (exitResult) return;
        if (child.connected) child.send({ type: 'kill', id });
        socket.destroy();
      },
    };
  }
}

const spawner = new Spawner();

export function spawnViaHelper(args: string[], cwd: string | undefined, env: NodeJS.ProcessEnv): Promise<GitProcess> {
  return spawner.spawn(args, cwd, env);
}

/** The same interface over a process this one forked itself (the fallback). */
export function wrapChildProcess(child: ChildProcess): GitProcess {
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.on('error', () => resolve({ code: null, signal: null }));
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  child.stdin!.on('error', () => {});
  return {
    stdin: child.stdin!,
    stdout: child.stdout!,
    stderr: child.stderr!,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
