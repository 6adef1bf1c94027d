import type { Readable } from 'node:stream';
import { assertSafeArg, GitError, spawnGit } from './command.js';

export type ArchiveFormat = 'tar.gz' | 'tar.bz2' | 'tar' | 'zip';

/** Every suffix GitLab accepts, mapped to the archive it produces. */
export const ARCHIVE_FORMATS: Record<string, ArchiveFormat> = {
  'tar.gz': 'tar.gz',
  tgz: 'tar.gz',
  gz: 'tar.gz',
  'tar.bz2': 'tar.bz2',
  tbz: 'tar.bz2',
  tbz2: 'tar.bz2',
  tb2: 'tar.bz2',
  bz2: 'tar.bz2',
  tar: 'tar',
  zip: 'zip',
};

const ARCHIVE_TIMEOUT_MS = 10 * 60_000;

/**
 * Streams `git archive` of a commit (optionally one path of it). Resolves once git has
 * produced its first bytes, so a failure before that is a rejected promise (the caller can
 * still answer with an error status); later failures end the stream with an error.
 * bzip2 runs as git's own tar filter (a fixed command, no user input).
 */
export function streamArchive(gitDir: string, opts: { commit: string; format: ArchiveFormat; prefix: string; path?: string }): Promise<Readable> {
  assertSafeArg(opts.commit, 'commit');
  const args = ['-c', 'tar.tar.bz2.command=bzip2 -c', 'archive', `--format=${opts.format}`, `--prefix=${opts.prefix}/`, opts.commit];
  if (opts.path) args.push('--', opts.path);
  const child = spawnGit(args, { gitDir });
  const stdout = child.stdout!;
  const timer = setTimeout(() => child.kill('SIGKILL'), ARCHIVE_TIMEOUT_MS);
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr = (stderr + b.toString('utf8')).slice(-4000)));
  child.stdin!.end();
  // A client that goes away stops git.
  stdout.on('close', () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    let started = false;
    const onReadable = () => {
      if (started || stdout.readableLength === 0) return;
      started = true;
      stdout.off('readable', onReadable);
      resolve(stdout);
    };
    stdout.on('readable', onReadable);
    child.on('error', (e) => {
      clearTimeout(timer);
      if (!started) reject(new GitError(args, null, String(e)));
      else stdout.destroy(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0 && !signal) {
        if (!started) {
          started = true;
          stdout.off('readable', onReadable);
          resolve(stdout);
        }
        return;
      }
      const err = new GitError(args, code, stderr);
      if (!started) {
        started = true;
        stdout.off('readable', onReadable);
        reject(err);
      } else stdout.destroy(err);
    });
  });
}
