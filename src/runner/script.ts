// Turns a job's steps and variables into what the job's shell runs (bash, or sh in an image
// without bash): one script per step, each command echoed as `$ command` (as GitLab's logs show
// it) and run with errexit (and pipefail where the shell has it), so the first failing command
// ends the step with its exit code.
import fs from 'node:fs';
import path from 'node:path';
import type { JobVariable } from './types.js';

/** POSIX single quoting: safe for any bytes, in sh and bash alike. */
export function shQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Variables bash keeps read-only: exporting one would be an error. */
const READONLY_IN_BASH = new Set(['BASHOPTS', 'BASH_VERSINFO', 'EUID', 'PPID', 'SHELLOPTS', 'UID']);

/**
 * A step's script for bash or a POSIX sh (images without bash): `exports` first (the job's
 * variables, which are never in the environment of the runner's own wrappers: see job.ts), then
 * errexit, and pipefail where the shell has it (bash, busybox ash; not dash), as gitlab-runner's
 * scripts do; each command is echoed as `$ command` before it runs.
 */
export function stepScript(commands: string[], exports: Record<string, string> = {}, opts: { echo?: boolean } = {}): string {
  const lines: string[] = [];
  for (const [k, v] of Object.entries(exports)) if (NAME.test(k) && !READONLY_IN_BASH.has(k)) lines.push(`export ${k}=${shQuote(v)}`);
  lines.push('if (set -o pipefail) 2>/dev/null; then set -o pipefail; fi', 'set -e', 'set +o noclobber', '');
  for (const cmd of commands) {
    const shown = cmd.split('\n').length > 1 ? `${cmd.split('\n')[0]} # collapsed multi-line command` : cmd;
    if (opts.echo !== false) lines.push(`printf '%s\\n' ${shQuote(`\x1b[32;1m$ ${shown}\x1b[0;m`)}`);
    lines.push(cmd);
    lines.push('');
  }
  return lines.join('\n') + '\n';
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Expands $NAME and ${NAME} in the values of non-raw variables, as gitlab-runner does (an
 * unknown name becomes empty); `$$` stays a literal `$`.
 */
export function expandVariables(vars: JobVariable[]): Map<string, JobVariable> {
  const byKey = new Map<string, JobVariable>();
  for (const v of vars) if (v && typeof v.key === 'string' && NAME.test(v.key)) byKey.set(v.key, { ...v, value: String(v.value ?? '') });
  const raw = new Map([...byKey].map(([k, v]) => [k, v.value]));
  const expand = (s: string, depth: number): string =>
    s.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, a?: string, b?: string) => {
      if (m === '$$') return '$';
      const key = (a ?? b)!;
      const v = byKey.get(key);
      if (!v) return '';
      return v.raw || depth > 8 ? raw.get(key)! : expand(raw.get(key)!, depth + 1);
    });
  for (const v of byKey.values()) if (!v.raw) v.value = expand(v.value, 0);
  return byKey;
}

/** Environment variables from the parent that a job may see; nothing else leaks (tokens, DATABASE_URL). */
const PASSED_THROUGH = /^(PATH|USER|LOGNAME|SHELL|LANG|LANGUAGE|TZ|TERM|LC_[A-Z]+|https?_proxy|HTTPS?_PROXY|no_proxy|NO_PROXY)$/;

export function baseEnvironment(parent: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(parent)) if (v !== undefined && PASSED_THROUGH.test(k)) env[k] = v;
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  return env;
}

/**
 * The job's variables as the job's processes see them: file variables written to files in
 * `fileDir` (mode 0600), the variable set to the file's path as the job sees it (`fileDirShown`,
 * the same directory inside a container).
 */
export function jobVariables(vars: Map<string, JobVariable>, opts: { fileDir: string; fileDirShown?: string }): Record<string, string> {
  const out: Record<string, string> = {};
  for (const v of vars.values()) {
    if (v.file) {
      fs.mkdirSync(opts.fileDir, { recursive: true, mode: 0o700 });
      fs.writeFileSync(path.join(opts.fileDir, v.key), v.value, { mode: 0o600 });
      out[v.key] = path.posix.join(opts.fileDirShown ?? opts.fileDir, v.key);
    } else {
      out[v.key] = v.value;
    }
  }
  return out;
}
