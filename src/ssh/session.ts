import type { Readable, Writable } from 'node:stream';
import type { Cairn } from '../context.js';
import type { Key } from '../db/schema/keys.js';
import type { GitProcess } from '../git/command.js';
import { InvalidPushError, readReceivePackHead, serviceExit, type GitService } from '../git/http.js';
import { issueLfsToken, lfsTokenUsername } from '../lfs/tokens.js';
import type { GitCredential } from '../policies/git_access.js';
import { projectSettings } from '../presenters/projects.js';
import {
  authorizeGitPath,
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

/**
 * What one SSH session of an authenticated key does, whichever program spoke SSH: the built-in
 * ssh2 server (server.ts, one call per exec or shell request) and `cairn shell key-N` behind
 * OpenSSH's sshd (cli/shell.ts, its stdin/stdout/stderr) both call runSshSession. No command: the
 * welcome line. `git-upload-pack` / `git-receive-pack` / `git-upload-archive`: git, with the
 * access checks, push checks and post-receive work of services/git_transport.ts.
 * `git-lfs-authenticate PATH OPERATION`: the JSON git-lfs reads, with a short-lived credential
 * for the LFS endpoints of that project (lfs/tokens.ts).
 */

type Log = {
  info: (obj: unknown, msg?: string) => void;
  warn: (obj: unknown, msg?: string) => void;
  error: (obj: unknown, msg?: string) => void;
};

/** The client's side of a session: what it sends, where its output and messages go. */
export interface SshSessionIo {
  input: Readable;
  output: Writable;
  errors: Writable;
  /** Registers `cb` for when the client goes away (running git is then killed); returns its removal. */
  onHangup(cb: () => void): () => void;
}

export interface SshSessionRequest {
  key: Key;
  /** The exec command; null for a session without one (`ssh git@host`). */
  command: string | null;
  /** GIT_PROTOCOL as the client set it (already sanitized). */
  gitProtocol?: string;
}

/** Runs the session; resolves with the exit status for the client, once all output is written. */
export async function runSshSession(cairn: Cairn, req: SshSessionRequest, io: SshSessionIo, log: Log): Promise<number> {
  io.output.on('error', () => {});
  io.errors.on('error', () => {});
  const refuse = async (message: string) => {
    io.errors.write(`ERROR: ${message}\n`);
    return 1;
  };

  let parsed: ReturnType<typeof parseSshCommand> | null = null;
  if (req.command !== null) {
    parsed = parseSshCommand(req.command);
    if (!parsed.ok) return refuse(parsed.message);
  }
  let cred: GitCredential;
  try {
    cred = await keyCredential(cairn, req.key);
  } catch (err) {
    if (err instanceof GitAccessError) return refuse(err.message);
    throw err;
  }
  // Written beside the command, and waited for before the status: `cairn shell` exits right after.
  const touched = touchKey(cairn, req.key).catch((err) => log.warn({ err }, 'recording the use of an ssh key failed'));
  try {
    return await serve(cairn, req, parsed, cred, io, log, refuse);
  } finally {
    await touched;
  }
}

async function serve(
  cairn: Cairn,
  req: SshSessionRequest,
  parsed: Extract<ReturnType<typeof parseSshCommand>, { ok: true }> | null,
  cred: GitCredential,
  io: SshSessionIo,
  log: Log,
  refuse: (message: string) => Promise<number>,
): Promise<number> {
  if (!parsed) {
    io.output.write(`Welcome to Cairn, ${cred.deployKey ? 'Anonymous' : `@${cred.user.username}`}!\n`);
    return 0;
  }
  // `git archive --remote` reads what a fetch may read; LFS downloads too, LFS uploads what a push may write.
  const access: GitService = parsed.service === 'git-receive-pack' || (parsed.service === 'git-lfs-authenticate' && parsed.operation === 'upload') ? 'git-receive-pack' : 'git-upload-pack';
  let session: GitSession;
  try {
    session = await authorizeGitPath(cairn, cred, parsed.path, access, { gitProtocol: req.gitProtocol });
  } catch (err) {
    if (err instanceof GitAccessError) return refuse(err.message);
    throw err;
  }
  try {
    if (parsed.service === 'git-lfs-authenticate') return await lfsAuthenticate(cairn, req.key, cred, session, parsed.operation, io);
    if (parsed.service === 'git-receive-pack') return await receivePack(cairn, session, io, log);
    const proc = parsed.service === 'git-upload-pack' ? await startUploadPack(cairn, session, { stateless: false }) : await startUploadArchive(cairn, session);
    return await converse(proc, io, io.input, log);
  } catch (err) {
    log.error({ err, command: parsed.service }, 'ssh git command failed');
    return refuse('The command failed on the server.');
  }
}

/** GitLab's answer to git-lfs-authenticate: where the LFS API is, and the header to call it with. */
async function lfsAuthenticate(cairn: Cairn, key: Key, cred: GitCredential, session: GitSession, operation: 'download' | 'upload', io: SshSessionIo): Promise<number> {
  if (session.target.kind !== 'project') {
    io.errors.write('ERROR: Git LFS is not available for snippets.\n');
    return 1;
  }
  const project = session.target.project;
  if (!projectSettings(project).lfs_enabled) {
    io.errors.write('ERROR: Git LFS is disabled for this project.\n');
    return 1;
  }
  const { token, expiresIn } = issueLfsToken(cairn.config, { keyId: key.id, projectId: project.id, operation });
  const basic = Buffer.from(`${lfsTokenUsername(key, cred.user.username)}:${token}`).toString('base64');
  const href = `${cairn.config.externalUrl.replace(/\/+$/, '')}/${project.namespace.full_path}/${project.path}.git/info/lfs`;
  io.output.write(JSON.stringify({ header: { Authorization: `Basic ${basic}` }, href, expires_in: expiresIn }) + '\n');
  return 0;
}

/**
 * Connects git to the client (stdin from `input`, stdout and stderr to the client) until git
 * exits; git is killed if the client goes away. Resolves with its exit code.
 */
async function converse(proc: GitProcess, io: SshSessionIo, input: Readable | null, log: Log): Promise<number> {
  const off = io.onHangup(() => proc.kill());
  proc.stdin.on('error', () => {});
  proc.stdout.on('error', () => {});
  if (input) input.pipe(proc.stdin);
  proc.stdout.pipe(io.output, { end: false });
  proc.stderr.pipe(io.errors, { end: false });
  const { code, stderr } = await serviceExit(proc);
  off();
  if (input) input.unpipe(proc.stdin);
  if (code !== 0 && code !== null) log.warn({ code, stderr: stderr.slice(0, 2000) }, 'git service over ssh failed');
  return code ?? 1;
}

/**
 * A push: receive-pack's ref advertisement, then the commands read here and checked like a push
 * over HTTP (services/git_transport.ts startPush), then receive-pack (stateless, as for HTTP) on
 * the commands and the pack, then the post-receive work before the exit status.
 */
async function receivePack(cairn: Cairn, session: GitSession, io: SshSessionIo, log: Log): Promise<number> {
  const advertisement = await startAdvertisement(cairn, session, 'git-receive-pack');
  advertisement.stdin.end();
  const advertised = await converse(advertisement, io, null, log);
  if (advertised !== 0) {
    io.errors.write('ERROR: The repository could not be read.\n');
    return 1;
  }
  let head: Awaited<ReturnType<typeof readReceivePackHead>>;
  try {
    head = await readReceivePackHead(io.input);
  } catch (err) {
    // A client with nothing to push may just hang up after the advertisement.
    if (err instanceof InvalidPushError && /ended before/.test(err.message)) return 0;
    io.errors.write(`ERROR: ${err instanceof InvalidPushError ? err.message : 'The push could not be read.'}\n`);
    return 1;
  }
  if (!head.updates.length) return 0;
  const push = await startPush(cairn, session, head, log);
  if (push.refused) {
    // The client sends its pack before it reads the report: take it (and drop it) first.
    const packFollows = head.updates.some((u) => !/^0+$/.test(u.newSha));
    if (packFollows && !head.ended) {
      io.input.resume();
      await new Promise<void>((resolve) => {
        io.input.once('end', resolve);
        io.input.once('close', resolve);
      });
    }
    io.output.write(push.refused);
    return 0;
  }
  const code = await converse(push.proc, io, head.ended ? null : io.input, log);
  // The exit status waits for the push to be recorded, so a client that sees success can rely on it.
  await push.finish();
  return code;
}
