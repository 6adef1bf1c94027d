import type { CiPipeline } from '../db/schema/ci.js';
import type { User } from '../db/schema/core.js';
import type { CiPipelineSchedule, CiPipelineScheduleVariable, CiTrigger } from '../db/schema/pipeline_schedules.js';
import { presentPipelineBasic } from './ci.js';
import type { ProjectRow } from './projects.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

/** A pipeline schedule's variable (GitLab's Ci::Variable entity of a schedule variable). */
export function presentScheduleVariable(v: Pick<CiPipelineScheduleVariable, 'key' | 'variable_type' | 'raw'>, value: string) {
  return { variable_type: v.variable_type, key: v.key, value, raw: v.raw };
}

/** GitLab's Ci::PipelineSchedule: the form of lists. */
export function presentPipelineSchedule(ctx: PresentContext, s: CiPipelineSchedule, owner: User | null) {
  return {
    id: s.id,
    description: s.description,
    ref: s.ref,
    cron: s.cron,
    cron_timezone: s.cron_timezone,
    next_run_at: iso(s.next_run_at),
    active: s.active,
    created_at: iso(s.created_at)!,
    updated_at: iso(s.updated_at)!,
    owner: owner ? presentUserBasic(ctx, owner) : null,
  };
}

/**
 * GitLab's Ci::PipelineScheduleDetails: with its last pipeline and, for who may read them
 * (`variables` given), its variables.
 */
export function presentPipelineScheduleDetails(
  ctx: PresentContext,
  project: ProjectRow,
  s: CiPipelineSchedule,
  extra: { owner: User | null; lastPipeline: CiPipeline | null; variables?: ReturnType<typeof presentScheduleVariable>[] },
) {
  return {
    ...presentPipelineSchedule(ctx, s, extra.owner),
    last_pipeline: extra.lastPipeline ? presentPipelineBasic(ctx, project, extra.lastPipeline) : null,
    ...(extra.variables ? { variables: extra.variables } : {}),
  };
}

/**
 * GitLab's Trigger, with as much of its token as the caller may see (in full for its owner, the
 * first four characters after the prefix for others).
 */
export function presentTrigger(ctx: PresentContext, t: CiTrigger, owner: User | null, shownToken: string) {
  return {
    id: t.id,
    token: shownToken,
    description: t.description,
    created_at: iso(t.created_at)!,
    updated_at: iso(t.updated_at)!,
    last_used: iso(t.last_used_at),
    owner: owner ? presentUserBasic(ctx, owner) : null,
  };
}
