import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { assertSafeArg, gitText, startGit, type GitProcess } from './command.js';

/**
 * The process side of git's smart HTTP protocol (v0 and v2): `upload-pack` / `receive-pack`
 * in stateless-RPC mode, pkt-line framing, the ref-update commands at the head of a push,
 * and the report-status answer that refuses a push without running receive-pack.
 */
export type GitService = 'git-upload-pack' | 'git-receive-pack';

export const GIT_SERVICES: readonly GitService[] = ['git-upload-pack', 'git-receive-pack'];

const FLUSH_PKT = Buffer.from('0000');

/** Largest pkt-line payload (65520 bytes minus the 4-byte length). */
const MAX_PKT_PAYLOAD = 65516;

function pktLine(data: string | Buffer): Buffer {
  const payload = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  if (payload.length > MAX_PKT_PAYLOAD) throw new Error('pkt-line payload too long');
  return Buffer.concat([Buffer.from((payload.length + 4).toString(16).padStart(4, '0')), payload]);
}

/** The `# service=...` preamble a v0 advertisement over HTTP starts with. */
export function servicePreamble(service: GitService): Buffer {
  return Buffer.concat([pktLine(`# service=${service}\n`), FLUSH_PKT]);
}

/**
 * The value of the Git-Protocol header when it is well-formed (`version=2`, `key=value:key2`),
 * else undefined: it becomes GIT_PROTOCOL in git's environment, so nothing unusual passes.
 */
export function sanitizeGitProtocol(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value || value.length > 256 || !/^[A-Za-z0-9=:._-]+$/.test(value)) return undefined;
  return value;
}

export function isProtocolV2(gitProtocol: string | undefined): boolean {
  return !!gitProtocol && gitProtocol.split(':').includes('version=2');
}

/**
 * Refs GitLab keeps for itself: fetchable, but a push may not touch them (receive-pack
 * answers "deny updating a hidden ref").
 */
const RECEIVE_HIDDEN_REFS = ['refs/merge-requests', 'refs/pipelines', 'refs/keep-around', 'refs/environments', 'refs/tmp'];

/** What a transport may run: the two smart HTTP services, and upload-archive (`git archive --remote`, SSH only). */
export type GitCommandName = GitService | 'git-upload-archive';

export interface ServiceOptions {
  gitDir: string;
  service: GitCommandName;
  /**
   * One request-response round (`--stateless-rpc`: smart HTTP, and a push over SSH, whose commands
   * Cairn reads before git runs); false: the whole conversation on stdin/stdout (a fetch over SSH).
   * Default true.
   */
  stateless?: boolean;
  /** Only the ref advertisement (GET info/refs). */
  advertiseRefs?: boolean;
  /** The sanitized Git-Protocol header (v2 when it carries version=2). */
  gitProtocol?: string;
  /** A directory of hooks receive-pack runs instead of the repository's own. */
  hooksPath?: string;
  /** Extra environment for receive-pack's hooks (names must start with CAIRN_). */
  hookEnv?: Record<string, string>;
  /** upload-pack: share packs between identical fetches (pack_objects_hook.sh). */
  packObjectsCache?: { dir: string; maxAgeSeconds: number };
}

/** Where the packs of the pack-objects cache live (every process sharing the data directory shares them). */
export const packObjectsCacheDir = (dataDir: string) => path.join(dataDir, 'cache', 'pack-objects');

const PACK_OBJECTS_HOOK = fileURLToPath(new URL('./pack_objects_hook.sh', import.meta.url));
/** A word for the shell git runs the hook through. */
const shellWord = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Starts `git upload-pack|receive-pack [--stateless-rpc] [--advertise-refs] .` (or
 * `git upload-archive .`) in the repository. The caller pipes the request into stdin and stdout
 * into the response.
 */
