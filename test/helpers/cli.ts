import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `cairn ...` (bin/cairn.mjs) to its end as a user would: from the project's directory, in
 * the test's environment without DATABASE_URL (so the embedded database unless `env` names one),
 * with `env` on top. Killed after a minute.
 */
export function runCairn(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  // No SSH server on the default port: test processes run side by side.
  const base: NodeJS.ProcessEnv = { ...process.env, CAIRN_SSH_PORT: '0' };
  delete base.DATABASE_URL;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/cairn.mjs'), ...args], {
      cwd: ROOT,
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
