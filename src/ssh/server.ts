import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Writable } from 'node:stream';
import ssh2 from 'ssh2';
import type { Cairn } from '../context.js';
import type { Key } from '../db/schema/keys.js';
import { sanitizeGitProtocol } from '../git/http.js';
import { findAuthKey } from '../services/git_transport.js';
import { loadHostKeys } from './host_keys.js';
import { runSshSession } from './session.js';
import { SK_ALGORITHMS, verifySkSignature } from './sk_keys.js';

/**
 * Git over SSH (GitLab's gitlab-sshd): public-key authentication by users' keys and deploy keys
 * (looked up by the SHA-256 fingerprint of the offered key, an indexed column), then one exec
 * request per session: `git-upload-pack`, `git-receive-pack`, `git-upload-archive` or
 * `git-lfs-authenticate` with a repository path. This file is transport only: what a session does
 * is ssh/session.ts's, shared with `cairn shell` behind OpenSSH (cli/shell.ts); who may do what,
 * starting git, the checks of a push and the post-receive work are services/git_transport.ts's,
 * the same as for smart HTTP.
 * No shell, no port forwarding, no sftp; `ssh git@host` alone answers with a welcome.
 */

type Log = {
  info: (obj: unknown, msg?: string) => void;
  warn: (obj: unknown, msg?: string) => void;
  error: (obj: unknown, msg?: string) => void;
};

export interface SshServer {
  /** The port it listens on (the one asked for, or the one picked for port 0). */
  port: number;
  /** Stops accepting connections, lets running git commands finish (up to CAIRN_SHUTDOWN_TIMEOUT), then ends every connection. */
  close(): Promise<void>;
}

/** Only `git` logs in (as `ssh git@host`), as GitLab has it. */
const SSH_USER = 'git';

/** Authentication requests one connection may make (each key is usually offered, then signed with: two each). */
const MAX_AUTH_TRIES = 20;

/** Sessions (channels) open at once on one connection (OpenSSH's MaxSessions default). */
const MAX_SESSIONS = 10;

/** A connection that has not authenticated by then is dropped. */
const LOGIN_GRACE_MS = 30_000;

const fingerprintOf = (blob: Buffer) => 'SHA256:' + crypto.createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');

/** Whether `signature` is the offered key's over `data` (security keys by sk_keys.ts, the others by ssh2). */
function verifies(algo: string, keyBlob: Buffer, signature: Buffer, data: Buffer, hashAlgo: string | undefined): boolean {
  if ((SK_ALGORITHMS as readonly string[]).includes(algo)) return verifySkSignature(keyBlob, signature, data);
  const parsed = ssh2.utils.parseKey(keyBlob);
  if (parsed instanceof Error) return false;
  return parsed.verify(data, signature, hashAlgo) === true;
}

/** Resolves once everything written so far has been handed to the SSH connection (an empty write is a barrier). */
function flushed(stream: Writable): Promise<void> {
  return new Promise((resolve) => {
    if (stream.writableEnded || stream.destroyed) return resolve();
    stream.write(Buffer.alloc(0), () => resolve());
  });
}

