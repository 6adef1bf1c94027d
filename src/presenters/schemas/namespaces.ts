import { Type } from 'typebox';
import { Nullable, strict } from './common.js';

/** Response schemas of src/presenters/namespaces.ts; contract tests check real responses against them. */
export const namespaceBasicProps = {
  id: Type.Integer(),
  name: Type.String(),
  path: Type.String(),
  kind: Type.Union([Type.Literal('user'), Type.Literal('group')]),
  full_path: Type.String(),
  parent_id: Nullable(Type.Integer()),
  avatar_url: Nullable(Type.String()),
  web_url: Type.String(),
};
export const NamespaceBasicSchema = Type.Object(namespaceBasicProps, strict);

/** The Namespaces API form; members_count_with_descendants only for groups the caller administers. */
export const NamespaceSchema = Type.Object(
  {
    ...namespaceBasicProps,
    members_count_with_descendants: Type.Optional(Type.Integer()),
    projects_count: Type.Integer(),
  },
  strict,
);

/** GET /namespaces/:namespace/exists. */
export const NamespaceExistsSchema = Type.Object({ exists: Type.Boolean(), suggests: Type.Array(Type.String()) }, strict);
