import crypto from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { SharedCache } from './shared_cache.js';

const CHANNEL = 'cairn_cache';
const HEARTBEAT_MS = 5_000;
/**
 * A process whose heartbeat is older than this is taken for dead; nobody waits for it. One whose
 * listening connection has ended (the process exited or crashed) is not waited for at all.
 */
const LIVE_WINDOW = '20 seconds';
const ACK_TIMEOUT_MS = 2_000;
const RECONNECT_MS = 1_000;

interface Log {
  warn(obj: unknown, msg?: string): void;
}

interface PendingBarrier {
  ownSeen: boolean;
  /** Peers still to acknowledge; null until the barrier statement has returned them. */
  waitingFor: Set<string> | null;
  acked: Set<string>;
  resolve: () => void;
}

/**
 * Keeps a SharedCache true to PostgreSQL across processes (see shared_cache.ts). One dedicated
 * connection listens on `cairn_cache`, where table triggers announce writes (`t:<table>`) and
 * writers announce barriers (`b:<process>:<seq>`), and on this process's own acknowledgement
 * channel, where other processes answer its barriers once they have cleared their caches.
 * Notifications arrive in commit order, so a process that acknowledges a barrier has already
 * applied every write committed before it.
 */
export class PostgresInvalidation {
  readonly id = crypto.randomBytes(12).toString('hex');
  private readonly ackChannel = `cairn_cache_ack_${this.id}`;
  private client: pg.Client | null = null;
  private closing = false;
  private seq = 0;
  private backendPid = 0;
  private readonly pending = new Map<number, PendingBarrier>();
  private heartbeat: NodeJS.Timeout | null = null;
  private reconnect: NodeJS.Timeout | null = null;

  constructor(
    private readonly cache: SharedCache,
    private readonly db: Database,
    private readonly databaseUrl: string,
    private readonly log: Log,
  ) {
    cache.barrier = () => this.barrier();
  }

  /** Connects and starts listening; on failure the cache stays off and a retry is scheduled. */
  async start(): Promise<void> {
    await this.connect().catch((err) => this.down(err));
  }

  private async connect() {
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: 'cairn cache listener' });
    this.client = client;
    client.on('notification', (msg) => this.onNotification(msg.channel, msg.payload ?? ''));
    client.on('error', (err) => this.down(err));
    client.on('end', () => this.down(new Error('cache listener connection ended')));
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    await client.query(`LISTEN ${this.ackChannel}`);
    this.backendPid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
    if (this.client !== client || this.closing) return;
    await this.beat();
    await sql`delete from cache_listeners where heartbeat_at < now() - interval '1 day'`.execute(this.db);
    this.cache.clear();
    this.cache.enabled = true;
    this.heartbeat ??= setInterval(() => void this.beat().catch(() => {}), HEARTBEAT_MS).unref();
  }

  private async beat() {
    await sql`insert into cache_listeners (id, backend_pid, heartbeat_at) values (${this.id}, ${this.backendPid}, now())
              on conflict (id) do update set backend_pid = excluded.backend_pid, heartbeat_at = now()`.execute(this.db);
  }

  /** The listener is gone: serve nothing from memory until it is back. */
  private down(err: unknown) {
    const wasEnabled = this.cache.enabled;
    this.cache.enabled = false;
    this.cache.clear();
    const client = this.client;
    this.client = null;
    client?.removeAllListeners('end');
    client?.end().catch(() => {});
    for (const [, p] of this.pending) p.resolve();
    this.pending.clear();
    if (this.closing) return;
    if (wasEnabled) this.log.warn({ err }, 'cache listener lost; caching off until it reconnects');
    this.reconnect ??= setTimeout(() => {
      this.reconnect = null;
      void this.connect().catch((e) => this.down(e));
    }, RECONNECT_MS).unref();
  }

  private onNotification(channel: string, payload: string) {
    if (channel === this.ackChannel) {
      const [seq, peer] = payload.split(':');
      const p = this.pending.get(Number(seq));
      if (p) {
        p.acked.add(peer);
        p.waitingFor?.delete(peer);
        this.settle(Number(seq), p);
      }
      return;
    }
    if (payload.startsWith('t:')) {
      this.cache.clear();
    } else if (payload.startsWith('b:')) {
      const [, writer, seq] = payload.split(':');
      if (writer === this.id) {
        const p = this.pending.get(Number(seq));
        if (p) {
          p.ownSeen = true;
          this.settle(Number(seq), p);
        }
      } else {
        this.client?.query('select pg_notify($1, $2)', [`cairn_cache_ack_${writer}`, `${seq}:${this.id}`]).catch(() => {});
      }
    }
  }

  private settle(seq: number, p: PendingBarrier) {
    if (p.ownSeen && p.waitingFor && p.waitingFor.size === 0) {
      this.pending.delete(seq);
      p.resolve();
    }
  }

  /**
   * Announces a barrier after this process's committed writes and waits until this process and
   * every live peer have passed it, i.e. have dropped what those writes made stale.
   */
  async barrier(): Promise<void> {
    if (!this.client || this.closing) return;
    const seq = ++this.seq;
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    const p: PendingBarrier = { ownSeen: false, waitingFor: null, acked: new Set(), resolve };
    this.pending.set(seq, p);
    const timer = setTimeout(() => {
      if (!this.pending.has(seq)) return;
      this.pending.delete(seq);
      this.log.warn({ waitingFor: [...(p.waitingFor ?? [])], ownSeen: p.ownSeen }, 'cache barrier timed out');
      resolve();
    }, ACK_TIMEOUT_MS);
    try {
      const { rows } = await sql<{ peers: string[] }>`
        select array(select l.id from cache_listeners l
                     where l.id <> ${this.id} and l.heartbeat_at > now() - ${LIVE_WINDOW}::interval
                       and exists (select 1 from pg_stat_activity a where a.pid = l.backend_pid)) as peers,
               pg_notify(${CHANNEL}, ${`b:${this.id}:${seq}`})`.execute(this.db);
      p.waitingFor = new Set(rows[0].peers.filter((peer) => !p.acked.has(peer)));
      this.settle(seq, p);
      await done;
    } catch (err) {
      // The write itself has committed; its notification still reaches every cache, only later.
      this.pending.delete(seq);
      this.log.warn({ err }, 'cache barrier failed');
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    this.cache.enabled = false;
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.reconnect) clearTimeout(this.reconnect);
    for (const [, p] of this.pending) p.resolve();
    this.pending.clear();
    await sql`delete from cache_listeners where id = ${this.id}`.execute(this.db).catch(() => {});
    const client = this.client;
    this.client = null;
    client?.removeAllListeners('end');
    await client?.end().catch(() => {});
  }
}
