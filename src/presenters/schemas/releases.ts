import { Type } from 'typebox';
import { CommitSchema } from './commits.js';
import { Nullable, strict, Timestamp } from './common.js';
import { GroupMilestoneSchema, ProjectMilestoneSchema } from './milestones.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of src/presenters/releases.ts (GitLab's Entities::Release and Releases::Link). */

export const ReleaseLinkSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    url: Type.String(),
    direct_asset_url: Type.String(),
    link_type: Type.String(),
  },
  strict,
);

const issueStats = Type.Object({ total: Type.Integer(), closed: Type.Integer() }, strict);

export const ReleaseSchema = Type.Object(
  {
    name: Type.String(),
    tag_name: Type.String(),
    description: Type.String(),
    description_html: Type.Optional(Type.String()),
    created_at: Timestamp,
    released_at: Timestamp,
    upcoming_release: Type.Boolean(),
    historical_release: Type.Boolean(),
    author: Nullable(UserBasicSchema),
    commit: Type.Optional(Nullable(CommitSchema)),
    milestones: Type.Optional(
      Type.Array(
        Type.Union([
          Type.Object({ ...ProjectMilestoneSchema.properties, issue_stats: issueStats }, strict),
          Type.Object({ ...GroupMilestoneSchema.properties, issue_stats: issueStats }, strict),
        ]),
      ),
    ),
    commit_path: Type.Optional(Type.String()),
    tag_path: Type.Optional(Type.String()),
    assets: Type.Object(
      {
        count: Type.Integer(),
        sources: Type.Array(Type.Object({ format: Type.String(), url: Type.String() }, strict)),
        links: Type.Array(ReleaseLinkSchema),
      },
      strict,
    ),
    evidences: Type.Array(Type.Never()),
    _links: Type.Object(
      {
        closed_issues_url: Type.String(),
        closed_merge_requests_url: Type.String(),
        edit_url: Type.Optional(Type.String()),
        merged_merge_requests_url: Type.String(),
        opened_issues_url: Type.String(),
        opened_merge_requests_url: Type.String(),
        self: Type.String(),
      },
      strict,
    ),
  },
  strict,
);
