import { buildApp } from './app.js';
import { loadConfig } from './config.js';
import { scheduleRecurring, startWorker } from './jobs/queue.js';
import { sweepLeftoversSoon } from './services/leftovers.js';
import type { BuiltinRunner } from './runner/runner.js';
import { startServeBuiltinRunner } from './runner/serve.js';
import { reduceMemorySoon } from './lib/memory.js';
import { startJobListener } from './plugins/job_listener.js';
import { startSshServer, type SshServer } from './ssh/server.js';

export async function serve() {
  const config = loadConfig();
  const app = await buildApp({ config });
  let builtin: BuiltinRunner | null = null;
  let ssh: SshServer | null = null;
  const shutdown = async (signal: string) => {
    app.log.info(`${signal}: shutting down`);
    // The blackout: readiness fails so that load balancers stop sending requests here, while every
    // request still gets served; closing keep-alive connections a balancer may be about to reuse
    // would lose the request it sends on one (GitLab's shutdown_blackout_seconds).
    app.cairn.draining = true;
    if (config.shutdownBlackout > 0) await new Promise((r) => setTimeout(r, config.shutdownBlackout * 1000));
    // Bounded: what is still running past the grace period (and the closing after it) is cut off.
    setTimeout(() => {
      app.log.warn(`still stopping after CAIRN_SHUTDOWN_TIMEOUT (${config.shutdownTimeout} s): exiting now`);
      process.exit(1);
    }, config.shutdownTimeout * 1000 + 5_000).unref();
    // The built-in runner reports its running jobs failed while the server can still take it.
    await builtin?.stop().catch(() => {});
    // No new SSH connections; running git commands finish (pushes are recorded) while HTTP drains.
    const sshClosed = ssh?.close().catch(() => {});
    await app.close();
    await sshClosed;
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  // Background jobs run in-process by default; every process works the same queue.
  if (config.workers) {
    // What a crash left on disk is swept at start (by age: see services/leftovers.ts).
    await scheduleRecurring(app.cairn.db)
      .then(() => sweepLeftoversSoon(app.cairn))
      .catch((err) => app.log.error({ err }, 'scheduling the leftover sweep failed'));
    const stop = startWorker(app.cairn, { log: app.log, concurrency: config.workerConcurrency });
    // Closers run last-registered first: the worker stops before the cache and the database.
    app.cairn.closers.push(stop);
  }
  await app.listen({ host: config.host, port: config.port });
  // On the embedded database this process owns the data directory: commands that need the
  // database (cairn token create, cairn backup create) ask it through this socket.
  if (app.cairn.dbKind === 'pglite') {
    const { startControlServer } = await import('./control/index.js');
    const stopControl = await startControlServer(app.cairn, app.log);
    if (stopControl) app.cairn.closers.push(stopControl);
  }
  // Git over SSH (CAIRN_SSH_PORT=0 turns it off).
  if (config.sshPort) {
    ssh = await startSshServer(app.cairn, { host: config.sshHost, port: config.sshPort, log: app.log });
    app.log.info(`git over SSH on ${config.sshHost}:${ssh.port}`);
  }
  // CI jobs reach this server through their own listener (no trusted-proxy status, no metrics).
  const jobs = await startJobListener(app, { port: config.jobPort });
  app.log.info(`job listener on 127.0.0.1:${jobs.port} (CI jobs' own requests: client address 100::1, no X-Forwarded-For, no metrics)`);
  // Cairn's own instance runner for untagged jobs (CAIRN_BUILTIN_RUNNER=0 turns it off); it talks
  // to this server over HTTP like any other runner.
  builtin = await startServeBuiltinRunner(app.cairn, { log: (m) => app.log.info(m), warn: (m) => app.log.warn(m), jobPort: jobs.port });
  reduceMemorySoon(2000);
  app.log.info(`Cairn serving ${config.externalUrl} (${app.cairn.dbKind === 'pglite' ? `embedded database in ${config.dataDir}` : 'PostgreSQL'})`);
  return app;
}
