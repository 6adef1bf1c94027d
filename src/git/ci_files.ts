import { assertSafeArg, git } from './command.js';

/**
 * Paths changed between two commits (rules:changes of a push); null when they cannot be compared
 * (an unknown or unrelated `from`), which the compiler treats as "changes: true".
 */
export async function changedPathsBetween(gitDir: string, from: string, to: string): Promise<string[] | null> {
  const res = await git(['diff', '--name-only', '-z', '--no-renames', assertSafeArg(from, 'commit'), assertSafeArg(to, 'commit'), '--'], { gitDir, okCodes: [128] });
  if (res.exitCode !== 0) return null;
  return res.stdout.toString().split('\0').filter(Boolean);
}
