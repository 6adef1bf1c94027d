import { Type } from 'typebox';

const enumOf = (values: readonly string[]) => Type.Union(values.map((v) => Type.Literal(v)));
const Bool = Type.Boolean();
const IntOrString = Type.Union([Type.Integer(), Type.String()]);

export const VISIBILITY = enumOf(['private', 'internal', 'public']);
export const ACCESS_LEVEL = Type.Union([5, 10, 20, 30, 40, 50].map((v) => Type.Literal(v)));

/** Query of GET /projects, /users/:id/projects and /groups/:id/projects (paginated routes: page and per_page come with route()). */
export const ProjectListQuery = Type.Object({
  order_by: Type.Optional(enumOf(['id', 'name', 'path', 'created_at', 'updated_at', 'last_activity_at', 'similarity', 'star_count'])),
  sort: Type.Optional(enumOf(['asc', 'desc'])),
  visibility: Type.Optional(VISIBILITY),
  search: Type.Optional(Type.String()),
  search_namespaces: Type.Optional(Bool),
  archived: Type.Optional(Bool),
  owned: Type.Optional(Bool),
  membership: Type.Optional(Bool),
  starred: Type.Optional(Bool),
  simple: Type.Optional(Bool),
  statistics: Type.Optional(Bool),
  with_custom_attributes: Type.Optional(Bool),
  with_issues_enabled: Type.Optional(Bool),
  with_merge_requests_enabled: Type.Optional(Bool),
  include_subgroups: Type.Optional(Bool),
  with_shared: Type.Optional(Bool),
  min_access_level: Type.Optional(ACCESS_LEVEL),
  id_after: Type.Optional(Type.Integer()),
  id_before: Type.Optional(Type.Integer()),
  last_activity_after: Type.Optional(Type.String()),
  last_activity_before: Type.Optional(Type.String()),
  created_after: Type.Optional(Type.String()),
  created_before: Type.Optional(Type.String()),
  updated_after: Type.Optional(Type.String()),
  updated_before: Type.Optional(Type.String()),
  repository_storage: Type.Optional(Type.String()),
  topic: Type.Optional(Type.String()),
  pagination: Type.Optional(enumOf(['keyset', 'offset'])),
});

/** Body of POST /projects (settings beyond these are checked by the service). */
export const ProjectCreateBody = Type.Object({
  name: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  namespace_id: Type.Optional(IntOrString),
  namespace_path: Type.Optional(Type.String()),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  visibility: Type.Optional(VISIBILITY),
  default_branch: Type.Optional(Type.String()),
  initialize_with_readme: Type.Optional(Bool),
});

export const ProjectUpdateBody = Type.Object({
  name: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  visibility: Type.Optional(VISIBILITY),
  default_branch: Type.Optional(Type.String()),
});

export const ProjectHousekeepingBody = Type.Object({
  task: Type.Optional(Type.Union([Type.Literal('eager'), Type.Literal('prune')])),
});

export const ProjectTransferBody = Type.Object({
  /** The target namespace's id or full path. */
  namespace: Type.Union([Type.String(), Type.Integer()]),
});

/** Query of GET /projects/:id/users. */
export const ProjectUsersQuery = Type.Object({
  search: Type.Optional(Type.String()),
  /** Ids to leave out: an array or a comma list (non-numeric entries are ignored). */
  skip_users: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
});
