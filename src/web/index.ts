import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { RawBody, route } from '../api/route.js';
import { ASSETS } from './layout.js';
import { registerMergeRequestPages } from './pages/merge_requests.js';
import { registerIssuePages } from './pages/issues.js';
import { registerCommitPages } from './pages/commits.js';
import { registerProjectPages } from './pages/project.js';
import { registerSnippetPages } from './pages/snippets.js';
import { registerJobPages } from './pages/jobs.js';
import { registerPipelinePages } from './pages/pipelines.js';
import { registerSettingsPages } from './pages/settings.js';
import { stopLogStreams } from './log_stream.js';
import { registerFilesPages } from './pages/files.js';
import { registerBranchPages } from './pages/branches.js';
import { registerDashboardPages } from './pages/dashboard.js';
import { PageRegistry, registerPageRoutes } from './router.js';

/**
 * The web interface: server-rendered pages at GitLab's paths (src/web/pages/), one style sheet
 * and one small script (src/web/assets/). Each page module registers its pages here.
 */
export function pageRegistry(): PageRegistry {
  const pages = new PageRegistry();
  registerProjectPages(pages);
  registerMergeRequestPages(pages);
  registerIssuePages(pages);
  registerSnippetPages(pages);
  registerPipelinePages(pages);
  registerJobPages(pages);
  registerSettingsPages(pages);
  registerFilesPages(pages);
  registerBranchPages(pages);
  registerDashboardPages(pages);
  registerCommitPages(pages);
  return pages;
}

export default async function webRoutes(app: FastifyInstance) {
  // One route for the assets, whose names carry their content's digest (so the route table,
  // and docs/api-coverage.md generated from it, do not change with every style edit).
  const byPath = new Map<string, (typeof ASSETS)[keyof typeof ASSETS]>(Object.values(ASSETS).map((a) => [a.path, a]));
  app.get('/-/assets/:file', route({ matrix: 'public',
    access: { public: true },
    config: { skipApiAuth: true },
    schema: { params: Type.Object({ file: Type.String() }), response: { 200: RawBody('text/css or text/javascript') } },
  }), async (request, reply) => {
    const asset = byPath.get(`/-/assets/${(request.params as { file: string }).file}`);
    if (!asset) return reply.callNotFound();
    return reply.headers({ 'content-type': asset.type, 'cache-control': 'public, max-age=31536000, immutable' }).send(asset.body);
  });
  // Live job logs are held responses: they end before the server waits for its connections.
  app.addHook('preClose', async () => stopLogStreams(app.cairn));
  registerPageRoutes(app, pageRegistry());
}