export function startService(opts: ServiceOptions): Promise<GitProcess> {
  const config: string[] = [];
  if (opts.service === 'git-upload-pack') {
    // Partial clones (--filter) and the lazy fetches of missing objects they make later.
    config.push('-c', 'uploadpack.allowFilter=true', '-c', 'uploadpack.allowAnySHA1InWant=true');
    // Only honoured from protected configuration, which the command line is.
    if (opts.packObjectsCache && opts.packObjectsCache.maxAgeSeconds > 0 && !opts.advertiseRefs) {
      config.push('-c', `uploadpack.packObjectsHook=sh ${shellWord(PACK_OBJECTS_HOOK)}`);
    }
  } else if (opts.service === 'git-upload-archive') {
    // Only what upload-archive allows by default: reachable commits and trees.
    config.push('-c', 'uploadarchive.allowUnreachable=false');
  } else {
    // Hooks only ever come from a Cairn-owned directory, never from the repository.
    config.push('-c', `core.hooksPath=${opts.hooksPath ?? '/dev/null'}`);
    for (const ref of RECEIVE_HIDDEN_REFS) config.push('-c', `receive.hideRefs=${ref}`);
    // `git push -o ...` (ci.skip and friends); atomic pushes are advertised by default.
    config.push('-c', 'receive.advertisePushOptions=true');
  }
  const args = [...config, opts.service.slice(4)];
  if (opts.service !== 'git-upload-archive' && opts.stateless !== false) args.push('--stateless-rpc');
  if (opts.advertiseRefs) args.push('--advertise-refs');
  args.push('.');
  const env: Record<string, string | undefined> = { GIT_PROTOCOL: opts.gitProtocol };
  if (opts.packObjectsCache && opts.service === 'git-upload-pack') {
    // What the hook reads (set for git's child, not settings of this process).
    Object.assign(env, { CAIRN_PACK_CACHE_DIR: opts.packObjectsCache.dir, CAIRN_PACK_CACHE_MAX_AGE: String(opts.packObjectsCache.maxAgeSeconds) });
  }
  for (const [k, v] of Object.entries(opts.hookEnv ?? {})) {
    if (!/^CAIRN_[A-Z0-9_]+$/.test(k)) throw new Error(`hook environment name ${k} is not allowed`);
    env[k] = v;
  }
  return startGit(args, { cwd: opts.gitDir, env });
}

/** Resolves with the exit code (null when killed) and the first 64 KiB of stderr. */
export async function serviceExit(proc: GitProcess): Promise<{ code: number | null; stderr: string }> {
  const err: Buffer[] = [];
  let size = 0;
  proc.stderr.on('data', (b: Buffer) => {
    if (size < 65536) err.push(b);
    size += b.length;
  });
  const { code } = await proc.exited;
  return { code, stderr: Buffer.concat(err).toString('utf8') };
}

// ---------------------------------------------------------------------------------------------
// The ref-update commands at the head of a receive-pack request.

export interface RefUpdate {
  ref: string;
  oldSha: string;
  newSha: string;
}

export interface ReceivePackHead {
  updates: RefUpdate[];
  /** Capabilities the client asked for on the first command (report-status, side-band-64k, ...). */
  capabilities: string[];
  /** `git push -o` values, sent after the commands when the client asked for push-options. */
  pushOptions: string[];
  /** Every byte read so far (commands, flush, maybe the start of the pack), to replay into receive-pack. */
  consumed: Buffer;
  /** The request body ended while being read (a push of deletions only has no pack). */
  ended: boolean;
}

export class InvalidPushError extends Error {}

const COMMAND_RE = /^([0-9a-f]{40}|[0-9a-f]{64}) ([0-9a-f]{40}|[0-9a-f]{64}) (refs\/\S+)$/;

/** Push options receive-pack accepts at most (its own limit is the same order). */
const MAX_PUSH_OPTIONS = 100;

type ParsedHead = Pick<ReceivePackHead, 'updates' | 'capabilities' | 'pushOptions'>;

