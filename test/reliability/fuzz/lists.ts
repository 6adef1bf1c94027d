import fc from 'fast-check';
import type { TestContext } from '../../helpers/app.js';
import { encodeQueryValue, enc, operationsFromOpenApi, type Operation } from './generate.js';
import type { World } from './world.js';

/**
 * Issue #25: no list request may take more than a time budget of server time, whatever its
 * parameters. Every GET of the OpenAPI document that takes query parameters gets them all at
 * once, each at its worst: lists of up to a few thousand items (over the caps and at them),
 * long search strings, every filter and its not[...] side, every order. The fixture's ids fill the
 * path, so the requests reach the finders past the 404s.
 */

export interface SlowAnswer {
  url: string;
  actor: string;
  status: number;
  ms: number;
}

export interface ListStressStats {
  requests: number;
  operations: number;
  statuses: Record<string, number>;
  slowest: SlowAnswer[];
  over: SlowAnswer[];
  errors: SlowAnswer[];
}

/** How many items a stressed list carries: at the cap, just over it, far over it. */
const SIZES = [100, 101, 1000, 4000];

/** A long text for a search-like parameter. */
const LONG = 'a%_\\'.repeat(1250);

/** A parameter that takes many items: an array in the schema, or a comma list by GitLab's name for it. */
function isListy(name: string, schema: any): boolean {
  if (enumValues(schema).length || schema.type === 'boolean') return false;
  const types = [schema, ...(schema.anyOf ?? schema.oneOf ?? [])];
  return types.some((s: any) => s?.type === 'array')
    || /(^|\[)(iids|ids|labels|topic|refs|tag_list|scope|in|custom_attributes)\]?$|_ids\]?$|_usernames?\]?$|^skip_/.test(name);
}

function isInteger(schema: any): boolean {
  const types = [schema, ...(schema.anyOf ?? schema.oneOf ?? [])];
  return types.some((s: any) => s?.type === 'integer' || s?.items?.type === 'integer');
}

function enumValues(schema: any): unknown[] {
  if (Array.isArray(schema.enum)) return schema.enum;
  const alts = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alts) && alts.every((a: any) => 'const' in a)) return alts.map((a: any) => a.const);
  return [];
}

/** The worst value of one parameter: a huge list, a long text, an enum's value. */
function stressed(name: string, schema: any, size: number, pick: number, w: World): unknown {
  const choices = enumValues(schema);
  if (choices.length) return choices[pick % choices.length];
  if (schema.type === 'boolean') return pick % 2 === 0;
  if (schema.type === 'object' && schema.properties) {
    return Object.fromEntries(Object.entries<any>(schema.properties).map(([k, s]) => [k, stressed(k, s, size, pick + 1, w)]));
  }
  if (/custom_attributes/.test(name)) return Object.fromEntries(Array.from({ length: size }, (_, i) => [`k${i}`, 'v']));
  if (isListy(name, schema)) {
    const ints = isInteger(schema) || /ids?$/.test(name);
    const items = Array.from({ length: size }, (_, i) => (ints ? i + 1 : `${name.replace(/\W/g, '')}${i}`));
    // Half as `a,b,c`, half as `x[]=a&x[]=b` (both reach the same code in GitLab's clients).
    return pick % 2 === 0 ? items.join(',') : items;
  }
  if (isInteger(schema) || schema.type === 'number') return pick % 2 === 0 ? 2147483647 : w.projectId;
  if (/_at$|_before$|_after$|since|until|date/.test(name)) return '2001-01-01T00:00:00Z';
  if (/username|user$|author|assignee|reviewer/.test(name)) return w.member.user.username;
  return LONG;
}

/** The path of an operation with the fixture's ids (each collection's own). */
function pathOf(op: Operation, w: World): string | null {
  let url = op.path;
  for (const name of op.pathParams) {
    let value: string | number | undefined;
    if (name === 'id') {
      const m = /\/([a-z_]+)\/\{id\}/.exec(op.path);
      value = (w.ids[m?.[1] ?? 'default'] ?? w.ids.default)?.[0];
    } else {
      value = w.values[name]?.[0];
    }
    if (value === undefined) return null;
    url = url.replace(`{${name}}`, enc(String(value)));
  }
  return url;
}

/** Every GET with query parameters beyond pagination. */
export function listOperations(doc: any): Operation[] {
  return operationsFromOpenApi(doc).filter(
    (op) => op.method === 'GET' && op.query.some((q) => !['page', 'per_page'].includes(q.name)),
  );
}

/** One stressed query: which parameters, at what size. */
interface Variant {
  label: string;
  params: { name: string; schema: any }[];
  size: number;
  pick: number;
}

/** Query parameters as stressable units: `not` (an object) counts as each of its properties. */
function paramsOf(op: Operation): { name: string; schema: any }[] {
  const out: { name: string; schema: any }[] = [];
  for (const q of op.query) {
    if (q.name === 'page' || q.name === 'per_page') continue;
    if (q.schema?.type === 'object' && q.schema.properties) {
      for (const [k, s] of Object.entries<any>(q.schema.properties)) out.push({ name: `${q.name}[${k}]`, schema: s });
    } else {
      out.push({ name: q.name, schema: q.schema ?? {} });
    }
  }
  return out;
}

