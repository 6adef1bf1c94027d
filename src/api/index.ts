import type { FastifyInstance } from 'fastify';
import metaRoutes from './meta/routes.js';
import applicationRoutes from './applications/routes.js';
import oauthRoutes from '../oauth/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(applicationRoutes);
  await app.register(oauthRoutes);
}
