import { Type } from 'typebox';
import { Sha, Timestamp, strict } from './common.js';

/** Response schemas of the repository files API; contract tests check real responses against them. */
export const RepositoryFileSchema = Type.Object(
  {
    file_name: Type.String(),
    file_path: Type.String(),
    size: Type.Integer(),
    encoding: Type.Literal('base64'),
    content_sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    ref: Type.String(),
    blob_id: Sha,
    commit_id: Sha,
    last_commit_id: Sha,
    execute_filemode: Type.Boolean(),
    content: Type.String(),
  },
  strict,
);

/** POST and PUT answer the path and branch written. */
export const FileWriteSchema = Type.Object({ file_path: Type.String(), branch: Type.String() }, strict);

export const BlameRangeSchema = Type.Object(
  {
    commit: Type.Object(
      {
        id: Sha,
        parent_ids: Type.Array(Sha),
        message: Type.String(),
        authored_date: Timestamp,
        author_name: Type.String(),
        author_email: Type.String(),
        committed_date: Timestamp,
        committer_name: Type.String(),
        committer_email: Type.String(),
      },
      strict,
    ),
    lines: Type.Array(Type.String()),
  },
  strict,
);
