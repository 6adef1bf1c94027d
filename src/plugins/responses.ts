import type { TSchema } from 'typebox';
import { Value } from 'typebox/value';
import type { Matrix } from '../api/permissions.js';
import type { Access } from '../api/route.js';

/** One declared route, as `app.routeTable` lists it. */
export interface RouteRecord {
  method: string;
  url: string;
  access: Access | undefined;
  /** The declared permission matrix (api/permissions.ts). */
  matrix?: Matrix;
  /** Credential rules of the route (skipApiAuth, readUser, allowScopes, jobToken). */
  config?: { skipApiAuth?: boolean; readUser?: boolean; allowScopes?: string[] | 'any'; jobToken?: boolean };
  response: Record<number, TSchema> | undefined;
  /** The input schemas, as declared (the OpenAPI test checks they are all documented). */
  params?: TSchema;
  querystring?: TSchema;
  body?: TSchema;
}

declare module 'fastify' {
  interface FastifyInstance {
    routeTable: RouteRecord[];
  }
}

/** A JSON answer that does not match its route's declared response schema (only when responses are checked). */
export class ResponseSchemaMismatch extends Error {
  constructor(readonly problems: string[]) {
    super(`response does not match its schema: ${problems.slice(0, 5).join('; ')}`);
  }
}

/**
 * Answers are serialised with JSON.stringify, not from the schema: a schema-driven serialiser
 * silently drops a field the schema lacks, and a form that changed would go unnoticed. Instead,
 * with `validate` (tests), every JSON answer is checked against the declared schema and a
 * mismatch fails the request, so the schemas stay the true description of what is sent.
 */
export function responseSerializer(validate: boolean) {
  return ({ schema }: { schema: unknown }) => {
    const s = schema as TSchema & { 'x-raw'?: string };
    if (!validate || s['x-raw']) return (data: unknown) => JSON.stringify(data);
    return (data: unknown) => {
      assertMatchesSchema(s, data);
      return JSON.stringify(data);
    };
  };
}

/** Throws ResponseSchemaMismatch when `data` does not match `schema` (for answers sent as bytes, e.g. cached pages). */
export function assertMatchesSchema(schema: TSchema, data: unknown) {
  if (!Value.Check(schema, data)) {
    const problems = [...Value.Errors(schema, data)].slice(0, 10).map((e) => `${e.instancePath || '/'} ${e.message}`);
    throw new ResponseSchemaMismatch(problems);
  }
}
