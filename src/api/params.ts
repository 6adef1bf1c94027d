import { Type, type Static } from 'typebox';

/** Path-parameter schemas shared across resources. */

/** A path segment that names a row: PostgreSQL's integer range, so a larger number is a 400 rather than a database error. */
export const RowId = Type.Integer({ minimum: 0, maximum: 2147483647 });

/** `:id` of a project, group, user or namespace: a numeric id or a URL-encoded path. */
export const IdParams = Type.Object({ id: Type.String() });
export type IdParams = Static<typeof IdParams>;

/** A commit of the project `:id`: `:sha` is a commit SHA or a ref name. */
export const ShaParams = Type.Object({ id: Type.String(), sha: Type.String() });

/** `:id` that can only be a row id (a token, a key). */
export const RowIdParams = Type.Object({ id: RowId });

/** `:user_id` that can only be a row id. */
export const UserIdParams = Type.Object({ user_id: RowId });

/** A member of the group or project `:id`; `:user_id` stays a string that the handler parses, to answer as GitLab does. */
export type MemberParams = IdParams & { user_id: string };
