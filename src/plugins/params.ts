import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MultipartError, multipartBoundary, readMultipart } from '../lib/multipart.js';
import { ApiError } from './errors.js';

/**
 * Parameters arrive the way Rails/Rack clients send them: `name[]=a&name[]=b` arrays,
 * `actions[][action]=create` arrays of hashes, `custom_attributes[key]=v` hashes. One
 * parser serves query strings and form bodies, so every endpoint sees the same shapes.
 */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);
const MAX_DEPTH = 8;
const MAX_PARAMS = 5000;

function decode(s: string): string {
  const plus = s.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(plus);
  } catch {
    return plus.replace(/%([0-9a-fA-F]{2})/g, (_m, h) => String.fromCharCode(parseInt(h, 16)));
  }
}

type Params = Record<string, any>;

function hasNestedKey(obj: Params, name: string): boolean {
  const keys = name.split(/[\[\]]+/).filter(Boolean);
  let cur: any = obj;
  for (const k of keys) {
    if (cur === null || typeof cur !== 'object' || !Object.prototype.hasOwnProperty.call(cur, k)) return false;
    cur = cur[k];
  }
  return true;
}

function normalize(params: Params, name: string, value: unknown, depth: number): Params {
  if (depth > MAX_DEPTH) return params;
  const m = /^[\[\]]*([^\[\]]+)\]*/.exec(name);
  if (!m) return params;
  const key = m[1];
  if (FORBIDDEN_KEYS.has(key)) return params;
  const after = name.slice(m[0].length);
  if (after === '') {
    params[key] = value;
  } else if (after === '[]') {
    if (!Array.isArray(params[key])) params[key] = [];
    params[key].push(value);
  } else if (after.startsWith('[]')) {
    const child = after.slice(2);
    if (!Array.isArray(params[key])) params[key] = [];
    const list = params[key] as any[];
    const last = list[list.length - 1];
    if (last && typeof last === 'object' && !Array.isArray(last) && !hasNestedKey(last, child)) {
      normalize(last, child, value, depth + 1);
    } else {
      list.push(normalize({}, child, value, depth + 1));
    }
  } else {
    if (params[key] === null || typeof params[key] !== 'object' || Array.isArray(params[key])) params[key] = {};
    normalize(params[key], after, value, depth + 1);
  }
  return params;
}

export function parseNestedParams(qs: string): Params {
  const params: Params = {};
  if (!qs) return params;
  let count = 0;
  for (const pair of qs.split('&')) {
    if (!pair) continue;
    if (++count > MAX_PARAMS) break;
    const i = pair.indexOf('=');
    const name = decode(i < 0 ? pair : pair.slice(0, i));
    const value = i < 0 ? '' : decode(pair.slice(i + 1));
    normalize(params, name, value, 0);
  }
  return params;
}

const TRUE = new Set(['true', '1', 'yes', 't', 'on']);
const FALSE = new Set(['false', '0', 'no', 'f', 'off']);

/** GitLab takes booleans as true/false/True/False/1/0 (and yes/no); `null` leaves defaults. */
export function toBoolean(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string') {
    const s = v.trim().toLowerCase();
    if (TRUE.has(s)) return true;
    if (FALSE.has(s)) return false;
  }
  return undefined;
}

function isBooleanSchema(s: any): boolean {
  if (!s || typeof s !== 'object') return false;
  if (s.type === 'boolean') return true;
  if (Array.isArray(s.type) && s.type.includes('boolean')) return true;
  return Array.isArray(s.anyOf) && s.anyOf.some(isBooleanSchema);
}

