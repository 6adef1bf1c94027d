import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { NotificationHub } from '../db/notifications.js';
import type { SharedCache } from './shared_cache.js';

const CHANNEL = 'cairn_cache';
/** How often a process pings itself through its listener, renewing its lease. */
const PING_MS = 250;
/** How long one received ping lets a process serve from memory. Must stay below ACK_TIMEOUT_MS. */
const LEASE_MS = 1_000;
/** How long a writer waits for acknowledgements; by then a silent peer's lease has run out. */
const ACK_TIMEOUT_MS = 2_000;
const HEARTBEAT_MS = 5_000;
/**
 * Writers wait only for processes whose heartbeat is younger than this and whose listening
 * connection still exists; a process stops serving well before its heartbeat gets this old.
 */
const LIVE_WINDOW_MS = 20_000;
const HEARTBEAT_TRUST_MS = LIVE_WINDOW_MS - 5_000;

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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

/**
 * Keeps a SharedCache true to PostgreSQL across processes (see shared_cache.ts).
 *
 The process's listening connection (db/notifications.ts) listens on `cairn_cache`, where table
 * triggers announce writes (`t:<table>`) and writers announce barriers (`b:<process>:<seq>`), and
 * on this process's own channel, where peers acknowledge its barriers and its pings (sent over
 * that same connection) come back. Notifications arrive in commit order, so a process that
 * acknowledges a barrier, or receives a ping, has applied every write committed before it was sent.
 *
 * Failure rules, which together keep the guarantee when connections break silently:
 * - a process serves from memory only until LEASE_MS after sending the last ping it got back,
 *   and only while its heartbeat is recent enough for writers to wait for it;
 * - a writer waits for acknowledgements at most ACK_TIMEOUT_MS (> LEASE_MS): a peer that did not
 *   answer by then has stopped serving;
 * - a writer whose own listener is down waits LEASE_MS, after which every peer has either
 *   applied the write or stopped serving.
 */
