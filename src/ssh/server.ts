import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import ssh2 from 'ssh2';
import type { Cairn } from '../context.js';
import type { Key } from '../db/schema/keys.js';
import type { GitProcess } from '../git/command.js';
import { InvalidPushError, readReceivePackHead, sanitizeGitProtocol, serviceExit, type GitService } from '../git/http.js';
import type { GitCredential } from '../policies/git_access.js';
import {
  authorizeGitPath,
  findAuthKey,
  GitAccessError,
  keyCredential,
  startAdvertisement,
  startPush,
  startUploadArchive,
  startUploadPack,
  touchKey,
  type GitSession,
} from '../services/git_transport.js';
import { parseSshCommand } from './command.js';
import { loadHostKeys } from './host_keys.js';
import { SK_ALGORITHMS, verifySkSignature } from './sk_keys.js';

/**
 * Git over SSH (GitLab's gitlab-sshd): public-key authentication by users' keys and deploy keys
 * (looked up by the SHA-256 fingerprint of the offered key, an indexed column), then one exec
 * request per session: `git-upload-pack`, `git-receive-pack` or `git-upload-archive` with a
 * repository path. This file is transport only: who may do what, starting git, the checks of a
 * push and the post-receive work are services/git_transport.ts's, the same as for smart HTTP.
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
          track(welcome(channel));
        });
        session.on('exec', (accept, reject, req) => {
          if (used) return reject?.();
          used = true;
          const channel = accept();
          track(runCommand(channel, req.command, gitProtocol));
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

    /** Ends a command: its output flushed, then the exit status, then the channel closed. */
    async function done(channel: ssh2.ServerChannel, code: number) {
      await flushed(channel.stderr);
      await flushed(channel);
      channel.exit(code);
      channel.end();
    }

    async function refuse(channel: ssh2.ServerChannel, message: string) {
      channel.stderr.write(`ERROR: ${message}\n`);
      await done(channel, 1);
    }

    async function credential(channel: ssh2.ServerChannel): Promise<GitCredential | null> {
      try {
        const cred = await keyCredential(cairn, key!);
        touchKey(cairn, key!).catch((err) => log.warn({ err }, 'recording the use of an ssh key failed'));
        return cred;
      } catch (err) {
        if (!(err instanceof GitAccessError)) throw err;
        await refuse(channel, err.message);
        return null;
      }
    }

    async function welcome(channel: ssh2.ServerChannel) {
      channel.on('error', () => {});
      const cred = await credential(channel);
      if (!cred) return;
      channel.write(`Welcome to Cairn, ${cred.deployKey ? 'Anonymous' : `@${cred.user.username}`}!\n`);
      await done(channel, 0);
    }

    async function runCommand(channel: ssh2.ServerChannel, command: string, gitProtocol: string | undefined) {
      channel.on('error', () => {});
      const parsed = parseSshCommand(command);
      if (!parsed.ok) return refuse(channel, parsed.message);
      const cred = await credential(channel);
      if (!cred) return;
      // `git archive --remote` reads what a fetch may read.
      const access: GitService = parsed.service === 'git-receive-pack' ? 'git-receive-pack' : 'git-upload-pack';
      let session: GitSession;
      try {
        session = await authorizeGitPath(cairn, cred, parsed.path, access, { gitProtocol });
      } catch (err) {
        if (err instanceof GitAccessError) return refuse(channel, err.message);
        throw err;
      }
      try {
        if (parsed.service === 'git-receive-pack') return await receivePack(channel, session);
        const proc = parsed.service === 'git-upload-pack' ? await startUploadPack(cairn, session, { stateless: false }) : await startUploadArchive(cairn, session);
        await done(channel, await converse(channel, proc, channel));
      } catch (err) {
        log.error({ err, command: parsed.service }, 'ssh git command failed');
        await refuse(channel, 'The command failed on the server.');
      }
    }

    /**
     * Connects git to the channel (stdin from `input`, stdout and stderr to the client) until git
     * exits; git is killed if the client goes away. Resolves with its exit code.
     */
    async function converse(channel: ssh2.ServerChannel, proc: GitProcess, input: Readable | null): Promise<number> {
      const onClose = () => proc.kill();
      channel.once('close', onClose);
      proc.stdin.on('error', () => {});
      proc.stdout.on('error', () => {});
      if (input) input.pipe(proc.stdin);
      proc.stdout.pipe(channel, { end: false });
      proc.stderr.pipe(channel.stderr, { end: false });
      const { code, stderr } = await serviceExit(proc);
      channel.off('close', onClose);
      if (input) input.unpipe(proc.stdin);
      if (code !== 0 && code !== null) log.warn({ code, stderr: stderr.slice(0, 2000) }, 'git service over ssh failed');
      return code ?? 1;
    }

    /**
     * A push: receive-pack's ref advertisement, then the commands read here and checked like a
     * push over HTTP (services/git_transport.ts startPush), then receive-pack (stateless, as for
     * HTTP) on the commands and the pack, then the post-receive work before the exit status.
     */
    async function receivePack(channel: ssh2.ServerChannel, session: GitSession) {
      const advertisement = await startAdvertisement(cairn, session, 'git-receive-pack');
      advertisement.stdin.end();
      const advertised = await converse(channel, advertisement, null);
      if (advertised !== 0) return refuse(channel, 'The repository could not be read.');
      let head: Awaited<ReturnType<typeof readReceivePackHead>>;
      try {
        head = await readReceivePackHead(channel);
      } catch (err) {
        // A client with nothing to push may just hang up after the advertisement.
        if (err instanceof InvalidPushError && /ended before/.test(err.message)) return done(channel, 0);
        return refuse(channel, err instanceof InvalidPushError ? err.message : 'The push could not be read.');
      }
      if (!head.updates.length) return done(channel, 0);
      const push = await startPush(cairn, session, head, log);
      if (push.refused) {
        // The client sends its pack before it reads the report: take it (and drop it) first.
        const packFollows = head.updates.some((u) => !/^0+$/.test(u.newSha));
        if (packFollows && !head.ended) {
          channel.resume();
          await new Promise<void>((resolve) => {
            channel.once('end', resolve);
            channel.once('close', resolve);
          });
        }
        channel.write(push.refused);
        return done(channel, 0);
      }
      const code = await converse(channel, push.proc, head.ended ? null : channel);
      // The exit status waits for the push to be recorded, so a client that sees success can rely on it.
      await push.finish();
      await done(channel, code);
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
