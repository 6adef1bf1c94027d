import type { FastifyInstance } from 'fastify';
import memberRoutes from './members/routes.js';
import metaRoutes from './meta/routes.js';
import repositoryRoutes from './repository/routes.js';
import branchRoutes from './branches/routes.js';
import tagRoutes from './tags/routes.js';
import protectedBranchRoutes from './protected_branches/routes.js';
import personalAccessTokenRoutes from './personal_access_tokens/routes.js';
import keyRoutes from './keys/routes.js';
import deployKeyRoutes from './deploy_keys/routes.js';
import userRoutes from './users/routes.js';
import applicationRoutes from './applications/routes.js';
import oauthRoutes from '../oauth/routes.js';
import projectRoutes from './projects/routes.js';
import groupRoutes from './groups/routes.js';
import namespaceRoutes from './namespaces/routes.js';
import commitRoutes from './commits/routes.js';
import fileRoutes from './files/routes.js';
import gitHttpRoutes from './git_http/routes.js';
import mergeRequestRoutes from './merge_requests/routes.js';
import labelRoutes from './labels/routes.js';
import milestoneRoutes from './milestones/routes.js';
import noteRoutes from './notes/routes.js';

/** Every route module. Each area registers its own file here. */
export async function registerRoutes(app: FastifyInstance) {
  await app.register(metaRoutes);
  await app.register(repositoryRoutes);
  await app.register(branchRoutes);
  await app.register(tagRoutes);
  await app.register(protectedBranchRoutes);
  await app.register(personalAccessTokenRoutes);
  await app.register(keyRoutes);
  await app.register(deployKeyRoutes);
  await app.register(memberRoutes);
  await app.register(userRoutes);
  await app.register(applicationRoutes);
  await app.register(oauthRoutes);
  await app.register(projectRoutes);
  await app.register(groupRoutes);
  await app.register(namespaceRoutes);
  await app.register(commitRoutes);
  await app.register(fileRoutes);
  await app.register(mergeRequestRoutes);
  await app.register(gitHttpRoutes);
  await app.register(labelRoutes);
  await app.register(milestoneRoutes);
  await app.register(noteRoutes);
}