/** Reads one pkt-line at `pos`: its payload, 'flush', or null when more bytes are needed. */
function readPkt(buf: Buffer, pos: number): { payload: string | 'flush'; next: number } | null {
  if (pos + 4 > buf.length) return null;
  const lenHex = buf.subarray(pos, pos + 4).toString('latin1');
  if (!/^[0-9a-f]{4}$/.test(lenHex)) throw new InvalidPushError('malformed pkt-line in push request');
  const len = parseInt(lenHex, 16);
  if (len === 0) return { payload: 'flush', next: pos + 4 };
  if (len < 4) throw new InvalidPushError('unexpected special pkt-line in push request');
  if (pos + len > buf.length) return null;
  let line = buf.subarray(pos + 4, pos + len).toString('utf8');
  if (line.endsWith('\n')) line = line.slice(0, -1);
  return { payload: line, next: pos + len };
}

/**
 * Parses the commands up to the first flush-pkt, and the push options after them when the
 * client asked for `push-options`; null when more bytes are needed. A request that is only a
 * flush-pkt (git's probe before a large push, or a push with nothing to do) has no updates.
 */
function parseReceivePackCommands(buf: Buffer): ParsedHead | null {
  const updates: RefUpdate[] = [];
  let capabilities: string[] = [];
  let pos = 0;
  for (;;) {
    const pkt = readPkt(buf, pos);
    if (!pkt) return null;
    pos = pkt.next;
    if (pkt.payload === 'flush') break;
    let line = pkt.payload;
    const nul = line.indexOf('\0');
    if (nul >= 0) {
      if (!updates.length) capabilities = line.slice(nul + 1).split(' ').filter(Boolean);
      line = line.slice(0, nul);
    }
    if (line.startsWith('shallow ')) continue;
    const m = COMMAND_RE.exec(line);
    if (!m) throw new InvalidPushError('malformed ref update in push request');
    updates.push({ oldSha: m[1], newSha: m[2], ref: m[3] });
  }
  const pushOptions: string[] = [];
  if (updates.length && capabilities.includes('push-options')) {
    for (;;) {
      const pkt = readPkt(buf, pos);
      if (!pkt) return null;
      pos = pkt.next;
      if (pkt.payload === 'flush') break;
      if (pushOptions.length >= MAX_PUSH_OPTIONS) throw new InvalidPushError('too many push options');
      pushOptions.push(pkt.payload);
    }
  }
  return { updates, capabilities, pushOptions };
}

/**
 * Reads the push commands (and push options) from the start of a request body without
 * consuming the pack: at most `limit` bytes are buffered, and the stream is left paused for
 * the caller to pipe on.
 */
export function readReceivePackHead(body: Readable, limit = 32 * 1024 * 1024): Promise<ReceivePackHead> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (err: Error | null, ended: boolean) => {
      body.pause();
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
      if (err) return reject(err);
      const consumed = Buffer.concat(chunks);
      let parsed: ParsedHead | null;
      try {
        parsed = parseReceivePackCommands(consumed);
      } catch (e) {
        return reject(e);
      }
      if (!parsed) return reject(new InvalidPushError('push request ended before its ref updates'));
      resolve({ ...parsed, consumed, ended });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      let parsed: ParsedHead | null;
      try {
        parsed = parseReceivePackCommands(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
      } catch (e) {
        return finish(e as Error, false);
      }
      if (parsed) return finish(null, false);
      if (size > limit) finish(new InvalidPushError('too many ref updates in one push'), false);
    };
    const onEnd = () => finish(null, true);
    const onError = (e: Error) => finish(e, false);
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('error', onError);
  });
}

/** Sideband framing: band 1 carries protocol data, band 2 progress text, band 3 a fatal error. */
function sideband(band: 1 | 2 | 3, data: Buffer, max: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i += max) out.push(pktLine(Buffer.concat([Buffer.from([band]), data.subarray(i, i + max)])));
  return out;
}

/**
 * The receive-pack answer for a push Cairn refuses before any ref moves: "unpack ok", then
 * "ng <ref> <reason>" for every ref (refused ones with their reason, the rest declined with
 * them, as a failing pre-receive hook does), and the reasons as remote messages.
 */
