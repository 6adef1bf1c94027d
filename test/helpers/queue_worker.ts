// A second process working the background queue, for test/jobs.test.ts: another Cairn process's
// worker as far as the queue can tell (its own pid, so its own locked_by, and its own connections).
// Usage: node --import tsx test/helpers/queue_worker.ts <databaseUrl> <queue> <lockTimeoutMs> <heartbeatMs>
// Prints "ready" once it polls, and each queue warning as a JSON line; runs until SIGTERM.
import type { Cairn } from '../../src/context.js';
import { openDatabase } from '../../src/db/index.js';
import { startWorker } from '../../src/jobs/queue.js';
import { defineSlowJob } from './queue_jobs.js';

const [databaseUrl, queue, lockTimeoutMs, heartbeatMs] = process.argv.slice(2);
const database = await openDatabase({ databaseUrl, dataDir: '' });
defineSlowJob();
const cairn = { db: database.db, dbKind: database.kind } as unknown as Cairn;
const stop = startWorker(cairn, {
  queue,
  lockTimeoutMs: Number(lockTimeoutMs),
  heartbeatMs: Number(heartbeatMs),
  idleMs: 50,
  log: { warn: (obj, msg) => console.log(JSON.stringify({ msg, ...obj })) },
});
process.once('SIGTERM', () => {
  void stop().then(() => database.close()).then(() => process.exit(0));
});
console.log('ready');
