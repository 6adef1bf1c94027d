import { Type } from 'typebox';
import { CommitSchema, PipelineSummarySchema } from './commits.js';
import { Nullable, Sha, Timestamp, strict } from './common.js';
import { UserBasicSchema, UserExtendedSchema } from './users.js';

/** Response schemas of src/presenters/ci.ts (pipelines, jobs, bridges, CI variables, lint). */

/** Entities::Ci::PipelineBasic: the summary (a commit's last_pipeline, a job's pipeline) and its name. */
export const PipelineBasicSchema = Type.Object({ ...PipelineSummarySchema.properties, name: Nullable(Type.String()) }, strict);

export const DetailedStatusSchema = Type.Object(
  {
    icon: Type.String(),
    text: Type.String(),
    label: Type.String(),
    group: Type.String(),
    tooltip: Type.String(),
    has_details: Type.Boolean(),
    details_path: Type.String(),
    illustration: Type.Null(),
    favicon: Type.String(),
  },
  strict,
);

export const PipelineSchema = Type.Object(
  {
    ...PipelineBasicSchema.properties,
    before_sha: Sha,
    tag: Type.Boolean(),
    yaml_errors: Nullable(Type.String()),
    user: Nullable(UserBasicSchema),
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
    committed_at: Nullable(Timestamp),
    duration: Nullable(Type.Integer()),
    queued_duration: Nullable(Type.Number()),
    coverage: Nullable(Type.String()),
    detailed_status: DetailedStatusSchema,
    archived: Type.Boolean(),
  },
  strict,
);

export const PipelineVariableSchema = Type.Object({ key: Type.String(), value: Type.String(), variable_type: Type.String() }, strict);

/** A pipeline as a job shows it (PipelineBasic without its name): the commit's last_pipeline form. */
const JobPipelineSchema = PipelineSummarySchema;

export const jobCommon = {
  id: Type.Integer(),
  status: Type.String(),
  stage: Type.String(),
  name: Type.String(),
  ref: Type.String(),
  tag: Type.Boolean(),
  coverage: Nullable(Type.Number()),
  allow_failure: Type.Boolean(),
  created_at: Timestamp,
  started_at: Nullable(Timestamp),
  finished_at: Nullable(Timestamp),
  erased_at: Nullable(Timestamp),
  duration: Nullable(Type.Number()),
  queued_duration: Nullable(Type.Number()),
  user: Nullable(UserExtendedSchema),
  commit: Nullable(CommitSchema),
  pipeline: JobPipelineSchema,
  web_url: Type.String(),
  project: Type.Object({ ci_job_token_scope_enabled: Type.Boolean() }, strict),
  archived: Type.Boolean(),
};

export const ArtifactSchema = Type.Object({ file_type: Type.String(), size: Type.Integer(), filename: Type.String(), file_format: Nullable(Type.String()) }, strict);
export const RunnerSummarySchema = Type.Object(
  {
    id: Type.Integer(),
    description: Type.String(),
    ip_address: Nullable(Type.String()),
    active: Type.Boolean(),
    paused: Type.Boolean(),
    is_shared: Type.Boolean(),
    runner_type: Type.String(),
    name: Nullable(Type.String()),
    online: Nullable(Type.Boolean()),
    status: Type.String(),
  },
  strict,
);

export const JobSchema = Type.Object(
  {
    ...jobCommon,
    failure_reason: Type.Optional(Type.String()),
    artifacts_file: Type.Optional(Type.Object({ filename: Type.String(), size: Type.Integer() }, strict)),
    artifacts: Type.Array(ArtifactSchema),
    artifacts_expire_at: Nullable(Timestamp),
    tag_list: Type.Array(Type.String()),
    runner: Nullable(RunnerSummarySchema),
    runner_manager: Type.Null(),
    /** Only in the keep-artifacts answer (always null there). */
    download_url: Type.Optional(Type.Null()),
  },
  strict,
);

/** GitLab's Entities::Ci::JobBasic. */
export const JobBasicSchema = Type.Object({ ...jobCommon, failure_reason: Type.Optional(Type.String()) }, strict);

/** GitLab's Entities::Ci::ResourceGroup. */
export const ResourceGroupSchema = Type.Object(
  { id: Type.Integer(), key: Type.String(), process_mode: Type.String(), created_at: Timestamp, updated_at: Timestamp },
  strict,
);

export const BridgeSchema = Type.Object(
  {
    ...jobCommon,
    pipeline: Type.Object({ ...JobPipelineSchema.properties }, strict),
    downstream_pipeline: Nullable(
      Type.Object({ id: Type.Integer(), sha: Sha, ref: Type.String(), status: Type.String(), created_at: Timestamp, updated_at: Timestamp, web_url: Type.String() }, strict),
    ),
  },
  strict,
);

export const CiVariableSchema = Type.Object(
  {
    variable_type: Type.String(),
    key: Type.String(),
    value: Type.String(),
    protected: Type.Boolean(),
    masked: Type.Boolean(),
    raw: Type.Boolean(),
    environment_scope: Type.String(),
    description: Nullable(Type.String()),
  },
  strict,
);

/** GET /admin/ci/variables: a variable of the instance (no environment scope). */
export const InstanceVariableSchema = Type.Object(
  {
    variable_type: Type.String(),
    key: Type.String(),
    value: Type.String(),
    protected: Type.Boolean(),
    masked: Type.Boolean(),
    raw: Type.Boolean(),
    description: Nullable(Type.String()),
  },
  strict,
);

export const LintSchema = Type.Object(
  {
    valid: Type.Boolean(),
    errors: Type.Array(Type.String()),
    warnings: Type.Array(Type.String()),
    merged_yaml: Nullable(Type.String()),
    includes: Type.Array(Type.Record(Type.String(), Type.Unknown())),
    jobs: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()))),
  },
  strict,
);
