import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { route } from '../route.js';

/** The top of an OpenAPI 3.1 document; the paths hold every API route's operations. */
const OpenApiDocumentSchema = Type.Object({
  openapi: Type.Literal('3.1.0'),
  info: Type.Object({ title: Type.String(), version: Type.String() }, { additionalProperties: true }),
  paths: Type.Record(Type.String(), Type.Object({}, { additionalProperties: true })),
  components: Type.Optional(Type.Object({}, { additionalProperties: true })),
}, { additionalProperties: true });

export default async function openApiRoutes(app: FastifyInstance) {
  // Built once, on first request: the routes are all registered by then and never change.
  let document: unknown;
  app.get('/api/v4/openapi.json', route({ matrix: 'public',
    access: { public: true },
    schema: { response: { 200: OpenApiDocumentSchema } },
  }), async () => {
    document ??= app.swagger();
    return document;
  });
}
