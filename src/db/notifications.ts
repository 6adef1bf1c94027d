import type pg from 'pg';
import type { OpenedDatabase } from './index.js';

/**
 * The process's one LISTEN connection (issue #26 item 3). Every part of Cairn that waits for
 * something another process does (runner long polls, the background worker, live job logs, the
 * cache's invalidation) subscribes to a channel here instead of keeping its own connection,
 * reconnect loop and PGlite branch.
 *
 * - PostgreSQL: one dedicated `pg.Client`; every subscribed channel is LISTENed on it, again after
 *   each reconnect (every RECONNECT_MS while it is down). Notifications sent while it is down are
 *   lost, so when a channel is listened again its subscribers are told to look again
 *   (`ChannelHandler.listening`), and waits end early while it is down (FALLBACK_POLL_MS).
 * - PGlite: its in-process `listen()` (one process per data directory: the lock in db/index.ts).
 * - A PostgreSQL database handed over without its address (tests sharing one): nothing listens;
 *   waits poll every FALLBACK_POLL_MS.
 *
 * Adding a waiting channel: NOTIFY it in the writing transaction (`select pg_notify('<channel>',
 * <key>)`, or a trigger), and wait with `hub.wakeup('<channel>', key)`: see Wakeup.
 */

/** How often a lost connection is tried again. */
const RECONNECT_MS = 1_000;
/** While a channel is not listened, waits end this soon: waiters poll until it is back. */
export const FALLBACK_POLL_MS = 1_000;
/**
 * Even while listening, no wait lasts longer than this: a safety net for a notification missed in
 * a way the connection did not report (the waiter looks again, one cheap statement).
 */
export const SAFETY_NET_MS = 15_000;

const CHANNEL_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface HubLog {
  warn(obj: unknown, msg?: string): void;
}

export interface ChannelHandler {
  /** A notification on the channel (in commit order across all channels). */
  message(payload: string): void;
  /** The channel is listened (again): whatever was sent while it was not is lost, look again. */
  listening?(): void;
  /** The channel is no longer listened (connection lost, hub closing). */
  lost?(): void;
}

export interface ConnectionWatcher {
  /** The connection is up and listens on every subscribed channel; `backendPid` is its server process. */
  up?(backendPid: number): void;
  /** The connection is gone (or the hub closes); notifications are lost until `up`. */
  down?(err: unknown): void;
}