export function refusalReport(head: Pick<ReceivePackHead, 'updates' | 'capabilities'>, refusals: Map<string, string>): Buffer {
  const lines: Buffer[] = [pktLine('unpack ok\n')];
  for (const u of head.updates) {
    const reason = refusals.get(u.ref) ?? 'pre-receive hook declined';
    lines.push(pktLine(`ng ${u.ref} ${reason.replace(/[\r\n]+/g, ' ')}\n`));
  }
  lines.push(FLUSH_PKT);
  const report = Buffer.concat(lines);
  const caps = new Set(head.capabilities);
  const max = caps.has('side-band-64k') ? 65515 : caps.has('side-band') ? 999 : 0;
  if (!max) return report;
  const messages = [...new Set(refusals.values())].map((m) => `GitLab: ${m}\n`).join('');
  const out = [...(messages ? sideband(2, Buffer.from(messages), max) : []), ...sideband(1, report, max), FLUSH_PKT];
  return Buffer.concat(out);
}

// ---------------------------------------------------------------------------------------------
// Refs before and after a push.

export interface RefSnapshot {
  /** Current values of the refs asked about (absent ones are missing). */
  values: Map<string, string>;
  /** Every branch name. */
  branches: string[];
}

/** The values of `refs` and the list of branches, in one `for-each-ref`. */
export async function refSnapshot(gitDir: string, refs: string[]): Promise<RefSnapshot> {
  const wanted = new Set(refs);
  const others = refs.filter((r) => !r.startsWith('refs/heads/'));
  // Past a few hundred refs a full listing is cheaper than a long command line.
  const patterns = others.length <= 200 ? ['refs/heads/', ...others.map((r) => assertSafeArg(r, 'ref'))] : [];
  const out = await gitText(['for-each-ref', '--format=%(objectname) %(refname)', ...patterns], { gitDir });
  const values = new Map<string, string>();
  const branches: string[] = [];
  for (const line of out.split('\n')) {
    const sp = line.indexOf(' ');
    if (sp < 0) continue;
    const ref = line.slice(sp + 1);
    if (wanted.has(ref)) values.set(ref, line.slice(0, sp));
    if (ref.startsWith('refs/heads/')) branches.push(ref.slice('refs/heads/'.length));
  }
  return { values, branches };
}

/** The branch HEAD points at (whether or not it exists), read from the HEAD file. */
export async function headBranch(gitDir: string): Promise<string | null> {
  try {
    const m = /^ref: refs\/heads\/(.+)$/m.exec(await fs.readFile(path.join(gitDir, 'HEAD'), 'utf8'));
    return m ? m[1].trim() : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// The pre-receive hook Cairn installs for receive-pack.

/**
 * Refuses non-fast-forward updates of the refs listed (one per line) in CAIRN_NO_FORCE_REFS.
 * Whether an update is a force push is only known once the pack is in (quarantined), so this
 * is the one check that runs inside receive-pack; everything else is decided before it starts.
 */
const PRE_RECEIVE = `#!/bin/sh
# Installed by Cairn. Refuses force pushes to the refs named in CAIRN_NO_FORCE_REFS.
[ -n "$CAIRN_NO_FORCE_REFS" ] || { cat >/dev/null; exit 0; }
status=0
while read -r old new ref; do
  case "$old" in *[!0]*) ;; *) continue ;; esac
  case "$new" in *[!0]*) ;; *) continue ;; esac
  if printf '%s\\n' "$CAIRN_NO_FORCE_REFS" | grep -qxF -- "$ref"; then
    if ! git merge-base --is-ancestor "$old" "$new" 2>/dev/null; then
      echo "GitLab: \${CAIRN_FORCE_PUSH_MESSAGE:-You are not allowed to force push code to a protected branch on this project.}" >&2
      status=1
    fi
  fi
done
exit $status
`;

/** Writes Cairn's hooks directory under `dataDir` (idempotent) and returns its path. */
export async function ensureHooksDir(dataDir: string): Promise<string> {
  const dir = path.join(dataDir, 'git-hooks');
  const file = path.join(dir, 'pre-receive');
  try {
    if ((await fs.readFile(file, 'utf8')) === PRE_RECEIVE) return dir;
  } catch {}
  await fs.mkdir(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, PRE_RECEIVE, { mode: 0o755 });
  await fs.rename(tmp, file);
  return dir;
}
