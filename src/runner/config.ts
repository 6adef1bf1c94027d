// The runner's configuration file: where the server is and the runner's own token. It holds a
// secret, so it is written with mode 0600 in a 0700 directory.
import fs from 'node:fs';
import path from 'node:path';
import { setting } from '../config.js';

export interface RunnerConfigFile {
  url: string;
  token: string;
  id: number | null;
  token_expires_at?: string | null;
  description?: string;
  tag_list?: string[];
  run_untagged?: boolean;
  locked?: boolean;
  concurrent?: number;
  builds_dir?: string;
  /** Run jobs without bubblewrap when it is missing (explicit opt-in). */
  allow_unisolated?: boolean;
}

export function dataDir(env: NodeJS.ProcessEnv = process.env): string {
  return setting<string>('CAIRN_DATA_DIR', env);
}

export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  return setting<string | null>('CAIRN_RUNNER_CONFIG', env) ?? path.join(dataDir(env), 'runner', 'config.json');
}

export function readRunnerConfig(file: string): RunnerConfigFile {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new Error(`no runner configuration at ${file}: run \`cairn runner register\` first`);
    throw err;
  }
  const c = JSON.parse(text) as RunnerConfigFile;
  if (typeof c.url !== 'string' || typeof c.token !== 'string' || !c.token) throw new Error(`${file} is not a runner configuration (url and token are required)`);
  return c;
}

export function writeRunnerConfig(file: string, config: RunnerConfigFile) {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
}