export class NotificationHub {
  private readonly handlers = new Map<string, Set<ChannelHandler>>();
  /** Channels the live connection (PostgreSQL client or PGlite) listens on now. */
  private readonly listened = new Set<string>();
  private readonly pgliteUnlisten = new Map<string, () => Promise<void>>();
  private readonly watchers = new Set<ConnectionWatcher>();
  private client: pg.Client | null = null;
  /** The client has connected and LISTENed what was subscribed then (later subscriptions LISTEN themselves). */
  private ready = false;
  private reconnect: NodeJS.Timeout | null = null;
  private closing = false;
  private warned = false;
  /** The listening connection's server process (PostgreSQL), 0 while down. */
  backendPid = 0;
  /**
   * The listening connection's statements, one after the other: a pg client runs one at a time,
   * and one issued while another runs is deprecated (refused from pg 9). Sends, LISTENs of new
   * subscriptions and the connect's own statements would otherwise overlap. One chain per connection.
   */
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly database: Pick<OpenedDatabase, 'pglite' | 'url'>,
    private readonly log: HubLog,
  ) {}

  /** Opens the process's listening connection (a failed first connect is retried in the background). */
  static async start(database: Pick<OpenedDatabase, 'pglite' | 'url'>, log: HubLog): Promise<NotificationHub> {
    const hub = new NotificationHub(database, log);
    if (!database.pglite && database.url) await hub.connect();
    return hub;
  }

  /** A hub that listens to nothing: every wait polls (a process without a listening connection). */
  static inert(): NotificationHub {
    return new NotificationHub({}, { warn() {} });
  }

  /** Whether notifications on `channel` reach this process now. */
  listensTo(channel: string): boolean {
    return this.listened.has(channel);
  }

  get connected(): boolean {
    return this.database.pglite ? !this.closing : this.ready;
  }

  /**
   * Subscribes `handler` to `channel`; resolves once the channel is listened (at once when it
   * already is, or when nothing can listen now: the handler's `listening` tells when it is).
   * Returns the function that ends the subscription (the channel stays listened).
   */
  async subscribe(channel: string, handler: ChannelHandler): Promise<() => void> {
    if (!CHANNEL_NAME.test(channel)) throw new Error(`invalid notification channel name ${JSON.stringify(channel)}`);
    let set = this.handlers.get(channel);
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(handler);
    const unsubscribe = () => void set.delete(handler);
    if (this.closing || this.listened.has(channel)) return unsubscribe;
    if (this.database.pglite) {
      if (!this.pgliteUnlisten.has(channel)) {
        const pending = this.database.pglite.listen(channel, (payload) => this.dispatch(channel, payload ?? ''));
        this.pgliteUnlisten.set(channel, async () => (await pending)());
        await pending;
        this.listened.add(channel);
        this.announceListening(channel);
      }
      return unsubscribe;
    }
    // Connected: LISTEN now. Connecting: connect() LISTENs every subscribed channel once it is up.
    const c = this.client;
    if (c && this.ready) await this.listen(c, channel).catch((err) => this.down(err, c));
    return unsubscribe;
  }

  /** Watches the connection itself (the cache's invalidation keeps a lease on it); `up` at once when it is up. */
  watch(watcher: ConnectionWatcher): () => void {
    this.watchers.add(watcher);
    if (this.ready && this.client) {
      const pid = this.backendPid;
      queueMicrotask(() => this.watchers.has(watcher) && this.ready && watcher.up?.(pid));
    }
    return () => void this.watchers.delete(watcher);
  }

  /** NOTIFY over the listening connection itself (PGlite: the database); refused while it is down. */
  async send(channel: string, payload: string): Promise<void> {
    if (this.database.pglite) {
      await this.database.pglite.query('select pg_notify($1, $2)', [channel, payload]);
      return;
    }
    const c = this.client;
    if (!c || !this.ready) throw new Error('the notification connection is down');
    await this.query(c, 'select pg_notify($1, $2)', [channel, payload]);
  }

  /**
   * A wakeup for notifications on `channel` (only those whose payload is `key` when given). Close
   * it when done: it stays subscribed until then.
   */
  wakeup(channel: string, key?: string): Wakeup {
    const w: Wakeup = new Wakeup(() => this.listened.has(channel), () => unsubscribe.then((u) => u()));
    const unsubscribe = this.subscribe(channel, {
      message: (payload) => (key === undefined || payload === key) && w.notify(),
      listening: () => w.notify(),
      lost: () => w.notify(),
    });
    return w;
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.reconnect) clearTimeout(this.reconnect);
    const lost = [...this.listened];
    this.listened.clear();
    for (const ch of lost) this.announceLost(ch);
    for (const w of [...this.watchers]) w.down?.(new Error('closing'));
    for (const unlisten of this.pgliteUnlisten.values()) await unlisten().catch(() => {});
    this.pgliteUnlisten.clear();
    const c = this.client;
    this.client = null;
    this.ready = false;
    if (c) {
      c.removeAllListeners();
      c.on('error', () => {});
      await c.end().catch(() => {});
    }
  }

  private dispatch(channel: string, payload: string) {
    for (const h of [...(this.handlers.get(channel) ?? [])]) {
      try {
        h.message(payload);
      } catch (err) {
        this.log.warn({ err, channel }, 'notification handler failed');
      }
    }
  }

  private announceListening(channel: string) {
    for (const h of [...(this.handlers.get(channel) ?? [])]) h.listening?.();
  }

  private announceLost(channel: string) {
    for (const h of [...(this.handlers.get(channel) ?? [])]) h.lost?.();
  }

  private async listen(c: pg.Client, channel: string) {
    if (this.listened.has(channel)) return;
    await this.query(c, `LISTEN ${channel}`);
    if (this.client !== c || this.listened.has(channel)) return;
    this.listened.add(channel);
    this.announceListening(channel);
  }

  private query<R extends pg.QueryResultRow = pg.QueryResultRow>(c: pg.Client, text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    const run = this.tail.then(() => c.query<R>(text, values));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async connect() {
    const { default: pg } = await import('pg');
    if (this.closing) return;
    const c = new pg.Client({ connectionString: this.database.url, application_name: 'cairn listener', keepAlive: true });
    this.client = c;
    this.tail = Promise.resolve(); // a statement stuck on the lost connection must not hold up this one
    this.ready = false;
    c.on('notification', (msg) => this.dispatch(msg.channel, msg.payload ?? ''));
    c.on('error', (err) => this.down(err, c));
    c.on('end', () => this.down(new Error('listening connection ended'), c));
    try {
      await c.connect();
      const pid = (await this.query<{ pid: number }>(c, 'select pg_backend_pid() as pid')).rows[0].pid;
      // Map iteration sees channels subscribed while this runs.
      for (const channel of this.handlers.keys()) {
        await this.query(c, `LISTEN ${channel}`);
        if (this.client !== c) return;
        this.listened.add(channel);
      }
      if (this.client !== c) return;
      this.ready = true;
      this.backendPid = pid;
      if (this.warned) this.log.warn({}, 'listening connection is back');
      this.warned = false;
      // Whatever was sent while nobody listened is lost: every subscriber looks again.
      for (const channel of this.listened) this.announceListening(channel);
      for (const w of [...this.watchers]) if (this.client === c) w.up?.(pid);
    } catch (err) {
      this.down(err, c);
    }
  }

  private down(err: unknown, from: pg.Client) {
    if (from !== this.client) return;
    this.client = null;
    this.ready = false;
    this.backendPid = 0;
    from.removeAllListeners();
    from.on('error', () => {});
    from.end().catch(() => {});
    const lost = [...this.listened];
    this.listened.clear();
    for (const ch of lost) this.announceLost(ch);
    for (const w of [...this.watchers]) w.down?.(err);
    if (this.closing) return;
    if (!this.warned) this.log.warn({ err }, 'listening connection lost; waits poll and the cache is off until it reconnects');
    this.warned = true;
    this.reconnect ??= setTimeout(() => {
      this.reconnect = null;
      void this.connect();
    }, RECONNECT_MS).unref();
  }
}

/**
 * Something to wait for, woken by notifications. A generation counter closes the gap between a
 * waiter's check and its wait: take `generation`, look (a statement), then `wait(since, ms)`,
 * which returns at once when a notification came in between.
 */
export class Wakeup {
  private gen = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly isListening: () => boolean = () => false,
    private readonly onClose: () => void = () => {},
  ) {}

  get generation() {
    return this.gen;
  }

  get waiting() {
    return this.waiters.size;
  }

  notify() {
    this.gen++;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w();
  }

  /**
   * Resolves when a notification came after `since`, when `signal` aborts, or after `ms`, capped
   * by SAFETY_NET_MS while listening and FALLBACK_POLL_MS while not.
   */
  wait(since: number, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.gen !== since || signal?.aborted || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.min(ms, this.isListening() ? SAFETY_NET_MS : FALLBACK_POLL_MS));
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Ends the subscription and releases any waiter. */
  close() {
    this.onClose();
    this.notify();
  }
}
