import type { Cairn } from '../context.js';
import { findProjectRow } from '../finders/projects.js';
import { commitsBetween, readCommitsOnce } from '../git/compare.js';
import { readRefs } from '../git/ref_files.js';
import { isProtectedRef } from '../policies/branches.js';
import { projectRepoPath } from '../services/projects.js';
import type { HookTrigger } from './delivery.js';
import { buildPayload, jobPayload, type HookEvent } from './payloads.js';

/**
 * What `POST /projects/:id/hooks/:hook_id/test/:trigger` sends: GitLab's test data, built from the
 * project's latest record of the kind (its last three commits on the default branch for a push,
 * its latest tag, issue, merge request, note, pipeline, job, release), or GitLab's message when it
 * has none.
 */
export const SAMPLE_TRIGGERS = ['push_events', 'tag_push_events', 'issues_events', 'confidential_issues_events', 'merge_requests_events', 'note_events', 'confidential_note_events', 'pipeline_events', 'job_events', 'releases_events'] as const;
export type SampleTrigger = (typeof SAMPLE_TRIGGERS)[number];

const ZERO = '0000000000000000000000000000000000000000';

export async function samplePayload(cairn: Cairn, projectId: number, userId: number, trigger: SampleTrigger): Promise<{ trigger: HookTrigger; data: unknown } | { error: string }> {
  const project = await findProjectRow(cairn.db, projectId);
  if (!project) return { error: 'Project not found' };
  const gitDir = projectRepoPath(cairn, project);
  let event: HookEvent | null = null;
  let error = '';
  switch (trigger) {
    case 'push_events': {
      error = 'Ensure the project has at least one commit.';
      const head = project.default_branch ? ((await readRefs(gitDir, `refs/heads/`)) ?? []).find((r) => r.ref === `refs/heads/${project.default_branch}`)?.oid : undefined;
      if (!head) break;
      const oids = await commitsBetween(gitDir, null, head, { limit: 3 });
      const [oldest] = await readCommitsOnce(gitDir, oids.slice(0, 1));
      event = { kind: 'push', projectId, userId, ref: `refs/heads/${project.default_branch}`, before: oldest?.parents[0] ?? ZERO, after: head };
      break;
    }
    case 'tag_push_events': {
      error = 'Ensure the project has tags.';
      const tags = (await readRefs(gitDir, 'refs/tags/')) ?? [];
      const last = tags[tags.length - 1];
      if (last) event = { kind: 'push', projectId, userId, ref: last.ref, before: ZERO, after: last.oid };
      break;
    }
    case 'issues_events':
    case 'confidential_issues_events': {
      error = 'Ensure the project has issues.';
      const issue = await cairn.db.selectFrom('issues').select('id').where('project_id', '=', projectId).orderBy('id', 'desc').limit(1).executeTakeFirst();
      if (issue) event = { kind: 'issue', projectId, id: issue.id, userId, action: 'open' };
      break;
    }
    case 'merge_requests_events': {
      error = 'Ensure the project has merge requests.';
      const mr = await cairn.db.selectFrom('merge_requests').select('id').where('target_project_id', '=', projectId).orderBy('id', 'desc').limit(1).executeTakeFirst();
      if (mr) event = { kind: 'merge_request', projectId, id: mr.id, userId, action: 'open' };
      break;
    }
    case 'note_events':
    case 'confidential_note_events': {
      error = 'Ensure the project has notes.';
      const note = await cairn.db.selectFrom('notes').select('id').where('project_id', '=', projectId).where('system', '=', false).orderBy('id', 'desc').limit(1).executeTakeFirst();
      if (note) event = { kind: 'note', projectId, id: note.id, userId, action: 'create' };
      break;
    }
    case 'pipeline_events': {
      error = 'Ensure the project has CI pipelines.';
      const pipeline = await cairn.db.selectFrom('ci_pipelines').select('id').where('project_id', '=', projectId).orderBy('id', 'desc').limit(1).executeTakeFirst();
      if (pipeline) event = { kind: 'pipeline', projectId, id: pipeline.id };
      break;
    }
    case 'releases_events': {
      error = 'Ensure the project has releases.';
      const release = await cairn.db.selectFrom('releases').select('id').where('project_id', '=', projectId).orderBy('id', 'desc').limit(1).executeTakeFirst();
      if (release) event = { kind: 'release', projectId, id: release.id, action: 'create' };
      break;
    }
    case 'job_events': {
      const build = await cairn.db.selectFrom('ci_builds').selectAll().where('project_id', '=', projectId).where('type', '=', 'Ci::Build').orderBy('id', 'desc').limit(1).executeTakeFirst();
      if (!build) return { error: 'Ensure the project has CI jobs.' };
      return jobPayload(cairn, project, build);
    }
  }
  if (!event) return { error };
  const built = await buildPayload(cairn, event, { protectedRef: (ref, tag) => isProtectedRef(cairn, projectId, ref, tag) });
  if (!built) return { error };
  // The test is delivered as the trigger asked (a confidential test as the confidential event).
  const asked: Partial<Record<SampleTrigger, HookTrigger>> = { confidential_issues_events: 'confidential_issue_hooks', confidential_note_events: 'confidential_note_hooks', issues_events: 'issue_hooks', note_events: 'note_hooks' };
  return { trigger: asked[trigger] ?? built.trigger, data: built.data };
}
