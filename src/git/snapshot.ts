// A repository as of a moment, and back (for backups, src/backup/): its refs and HEAD read at
// that moment, and one pack of every object those refs reach, made later; git never rewrites an
// object, and housekeeping only prunes what has been unreachable for two weeks, so the objects of
// refs read a moment ago are all still there when the pack is made, whatever was pushed since.
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { assertSafeArg, git, GitError, startGit } from './command.js';
import { initBareRepository } from './repository.js';
import { isObjectId, isValidRefName } from './validate.js';

export interface RefsSnapshot {
  /** Where HEAD points (a full ref name), or null (detached, or unreadable). */
  head: string | null;
  /** Full ref name -> object id. */
  refs: [string, string][];
}

export async function readRefsSnapshot(gitDir: string): Promise<RefsSnapshot> {
  const out = (await git(['for-each-ref', '--format=%(objectname) %(refname)'], { gitDir, timeoutMs: 10 * 60_000 })).stdout.toString('utf8');
  const head = (await git(['symbolic-ref', '-q', 'HEAD'], { gitDir, okCodes: [1] })).stdout.toString('utf8').trim();
  const refs: [string, string][] = [];
  for (const line of out.split('\n')) {
    const sp = line.indexOf(' ');
    if (sp > 0) refs.push([line.slice(sp + 1), line.slice(0, sp)]);
  }
  return { head: head || null, refs };
}

/** The text form kept in a backup: `HEAD <ref>` (or `HEAD`), then `<oid> <ref>` lines. */
export function formatRefsSnapshot(s: RefsSnapshot): string {
  return [`HEAD${s.head ? ` ${s.head}` : ''}`, ...s.refs.map(([ref, oid]) => `${oid} ${ref}`)].join('\n') + '\n';
}

/** Parses formatRefsSnapshot's text, refusing anything that is not a valid ref name or object id. */
export function parseRefsSnapshot(text: string): RefsSnapshot {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const first = lines.shift() ?? '';
  const m = /^HEAD(?: (\S+))?$/.exec(first);
  if (!m) throw new Error('refs: the first line is not HEAD');
  const head = m[1] ?? null;
  if (head !== null && !isValidRefName(head)) throw new Error(`refs: HEAD names an invalid ref`);
  const refs: [string, string][] = [];
  for (const line of lines) {
    const sp = line.indexOf(' ');
    const oid = line.slice(0, sp);
    const ref = line.slice(sp + 1);
    if (sp < 0 || !isObjectId(oid) || !ref.startsWith('refs/') || !isValidRefName(ref) || /[\x00-\x20\x7f]/.test(ref)) throw new Error('refs: a line is not "<object id> <ref>"');
    refs.push([ref, oid]);
  }
  return { head, refs };
}

/** Writes one pack of every object reachable from the snapshot's refs to `file`; false when there are none. */
export async function packSnapshot(gitDir: string, snapshot: RefsSnapshot, file: string): Promise<boolean> {
  const tips = [...new Set(snapshot.refs.map(([, oid]) => oid))];
  if (!tips.length) return false;
  const proc = await startGit(['pack-objects', '--revs', '--stdout', '--quiet', '--delta-base-offset'], { gitDir });
  const stderr: Buffer[] = [];
  proc.stderr.on('data', (b: Buffer) => stderr.push(b));
  proc.stdin.on('error', () => {});
  proc.stdin.end(tips.join('\n') + '\n');
  try {
    await pipeline(proc.stdout, fs.createWriteStream(file, { mode: 0o600 }));
  } catch (err) {
    proc.kill();
    throw err;
  }
  const { code } = await proc.exited;
  const args = ['pack-objects'];
  if (code !== 0) throw new GitError(args, code, Buffer.concat(stderr).toString('utf8'));
  return true;
}

/**
 * Makes the repository of a snapshot in `dir` (which must not exist): a new bare repository with
 * Cairn's configuration, the pack indexed from `pack` (a stream; null when the repository had no
 * objects), then the refs created and HEAD pointed, so every ref names an object that is there.
 */
export async function restoreSnapshot(dir: string, snapshot: RefsSnapshot, pack: AsyncIterable<Buffer> | null): Promise<void> {
  const headBranch = snapshot.head?.startsWith('refs/heads/') ? snapshot.head.slice('refs/heads/'.length) : 'main';
  await initBareRepository(dir, assertSafeArg(headBranch, 'HEAD'));
  if (pack) {
    const proc = await startGit(['index-pack', '--stdin', '--strict'], { gitDir: dir, cwd: dir });
    const stderr: Buffer[] = [];
    proc.stderr.on('data', (b: Buffer) => stderr.push(b));
    proc.stdout.resume();
    let fed: Error | null = null;
    try {
      await pipeline(Readable.from(pack), proc.stdin);
    } catch (err) {
      fed = err as Error;
      proc.kill();
    }
    const { code } = await proc.exited;
    if (fed) throw fed;
    if (code !== 0) throw new GitError(['index-pack'], code, Buffer.concat(stderr).toString('utf8'));
  }
  if (snapshot.refs.length) {
    const input = snapshot.refs.map(([ref, oid]) => `create ${ref} ${oid}\n`).join('');
    await git(['update-ref', '--stdin'], { gitDir: dir, input, timeoutMs: 10 * 60_000 });
  }
  if (snapshot.head) await git(['symbolic-ref', 'HEAD', assertSafeArg(snapshot.head, 'HEAD')], { gitDir: dir });
}
