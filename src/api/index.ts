import type { FastifyInstance } from 'fastify';
import metaRoutes from './meta/routes.js';
import repositoryRoutes from './repository/routes.js';
import branchRoutes from './branches/routes.js';
import tagRoutes from './tags/routes.js';
import protectedBranchRoutes from './protected_branches/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(repositoryRoutes);
  await app.register(branchRoutes);
  await app.register(tagRoutes);
  await app.register(protectedBranchRoutes);
}
