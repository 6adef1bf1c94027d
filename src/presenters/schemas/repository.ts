import { Type } from 'typebox';
import { Nullable, Sha, strict } from './common.js';
import { CommitSchema, DiffSchema } from './commits.js';

/** Response schemas of src/presenters/repository.ts; contract tests check real responses against them. */
export const TreeEntrySchema = Type.Object(
  {
    id: Sha,
    name: Type.String(),
    type: Type.Union([Type.Literal('tree'), Type.Literal('blob'), Type.Literal('commit')]),
    path: Type.String(),
    mode: Type.String({ pattern: '^[0-7]{6}$' }),
  },
  strict,
);

export const BlobSchema = Type.Object(
  { size: Type.Integer(), encoding: Type.Literal('base64'), content: Type.String(), sha: Sha },
  strict,
);

export const CompareSchema = Type.Object(
  {
    commit: Nullable(CommitSchema),
    commits: Type.Array(CommitSchema),
    diffs: Type.Array(DiffSchema),
    compare_timeout: Type.Boolean(),
    compare_same_ref: Type.Boolean(),
    web_url: Type.String(),
  },
  strict,
);

export const ContributorSchema = Type.Object(
  { name: Type.String(), email: Type.String(), commits: Type.Integer(), additions: Type.Integer(), deletions: Type.Integer() },
  strict,
);

/** GET /projects/:id/repository/changelog: the generated release section. */
export const ChangelogSchema = Type.Object({ notes: Type.String() }, strict);
