import fc from 'fast-check';
import type { RouteRecord } from '../../../src/plugins/responses.js';
import type { World } from './world.js';

/** One operation to fuzz: from the OpenAPI document (the REST API) or the route table (pages, OAuth, git). */
export interface Operation {
  method: string;
  /** With `{name}` placeholders. */
  path: string;
  pathParams: string[];
  query: { name: string; schema: any; required: boolean }[];
  body: any | null;
  bodyRequired: boolean;
  source: 'openapi' | 'routes';
}

export type Actor = 'admin' | 'member' | 'anonymous' | 'bad_token';

export interface FuzzRequest {
  op: Operation;
  actor: Actor;
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string;
  /** How the body was made (json, form, broken json...): for the failure report. */
  bodyMode: string;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function deref(doc: any, schema: any): any {
  if (schema && typeof schema === 'object' && typeof schema.$ref === 'string' && schema.$ref.startsWith('#/')) {
    return schema.$ref.slice(2).split('/').reduce((o: any, k: string) => o?.[k], doc);
  }
  return schema;
}

export function operationsFromOpenApi(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const params = (op.parameters ?? []) as any[];
      const content = op.requestBody?.content ?? {};
      const body = deref(doc, (Object.values(content)[0] as any)?.schema) ?? null;
      ops.push({
        method: method.toUpperCase(),
        path,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name),
        query: params.filter((p) => p.in === 'query').map((p) => ({ name: p.name, schema: deref(doc, p.schema) ?? {}, required: !!p.required })),
        body,
        bodyRequired: !!op.requestBody?.required,
        source: 'openapi',
      });
    }
  }
  return ops;
}

/**
 * The routes outside the REST API (sign-in, OAuth, applications and token pages, monitoring, git
 * over HTTP), from their declared schemas. Git's catch-all routes are taken at two and three
 * path segments (a project in a group and in a subgroup).
 */
export function operationsOutsideApi(table: RouteRecord[]): Operation[] {
  const ops: Operation[] = [];
  for (const r of table) {
    if (r.url.startsWith('/api/v4/') || r.method === 'HEAD' || r.method === 'OPTIONS') continue;
    if (/\/:p\d+/.test(r.url) && !/^\/:p0\/:p1(\/:p2)?\/(info|git-)/.test(r.url)) continue;
    const params = Object.keys((r.params as any)?.properties ?? {});
    const urlParams = [...r.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
    const q = (r.querystring as any) ?? {};
    ops.push({
      method: r.method,
      path: r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}'),
      pathParams: [...new Set([...urlParams, ...params])],
      query: Object.entries<any>(q.properties ?? {}).map(([name, schema]) => ({ name, schema, required: (q.required ?? []).includes(name) })),
      body: r.body ?? null,
      bodyRequired: false,
      source: 'routes',
    });
  }
  return ops;
}

/** Strings a hostile caller tries: traversal, git option and revision syntax, NUL, odd unicode, injections. */
export const HOSTILE_STRINGS = [
  '', ' ', '.', '..', '/', '//', '\\', '../', '../../etc/passwd', '..%2F..%2Fetc%2Fpasswd', '%2e%2e%2f', '%2e%2e/%2e%2e/x', '%252e%252e%252f',
  '....//....//', 'main:../../', 'HEAD:../../', 'main:README.md', 'main:', ':README.md', 'v1.0^{}', 'HEAD^{tree}', 'main@{0}', '@{-1}', 'main..feature',
  'main...feature', 'HEAD~999999', 'HEAD~1', 'refs/heads/../../x', 'refs/heads/main', 'refs/../config', '.git/config', 'objects/info/alternates',
  '--upload-pack=touch /x', '--output=x', '--exec=x', '-x', '-', '--', '-c', '-n1', '--all', '-Dx',
  '\u0000', 'a\u0000b', 'main\u0000', '\u0001\u0002\u001f', '\ud800', '\udfff', '\uffff', '\ufeff', '💥🔥', 'ℌ𝔢𝔩𝔩𝔬', '\u202eevil', 'Ω≈ç√', 'ǅ', 'İ',
  "' OR 1=1 --", '"; drop table users; --', "\\'", '%', '%zz', '%00', '%0a', '%ff', '<script>alert(1)</script>', '${7*7}', '{{7*7}}', '$(id)', '`id`', '|id', ';id',
  ' a ', '\n', '\r\n', '\t', 'null', 'undefined', 'true', 'false', 'NaN', 'Infinity', '-Infinity', '0', '-0', '-1', '1e309', '1.5', '0x10', '1_000',
  '9'.repeat(30), '2147483648', '-2147483649', '9223372036854775808', '[]', '{}', '[object Object]', '__proto__', 'constructor', 'prototype', 'toString',
  'hasOwnProperty', 'a'.repeat(256), 'a'.repeat(5000), 'é'.repeat(2000), '/'.repeat(300), 'a/'.repeat(200), 'x@y', 'a@b.c', 'a b', '*', '?', '#', '&', '=', '+',
  '2024-02-30', '2024-13-01T00:00:00Z', '0000-00-00', '9999-12-31T23:59:59Z', '-infinity', 'epoch', 'now',
];

