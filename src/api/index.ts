import type { FastifyInstance } from 'fastify';
import metaRoutes from './meta/routes.js';
import commitRoutes from './commits/routes.js';
import fileRoutes from './files/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(commitRoutes);
  await app.register(fileRoutes);
}
