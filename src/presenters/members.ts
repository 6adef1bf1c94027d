import type { Namespace, User } from '../db/schema/core.js';
import { accessLevelName, VISIBILITY_NAMES } from '../policies/access.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

/** A membership as the presenters need it: the row's facts plus its user, preloaded. */
export interface MemberView {
  /** members.id; null for the owner of a personal namespace, who has no row. */
  id: number | null;
  user: User;
  access_level: number;
  expires_at: string | null;
  created_at: Date | string;
  created_by: User | null;
  /** 0 active, 1 awaiting. */
  state: number;
  override: boolean;
  requested_at?: Date | string | null;
}

export interface MemberPresentOptions {
  /** `show_seat_info=true`: whether each user takes a seat in the root namespace. */
  seatUserIds?: Set<number>;
  /** The override calls show the flag. */
  withOverride?: boolean;
}

export const MEMBER_STATE_NAMES: Record<number, 'active' | 'awaiting'> = { 0: 'active', 1: 'awaiting' };

/** GitLab's Member entity: the user's basic form merged with the membership's fields. */
export function presentMember(ctx: PresentContext, m: MemberView, opts: MemberPresentOptions = {}) {
  return {
    ...presentUserBasic(ctx, m.user),
    access_level: m.access_level,
    created_at: iso(m.created_at),
    ...(m.created_by ? { created_by: presentUserBasic(ctx, m.created_by) } : {}),
    expires_at: m.expires_at,
    ...(m.user.public_email ? { email: m.user.public_email } : {}),
    group_saml_identity: null,
    ...(opts.seatUserIds ? { is_using_seat: opts.seatUserIds.has(m.user.id) } : {}),
    ...(opts.withOverride ? { override: m.override } : {}),
    membership_state: MEMBER_STATE_NAMES[m.state] ?? 'active',
  };
}

/** An access request: the requester's basic form and when they asked. */
export function presentAccessRequester(ctx: PresentContext, m: MemberView) {
  return { ...presentUserBasic(ctx, m.user), requested_at: iso(m.requested_at ?? null) };
}

export type MembershipType = 'group_member' | 'project_member' | 'group_invite' | 'project_invite';

export interface BillableView {
  user: User;
  membership_type: MembershipType;
  is_last_owner: boolean;
}

/** A billable member: basic user form plus seat facts. `email` is the real one for administrators. */
export function presentBillableMember(ctx: PresentContext, b: BillableView, callerIsAdmin: boolean) {
  return {
    ...presentUserBasic(ctx, b.user),
    email: callerIsAdmin ? b.user.email : b.user.public_email || null,
    last_activity_on: b.user.last_activity_on,
    membership_type: b.membership_type,
    removable: b.membership_type === 'group_member' || b.membership_type === 'project_member',
    created_at: iso(b.user.created_at),
    is_last_owner: b.is_last_owner,
    last_login_at: iso(b.user.current_sign_in_at),
  };
}

export interface BillableMembershipView {
  id: number;
  source_id: number;
  source_type: 'Project' | 'Namespace';
  source_full_name: string;
  source_full_path: string;
  created_at: Date | string;
  expires_at: string | null;
  access_level: number;
}

export function presentBillableMembership(ctx: PresentContext, m: BillableMembershipView) {
  const membersPath = m.source_type === 'Project' ? `${m.source_full_path}/-/project_members` : `groups/${m.source_full_path}/-/group_members`;
  return {
    id: m.id,
    source_id: m.source_id,
    source_full_name: m.source_full_name,
    source_members_url: `${ctx.baseUrl}/${membersPath}`,
    created_at: iso(m.created_at),
    expires_at: m.expires_at,
    access_level: { string_value: accessLevelName(m.access_level), integer_value: m.access_level },
  };
}

export interface ProjectGroupLinkRow {
  id: number;
  project_id: number;
  group_id: number;
  group_access: number;
  expires_at: string | null;
}

/** GitLab's ProjectGroupLink entity (the answer to POST /projects/:id/share). */
export function presentProjectGroupLink(l: ProjectGroupLinkRow) {
  return { id: l.id, project_id: l.project_id, group_id: l.group_id, group_access: l.group_access, expires_at: l.expires_at };
}

export interface GroupShareView {
  group: Pick<Namespace, 'id' | 'name' | 'path' | 'full_name' | 'full_path'>;
  group_access: number;
  expires_at: string | null;
}

/** One entry of a group's shared_with_groups list. */
export function presentSharedWithGroup(s: GroupShareView) {
  return {
    group_id: s.group.id,
    group_name: s.group.name,
    group_full_path: s.group.full_path,
    group_access_level: s.group_access,
    expires_at: s.expires_at,
  };
}

/**
 * The group as POST /groups/:id/share answers: the group's basic fields and the groups it is
 * shared with (the part of GitLab's GroupDetail this operation changes).
 */
export function presentSharedGroup(ctx: PresentContext, g: Namespace, shares: GroupShareView[]) {
  return {
    id: g.id,
    web_url: `${ctx.baseUrl}/groups/${g.full_path}`,
    name: g.name,
    path: g.path,
    description: g.description,
    visibility: VISIBILITY_NAMES[g.visibility_level] ?? 'private',
    share_with_group_lock: g.settings?.share_with_group_lock === true,
    avatar_url: null,
    full_name: g.full_name,
    full_path: g.full_path,
    parent_id: g.parent_id,
    created_at: iso(g.created_at),
    shared_with_groups: shares.map(presentSharedWithGroup),
  };
}