export const HOSTILE_NUMBERS = [-1, 0, -0, 0.5, -2147483649, 2147483647, 2147483648, 9007199254740993, 1e9, 1e300, -1e300, 1e-300];

/** Values of another shape: arrays where scalars are expected, objects, nesting, prototype keys. */
function structures(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.constantFrom<unknown>(null, [], {}, [null], [[]], { __proto__: { admin: true } }, JSON.parse('{"__proto__":{"admin":true}}'),
      { constructor: { prototype: { admin: true } } }, [1, 'a', null, {}], { a: { b: { c: { d: {} } } } }),
    fc.integer({ min: 20, max: 200 }).map((d) => nest(d)),
    fc.jsonValue({ maxDepth: 3 }),
  );
}

function nest(depth: number): unknown {
  let v: unknown = 'x';
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

let hostile: fc.Arbitrary<unknown> | null = null;

/** One shared arbitrary (building fast-check's JSON arbitraries is costly; sampling is not). */
export function hostileValue(): fc.Arbitrary<unknown> {
  return (hostile ??= fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom<unknown>(...HOSTILE_STRINGS) },
    { weight: 2, arbitrary: fc.constantFrom<unknown>(...HOSTILE_NUMBERS) },
    { weight: 1, arbitrary: fc.boolean() },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
    { weight: 2, arbitrary: structures() },
    { weight: 1, arbitrary: fc.constantFrom(50_000, 300_000).map((n) => 'z'.repeat(n)) },
  ));
}

/** A path or query string: hostile ones never longer than a URL may sensibly be. */
let hostileTexts: fc.Arbitrary<string> | null = null;

function hostileText(): fc.Arbitrary<string> {
  return (hostileTexts ??= fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
    { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_NUMBERS).map(String) },
  ));
}

/** Values that name the fixture's things, by the field's name. */
/** Words GitLab's list filters take, where the schema says only "string". */
const WORDS: Record<string, string[]> = {
  state: ['opened', 'closed', 'merged', 'all', 'locked', 'active'],
  order_by: ['created_at', 'updated_at', 'id', 'name', 'path', 'title', 'priority', 'due_date', 'label_priority', 'similarity', 'last_activity_at'],
  sort: ['asc', 'desc'],
  scope: ['all', 'created_by_me', 'assigned_to_me', 'running', 'pending', 'finished', 'branches', 'tags', 'success', 'failed'],
  visibility: ['public', 'internal', 'private'],
  with_labels_details: ['true', 'false'],
  search: ['Target', 'bug', 'a', ''],
  '*': ['out.txt', 'main/download', 'main/raw/out.txt', 'feature/download'],
};

function namedValues(w: World, name: string): (string | number)[] {
  const v = w.values[name] ?? WORDS[name];
  if (v?.length) return v;
  if (/(^|_)ids?$/.test(name) || name.endsWith('_iid')) return w.integers;
  if (/ref|branch|sha|from|to|start/.test(name)) return ['main', 'feature', 'v1.0', ...(w.values.sha ?? [])];
  if (/path|file/.test(name)) return w.values.file_path;
  if (/user(name)?s?$|assignee|author|reviewer/.test(name)) return [w.member.user.username, w.member.user.id, w.other.user.id];
  if (/label/.test(name)) return ['bug', 'group-label', 'bug,group-label'];
  if (/namespace|group/.test(name)) return [w.groupId, w.groupPath];
  if (/project/.test(name)) return [w.projectId, w.projectPath];
  return w.strings;
}

