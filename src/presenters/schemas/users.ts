import { Type, type TSchema } from 'typebox';

/** Response schemas of the user forms in src/presenters/users.ts; contract tests check real responses against them. */
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Timestamp = Type.String({ format: 'date-time' });
const strict = { additionalProperties: false } as const;

const basicProps = {
  id: Type.Integer(),
  username: Type.String(),
  name: Type.String(),
  state: Type.String(),
  locked: Type.Boolean(),
  avatar_url: Nullable(Type.String()),
  web_url: Type.String(),
};
export const UserBasicSchema = Type.Object(basicProps, strict);

const extendedProps = {
  ...basicProps,
  created_at: Timestamp,
  bio: Type.String(),
  location: Type.String(),
  public_email: Nullable(Type.String()),
  skype: Type.String(),
  linkedin: Type.String(),
  twitter: Type.String(),
  discord: Type.String(),
  website_url: Type.String(),
  organization: Type.String(),
  job_title: Type.String(),
  pronouns: Nullable(Type.String()),
  bot: Type.Boolean(),
  work_information: Nullable(Type.String()),
};
export const UserExtendedSchema = Type.Object(extendedProps, strict);

const singleProps = {
  ...extendedProps,
  local_time: Nullable(Type.String()),
  followers: Type.Integer(),
  following: Type.Integer(),
  is_followed: Type.Boolean(),
};
export const UserSingleSchema = Type.Object(singleProps, strict);

export const IdentitySchema = Type.Object(
  { provider: Type.String(), extern_uid: Type.String(), saml_provider_id: Nullable(Type.Integer()) },
  strict,
);

const selfProps = {
  ...singleProps,
  last_sign_in_at: Nullable(Timestamp),
  confirmed_at: Nullable(Timestamp),
  last_activity_on: Nullable(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' })),
  email: Type.String(),
  theme_id: Type.Integer(),
  color_scheme_id: Type.Integer(),
  projects_limit: Type.Integer(),
  current_sign_in_at: Nullable(Timestamp),
  identities: Type.Array(IdentitySchema),
  can_create_group: Type.Boolean(),
  can_create_project: Type.Boolean(),
  two_factor_enabled: Type.Boolean(),
  external: Type.Boolean(),
  private_profile: Type.Boolean(),
  commit_email: Type.String(),
};
export const UserSelfSchema = Type.Object(selfProps, strict);

const adminProps = {
  ...selfProps,
  is_admin: Type.Boolean(),
  note: Nullable(Type.String()),
  namespace_id: Nullable(Type.Integer()),
  created_by: Type.Null(),
  current_sign_in_ip: Nullable(Type.String()),
  last_sign_in_ip: Nullable(Type.String()),
  sign_in_count: Type.Integer(),
  shared_runners_minutes_limit: Nullable(Type.Integer()),
  extra_shared_runners_minutes_limit: Nullable(Type.Integer()),
  is_auditor: Type.Boolean(),
  using_license_seat: Type.Boolean(),
  provisioned_by_group_id: Nullable(Type.Integer()),
};
export const UserAdminSchema = Type.Object(adminProps, strict);

export const CustomAttributeSchema = Type.Object({ key: Type.String(), value: Type.String() }, strict);
const customAttributes = { custom_attributes: Type.Array(CustomAttributeSchema) };
export const UserBasicWithCustomAttributesSchema = Type.Object({ ...basicProps, ...customAttributes }, strict);
export const UserAdminWithCustomAttributesSchema = Type.Object({ ...adminProps, ...customAttributes }, strict);
export const UserSingleWithCustomAttributesSchema = Type.Object({ ...singleProps, ...customAttributes }, strict);

export const UserStatusSchema = Type.Object(
  {
    emoji: Nullable(Type.String()),
    availability: Nullable(Type.String()),
    message: Nullable(Type.String()),
    message_html: Type.String(),
    clear_status_at: Nullable(Timestamp),
  },
  strict,
);

/** The answer of approve and reject (GitLab's `{ message: 'Success' }`). */
export const UserActionMessageSchema = Type.Object({ message: Type.String() }, strict);

/** A moderation answer (activate, ban, unban): `true`, the state changed. */
export const UserStateChangedSchema = Type.Literal(true);
/** block and deactivate: `true` when the state changed, `null` for a no-op GitLab skips. */
export const UserStateChangedOrSkippedSchema = Type.Union([Type.Literal(true), Type.Null()]);
/** unblock: `true` when the state changed, `false` when there was nothing to undo. */
export const UserStateChangedOrNotSchema = Type.Boolean();
