// The glue `cairn serve` needs for its built-in runner: the instance registration token and a
// loopback URL of the listening server. The runner itself still only speaks HTTP.
import type { Config } from '../config.js';
import type { Cairn } from '../context.js';
import { registrationToken } from '../ci/runners.js';
import { startBuiltinRunner, type BuiltinRunner } from './runner.js';
import { setting } from '../config.js';

/** The address a process reaches its own listening server at. */
export function loopbackUrl(config: Pick<Config, 'host' | 'port'>, port = config.port): string {
  const host = config.host;
  if (host === '0.0.0.0' || host === '' || host === '*') return `http://127.0.0.1:${port}`;
  if (host === '::' || host === '[::]') return `http://[::1]:${port}`;
  return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/**
 * Starts the built-in instance runner (untagged jobs) of a listening server, unless
 * CAIRN_BUILTIN_RUNNER=0. Never throws: a runner that cannot start is logged, the server serves.
 */
export async function startServeBuiltinRunner(
  cairn: Pick<Cairn, 'db' | 'config'>,
  opts: { port?: number; env?: NodeJS.ProcessEnv; log: (msg: string) => void },
): Promise<BuiltinRunner | null> {
  const env = opts.env ?? process.env;
  if (!setting<boolean>('CAIRN_BUILTIN_RUNNER', env)) return null;
  try {
    return await startBuiltinRunner({
      url: loopbackUrl(cairn.config, opts.port),
      registrationToken: await registrationToken(cairn, { type: 'instance_type' }),
      dataDir: cairn.config.dataDir,
      env,
      log: (m) => opts.log(`built-in runner: ${m}`),
    });
  } catch (err) {
    opts.log(`built-in runner: not started: ${(err as Error).message}`);
    return null;
  }
}