/** Arbitraries shared by every field (building some, such as stringMatching, costs milliseconds). */
const shared = new Map<string, fc.Arbitrary<any>>();
function once<T>(key: string, make: () => fc.Arbitrary<T>): fc.Arbitrary<T> {
  let a = shared.get(key);
  if (!a) shared.set(key, (a = make()));
  return a;
}

/** A value for `schema` (valid-looking most of the time, hostile some of the time). */
export function valueOf(schema: any, name: string, w: World, depth = 0, clean = false): fc.Arbitrary<unknown> {
  const valid = validValueOf(schema ?? {}, name, w, depth, clean);
  if (clean) return valid;
  return fc.oneof({ weight: 7, arbitrary: valid }, { weight: 1, arbitrary: hostileValue() });
}

function validValueOf(schema: any, name: string, w: World, depth: number, clean = false): fc.Arbitrary<unknown> {
  if (depth > 4) return fc.constant(null);
  const alts = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alts) && alts.length) return fc.oneof(...alts.map((s: any) => validValueOf(s, name, w, depth, clean)));
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum) && schema.enum.length) return fc.constantFrom(...schema.enum);
  const type = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (type.length > 1) return fc.oneof(...type.map((t: string) => validValueOf({ ...schema, type: t }, name, w, depth, clean)));
  const named = namedValues(w, name);
  switch (type[0]) {
    case 'string': {
      const arbs: fc.Arbitrary<string>[] = [
        fc.constantFrom(...named.map(String)),
        once('string', () => fc.string({ maxLength: 16 })),
        once('slug', () => fc.stringMatching(/^[a-z][a-z0-9_-]{0,12}$/)),
      ];
      if (schema.format === 'date-time' || /_at$|_before$|_after$|since|until/.test(name)) arbs.push(once('time', () => fc.date({ noInvalidDate: true }).map((d) => d.toISOString())));
      if (schema.format === 'date' || /date/.test(name)) arbs.push(once('day', () => fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4102444800000) }).map((d) => d.toISOString().slice(0, 10))));
      if (schema.format === 'email' || /email/.test(name)) arbs.push(once('email', () => fc.emailAddress()));
      if (schema.pattern) {
        try {
          arbs.push(once(`pattern:${schema.pattern}`, () => fc.stringMatching(new RegExp(schema.pattern))));
        } catch {}
      }
      return fc.oneof(...arbs);
    }
    case 'integer': {
      const ints = named.filter((v): v is number => typeof v === 'number');
      const min = typeof schema.minimum === 'number' ? schema.minimum : -5;
      const max = typeof schema.maximum === 'number' ? schema.maximum : 100_000;
      return fc.oneof(
        fc.integer({ min: Math.max(min, -1e9), max: Math.min(max, 1e9) }),
        ints.length ? fc.constantFrom(...ints) : fc.integer({ min: 0, max: 50 }),
        fc.constantFrom(0, 1, 10, 30, 40, 50),
      );
    }
    case 'number':
      return once('number', () => fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer({ min: -10, max: 1000 })));
    case 'boolean':
      return once('boolean', () => fc.oneof(fc.boolean(), fc.constantFrom('true', 'false', '1', '0')));
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(validValueOf(schema.items ?? {}, name, w, depth + 1, clean), { maxLength: 4 });
    case 'object': {
      const props = Object.entries<any>(schema.properties ?? {});
      if (!props.length) return once('dictionary', () => fc.dictionary(fc.stringMatching(/^[a-z_]{1,10}$/), fc.oneof(fc.string({ maxLength: 10 }), fc.integer()), { maxKeys: 3 }));
      const required: string[] = schema.required ?? [];
      const rec: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, s] of props) rec[k] = valueOf(s, k, w, depth + 1, clean);
      return clean ? fewFields(rec, required) : fc.record(rec, { requiredKeys: required.filter((k) => k in rec) });
    }
    default:
      return fc.oneof(fc.constantFrom(...named), fc.string({ maxLength: 10 }));
  }
}

/**
 * The required fields and at most two of the others: a well-formed request with twenty optional
 * filters, each drawn at random, would almost never be valid as a whole.
 */
