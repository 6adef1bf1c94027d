// The glue `cairn serve` needs for its built-in runner: the instance registration token and a
// loopback URL of the listening server. The runner itself still only speaks HTTP.
import type { Config } from '../config.js';
import type { Cairn } from '../context.js';
import { registrationToken } from '../ci/runners.js';
import { startBuiltinRunner, type BuiltinRunner } from './runner.js';
import { setting } from '../config.js';
import { isLoopbackHost, urlPort } from './sandbox.js';

/** The address a process reaches its own listening server at. */
export function loopbackUrl(config: Pick<Config, 'host' | 'port'>, port = config.port): string {
  const host = config.host;
  if (host === '0.0.0.0' || host === '' || host === '*') return `http://127.0.0.1:${port}`;
  if (host === '::' || host === '[::]') return `http://[::1]:${port}`;
  return `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}

/**
 * The ports a job of the built-in runner reaches this server at on its own loopback (the
 * runner's URL, and the external URL when that is on loopback), each forwarded to the job
 * listener: never to the main listener, where loopback is a trusted proxy.
 */
export function builtinForwards(config: Pick<Config, 'host' | 'port' | 'externalUrl'>, jobPort: number, port = config.port): { jobPort: number; hostPort: number }[] {
  const ports = new Set<number>();
  for (const u of [loopbackUrl(config, port), config.externalUrl]) {
    try {
      const url = new URL(u);
      if (isLoopbackHost(url.hostname)) ports.add(urlPort(url));
    } catch {
      /* not a URL */
    }
  }
  return [...ports].map((p) => ({ jobPort: p, hostPort: jobPort }));
}

/**
 * Starts the built-in instance runner (untagged jobs) of a listening server, unless
 * CAIRN_BUILTIN_RUNNER=0. Never throws: a runner that cannot start is logged, the server serves.
 */
export async function startServeBuiltinRunner(
  cairn: Pick<Cairn, 'db' | 'config'>,
  opts: { port?: number; env?: NodeJS.ProcessEnv; log: (msg: string) => void; warn?: (msg: string) => void; /** The job listener's port (startJobListener): jobs reach this server there. */ jobPort?: number },
): Promise<BuiltinRunner | null> {
  const env = opts.env ?? process.env;
  if (!setting<boolean>('CAIRN_BUILTIN_RUNNER', env)) return null;
  try {
    return await startBuiltinRunner({
      url: loopbackUrl(cairn.config, opts.port),
      registrationToken: await registrationToken(cairn, { type: 'instance_type' }),
      dataDir: cairn.config.dataDir,
      env,
      forwardPorts: opts.jobPort ? builtinForwards(cairn.config, opts.jobPort, opts.port) : [],
      log: (m) => opts.log(`built-in runner: ${m}`),
      warn: (m) => (opts.warn ?? opts.log)(`built-in runner: ${m}`),
    });
  } catch (err) {
    (opts.warn ?? opts.log)(`built-in runner: not started: ${(err as Error).message}`);
    return null;
  }
}
