// Turns a job's steps and variables into what bash runs: one script per step, each command
// echoed as `$ command` (as GitLab's logs show it) and run with `set -eo pipefail`, so the
// first failing command ends the step with its exit code.
import fs from 'node:fs';
import path from 'node:path';
import type { JobVariable } from './types.js';

/** bash ANSI-C quoting ($'...'): safe for any bytes, including newlines and quotes. */
export function ansiQuote(s: string): string {
  let out = "$'";
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + "'";
}

export function stepScript(commands: string[]): string {
  const lines = ['set -eo pipefail', 'set +o noclobber', ''];
  for (const cmd of commands) {
    const shown = cmd.split('\n').length > 1 ? `${cmd.split('\n')[0]} # collapsed multi-line command` : cmd;
    lines.push(`printf '%s\\n' ${ansiQuote(`\x1b[32;1m$ ${shown}\x1b[0;m`)}`);
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
 * The job's environment: the base, then the job's variables (file variables written to files
 * under tmpDir, the variable set to the path).
 */
export function jobEnvironment(vars: Map<string, JobVariable>, opts: { tmpDir: string; base: NodeJS.ProcessEnv; extra: Record<string, string> }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...opts.base, ...opts.extra };
  const fileDir = path.join(opts.tmpDir, 'variables');
  for (const v of vars.values()) {
    if (v.file) {
      fs.mkdirSync(fileDir, { recursive: true, mode: 0o700 });
      const p = path.join(fileDir, v.key);
      fs.writeFileSync(p, v.value, { mode: 0o600 });
      env[v.key] = p;
    } else {
      env[v.key] = v.value;
    }
  }
  // The runner's own settings win over a job's variable of the same name.
  Object.assign(env, opts.extra);
  return env;
}
