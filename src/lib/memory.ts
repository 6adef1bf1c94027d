import inspector from 'node:inspector';

/**
 * One memory-reducing garbage collection, once the server has settled after its start.
 *
 * Starting leaves garbage (module compilation, the migrations, the first queries, on the embedded
 * database its initdb run) and a heap grown to hold it: the young generation at its largest
 * (2 x 16 MB) and old-generation pages that are now mostly free. An ordinary full GC frees the
 * objects but keeps the pages, and V8's own memory reducer gives them back only after the process
 * has been quiet for a while (about 40 s after a start). What gives them back at once is V8's
 * low-memory notification: compacting full GCs that release free pages and shrink the young
 * generation to its smallest. Node exposes it only through the inspector protocol
 * (HeapProfiler.collectGarbage), over an in-process session that opens no port; it costs about
 * 100 ms of one core, once. Measured on PostgreSQL: idle RSS 190 MB before it, about 145 after.
 */
export function reduceMemorySoon(delayMs: number): void {
  setTimeout(() => {
    try {
      const session = new inspector.Session();
      session.connect();
      // Disconnecting inside the callback deadlocks: V8 runs it holding a lock that closing the
      // session takes too.
      session.post('HeapProfiler.collectGarbage', () => setImmediate(() => session.disconnect()));
    } catch {
      // No inspector in this build of Node: V8's memory reducer gets there on its own, later.
    }
  }, delayMs).unref();
}
