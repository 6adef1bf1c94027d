import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { LintResult } from '../../ci/config/index.js';
import { ciConfigPath, ciVariablesFor, predefinedVariables, repositoryReader } from '../../ci/pipelines/create.js';
import { isProtectedRef } from '../../policies/branches.js';
import type { FoundProject } from '../../finders/projects.js';
import { readRef, resolveCommit } from '../../git/refs.js';
import { badRequest, notFound } from '../../plugins/errors.js';
import { projectFullPath } from '../../presenters/projects.js';
import { LintSchema } from '../../presenters/schemas/ci.js';
import { projectRepoPath } from '../../services/projects.js';
import { IdParams } from '../params.js';
import { projectOf, route } from '../route.js';

// POST /projects/:id/ci/lint (content given) and GET /projects/:id/ci/lint (the project's own
// file at a sha): GitLab's Ci::Lint with the project's context (include:local, dry_run).

export default async function ciLintRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  async function lint(request: FastifyRequest, project: FoundProject, yaml: string, opts: { sha: string | null; ref: string; tag: boolean; dryRun: boolean; includeJobs: boolean }) {
    const reader = opts.sha ? repositoryReader(cairn, project, opts.sha) : { readLocalFile: async () => null, fileExists: async () => false, listFiles: async () => [] };
    const protectedRef = opts.sha ? await isProtectedRef(cairn, project.id, opts.ref, opts.tag) : false;
    const variables = opts.sha
      ? await predefinedVariables(cairn, project, {
          ref: opts.ref, tag: opts.tag, sha: opts.sha, source: 'push', protectedRef,
          userId: request.actor?.user.id ?? null, message: '', author: '', committedAt: null, configPath: ciConfigPath(project),
        })
      : {};
    // A dry run creates the pipeline as a push would, so the project's (and its groups') CI/CD
    // variables take part, as they do in GitLab's simulated pipeline.
    const ciVariables: Record<string, string> = {};
    if (opts.dryRun && opts.sha) for (const v of await ciVariablesFor(cairn, project, protectedRef)) ciVariables[v.key] = v.value;
    // The compiler loads on first use (as for pipeline creation).
    const { lintConfig } = await import('../../ci/config/index.js');
    const result: LintResult = await lintConfig({
      yaml,
      sha: opts.sha,
      readLocalFile: reader.readLocalFile,
      fileExists: reader.fileExists,
      listFiles: reader.listFiles,
      variables,
      simulate: opts.dryRun && opts.sha ? { ref: opts.ref, tag: opts.tag, sha: opts.sha, source: 'push', variables: ciVariables, lowPrecedenceVariables: variables } : undefined,
    });
    const base = `${cairn.config.externalUrl}/${projectFullPath(project)}`;
    return {
      valid: result.valid,
      errors: result.errors,
      warnings: result.warnings,
      merged_yaml: result.mergedYaml || null,
      includes: result.includes.map((i) => ({
        type: i.type,
        location: i.location,
        blob: i.contextSha ? `${base}/-/blob/${i.contextSha}/${i.location.replace(/^\/+/, '')}` : null,
        raw: i.contextSha ? `${base}/-/raw/${i.contextSha}/${i.location.replace(/^\/+/, '')}` : null,
        extra: i.extra,
        context_project: projectFullPath(project),
        context_sha: i.contextSha,
      })),
      ...(opts.includeJobs ? { jobs: result.jobs as unknown as Record<string, unknown>[] } : {}),
    };
  }

  /** The ref to lint against and its commit: `ref`, or the default branch. */
  async function refAndSha(project: FoundProject, ref: string | undefined): Promise<{ ref: string; tag: boolean; sha: string | null }> {
    const gitDir = projectRepoPath(cairn, project);
    const name = ref ?? project.default_branch ?? 'main';
    const branch = await readRef(cairn.catfile, gitDir, `refs/heads/${name}`);
    if (branch) return { ref: name, tag: false, sha: branch };
    const tag = await readRef(cairn.catfile, gitDir, `refs/tags/${name}`);
    if (tag) return { ref: name, tag: true, sha: (await resolveCommit(cairn.catfile, gitDir, tag))?.oid ?? null };
    return { ref: name, tag: false, sha: null };
  }

  app.post('/api/v4/projects/:id/ci/lint', route({ matrix: 'developer',
    access: { project: 'create_pipeline', signedIn: true },
    schema: {
      params: IdParams,
      body: Type.Object({
        content: Type.String(),
        dry_run: Type.Optional(Type.Boolean()),
        include_jobs: Type.Optional(Type.Boolean()),
        ref: Type.Optional(Type.String()),
        dry_run_ref: Type.Optional(Type.String()),
      }),
      response: { 200: LintSchema },
    },
  }), async (request) => {
    const { project } = projectOf(request);
    const b = request.body;
    const target = await refAndSha(project, b.dry_run_ref ?? b.ref);
    return lint(request, project, b.content, { ...target, dryRun: !!b.dry_run, includeJobs: !!b.include_jobs });
  });

  app.get('/api/v4/projects/:id/ci/lint', route({ matrix: 'read',
    access: { project: 'read_build', signedIn: true },
    schema: {
      params: IdParams,
      querystring: Type.Object({
        sha: Type.Optional(Type.String()),
        content_ref: Type.Optional(Type.String()),
        dry_run: Type.Optional(Type.Boolean()),
        include_jobs: Type.Optional(Type.Boolean()),
        ref: Type.Optional(Type.String()),
        dry_run_ref: Type.Optional(Type.String()),
      }),
      response: { 200: LintSchema },
    },
  }), async (request) => {
    const { project } = projectOf(request);
    const q = request.query;
    const gitDir = projectRepoPath(cairn, project);
    const rev = q.content_ref ?? q.sha;
    let sha: string | null;
    if (rev) {
      sha = (await resolveCommit(cairn.catfile, gitDir, rev))?.oid ?? null;
      if (!sha) throw notFound('Commit');
    } else {
      sha = (await refAndSha(project, undefined)).sha;
    }
    if (!sha) throw notFound('Commit');
    const reader = repositoryReader(cairn, project, sha);
    const yaml = await reader.readLocalFile(ciConfigPath(project));
    if (yaml === null) throw badRequest('Missing CI config file');
    const target = q.dry_run_ref || q.ref ? await refAndSha(project, q.dry_run_ref ?? q.ref) : { ref: project.default_branch ?? 'main', tag: false, sha };
    return lint(request, project, yaml, { ref: target.ref, tag: target.tag, sha, dryRun: !!q.dry_run, includeJobs: !!q.include_jobs });
  });
}
