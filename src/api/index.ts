import type { FastifyInstance } from 'fastify';
import metaRoutes from './meta/routes.js';
import repositoryRoutes from './repository/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(repositoryRoutes);
}
