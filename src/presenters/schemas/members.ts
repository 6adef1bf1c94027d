import { Type } from 'typebox';
import { DateOnly, Nullable, Timestamp, strict } from './common.js';
import { SharedGroupSchema } from './groups.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of src/presenters/members.ts; contract tests check real responses against them. */
const basic = UserBasicSchema.properties;

const memberProps = {
  ...basic,
  access_level: Type.Integer(),
  created_at: Timestamp,
  /** Absent for memberships without a recorded creator (e.g. a personal namespace's owner). */
  created_by: Type.Optional(UserBasicSchema),
  expires_at: Nullable(DateOnly),
  /** Only for users with a public e-mail address. */
  email: Type.Optional(Type.String()),
  group_saml_identity: Type.Null(),
  /** With show_seat_info=true. */
  is_using_seat: Type.Optional(Type.Boolean()),
  membership_state: Type.Union([Type.Literal('active'), Type.Literal('awaiting')]),
};
/** GitLab's Member entity. */
export const MemberSchema = Type.Object(memberProps, strict);
/** The member as the override calls answer it. */
export const MemberWithOverrideSchema = Type.Object({ ...memberProps, override: Type.Boolean() }, strict);

export const AccessRequesterSchema = Type.Object({ ...basic, requested_at: Timestamp }, strict);

export const BillableMemberSchema = Type.Object(
  {
    ...basic,
    email: Nullable(Type.String()),
    last_activity_on: Nullable(DateOnly),
    membership_type: Type.Union([Type.Literal('group_member'), Type.Literal('project_member'), Type.Literal('group_invite'), Type.Literal('project_invite')]),
    removable: Type.Boolean(),
    created_at: Timestamp,
    is_last_owner: Type.Boolean(),
    last_login_at: Nullable(Timestamp),
  },
  strict,
);

export const BillableMembershipSchema = Type.Object(
  {
    id: Type.Integer(),
    source_id: Type.Integer(),
    source_full_name: Type.String(),
    source_members_url: Type.String(),
    created_at: Timestamp,
    expires_at: Nullable(DateOnly),
    access_level: Type.Object({ string_value: Type.String(), integer_value: Type.Integer() }, strict),
  },
  strict,
);

export const ProjectGroupLinkSchema = Type.Object(
  { id: Type.Integer(), project_id: Type.Integer(), group_id: Type.Integer(), group_access: Type.Integer(), expires_at: Nullable(DateOnly) },
  strict,
);

/** The answer to adding several users at once (POST members with user_id "1,2,3"). */
export const MembersAddedSchema = Type.Union([
  Type.Object({ status: Type.Literal('success') }, strict),
  Type.Object({ status: Type.Literal('error'), message: Type.String() }, strict),
]);

/** The group as POST /groups/:id/share answers it: its basic fields and the groups it is shared with. */
export const GroupSharesSchema = Type.Object(
  {
    id: Type.Integer(),
    web_url: Type.String(),
    name: Type.String(),
    path: Type.String(),
    description: Type.String(),
    visibility: Type.Union([Type.Literal('private'), Type.Literal('internal'), Type.Literal('public')]),
    share_with_group_lock: Type.Boolean(),
    avatar_url: Type.Null(),
    full_name: Type.String(),
    full_path: Type.String(),
    parent_id: Nullable(Type.Integer()),
    created_at: Timestamp,
    shared_with_groups: Type.Array(SharedGroupSchema),
  },
  strict,
);
