import { Type } from 'typebox';
import { Nullable, strict, Timestamp } from './common.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of the snippet forms in src/presenters/snippets.ts. */

export const SnippetFileSchema = Type.Object({ path: Type.String(), raw_url: Type.String() }, strict);

/** GitLab's BasicSnippet: a snippet inside another record (a repository storage move). */
export const BasicSnippetSchema = Type.Object(
  {
    id: Type.Integer(),
    title: Type.String(),
    description: Nullable(Type.String()),
    visibility: Type.Union([Type.Literal('private'), Type.Literal('internal'), Type.Literal('public')]),
    created_at: Timestamp,
    updated_at: Timestamp,
    project_id: Nullable(Type.Integer()),
    web_url: Type.String(),
    raw_url: Type.String(),
    ssh_url_to_repo: Type.String(),
    http_url_to_repo: Type.String(),
  },
  strict,
);

/** GitLab's Snippet / PersonalSnippet / ProjectSnippet: a BasicSnippet and more (project_id is null for personal snippets). */
export const SnippetSchema = Type.Object(
  {
    ...BasicSnippetSchema.properties,
    /** The first file's path (null for a snippet without files). */
    file_name: Nullable(Type.String()),
    author: UserBasicSchema,
    expires_at: Nullable(Timestamp),
    files: Type.Array(SnippetFileSchema),
    imported: Type.Boolean(),
    imported_from: Type.String(),
  },
  strict,
);

/** GitLab's UserAgentDetail (administrators). */
export const UserAgentDetailSchema = Type.Object(
  {
    user_agent: Type.String(),
    ip_address: Type.String(),
    akismet_submitted: Type.Boolean(),
    spamcheck_submitted: Type.Boolean(),
  },
  strict,
);
