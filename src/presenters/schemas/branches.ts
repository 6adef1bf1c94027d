import { Type } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';
import { CommitSchema } from './commits.js';

/** Response schemas of branches, tags and protected branches; contract tests check real responses against them. */
export const BranchSchema = Type.Object(
  {
    name: Type.String(),
    commit: CommitSchema,
    merged: Type.Boolean(),
    protected: Type.Boolean(),
    developers_can_push: Type.Boolean(),
    developers_can_merge: Type.Boolean(),
    can_push: Type.Boolean(),
    default: Type.Boolean(),
    web_url: Type.String(),
  },
  strict,
);

export const TagSchema = Type.Object(
  {
    name: Type.String(),
    message: Type.String(),
    target: Type.String({ pattern: '^[0-9a-f]{40}$' }),
    commit: Nullable(CommitSchema),
    release: Nullable(Type.Object({ tag_name: Type.String(), description: Type.String() }, strict)),
    protected: Type.Boolean(),
    created_at: Nullable(Timestamp),
  },
  strict,
);

export const ProtectedRefAccessSchema = Type.Object(
  {
    id: Type.Integer(),
    access_level: Type.Integer(),
    access_level_description: Type.String(),
    user_id: Nullable(Type.Integer()),
    group_id: Nullable(Type.Integer()),
  },
  strict,
);

export const ProtectedBranchSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    push_access_levels: Type.Array(ProtectedRefAccessSchema),
    merge_access_levels: Type.Array(ProtectedRefAccessSchema),
    unprotect_access_levels: Type.Array(ProtectedRefAccessSchema),
    allow_force_push: Type.Boolean(),
    code_owner_approval_required: Type.Boolean(),
  },
  strict,
);

/** DELETE .../repository/merged_branches: the deletion is accepted. */
export const MergedBranchesAcceptedSchema = Type.Object({ message: Type.Literal('202 Accepted') }, strict);
