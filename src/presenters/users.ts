import type { User } from '../db/schema/core.js';

/** What presenters may know beyond the row: the external URL, and preloaded extras. */
export interface PresentContext {
  baseUrl: string;
}

export interface IdentityRow {
  provider: string;
  extern_uid: string;
  saml_provider_id?: number | null;
}

export function iso(d: Date | string | null | undefined): string | null {
  if (d === null || d === undefined) return null;
  return (d instanceof Date ? d : new Date(d)).toISOString();
}

export function userWebUrl(ctx: PresentContext, username: string): string {
  return `${ctx.baseUrl}/${username}`;
}

export function avatarUrl(ctx: PresentContext, user: Pick<User, 'id' | 'avatar_path'>): string | null {
  return user.avatar_path ? `${ctx.baseUrl}/uploads/-/system/user/avatar/${user.id}/${user.avatar_path}` : null;
}

/** GitLab's UserBasic: the public form (member lists, authors, job users' summaries). */
export function presentUserBasic(ctx: PresentContext, u: User) {
  return {
    id: u.id,
    username: u.username,
    name: u.name,
    state: u.state,
    locked: false,
    avatar_url: avatarUrl(ctx, u),
    web_url: userWebUrl(ctx, u.username),
  };
}

/** The extended form (job user, key owner): profile fields, no counts. */
export function presentUserExtended(ctx: PresentContext, u: User) {
  const hidden = u.private_profile;
  return {
    ...presentUserBasic(ctx, u),
    created_at: iso(u.created_at),
    bio: hidden ? '' : u.bio,
    location: hidden ? '' : u.location,
    public_email: hidden ? null : u.public_email || null,
    skype: hidden ? '' : u.skype,
    linkedin: hidden ? '' : u.linkedin,
    twitter: hidden ? '' : u.twitter,
    discord: hidden ? '' : u.discord,
    website_url: hidden ? '' : u.website_url,
    organization: hidden ? '' : u.organization,
    job_title: hidden ? '' : u.job_title,
    pronouns: hidden ? null : u.pronouns,
    bot: u.user_type !== 'human' && u.user_type !== 'ghost',
    work_information: hidden ? null : workInformation(u),
  };
}

export interface FollowCounts {
  followers: number;
  following: number;
}

/** The single-user form (`GET /users/:id` for non-admins). */
export function presentUserSingle(ctx: PresentContext, u: User, counts: FollowCounts = { followers: 0, following: 0 }) {
  return {
    ...presentUserExtended(ctx, u),
    local_time: null,
    followers: u.private_profile ? 0 : counts.followers,
    following: u.private_profile ? 0 : counts.following,
    is_followed: false,
  };
}

/** The caller's own record (`GET /user`): adds account settings. */
export function presentUserSelf(ctx: PresentContext, u: User, identities: IdentityRow[] = [], counts?: FollowCounts) {
  return {
    ...presentUserSingle(ctx, u, counts),
    last_sign_in_at: iso(u.last_sign_in_at),
    confirmed_at: iso(u.confirmed_at),
    last_activity_on: u.last_activity_on,
    email: u.email,
    theme_id: u.theme_id,
    color_scheme_id: u.color_scheme_id,
    projects_limit: u.projects_limit,
    current_sign_in_at: iso(u.current_sign_in_at),
    identities: identities.map((i) => ({ provider: i.provider, extern_uid: i.extern_uid, saml_provider_id: i.saml_provider_id ?? null })),
    can_create_group: u.can_create_group,
    can_create_project: u.projects_limit > 0,
    two_factor_enabled: u.two_factor_enabled,
    external: u.external,
    private_profile: u.private_profile,
    commit_email: u.commit_email || u.email,
  };
}

/** The admin form: what administrators see of any user. */
export function presentUserAdmin(ctx: PresentContext, u: User, identities: IdentityRow[] = [], counts?: FollowCounts, namespaceId?: number | null) {
  return {
    ...presentUserSelf(ctx, u, identities, counts),
    is_admin: u.admin,
    note: u.note,
    namespace_id: namespaceId ?? null,
    created_by: null,
    current_sign_in_ip: u.current_sign_in_ip,
    last_sign_in_ip: u.last_sign_in_ip,
    sign_in_count: u.sign_in_count,
    // Tier premium fields, always present so premium clients find them.
    shared_runners_minutes_limit: u.shared_runners_minutes_limit,
    extra_shared_runners_minutes_limit: u.extra_shared_runners_minutes_limit,
    is_auditor: u.is_auditor,
    using_license_seat: u.state === 'active' && u.user_type === 'human',
    provisioned_by_group_id: u.provisioned_by_group_id,
  };
}

function workInformation(u: User): string | null {
  if (u.job_title && u.organization) return `${u.job_title} at ${u.organization}`;
  return u.job_title || u.organization || null;
}
