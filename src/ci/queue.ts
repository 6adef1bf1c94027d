import type pg from 'pg';
import type { Cairn } from '../context.js';
import type { OpenedDatabase } from '../db/index.js';

/**
 * Wakes long-polling runners (POST /jobs/request) when a job becomes pending, in any process:
 * the job state machine's enqueueBuild runs `pg_notify('cairn_ci_jobs', project_id)` in its
 * transaction, and every process LISTENs on that channel (PostgreSQL: one dedicated
 * connection; PGlite: its in-process listen). Waiters then try to pick a job again; SKIP LOCKED
 * in the pick decides who gets it. A generation counter closes the gap between a waiter's
 * failed pick and its wait: a notification in between is not lost.
 */
export const JOBS_CHANNEL = 'cairn_ci_jobs';
const RECONNECT_MS = 1_000;
/** Without a listener (it is reconnecting), waiters look again this often. */
const FALLBACK_POLL_MS = 1_000;

interface Log {
  warn(obj: unknown, msg?: string): void;
}

export class JobWakeup {
  private gen = 0;
  private readonly waiters = new Set<() => void>();
  /** False while no listener delivers notifications: waits then end after FALLBACK_POLL_MS. */
  listening = false;

  get generation() {
    return this.gen;
  }

  notify() {
    this.gen++;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w();
  }

  /** Resolves when a notification came after `since`, after `ms`, or when `signal` aborts. */
  wait(since: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.gen !== since || signal?.aborted || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, this.listening ? ms : Math.min(ms, FALLBACK_POLL_MS));
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  get waiting() {
    return this.waiters.size;
  }
}

const wakeups = new WeakMap<Cairn, JobWakeup>();

/** The process's wakeup (a plain one, polling, when startJobWakeup was not called). */
export function jobWakeup(cairn: Cairn): JobWakeup {
  let w = wakeups.get(cairn);
  if (!w) wakeups.set(cairn, (w = new JobWakeup()));
  return w;
}

/** Starts listening for pending jobs; returns the function that stops it. */
export async function startJobWakeup(cairn: Cairn, database: OpenedDatabase, log: Log): Promise<() => Promise<void>> {
  const wakeup = jobWakeup(cairn);
  if (database.pglite) {
    const unlisten = await database.pglite.listen(JOBS_CHANNEL, () => wakeup.notify());
    wakeup.listening = true;
    return async () => {
      wakeup.listening = false;
      await unlisten().catch(() => {});
    };
  }
  if (!database.url) return async () => {};
  let client: pg.Client | null = null;
  let closing = false;
  let reconnect: NodeJS.Timeout | null = null;
  const down = (err: unknown, from: pg.Client) => {
    if (from !== client) return;
    client = null;
    wakeup.listening = false;
    from.removeAllListeners();
    from.on('error', () => {});
    from.end().catch(() => {});
    if (closing) return;
    log.warn({ err }, 'CI job listener lost; runners poll until it reconnects');
    reconnect ??= setTimeout(() => {
      reconnect = null;
      void connect();
    }, RECONNECT_MS).unref();
  };
  const connect = async () => {
    const { default: pg } = await import('pg');
    if (closing) return;
    const c = new pg.Client({ connectionString: database.url, application_name: 'cairn ci jobs listener', keepAlive: true });
    client = c;
    c.on('notification', () => wakeup.notify());
    c.on('error', (err) => down(err, c));
    c.on('end', () => down(new Error('CI job listener connection ended'), c));
    try {
      await c.connect();
      await c.query(`LISTEN ${JOBS_CHANNEL}`);
      if (client === c) {
        wakeup.listening = true;
        // Whatever was enqueued while nobody listened: let every waiter look.
        wakeup.notify();
      }
    } catch (err) {
      down(err, c);
    }
  };
  await connect();
  return async () => {
    closing = true;
    if (reconnect) clearTimeout(reconnect);
    wakeup.listening = false;
    wakeup.notify();
    const c = client;
    client = null;
    if (c) {
      c.removeAllListeners();
      c.on('error', () => {});
      await c.end().catch(() => {});
    }
  };
}