const isText = (p: { name: string; schema: any }) => !enumValues(p.schema).length && p.schema.type === 'string' && !isListy(p.name, p.schema);

/**
 * The variants of one operation: each list alone far over the caps, every text at its longest,
 * everything at once; `full` (the long form) adds each text alone, each list at the cap, every
 * order_by with every list and text, and random subsets of everything at random sizes.
 */
function variantsOf(op: Operation, round: number, rng: () => number, full: boolean): Variant[] {
  const params = paramsOf(op);
  const lists = params.filter((p) => isListy(p.name, p.schema));
  const texts = params.filter(isText);
  const out: Variant[] = [];
  if (round === 0) {
    for (const p of lists) out.push({ label: `${p.name} at 4000`, params: [p], size: 4000, pick: 1 });
    if (texts.length) out.push({ label: 'every text long', params: texts, size: 1, pick: 0 });
    out.push({ label: 'everything at 100', params, size: 100, pick: 0 });
    if (full) {
      for (const p of texts) out.push({ label: `${p.name} long`, params: [p], size: 1, pick: 0 });
      for (const p of lists) out.push({ label: `${p.name} at 100`, params: [p], size: 100, pick: 0 });
      const orders = params.find((p) => p.name === 'order_by');
      for (const [i] of enumValues(orders?.schema ?? {}).entries()) {
        out.push({ label: `order ${i} with every list at 100 and every text`, params: [...lists, ...texts, orders!], size: 100, pick: i });
      }
    }
  } else {
    const chosen = params.filter(() => rng() % 3 === 0);
    out.push({ label: `random ${round}`, params: chosen, size: SIZES[rng() % SIZES.length], pick: rng() });
  }
  return out;
}

/**
 * Sends the stressed variants of each list operation as the admin (who sees everything); `full`:
 * more variants, anonymously too, and `rounds - 1` random ones more. Returns the slowest answers, those over
 * `budgetMs` and any 5xx.
 */
export async function runListStress(t: TestContext, w: World, opts: { seed: number; rounds: number; budgetMs: number; full?: boolean }): Promise<ListStressStats> {
  const doc = (await t.get('/api/v4/openapi.json', { token: null })).body;
  const ops = listOperations(doc);
  const stats: ListStressStats = { requests: 0, operations: ops.length, statuses: {}, slowest: [], over: [], errors: [] };
  const numbers = fc.sample(fc.array(fc.nat(), { minLength: 4096, maxLength: 4096 }), { seed: opts.seed, numRuns: 1 })[0];
  let r = 0;
  const rng = () => numbers[r++ % numbers.length];
  for (let round = 0; round < opts.rounds; round++) {
    for (const op of ops) {
      const path = pathOf(op, w);
      if (!path) continue;
      for (const v of variantsOf(op, round, rng, !!opts.full)) {
        const parts: string[] = [];
        for (const p of v.params) parts.push(...encodeQueryValue(p.name, stressed(p.name, p.schema, v.size, v.pick + p.name.length, w)));
        parts.push('per_page=100');
        const url = `${path}?${parts.join('&')}`;
        for (const actor of opts.full ? (['admin', 'anonymous'] as const) : (['admin'] as const)) {
          const headers: Record<string, string> = actor === 'admin' ? { 'private-token': w.admin.token } : {};
          // A request far over the budget is cut short (recorded, not waited for: once labels took minutes).
          const send = async () => {
            let timer: NodeJS.Timeout | undefined;
            const t0 = performance.now();
            const res = await Promise.race([
              t.app.inject({ method: 'GET', url, headers }),
              new Promise<{ statusCode: number }>((resolve) => { timer = setTimeout(() => resolve({ statusCode: 599 }), opts.budgetMs * 20); }),
            ]).finally(() => clearTimeout(timer));
            return { res, ms: performance.now() - t0 };
          };
          let { res, ms } = await send();
          // Over the budget once may be the machine (a GC, another process); a slow path is slow twice.
          if (ms > opts.budgetMs && res.statusCode !== 599) {
            const again = await send();
            if (again.ms < ms) ({ res, ms } = again);
          }
          stats.requests++;
          stats.statuses[res.statusCode] = (stats.statuses[res.statusCode] ?? 0) + 1;
          const answer = { url: `${op.path}: ${v.label} (${url.length} chars)`, actor, status: res.statusCode, ms: Math.round(ms) };
          if (ms > opts.budgetMs) {
            stats.over.push(answer);
            if (process.env.CAIRN_FUZZ_VERBOSE) console.log('over the budget:', JSON.stringify(answer));
          }
          if (res.statusCode >= 500) stats.errors.push(answer);
          stats.slowest.push(answer);
          stats.slowest.sort((a, b) => b.ms - a.ms);
          stats.slowest.length = Math.min(stats.slowest.length, 10);
        }
      }
    }
  }
  return stats;
}
