// Webhook delivery (issue #32): events delivered per second, and the time from the triggering write
// to the receiver, at a steady rate of writes. A real `cairn serve` (bench/lib.ts) with
// BENCH_PROJECTS projects, each with a hook for issue events pointing at a receiver in this
// process; issues are created round-robin across the projects at BENCH_RATE a second for
// BENCH_SECONDS, each write sent on schedule whether or not the previous one has answered. Each
// event's latency runs from the moment its write was sent to the moment the receiver got it (the
// write's own time included). Target: p99 under 1 s at 100 events a second.
//
// Run: `node --import tsx bench/webhooks.ts` (PGlite) or with DATABASE_URL (PostgreSQL).
// Settings: BENCH_RATE (100), BENCH_SECONDS (10), BENCH_PROJECTS (20); CAIRN_WORKER_CONCURRENCY is
// passed to the server.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { api, startServer } from './lib.js';

const RATE = Number(process.env.BENCH_RATE || 100);
const SECONDS = Number(process.env.BENCH_SECONDS || 10);
const PROJECTS = Number(process.env.BENCH_PROJECTS || 20);
export const WEBHOOK_P99_TARGET_MS = 1000;

const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};

async function main() {
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  let unexpected = 0;
  let lastArrival = 0;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const now = performance.now();
      res.end('ok');
      try {
        const title = JSON.parse(Buffer.concat(chunks).toString('utf8')).object_attributes?.title as string;
        const sent = sentAt.get(title);
        if (sent === undefined) unexpected++;
        else {
          latencies.push(now - sent);
          sentAt.delete(title);
          lastArrival = now;
        }
      } catch {
        unexpected++;
      }
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const server = await startServer({ CAIRN_WEBHOOK_ALLOW_LOCAL_REQUESTS: 'true', ...(process.env.CAIRN_WORKER_CONCURRENCY ? { CAIRN_WORKER_CONCURRENCY: process.env.CAIRN_WORKER_CONCURRENCY } : {}) });
  let writeErrors = 0;
  const writeMs: number[] = [];
  try {
    const projects: { id: number }[] = [];
    for (let i = 0; i < PROJECTS; i++) {
      const p = await api(server, 'POST', '/projects', { name: `hooked-${i}` });
      await api(server, 'POST', `/projects/${p.id}/hooks`, { url: receiverUrl, push_events: false, issues_events: true });
      projects.push(p);
    }
    // Warm-up: one event per project, not counted.
    for (const p of projects) {
      const title = `warm-up ${p.id}`;
      sentAt.set(title, performance.now());
      await api(server, 'POST', `/projects/${p.id}/issues`, { title });
    }
    while (sentAt.size > 0) await new Promise((r) => setTimeout(r, 50));
    latencies.length = 0;

    const total = RATE * SECONDS;
    const started = performance.now();
    const writes: Promise<void>[] = [];
    for (let n = 0; n < total; n++) {
      const due = started + (n * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const title = `event ${n}`;
      const p = projects[n % projects.length];
      const sent = performance.now();
      sentAt.set(title, sent);
      writes.push(
        api(server, 'POST', `/projects/${p.id}/issues`, { title }).then(
          () => void writeMs.push(performance.now() - sent),
          () => {
            writeErrors++;
            sentAt.delete(title);
          },
        ),
      );
    }
    const sendSeconds = (performance.now() - started) / 1000;
    await Promise.all(writes);
    // Every event is delivered, or 60 s pass.
    const deadline = performance.now() + 60_000;
    while (sentAt.size > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const deliverSeconds = ((lastArrival || performance.now()) - started) / 1000;
    const delivered = latencies.length;
    const p99 = percentile(latencies, 99);
    const database = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)';
    console.log(`${database}; ${PROJECTS} projects with a hook each; issues created at ${RATE}/s for ${SECONDS} s (sent in ${sendSeconds.toFixed(1)} s)`);
    console.log(`delivered ${delivered} of ${total} events (${sentAt.size} missing, ${writeErrors} writes failed, ${unexpected} unexpected), ${(delivered / deliverSeconds).toFixed(1)} events/s`);
    console.log(`write to receiver: p50 ${percentile(latencies, 50).toFixed(0)} ms, p90 ${percentile(latencies, 90).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms (the write alone: p50 ${percentile(writeMs, 50).toFixed(0)} ms, p99 ${percentile(writeMs, 99).toFixed(0)} ms)`);
    console.log(`target p99 < ${WEBHOOK_P99_TARGET_MS} ms at 100 events/s: ${p99 < WEBHOOK_P99_TARGET_MS && sentAt.size === 0 ? 'met' : 'MISSED'}`);
  } finally {
    await server.stop();
    receiver.close();
  }
}

await main();
