import type { FastifyInstance } from 'fastify';
import memberRoutes from './members/routes.js';
import metaRoutes from './meta/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(memberRoutes);
}
