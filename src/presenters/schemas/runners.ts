import { Type } from 'typebox';
import { jobCommon, RunnerSummarySchema } from './ci.js';
import { Nullable, Timestamp, strict } from './common.js';
import { ProjectIdentitySchema } from './projects.js';

/** Response schemas of src/presenters/runners.ts (GitLab's Entities::Ci::Runner, RunnerDetails, JobBasicWithProject). */

/** The list form (also a job's `runner`). */
export const RunnerSchema = RunnerSummarySchema;

export const RunnerProjectSchema = Type.Object(
  { id: Type.Integer(), name: Type.String(), name_with_namespace: Type.String(), path: Type.String(), path_with_namespace: Type.String() },
  strict,
);

export const RunnerGroupSchema = Type.Object({ id: Type.Integer(), web_url: Type.String(), name: Type.String() }, strict);

export const RunnerDetailSchema = Type.Object(
  {
    ...RunnerSummarySchema.properties,
    tag_list: Type.Array(Type.String()),
    run_untagged: Type.Boolean(),
    locked: Type.Boolean(),
    maximum_timeout: Nullable(Type.Integer()),
    access_level: Type.String(),
    version: Nullable(Type.String()),
    revision: Nullable(Type.String()),
    platform: Nullable(Type.String()),
    architecture: Nullable(Type.String()),
    contacted_at: Nullable(Timestamp),
    maintenance_note: Nullable(Type.String()),
    maintainer_note: Nullable(Type.String()),
    projects: Type.Array(RunnerProjectSchema),
    groups: Type.Array(RunnerGroupSchema),
  },
  strict,
);

/** A job as GET /runners/:id/jobs lists it: the basic job form with its project and the runner's address. */
export const RunnerJobSchema = Type.Object(
  {
    ...jobCommon,
    failure_reason: Type.Optional(Type.String()),
    ip_address: Nullable(Type.String()),
    project: ProjectIdentitySchema,
  },
  strict,
);