export async function startSshServer(cairn: Cairn, opts: { host: string; port: number; log: Log }): Promise<SshServer> {
  const { log } = opts;
  const hostKeys = loadHostKeys(cairn.config.dataDir);
  const connections = new Set<ssh2.Connection>();
  /** Git commands running, so a stop waits for them (a push is recorded before its connection ends). */
  const running = new Set<Promise<void>>();
  let closing = false;

  const server = new ssh2.Server({ hostKeys, ident: 'Cairn' }, (client, info) => {
    connections.add(client);
    let key: Key | null = null;
    const grace = setTimeout(() => client.end(), LOGIN_GRACE_MS);
    grace.unref();
    client.on('error', (err) => log.info({ err: err.message, remote: info.ip }, 'ssh connection error'));
    client.on('close', () => {
      clearTimeout(grace);
      connections.delete(client);
    });
    client.on('authentication', (ctx) => {
      void authenticate(ctx).catch((err) => {
        log.error({ err }, 'ssh authentication failed');
        ctx.reject(['publickey']);
      });
    });
    let attempts = 0;
    async function authenticate(ctx: ssh2.AuthContext) {
      // As OpenSSH's MaxAuthTries: a connection does not get to try keys (a query each) without end.
      if (++attempts > MAX_AUTH_TRIES) {
        ctx.reject();
        return client.end();
      }
      if (ctx.method !== 'publickey' || ctx.username !== SSH_USER || closing) return ctx.reject(['publickey']);
      const found = await findAuthKey(cairn, fingerprintOf(ctx.key.data));
      if (!found) return ctx.reject(['publickey']);
      // Without a signature the client only asks whether the key would do; it signs next.
      if (!ctx.signature) return ctx.accept();
      if (!ctx.blob || !verifies(ctx.key.algo, ctx.key.data, ctx.signature, ctx.blob, ctx.hashAlgo)) return ctx.reject(['publickey']);
      key = found;
      ctx.accept();
    }
    client.on('ready', () => {
      clearTimeout(grace);
      let sessions = 0;
      client.on('session', (accept, reject) => {
        // As OpenSSH's MaxSessions: one connection does not start git without bound.
        if (sessions >= MAX_SESSIONS) return reject();
        sessions++;
        const session = accept();
        session.once('close', () => sessions--);
        let gitProtocol: string | undefined;
        let used = false;
        session.on('pty', (_accept, reject) => reject?.());
        session.on('x11', (_accept, reject) => reject?.());
        session.on('subsystem', (_accept, reject) => reject?.());
        session.on('env', (accept, reject, env) => {
          // Only GIT_PROTOCOL (protocol v2: `SendEnv GIT_PROTOCOL`, which git sets itself).
          if (env.key === 'GIT_PROTOCOL' && sanitizeGitProtocol(env.val)) {
            gitProtocol = sanitizeGitProtocol(env.val);
            accept?.();
          } else reject?.();
        });
        session.on('shell', (accept, reject) => {
          if (used) return reject?.();
          used = true;
          const channel = accept();
          track(serve(channel, null, undefined));
        });
        session.on('exec', (accept, reject, req) => {
          if (used) return reject?.();
          used = true;
          const channel = accept();
          track(serve(channel, req.command, gitProtocol));
        });
      });
      // No port forwarding of any kind.
      client.on('tcpip', (_accept, reject) => reject());
      client.on('openssh.streamlocal', (_accept, reject) => reject());
      client.on('request', (_accept, reject) => reject?.());
    });

    const track = (work: Promise<void>) => {
      const p = work.catch((err) => log.error({ err }, 'ssh command failed'));
      running.add(p);
      void p.finally(() => running.delete(p));
    };

    /** Runs the session (ssh/session.ts), then ends it: its output flushed, the exit status, the channel closed. */
    async function serve(channel: ssh2.ServerChannel, command: string | null, gitProtocol: string | undefined) {
      channel.on('error', () => {});
      const io = {
        input: channel,
        output: channel,
        errors: channel.stderr,
        onHangup: (cb: () => void) => {
          channel.once('close', cb);
          return () => void channel.off('close', cb);
        },
      };
      let code: number;
      try {
        code = await runSshSession(cairn, { key: key!, command, gitProtocol }, io, log);
      } catch (err) {
        log.error({ err }, 'ssh session failed');
        channel.stderr.write('ERROR: The command failed on the server.\n');
        code = 1;
      }
      await flushed(channel.stderr);
      await flushed(channel);
      channel.exit(code);
      channel.end();
    }
  });

  server.on('error', (err: Error) => log.error({ err }, 'ssh server error'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  let closed: Promise<void> | null = null;
  const close = () =>
    (closed ??= (async () => {
      closing = true;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      // Running commands finish (a push is recorded), within the shutdown grace period.
      const deadline = Date.now() + (cairn.config.shutdownTimeout ?? 30) * 1000;
      while (running.size && Date.now() < deadline) await Promise.race([Promise.all(running), new Promise((r) => setTimeout(r, 100))]);
      for (const c of connections) c.end();
      await Promise.race([stopped, new Promise((r) => setTimeout(r, 2000))]);
    })());
  // Closers run last-registered first: SSH stops before the database it needs.
  cairn.closers.push(close);
  return { port, close };
}
