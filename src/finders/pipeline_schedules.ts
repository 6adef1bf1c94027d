import type { Database } from '../db/index.js';

/** A project's pipeline schedules as GET /pipeline_schedules lists them (`scope`: active or inactive ones), to select and count. */
export function pipelineSchedulesQuery(db: Database, projectId: number, scope: 'active' | 'inactive' | undefined) {
  let q = db.selectFrom('ci_pipeline_schedules').where('project_id', '=', projectId);
  if (scope) q = q.where('active', '=', scope === 'active');
  return q;
}