function fewFields(rec: Record<string, fc.Arbitrary<unknown>>, required: string[]): fc.Arbitrary<Record<string, unknown>> {
  const req = Object.fromEntries(Object.entries(rec).filter(([k]) => required.includes(k)));
  const optional = Object.keys(rec).filter((k) => !required.includes(k));
  if (!optional.length) return fc.record(req);
  return fc
    .tuple(fc.record(req), fc.subarray(optional, { maxLength: Math.min(2, optional.length) }))
    .chain(([base, names]) => fc.record(Object.fromEntries(names.map((n) => [n, rec[n]]))).map((extra) => ({ ...base, ...extra })));
}

/** Each collection's own ids for `{id}`: `/projects/{id}` takes a project's id or its URL-encoded path. */
function idValues(w: World, path: string): (string | number)[] {
  const m = /\/([a-z_]+)\/\{id\}/.exec(path);
  return w.ids[m?.[1] ?? 'default'] ?? w.ids.default;
}

/** Which noteable a nested note, discussion or award parameter belongs to. */
function noteableIn(path: string, name: string): string {
  if (name === 'award_id' && path.includes('/notes/{note_id}/award_emoji')) return 'notes';
  const found = ['merge_requests', 'issues', 'snippets', 'epics', 'commits']
    .map((c) => [c, path.lastIndexOf(`/${c}/`)] as const)
    .filter(([, i]) => i >= 0)
    .sort((a, b) => b[1] - a[1])[0];
  return found?.[0] ?? '';
}

function validValues(w: World, op: Operation, name: string): fc.Arbitrary<string> {
  let valid: (string | number)[];
  if (name === 'id') valid = idValues(w, op.path);
  else if (/^p\d+$/.test(name)) valid = name === 'p0' ? [w.groupPath] : name === 'p1' ? ['target.git', 'target', 'sub'] : ['target.git'];
  else {
    const scoped = w.values[`${name}@${noteableIn(op.path, name)}`];
    valid = scoped?.length ? scoped : w.values[name]?.length ? w.values[name] : namedValues(w, name);
  }
  return valid.length ? fc.constantFrom(...valid.map(String)) : fc.integer({ min: 1, max: 100 }).map(String);
}

function validPathParamArb(w: World, op: Operation, name: string): fc.Arbitrary<{ value: string; raw: boolean }> {
  return validValues(w, op, name).map((value) => ({ value, raw: false }));
}

function pathParamArb(w: World, op: Operation, name: string): fc.Arbitrary<{ value: string; raw: boolean }> {
  const validArb = validValues(w, op, name);
  return fc.oneof(
    { weight: 6, arbitrary: validArb.map((value) => ({ value, raw: false })) },
    { weight: 2, arbitrary: hostileText().map((value) => ({ value, raw: false })) },
    // Unencoded: `../`, `%2e%2e`, `a/b` reach the router as typed.
    { weight: 1, arbitrary: hostileText().map((value) => ({ value, raw: true })) },
    { weight: 1, arbitrary: fc.integer({ min: -3, max: 3_000_000_000 }).map((n) => ({ value: String(n), raw: false })) },
  );
}

/** encodeURIComponent, except that a lone surrogate becomes its (invalid UTF-8) WTF-8 bytes instead of throwing. */
export function enc(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    let out = '';
    for (const ch of s) {
      const c = ch.codePointAt(0)!;
      if (c >= 0xd800 && c <= 0xdfff) out += `%${(0xe0 | (c >> 12)).toString(16)}%${(0x80 | ((c >> 6) & 0x3f)).toString(16)}%${(0x80 | (c & 0x3f)).toString(16)}`.toUpperCase();
      else out += encodeURIComponent(ch);
    }
    return out;
  }
}

/** Leaves `/`, `%`, `.`, `:`, `~` as typed (traversal and double encoding get through), escapes the rest. */
function rawEncode(s: string): string {
  return enc(s).replace(/%2F/gi, '/').replace(/%25/g, '%').replace(/%3A/gi, ':');
}

