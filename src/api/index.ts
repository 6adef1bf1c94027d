import type { FastifyInstance } from 'fastify';
import metaRoutes from './meta/routes.js';
import projectRoutes from './projects/routes.js';
import groupRoutes from './groups/routes.js';
import namespaceRoutes from './namespaces/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(projectRoutes);
  await app.register(groupRoutes);
  await app.register(namespaceRoutes);
}
