import { Type } from 'typebox';
import { USER_ORDER_FIELDS } from '../../finders/users.js';
import { CLEAR_STATUS_AFTER } from '../../services/user-profile.js';

const Bool = Type.Optional(Type.Boolean());
const Str = Type.Optional(Type.String());
const Int = Type.Optional(Type.Integer());
const NullableInt = Type.Optional(Type.Union([Type.Integer(), Type.Null()]));

/** GET /users (route() adds page and per_page). */
export const ListUsersQuery = Type.Object({
  username: Str,
  search: Str,
  active: Bool,
  blocked: Bool,
  external: Bool,
  exclude_external: Bool,
  exclude_internal: Bool,
  humans: Bool,
  exclude_humans: Bool,
  exclude_active: Bool,
  without_project_bots: Bool,
  extern_uid: Str,
  provider: Str,
  created_before: Str,
  created_after: Str,
  custom_attributes: Type.Optional(Type.Unknown()),
  with_custom_attributes: Bool,
  order_by: Type.Optional(Type.Union(USER_ORDER_FIELDS.map((f) => Type.Literal(f)))),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  two_factor: Str,
  without_projects: Bool,
  admins: Bool,
  saml_provider_id: Int,
});

export const WithCustomAttributesQuery = Type.Object({ with_custom_attributes: Bool });

/** Attributes POST and PUT /users share (GitLab's optional_attributes). */
const userAttributes = {
  name: Str,
  username: Str,
  email: Str,
  password: Str,
  skype: Str,
  linkedin: Str,
  twitter: Str,
  discord: Str,
  website_url: Str,
  organization: Str,
  job_title: Str,
  pronouns: Str,
  bio: Str,
  location: Str,
  public_email: Str,
  commit_email: Str,
  note: Str,
  projects_limit: Int,
  admin: Bool,
  can_create_group: Bool,
  external: Bool,
  private_profile: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  theme_id: Int,
  color_scheme_id: Int,
  view_diffs_file_by_file: Bool,
  shared_runners_minutes_limit: NullableInt,
  extra_shared_runners_minutes_limit: NullableInt,
  extern_uid: Str,
  provider: Str,
};

export const CreateUserBody = Type.Object({
  ...userAttributes,
  reset_password: Bool,
  force_random_password: Bool,
  skip_confirmation: Bool,
});

export const UpdateUserBody = Type.Object({
  ...userAttributes,
  skip_reconfirmation: Bool,
});

export const DeleteUserQuery = Type.Object({ hard_delete: Bool });

export const SetStatusBody = Type.Object({
  emoji: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  message: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  availability: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  clear_status_after: Type.Optional(Type.Union([...Object.keys(CLEAR_STATUS_AFTER).map((k) => Type.Literal(k)), Type.Null()])),
});

export const IdentityParams = Type.Object({ id: Type.String(), provider: Type.String() });
export const CustomAttributeParams = Type.Object({ id: Type.String(), key: Type.String() });
export const SetCustomAttributeBody = Type.Object({ value: Type.String() }, { required: ['value'] });