/** Converts boolean-typed properties of `data` in place, following the route's schema. */
function coerceBooleans(schema: any, data: any) {
  if (!schema || !data || typeof data !== 'object' || !schema.properties) return;
  for (const [name, prop] of Object.entries<any>(schema.properties)) {
    if (!(name in data)) continue;
    const v = data[name];
    if (isBooleanSchema(prop)) {
      const b = toBoolean(v);
      if (b !== undefined) data[name] = b;
      else if (v === '' || v === null) delete data[name];
    } else if (prop?.type === 'object') {
      coerceBooleans(prop, v);
    } else if (prop?.type === 'array' && prop.items?.type === 'object' && Array.isArray(v)) {
      for (const item of v) coerceBooleans(prop.items, item);
    }
  }
}

function isPlainObject(v: unknown): v is Params {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v) && typeof (v as any).pipe !== 'function';
}

/** All parameters of a request, as GitLab merges them: body over query. */
export function allParams(request: FastifyRequest): Params {
  const q = (request.query ?? {}) as Params;
  return isPlainObject(request.body) ? { ...q, ...request.body } : q;
}

/** Does any string in these parameters (at any depth) hold a NUL character? PostgreSQL text cannot. */
function hasNullByte(v: unknown, depth = 0): boolean {
  if (typeof v === 'string') return v.includes('\u0000');
  if (depth > 32 || v === null || typeof v !== 'object' || Buffer.isBuffer(v)) return false;
  if (Array.isArray(v)) return v.some((x) => hasNullByte(x, depth + 1));
  if (!isPlainObject(v)) return false;
  return Object.entries(v).some(([k, x]) => k.includes('\u0000') || hasNullByte(x, depth + 1));
}

export function registerParams(app: FastifyInstance) {
  const parseForm = (_req: FastifyRequest, body: string, done: (err: Error | null, body?: unknown) => void) => {
    done(null, parseNestedParams(body));
  };
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, parseForm);
  // GitLab accepts an empty body with a JSON content type (DELETE with `{}` or nothing).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch {
      const err: any = new Error('Bad Request - invalid JSON body');
      err.statusCode = 400;
      done(err);
    }
  });

  app.addHook('preValidation', async (request) => {
    // GitLab's HandleNullBytes middleware: a NUL in a query or form parameter is a 400. Path
    // segments and JSON bodies are left to the routes (file paths and refs answer in their own words).
    const form = String(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
    if (hasNullByte(request.query) || (form && hasNullByte(request.body))) {
      throw new ApiError(400, { message: '400 Bad request - Null bytes are not allowed in parameters' });
    }
    const method = request.method;
    const query = (request.query ?? {}) as Params;
    if (method === 'POST' || method === 'PUT' || method === 'PATCH') {
      if (request.body === undefined || request.body === null || request.body === '') request.body = { ...query };
      else if (isPlainObject(request.body)) request.body = { ...query, ...request.body };
    } else if (method === 'DELETE' && isPlainObject(request.body)) {
      request.query = { ...request.body, ...query };
    }
    const schema = request.routeOptions.schema as any;
    if (schema) {
      coerceBooleans(schema.querystring, request.query);
      coerceBooleans(schema.body, request.body);
    }
  });
}

/**
 * Forms sent as multipart/form-data (curl --form, as GitLab's documentation calls many endpoints)
 * read as their fields, nested like any form (`variables[KEY]=value`), for the routes of the plugin
 * that registers it. File parts are refused: these routes take no files.
 */
export function registerMultipartFields(app: FastifyInstance) {
  app.addContentTypeParser('multipart/form-data', async (request: FastifyRequest, payload: AsyncIterable<Buffer>) => {
    const boundary = multipartBoundary(request.headers['content-type']);
    if (!boundary) throw new ApiError(400, { message: '400 Bad request - multipart body without a boundary' });
    try {
      const fields = await readMultipart(payload, boundary, async (part) => {
        part.stream.resume();
        throw new MultipartError(`unexpected file ${part.field}`);
      });
      return parseNestedParams(Object.entries(fields).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'));
    } catch (err) {
      if (err instanceof MultipartError) throw new ApiError(400, { message: `400 Bad request - ${err.message}` });
      throw err;
    }
  });
}
