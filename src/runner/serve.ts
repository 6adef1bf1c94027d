// The glue `cairn serve` needs for its built-in runner: the instance registration token and a
// loopback URL of the listening server. The runner itself still only speaks HTTP.
import type { Config } from '../config.js';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import { finishBuild } from '../ci/jobs/state.js';
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
  cairn: Cairn,
  opts: { port?: number; env?: NodeJS.ProcessEnv; log: (msg: string) => void; warn?: (msg: string) => void; /** The job listener's port (startJobListener): jobs reach this server there. */ jobPort?: number },
): Promise<BuiltinRunner | null> {
  const env = opts.env ?? process.env;
  if (!setting<boolean>('CAIRN_BUILTIN_RUNNER', env)) return null;
  try {
    const started = await databaseNow(cairn);
    const runner = await startBuiltinRunner({
      url: loopbackUrl(cairn.config, opts.port),
      registrationToken: await registrationToken(cairn, { type: 'instance_type' }),
      dataDir: cairn.config.dataDir,
      env,
      forwardPorts: opts.jobPort ? builtinForwards(cairn.config, opts.jobPort, opts.port) : [],
      log: (m) => opts.log(`built-in runner: ${m}`),
      warn: (m) => (opts.warn ?? opts.log)(`built-in runner: ${m}`),
    });
    if (runner?.id != null) {
      const failed = await failOrphanedJobs(cairn, runner.id, started);
      if (failed) (opts.warn ?? opts.log)(`built-in runner: ${failed} job${failed > 1 ? 's' : ''} this runner was running when its process died marked failed (runner system failure)`);
    }
    return runner;
  } catch (err) {
    (opts.warn ?? opts.log)(`built-in runner: not started: ${(err as Error).message}`);
    return null;
  }
}

const databaseNow = async (cairn: Pick<Cairn, 'db'>): Promise<Date> => (await sql<{ now: Date }>`select now() as now`.execute(cairn.db)).rows[0].now;

/**
 * The jobs the built-in runner `runnerId` had started before `before` and still holds as running.
 * A built-in runner lives in its server's process: when it starts, it runs nothing, so each of
 * these was running when that process died (SIGKILL, a lost machine) and nobody will ever report
 * it. They are failed as GitLab fails a job whose runner broke (runner_system_failure; `retry:
 * when: runner_system_failure` retries them) rather than left running for the hour the stuck-job
 * sweep waits. Jobs it picks from now on started after `before` and are not touched.
 */
export async function failOrphanedJobs(cairn: Cairn, runnerId: number, before: Date): Promise<number> {
  const orphans = await cairn.db
    .selectFrom('ci_builds')
    .select('id')
    .where('runner_id', '=', runnerId)
    .where('status', '=', 'running')
    .where('started_at', '<', before)
    .execute();
  let failed = 0;
  for (const { id } of orphans) if (await finishBuild(cairn, Number(id), { status: 'failed', failureReason: 'runner_system_failure' })) failed++;
  return failed;
}
