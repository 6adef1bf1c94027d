import fc from 'fast-check';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from '../../helpers/app.js';
import { operationsFromOpenApi, operationsOutsideApi, requestArb, type FuzzRequest, type Operation } from './generate.js';
import { buildWorld, repairWorld, worldIntact, type World } from './world.js';

export interface Failure {
  index: number;
  actor: string;
  method: string;
  url: string;
  bodyMode: string;
  payload?: string;
  status: number;
  problem: string;
  body: string;
  logged: string[];
}

export interface FuzzStats {
  seed: number;
  requests: number;
  operations: number;
  /** Operations that got at least one request, and those that answered below 400 at least once. */
  covered: number;
  reachedSuccess: number;
  statuses: Record<string, number>;
  /** Every status code seen, and the operations that took the most time in all. */
  codes: Record<string, number>;
  slowest: string[];
  rebuilds: number;
  /** Fixture damage undone in place (tokens replaced, users unblocked, project unarchived...). */
  repairs: number;
  seconds: number;
  failures: Failure[];
}

/** What an answer must never carry (the data directory is added per run). */
const LEAKS: [RegExp, string][] = [
  [/\bat (?:async )?[\w$.<>[\] ]*\(?(?:\/|file:\/\/|node:)[^\s)]*:\d+:\d+\)?/, 'a stack trace'],
  [/node_modules/, 'a node_modules path'],
  [/\/work\//, 'a source path (/work)'],
  [/\b(?:TypeError|ReferenceError|RangeError|SyntaxError|AggregateError)\b/, 'a JavaScript error name'],
  [/syntax error at or near|violates (?:foreign key|unique|not-null|check|exclusion) constraint|duplicate key value|relation "[^"]+" does not exist|column "[^"]+" (?:of relation|does not exist)|invalid input syntax for|out of range for type|current transaction is aborted|could not determine data type|operator does not exist|SQLSTATE/, 'SQL error text'],
  [/ResponseSchemaMismatch|response does not match its schema/, 'a response schema mismatch'],
];

