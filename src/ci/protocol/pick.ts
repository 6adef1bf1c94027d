import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { CiBuild, CiRunner } from '../../db/schema/ci.js';
import { assignBuild } from '../jobs/state.js';

/**
 * Takes the oldest pending job this runner may run, in one transaction: the candidate's queue
 * row is locked FOR UPDATE SKIP LOCKED (so a concurrent pick, in this process or another,
 * passes over it), then assignBuild moves the job to running and deletes the row. Matching:
 *  - instance runners: projects with instance runners enabled;
 *  - group runners: projects in the runner's groups' trees, with group runners enabled;
 *  - project runners: projects the runner is assigned to;
 *  - the job's tags are a subset of the runner's; untagged jobs only when run_untagged;
 *  - ref_protected runners only run jobs of protected refs.
 * Paused runners get nothing (the caller does not even look; the query checks again, so a runner
 * paused while its long poll waits takes nothing).
 */
const ATTEMPTS = 5;

export async function pickJob(cairn: Cairn, runner: CiRunner): Promise<{ build: CiBuild; token: string } | null> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const outcome = await cairn.db.transaction().execute(async (trx) => {
      const scope =
        runner.runner_type === 'instance_type'
          ? sql`pb.instance_runners_enabled`
          : runner.runner_type === 'group_type'
            ? sql`pb.group_runners_enabled and exists (
                select 1 from ci_runner_namespaces rn join namespaces n on n.id = pb.namespace_id
                where rn.runner_id = r.id and rn.namespace_id = any(n.traversal_ids))`
            : sql`exists (select 1 from ci_runner_projects rp where rp.runner_id = r.id and rp.project_id = pb.project_id)`;
      const { rows } = await sql<{ build_id: number }>`
        select pb.build_id from ci_pending_builds pb, ci_runners r
        where r.id = ${runner.id}
          and ${scope}
          and pb.tag_list <@ r.tag_list
          and (r.run_untagged or cardinality(pb.tag_list) > 0)
          and (r.access_level <> 'ref_protected' or pb.protected)
          and r.active
        order by pb.build_id
        limit 1
        for update of pb skip locked`.execute(trx);
      if (!rows.length) return 'none' as const;
      const assigned = await assignBuild(trx, rows[0].build_id, runner.id);
      // The job was canceled or taken meanwhile: its queue row is gone now, look again.
      return assigned ?? ('again' as const);
    });
    if (outcome === 'none') return null;
    if (outcome !== 'again') return outcome;
  }
  return null;
}