/** `name=value`, `name[]=a&name[]=b`, `name[key]=v`: how GitLab's clients send scalars, arrays and hashes. */
export function encodeQueryValue(name: string, value: unknown, depth = 0): string[] {
  const n = enc(name);
  if (value === undefined) return [];
  if (value === null) return [n];
  if (Array.isArray(value)) return depth > 3 ? [`${n}=`] : value.flatMap((v) => encodeQueryValue(`${name}[]`, v, depth + 1));
  if (typeof value === 'object') {
    if (depth > 3) return [`${n}=`];
    const entries = Object.entries(value as object);
    return entries.length ? entries.flatMap(([k, v]) => encodeQueryValue(`${name}[${k}]`, v, depth + 1)) : [`${n}[]=`];
  }
  const s = String(value);
  return [`${n}=${enc(s.length > 6000 ? s.slice(0, 6000) : s)}`];
}

const PAGINATION = fc.record({
  page: fc.constantFrom<unknown>(0, -1, 1, 2, 'abc', 1e9, '1e9', 2 ** 31, '99999999999999999999', [], ['1', '2'], { a: 1 }, '', '1.5'),
  per_page: fc.constantFrom<unknown>(-1, 0, 1, 100, 101, 1e9, 'abc', '', '-0', 2 ** 53, ['20']),
}, { requiredKeys: [] });

const EXTRA_QUERY = fc.oneof(
  fc.constant(''),
  fc.constantFrom('sudo=root', 'sudo=-1', 'sudo=%00', 'pagination=keyset', 'pagination=keyset&order_by=id&sort=asc&id_after=-1', 'order_by=x%27%3B', 'sort=sideways',
    'cursor=%00%ff', '__proto__[admin]=true', 'constructor[prototype][admin]=1', `a${'[a]'.repeat(2000)}=1`, 'a[]=1&a[x]=2', '%zz=1', 'x=%zz', 'id_after=1e400',
    'search=%25', 'search=%00', 'scope=all', 'private_token=', 'ref=main:../../', 'ref=--output=x', 'ref=-x', 'path=../../', 'file_path=%2e%2e%2f'),
);

function flatForm(value: unknown): string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return `value=${encodeURIComponent(JSON.stringify(value))}`;
  return Object.entries(value as object).flatMap(([k, v]) => encodeQueryValue(k, v)).join('&');
}

/** Broken or unexpected bodies: invalid JSON, the wrong media type, a large or deep document. */
const ODD_BODIES: fc.Arbitrary<{ mode: string; type?: string; payload?: string }> = fc.oneof(
  fc.constantFrom(
    { mode: 'broken json', type: 'application/json', payload: '{"a":' },
    { mode: 'broken json', type: 'application/json', payload: '\u0000' },
    { mode: 'json null', type: 'application/json', payload: 'null' },
    { mode: 'json array', type: 'application/json', payload: '[1,2,3]' },
    { mode: 'json string', type: 'application/json', payload: '"text"' },
    { mode: 'json number', type: 'application/json', payload: '123' },
    { mode: 'json dup keys', type: 'application/json', payload: '{"title":"a","title":{"x":1}}' },
    { mode: 'json proto', type: 'application/json', payload: '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}' },
    { mode: 'empty json', type: 'application/json', payload: '' },
    { mode: 'text', type: 'text/plain', payload: 'hello' },
    { mode: 'xml', type: 'application/xml', payload: '<a/>' },
    { mode: 'multipart garbage', type: 'multipart/form-data; boundary=x', payload: '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\nb\r\n--x--' },
    { mode: 'multipart no boundary', type: 'multipart/form-data', payload: 'garbage' },
    { mode: 'form garbage', type: 'application/x-www-form-urlencoded', payload: '%zz=%%&a[=1&&=' },
    { mode: 'bad media type', type: 'application/json; charset=utf-99', payload: '{}' },
    { mode: 'deep json', type: 'application/json', payload: '['.repeat(5000) + ']'.repeat(5000) },
    { mode: 'deep json', type: 'application/json', payload: '{"a":'.repeat(3000) + '1' + '}'.repeat(3000) },
    { mode: 'wide json', type: 'application/json', payload: JSON.stringify(Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i]))) },
    { mode: 'huge json', type: 'application/json', payload: JSON.stringify({ title: 'x'.repeat(2_000_000), description: 'y'.repeat(1_000_000) }) },
    { mode: 'over limit', type: 'application/json', payload: `{"a":"${'x'.repeat(9 * 1024 * 1024)}"}` },
  ),
);

