import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import { CAIRN_VERSION, GITLAB_COMPAT_VERSION } from '../../version.js';

/** Only the REST API is described; git over HTTP, OAuth, monitoring and the HTML pages are not part of it. */
export const API_PREFIX = '/api/v4/';

type JsonObject = Record<string, any>;

/** `raw body (text/plain or application/octet-stream)` (RawBody) as OpenAPI content: bytes of those types. */
function rawResponse(schema: JsonObject): JsonObject {
  const types = String(schema['x-raw']).split(/\s+or\s+/).map((s) => s.trim()).filter(Boolean);
  const content: JsonObject = {};
  for (const type of types) {
    content[type] = { schema: type.startsWith('text/') ? { type: 'string' } : { type: 'string', contentMediaType: type } };
  }
  return { description: schema.description ?? 'raw body', content };
}

/** The answer without a body (NoContent, a 204 or a redirect). */
function isEmpty(schema: JsonObject): boolean {
  return schema.type === 'null';
}

/**
 * A tag per area: the collection the path is about (`/projects/{id}/labels/{label_id}` -> labels,
 * `/projects/{id}/repository/branches` -> branches); actions on a resource (`/projects/{id}/star`)
 * stay with it.
 */
export function tagOf(url: string): string {
  const segments = url.slice(API_PREFIX.length).split('/').filter((s) => s && !s.startsWith('{') && !s.startsWith(':')).map((s) => s.replace(/\..*$/, ''));
  const collection = (s: string | undefined) => !!s && s.endsWith('s') && s !== 'access_requests';
  let tag = segments[0] ?? 'meta';
  for (const s of segments.slice(1)) {
    if (s === 'repository' && tag !== 'repository') tag = 'repository';
    else if (collection(s)) tag = s;
    else break;
  }
  return tag;
}

export function operationIdOf(method: string, url: string): string {
  const words = url
    .slice(API_PREFIX.length)
    .replace(/[:{]([A-Za-z0-9_]+)}?/g, 'by_$1')
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean);
  return [method.toLowerCase(), ...words].join('_');
}

/**
 * @fastify/swagger in dynamic mode: it records every route registered after it (so it is
 * registered before the routes) and builds the OpenAPI 3.1 document from their TypeBox schemas,
 * which are JSON Schema already (TypeBox keeps its kind markers non-enumerable, so they do not
 * leak into the document). Raw answers (files, archives, logs) become content of their media
 * types, bodiless ones a bare description, and every operation documents GitLab's error bodies.
 */
export async function registerOpenApi(app: FastifyInstance) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Cairn REST API v4',
        version: CAIRN_VERSION,
        description: `Cairn's GitLab-compatible REST API (it answers as GitLab ${GITLAB_COMPAT_VERSION}). ` +
          'Authenticate with a personal, project or group access token in the PRIVATE-TOKEN header, or an OAuth 2.0 or job token as a bearer token.',
      },
      servers: [{ url: '/' }],
      components: {
        securitySchemes: {
          privateToken: { type: 'apiKey', in: 'header', name: 'PRIVATE-TOKEN' },
          bearer: { type: 'http', scheme: 'bearer' },
        },
        schemas: {
          Error: {
            type: 'object',
            description: "GitLab's error answer: `message` (a string, or an object of field errors) or OAuth's `error` and `error_description`.",
            properties: {
              message: { anyOf: [{ type: 'string' }, { type: 'object', additionalProperties: true }] },
              error: { type: 'string' },
              error_description: { type: 'string' },
            },
          },
        },
      },
      security: [{ privateToken: [] }, { bearer: [] }, {}],
    },
    transform: ({ schema, url, route }) => {
      const s = { ...((schema ?? {}) as JsonObject) };
      if (!url.startsWith(API_PREFIX)) return { schema: { ...s, hide: true } as any, url };
      const method = [route.method].flat()[0] as string;
      s.tags = [tagOf(url)];
      s.operationId = operationIdOf(method, url);
      if (s.response) {
        const response: JsonObject = {};
        for (const [code, r] of Object.entries(s.response as JsonObject)) {
          if (r && typeof r === 'object' && 'x-raw' in r) response[code] = rawResponse(r);
          else if (r && typeof r === 'object' && isEmpty(r)) response[code] = { description: r.description ?? 'no content', type: 'null' };
          else response[code] = r;
        }
        s.response = response;
      }
      return { schema: s as any, url };
    },
    transformObject: (documentObject) => {
      const doc = (documentObject as { openapiObject: JsonObject }).openapiObject;
      for (const item of Object.values((doc.paths ?? {}) as JsonObject)) {
        for (const op of Object.values(item as JsonObject)) {
          if (!op || typeof op !== 'object' || !op.responses) continue;
          op.responses['4XX'] ??= { description: 'Refused: bad input (400), not signed in (401), forbidden (403), not found (404), conflict (409)...', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
          op.responses['5XX'] ??= { description: 'Server error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
        }
      }
      return doc as any;
    },
  });
}
