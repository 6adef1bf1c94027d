import { Type } from 'typebox';
import { Nullable, Sha, Timestamp, strict } from './common.js';

/** Response schemas of src/presenters/commits.ts; contract tests check real responses against them. */
const commitProps = {
  id: Sha,
  short_id: Type.String({ pattern: '^[0-9a-f]{8}$' }),
  created_at: Timestamp,
  parent_ids: Type.Array(Sha),
  title: Type.String(),
  message: Type.String(),
  author_name: Type.String(),
  author_email: Type.String(),
  authored_date: Timestamp,
  committer_name: Type.String(),
  committer_email: Type.String(),
  committed_date: Timestamp,
  trailers: Type.Record(Type.String(), Type.String()),
  extended_trailers: Type.Record(Type.String(), Type.Array(Type.String())),
  web_url: Type.String(),
};
/** GitLab's Commit entity. */
export const CommitSchema = Type.Object(commitProps, strict);

export const CommitStatsSchema = Type.Object({ additions: Type.Integer(), deletions: Type.Integer(), total: Type.Integer() }, strict);
/** CommitWithStats (list with with_stats=true). */
export const CommitWithStatsSchema = Type.Object({ ...commitProps, stats: CommitStatsSchema }, strict);

/**
 * A pipeline's summary (Entities::Ci::PipelineBasic without its name): a commit's last_pipeline,
 * a job's pipeline (presenters/ci.ts presentPipelineSummary).
 */
export const PipelineSummarySchema = Type.Object(
  {
    id: Type.Integer(),
    iid: Type.Integer(),
    project_id: Type.Integer(),
    sha: Sha,
    ref: Type.String(),
    status: Type.String(),
    source: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
    web_url: Type.String(),
  },
  strict,
);

/** CommitDetail (single read, create); stats unless stats=false; status and last_pipeline from the sha's latest pipeline (null without one or without read_pipeline). */
export const CommitDetailSchema = Type.Object(
  {
    ...commitProps,
    stats: Type.Optional(CommitStatsSchema),
    status: Nullable(Type.String()),
    project_id: Type.Integer(),
    last_pipeline: Nullable(PipelineSummarySchema),
  },
  strict,
);

const Mode = Type.String({ pattern: '^[0-7]+$' });
/** GitLab's Diff entity (commit diffs and compare). */
export const DiffSchema = Type.Object(
  {
    diff: Type.String(),
    collapsed: Type.Boolean(),
    too_large: Type.Boolean(),
    new_path: Type.String(),
    old_path: Type.String(),
    a_mode: Mode,
    b_mode: Mode,
    new_file: Type.Boolean(),
    renamed_file: Type.Boolean(),
    deleted_file: Type.Boolean(),
    generated_file: Type.Boolean(),
  },
  strict,
);

/** Commit comments and discussions are notes: their forms live in ./notes.ts. */
export { CommitNoteSchema, DiscussionSchema, NoteSchema } from './notes.js';

/** GET .../commits/:sha/refs */
export const CommitRefSchema = Type.Object({ type: Type.Union([Type.Literal('branch'), Type.Literal('tag')]), name: Type.String() }, strict);

export const CherryPickDryRunSchema = Type.Object({ dry_run: Type.Literal('success') }, strict);