function escapeRegExp(s: string) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The problems of one answer: a 5xx, or a leak in its body or headers. */
export function problemsOf(status: number, text: string, headers: Record<string, unknown>, leaks: [RegExp, string][]): string[] {
  const problems: string[] = [];
  if (status >= 500) problems.push(`status ${status}`);
  const scanned = text.length > 2_000_000 ? text.slice(0, 2_000_000) : text;
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${String(v)}`).join('\n');
  for (const [re, what] of leaks) {
    if (re.test(scanned)) problems.push(`body has ${what}`);
    if (re.test(head)) problems.push(`headers have ${what}`);
  }
  return problems;
}

/** A deterministic order of the operations for one round. */
function shuffled<T>(items: T[], seed: number): T[] {
  return fc.sample(fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length }), { seed, numRuns: 1 })[0];
}

export interface RunOptions {
  seed: number;
  requests: number;
  /** Requests in flight at once (1: strictly one after another, reproducible). */
  concurrency?: number;
  /** Lines the app logged (errors), read after each failure. */
  logLines: string[];
  progress?: (done: number, stats: FuzzStats) => void;
  /** A fresh fixture every so many requests (deleted labels, branches, issues... come back). */
  refreshEvery?: number;
  timeoutMs?: number;
  /** The fixture to start from (one built by the caller); a fresh one otherwise. */
  world?: World;
}

/**
 * Fuzzes every operation of the OpenAPI document (and the routes outside the API) in rounds:
 * each round visits every operation once, in a seeded order, with one generated request. After a
 * write that succeeded, the fixture is checked and rebuilt when the request undid it (deleted the
 * project, revoked a token, demoted the admin...), so destructive routes are covered on real ids.
 */
export async function runFuzz(t: TestContext, opts: RunOptions): Promise<FuzzStats> {
  const started = Date.now();
  const doc = (await t.get('/api/v4/openapi.json', { token: null })).body;
  const ops: Operation[] = [...operationsFromOpenApi(doc), ...operationsOutsideApi(t.app.routeTable)];
  const leaks: [RegExp, string][] = [
    ...LEAKS,
    [new RegExp(escapeRegExp(t.tmpDir)), 'the data directory'],
    [new RegExp(escapeRegExp(path.join(os.tmpdir(), 'cairn-'))), 'a temporary directory'],
  ];
  for (const dir of Object.values(t.config.storages)) leaks.push([new RegExp(escapeRegExp(dir)), 'a repository storage path']);

  let world: World = opts.world ?? (await buildWorld(t));
  let arbs = new Map<Operation, fc.Arbitrary<FuzzRequest>>();
  const stats: FuzzStats = { seed: opts.seed, requests: 0, operations: ops.length, covered: 0, reachedSuccess: 0, statuses: {}, codes: {}, slowest: [], rebuilds: 0, repairs: 0, seconds: 0, failures: [] };
  const covered = new Set<Operation>();
  const succeeded = new Set<Operation>();
  let rebuilding: Promise<void> | null = null;
  const timeByOp = new Map<string, number>();
  const phase = { generate: 0, send: 0, check: 0, rebuild: 0 };

  const generate = (op: Operation, round: number, i: number): FuzzRequest => {
    const g0 = performance.now();
    let arb = arbs.get(op);
    if (!arb) arbs.set(op, (arb = requestArb(op, world)));
    const r = fc.sample(arb, { seed: (opts.seed + round * 1_000_003 + i * 7919) | 0, numRuns: 1 })[0];
    const took = performance.now() - g0;
    phase.generate += took;
    return r;
  };

  const send = async (req: FuzzRequest, index: number) => {
    const logFrom = opts.logLines.length;
    let status: number;
    let text: string;
    let headers: Record<string, unknown>;
    let timer: NodeJS.Timeout | undefined;
    const t0 = performance.now();
    try {
      const res = await Promise.race([
        t.app.inject({ method: req.method as any, url: req.url, headers: req.headers, payload: req.payload }),
        new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('no answer in time')), opts.timeoutMs ?? 60_000); }),
      ]);
      status = res.statusCode;
      text = res.body;
      headers = res.headers;
    } catch (err) {
      status = 599;
      text = String((err as Error)?.message ?? err);
      headers = {};
    } finally {
      clearTimeout(timer);
    }
    stats.requests++;
    phase.send += performance.now() - t0;
    const key = `${req.method} ${req.op.path}`;
    timeByOp.set(key, (timeByOp.get(key) ?? 0) + performance.now() - t0);
    stats.codes[status] = (stats.codes[status] ?? 0) + 1;
    const bucket = `${Math.floor(status / 100)}xx`;
    stats.statuses[bucket] = (stats.statuses[bucket] ?? 0) + 1;
    covered.add(req.op);
    if (status < 400) succeeded.add(req.op);
    const problems = problemsOf(status, text, headers, leaks);
    if (problems.length) {
      await new Promise((r) => setImmediate(r));
      stats.failures.push({
        index, actor: req.actor, method: req.method, url: req.url.length > 500 ? req.url.slice(0, 500) + '…' : req.url, bodyMode: req.bodyMode,
        payload: req.payload && req.payload.length > 500 ? req.payload.slice(0, 500) + '…' : req.payload,
        status, problem: problems.join('; '), body: text.slice(0, 500), logged: opts.logLines.slice(logFrom, logFrom + 3).map((l) => l.slice(0, 1500)),
      });
    }
    if (req.method !== 'GET' && status < 400) {
      const c0 = performance.now();
      const broken = await worldIntact(t, world);
      phase.check += performance.now() - c0;
      if (broken && process.env.CAIRN_FUZZ_VERBOSE) console.log('fixture broken:', broken, 'by', req.actor, req.method, req.url.slice(0, 200), req.payload?.slice(0, 200));
      if (broken && !rebuilding) {
        rebuilding = (async () => {
          const b0 = performance.now();
          let problem: string | null = broken;
          // A request may break several things at once (a blocked user and the tokens...).
          for (let i = 0; problem && i < 3; i++) {
            if (!(await repairWorld(t, world, problem))) break;
            problem = await worldIntact(t, world);
          }
          if (problem) {
            world = await buildWorld(t);
            arbs = new Map();
            stats.rebuilds++;
          } else {
            stats.repairs++;
          }
          phase.rebuild += performance.now() - b0;
        })().finally(() => { rebuilding = null; });
      }
      if (rebuilding) await rebuilding;
    }
  };

  const concurrency = opts.concurrency ?? 1;
  let index = 0;
  for (let round = 0; index < opts.requests; round++) {
    const order = shuffled(ops, opts.seed + round);
    const queue = order.map((op, i) => ({ op, i }));
    const workers = Array.from({ length: concurrency }, async () => {
      for (;;) {
        if (index >= opts.requests) return;
        const next = queue.shift();
        if (!next) return;
        const n = index++;
        if (opts.refreshEvery && n > 0 && n % opts.refreshEvery === 0 && !rebuilding) {
          rebuilding = (async () => {
            world = await buildWorld(t);
            arbs = new Map();
            stats.rebuilds++;
          })().finally(() => { rebuilding = null; });
        }
        if (rebuilding) await rebuilding;
        await send(generate(next.op, round, next.i), n);
        if (opts.progress && stats.requests % 1000 === 0) opts.progress(stats.requests, stats);
      }
    });
    await Promise.all(workers);
  }
  if (process.env.CAIRN_FUZZ_VERBOSE) console.log('never below 400:', ops.filter((o) => !succeeded.has(o)).map((o) => `${o.method} ${o.path}`).join('\n'));
  stats.covered = covered.size;
  stats.reachedSuccess = succeeded.size;
  stats.seconds = (Date.now() - started) / 1000;
  if (process.env.CAIRN_FUZZ_VERBOSE) console.log(JSON.stringify(phase));
  stats.slowest = [...timeByOp].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([k, ms]) => `${k} ${Math.round(ms)} ms`);
  return stats;
}