/** Every request of one operation: actor, path parameters, query, body. */
export function requestArb(op: Operation, w: World): fc.Arbitrary<FuzzRequest> {
  // Well-formed requests (valid ids and schema-shaped values) reach the code behind validation;
  // the others carry hostile values anywhere.
  return fc.oneof({ weight: 2, arbitrary: requestArbOf(op, w, true) }, { weight: 3, arbitrary: requestArbOf(op, w, false) });
}

function requestArbOf(op: Operation, w: World, clean: boolean): fc.Arbitrary<FuzzRequest> {
  const params = Object.fromEntries(op.pathParams.map((p) => [p, clean ? validPathParamArb(w, op, p) : pathParamArb(w, op, p)]));
  const query: Record<string, fc.Arbitrary<unknown>> = {};
  for (const q of op.query) query[q.name] = valueOf(q.schema, q.name, w, 0, clean);
  const required = op.query.filter((q) => q.required).map((q) => q.name);
  const paginated = op.query.some((q) => q.name === 'per_page');
  const bodyArb = op.body ? valueOf(op.body, 'body', w, 0, clean) : clean ? fc.constant(undefined) : fc.oneof(fc.constant(undefined), fc.constant(undefined), hostileValue());
  return fc
    .record({
      actor: clean ? fc.constantFrom<Actor>('admin', 'admin', 'member', 'anonymous') : fc.constantFrom<Actor>('admin', 'admin', 'member', 'member', 'anonymous', 'bad_token'),
      tokenIn: fc.constantFrom('header', 'header', 'header', 'bearer', 'query'),
      params: fc.record(params),
      query: clean ? fewFields(query, required) : fc.record(query, { requiredKeys: required }),
      pagination: paginated && !clean ? fc.option(PAGINATION, { freq: 3 }) : fc.constant(null),
      extra: clean ? fc.constant('') : fc.oneof({ weight: 5, arbitrary: fc.constant('') }, { weight: 1, arbitrary: EXTRA_QUERY }),
      bodyKind: clean ? fc.constantFrom('json', 'json', 'json', 'form') : fc.constantFrom('json', 'json', 'json', 'json', 'json', 'json', 'form', 'odd', 'none'),
      body: bodyArb,
      odd: ODD_BODIES,
    })
    .map((g) => {
      let url = op.path;
      for (const [name, { value, raw }] of Object.entries(g.params)) {
        url = url.replace(`{${name}}`, raw ? rawEncode(value) : enc(value));
      }
      const parts: string[] = [];
      for (const [name, value] of Object.entries(g.query)) parts.push(...encodeQueryValue(name, value));
      if (g.pagination) for (const [name, value] of Object.entries(g.pagination)) parts.push(...encodeQueryValue(name, value));
      if (g.extra) parts.push(g.extra);
      const headers: Record<string, string> = {};
      const token = g.actor === 'admin' ? w.admin.token : g.actor === 'member' ? w.member.token : g.actor === 'bad_token' ? 'glpat-not-a-real-token-00000' : null;
      if (token) {
        if (g.tokenIn === 'header') headers['private-token'] = token;
        else if (g.tokenIn === 'bearer') headers.authorization = `Bearer ${token}`;
        else parts.push(`private_token=${encodeURIComponent(token)}`);
      }
      if (parts.length) url += `?${parts.join('&')}`;
      let payload: string | undefined;
      let bodyMode = 'none';
      if (op.method !== 'GET' && op.method !== 'DELETE' || g.bodyKind === 'odd') {
        if (g.bodyKind === 'odd') {
          bodyMode = g.odd.mode;
          if (g.odd.type) headers['content-type'] = g.odd.type;
          payload = g.odd.payload;
        } else if (g.bodyKind === 'form' && g.body !== undefined) {
          bodyMode = 'form';
          headers['content-type'] = 'application/x-www-form-urlencoded';
          payload = flatForm(g.body);
        } else if (g.bodyKind !== 'none' && g.body !== undefined) {
          bodyMode = 'json';
          headers['content-type'] = 'application/json';
          payload = JSON.stringify(g.body);
        }
      }
      return { op, actor: g.actor, method: op.method, url, headers, payload, bodyMode };
    });
}