export class PostgresInvalidation {
  readonly id = crypto.randomBytes(12).toString('hex');
  private readonly ownChannel = `cairn_cache_ack_${this.id}`;
  private closing = false;
  private stopListening: (() => void)[] = [];
  private seq = 0;
  private backendPid = 0;
  private lastBeatAt = 0;
  private readonly pending = new Map<number, PendingBarrier>();
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly cache: SharedCache,
    private readonly db: Database,
    private readonly hub: NotificationHub,
    private readonly log: Log,
  ) {
    cache.barrier = (write) => this.barrier(write);
  }

  /** Subscribes to its channels; the cache serves once the listening connection is up and a ping came back. */
  async start(): Promise<void> {
    for (const channel of [CHANNEL, this.ownChannel]) {
      this.stopListening.push(await this.hub.subscribe(channel, { message: (payload) => this.onNotification(channel, payload) }));
    }
    this.stopListening.push(this.hub.watch({ up: (pid) => void this.up(pid).catch((err) => this.down(err)), down: (err) => this.down(err) }));
    if (!this.timers.length) {
      this.timers.push(setInterval(() => this.ping(), PING_MS).unref());
      this.timers.push(setInterval(() => void this.beat().catch(() => {}), HEARTBEAT_MS).unref());
    }
  }

  /** The listening connection is (again) up: register it, then serve from the first ping that comes back. */
  private async up(backendPid: number) {
    this.backendPid = backendPid;
    await this.beat();
    await sql`delete from cache_listeners where heartbeat_at < now() - interval '1 day'`.execute(this.db);
    this.ping();
  }

  private async beat() {
    if (!this.hub.connected || this.closing) return;
    const sentAt = performance.now();
    await sql`insert into cache_listeners (id, backend_pid, heartbeat_at) values (${this.id}, ${this.backendPid}, now())
              on conflict (id) do update set backend_pid = excluded.backend_pid, heartbeat_at = now()`.execute(this.db);
    this.lastBeatAt = sentAt;
  }

  private ping() {
    if (this.hub.connected) this.hub.send(this.ownChannel, `p:${performance.now()}`).catch(() => {});
  }

  /** The listener is gone: serve nothing from memory until it is back (the hub reconnects). */
  private down(err: unknown) {
    const wasServing = this.cache.servingUntil > 0;
    this.cache.servingUntil = 0;
    this.cache.clear();
    // Pending barriers run to their timeout: a peer may still need the time to let go.
    if (wasServing && !this.closing) this.log.warn({ err }, 'cache listener lost; caching off until it reconnects');
  }

  private onNotification(channel: string, payload: string) {
    if (channel === this.ownChannel) {
      if (payload.startsWith('p:')) {
        const sentAt = Number(payload.slice(2));
        this.cache.servingUntil = Math.max(this.cache.servingUntil, Math.min(sentAt + LEASE_MS, this.lastBeatAt + HEARTBEAT_TRUST_MS));
        return;
      }
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
      this.cache.invalidateFromNotification(payload);
    } else if (payload.startsWith('b:')) {
      // A barrier after a write no trigger announces (schema changes: `:u`) also clears.
      const [, writer, seq, unknown] = payload.split(':');
      if (unknown === 'u') this.cache.clear();
      if (writer === this.id) {
        const p = this.pending.get(Number(seq));
        if (p) {
          p.ownSeen = true;
          this.settle(Number(seq), p);
        }
      } else {
        this.hub.send(`cairn_cache_ack_${writer}`, `${seq}:${this.id}`).catch(() => {});
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
  /**
   * Announces a change no table trigger announces (`t:<name>`, a repository write) to every
   * process, then waits for them as after a table write.
   */
  async announce(name: string): Promise<void> {
    if (this.closing) return;
    try {
      await sql`select pg_notify(${CHANNEL}, ${`t:${name}`})`.execute(this.db);
    } catch (err) {
      // Not announced: every process drops everything instead (a barrier for an unknown write).
      this.log.warn({ err }, 'cache announcement failed');
      return this.barrier({ unknown: true });
    }
    return this.barrier({ unknown: false });
  }

  async barrier(write: { unknown: boolean } = { unknown: true }): Promise<void> {
    if (this.closing) return;
    if (!this.hub.connected) {
      await sleep(LEASE_MS);
      return;
    }
    const seq = ++this.seq;
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    const p: PendingBarrier = { ownSeen: false, waitingFor: null, acked: new Set(), resolve };
    this.pending.set(seq, p);
    const timer = setTimeout(() => {
      if (!this.pending.delete(seq)) return;
      this.log.warn({ waitingFor: [...(p.waitingFor ?? [])], ownSeen: p.ownSeen }, 'cache barrier timed out');
      resolve();
    }, ACK_TIMEOUT_MS);
    try {
      const { rows } = await sql<{ peers: string[] }>`
        select array(select l.id from cache_listeners l
                     where l.id <> ${this.id} and l.heartbeat_at > now() - ${`${LIVE_WINDOW_MS} milliseconds`}::interval
                       and exists (select 1 from pg_stat_activity a where a.pid = l.backend_pid)) as peers,
               pg_notify(${CHANNEL}, ${`b:${this.id}:${seq}${write.unknown ? ':u' : ''}`})`.execute(this.db);
      p.waitingFor = new Set(rows[0].peers.filter((peer) => !p.acked.has(peer)));
      this.settle(seq, p);
    } catch (err) {
      // The barrier could not be announced: wait until every peer has applied the write or
      // stopped serving (the write's own trigger notification still reaches them).
      this.log.warn({ err }, 'cache barrier failed');
      await sleep(LEASE_MS);
      this.pending.delete(seq);
      resolve();
    }
    try {
      await done;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    this.cache.servingUntil = 0;
    for (const t of this.timers) clearInterval(t);
    for (const stop of this.stopListening) stop();
    this.stopListening = [];
    for (const [, p] of this.pending) p.resolve();
    this.pending.clear();
    await sql`delete from cache_listeners where id = ${this.id}`.execute(this.db).catch(() => {});
  }
}
