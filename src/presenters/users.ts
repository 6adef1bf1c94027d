import type { User } from '../db/schema/core.js';

/** What presenters may know beyond the row: the external URL, and preloaded extras. */
export interface PresentContext {
  baseUrl: string;
  /** The port of Cairn's SSH server (CAIRN_SSH_PORT), for ssh_url_to_repo; 22 or absent: scp-like `git@host:path.git`. */
  sshPort?: number;
  /** Who is looking: a private profile is shown in full to its owner and to administrators. */
  viewer?: { id: number; admin: boolean; external: boolean } | null;
}

/**
 * A repository's SSH clone URL, as GitLab shows it: `git@host:path.git` on the standard port (or
 * with no SSH server of Cairn's own), `ssh://git@host:port/path.git` on another port.
 */
export function sshRepoUrl(baseUrl: string, sshPort: number | undefined, repoPath: string): string {
  const host = new URL(baseUrl).hostname;
  if (!sshPort || sshPort === 22) return `git@${host}:${repoPath}.git`;
  return `ssh://git@${host}:${sshPort}/${repoPath}.git`;
}

function profileHidden(ctx: PresentContext, u: User): boolean {
  return u.private_profile && !(ctx.viewer && (ctx.viewer.admin || ctx.viewer.id === u.id));
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
  const hidden = profileHidden(ctx, u);
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
  /** Whether the caller follows this user (GitLab's is_followed). */
  isFollowed?: boolean;
}

/** The single-user form (`GET /users/:id` for non-admins). */
export function presentUserSingle(ctx: PresentContext, u: User, counts: FollowCounts = { followers: 0, following: 0 }) {
  return {
    ...presentUserExtended(ctx, u),
    local_time: null,
    followers: profileHidden(ctx, u) ? 0 : counts.followers,
    following: profileHidden(ctx, u) ? 0 : counts.following,
    is_followed: counts.isFollowed ?? false,
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

export interface CustomAttributeRow {
  key: string;
  value: string;
}

export function presentCustomAttribute(a: CustomAttributeRow) {
  return { key: a.key, value: a.value };
}

/** `with_custom_attributes=true` for administrators: the form plus its custom attributes. */
export function withCustomAttributes<T extends object>(form: T, attrs: CustomAttributeRow[]): T & { custom_attributes: { key: string; value: string }[] } {
  return { ...form, custom_attributes: attrs.map(presentCustomAttribute) };
}

export interface UserStatusRow {
  emoji: string;
  message: string | null;
  availability: string;
  clear_status_at: Date | string | null;
}

/**
 * GitLab's UserStatus entity. A status whose clear_status_at has passed reads as no status,
 * which is the form GitLab gives when there is none (all null, empty message_html).
 */
export function presentUserStatus(status: UserStatusRow | null | undefined, now: Date = new Date()) {
  const live = status && !(status.clear_status_at && new Date(status.clear_status_at).getTime() <= now.getTime()) ? status : null;
  if (!live) return { emoji: null, availability: null, message: null, message_html: '', clear_status_at: null };
  return {
    emoji: live.emoji,
    availability: live.availability,
    message: live.message,
    message_html: renderStatusMessage(live.message),
    clear_status_at: iso(live.clear_status_at),
  };
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

/**
 * GitLab's emoji pipeline for status messages: the text HTML-escaped, `:name:` codes of known
 * emoji turned into <gl-emoji> elements; unknown codes stay as typed.
 */
export function renderStatusMessage(message: string | null): string {
  if (!message) return '';
  return escapeHtml(message).replace(/:([a-z0-9_+-]+):/g, (whole, name: string) => {
    const e = EMOJI[name];
    if (!e) return whole;
    return `<gl-emoji title="${e[1]}" data-name="${name}" data-unicode-version="${e[2]}">${e[0]}</gl-emoji>`;
  });
}

/** The emoji most used in statuses: name -> [character, title, unicode version]. */
export const EMOJI: Record<string, [string, string, string]> = {
  speech_balloon: ['\u{1F4AC}', 'speech balloon', '6.0'],
  coffee: ['\u2615', 'hot beverage', '4.0'],
  palm_tree: ['\u{1F334}', 'palm tree', '6.0'],
  tada: ['\u{1F389}', 'party popper', '6.0'],
  smile: ['\u{1F604}', 'smiling face with open mouth and smiling eyes', '6.0'],
  smiley: ['\u{1F603}', 'smiling face with open mouth', '6.0'],
  grinning: ['\u{1F600}', 'grinning face', '6.1'],
  slight_smile: ['\u{1F642}', 'slightly smiling face', '7.0'],
  wink: ['\u{1F609}', 'winking face', '6.0'],
  thumbsup: ['\u{1F44D}', 'thumbs up sign', '6.0'],
  thumbsdown: ['\u{1F44E}', 'thumbs down sign', '6.0'],
  heart: ['\u2764', 'heavy black heart', '1.1'],
  fire: ['\u{1F525}', 'fire', '6.0'],
  rocket: ['\u{1F680}', 'rocket', '6.0'],
  computer: ['\u{1F4BB}', 'personal computer', '6.0'],
  house: ['\u{1F3E0}', 'house building', '6.0'],
  house_with_garden: ['\u{1F3E1}', 'house with garden', '6.0'],
  calendar: ['\u{1F4C6}', 'tear-off calendar', '6.0'],
  date: ['\u{1F4C5}', 'calendar', '6.0'],
  thermometer_face: ['\u{1F912}', 'face with thermometer', '8.0'],
  sick: ['\u{1F912}', 'face with thermometer', '8.0'],
  face_with_thermometer: ['\u{1F912}', 'face with thermometer', '8.0'],
  mask: ['\u{1F637}', 'face with medical mask', '6.0'],
  sleeping: ['\u{1F634}', 'sleeping face', '6.1'],
  zzz: ['\u{1F4A4}', 'sleeping symbol', '6.0'],
  bus: ['\u{1F68C}', 'bus', '6.0'],
  car: ['\u{1F697}', 'automobile', '6.0'],
  red_car: ['\u{1F697}', 'automobile', '6.0'],
  airplane: ['\u2708', 'airplane', '1.1'],
  train: ['\u{1F68B}', 'tram car', '6.0'],
  beach: ['\u{1F3D6}', 'beach with umbrella', '7.0'],
  beach_umbrella: ['\u{1F3D6}', 'beach with umbrella', '7.0'],
  desert_island: ['\u{1F3DD}', 'desert island', '7.0'],
  books: ['\u{1F4DA}', 'books', '6.0'],
  book: ['\u{1F4D6}', 'open book', '6.0'],
  pencil: ['\u{1F4DD}', 'memo', '6.0'],
  memo: ['\u{1F4DD}', 'memo', '6.0'],
  calling: ['\u{1F4F2}', 'mobile phone with rightwards arrow at left', '6.0'],
  phone: ['\u260E', 'black telephone', '1.1'],
  telephone: ['\u260E', 'black telephone', '1.1'],
  headphones: ['\u{1F3A7}', 'headphone', '6.0'],
  no_entry: ['\u26D4', 'no entry', '5.2'],
  no_entry_sign: ['\u{1F6AB}', 'no entry sign', '6.0'],
  warning: ['\u26A0', 'warning sign', '4.0'],
  white_check_mark: ['\u2705', 'white heavy check mark', '6.0'],
  heavy_check_mark: ['\u2714', 'heavy check mark', '1.1'],
  x: ['\u274C', 'cross mark', '6.0'],
  eyes: ['\u{1F440}', 'eyes', '6.0'],
  rainbow: ['\u{1F308}', 'rainbow', '6.0'],
  sunny: ['\u2600', 'black sun with rays', '1.1'],
  snowflake: ['\u2744', 'snowflake', '1.1'],
  umbrella: ['\u2614', 'umbrella with rain drops', '4.0'],
  pizza: ['\u{1F355}', 'slice of pizza', '6.0'],
  hamburger: ['\u{1F354}', 'hamburger', '6.0'],
  beer: ['\u{1F37A}', 'beer mug', '6.0'],
  baby: ['\u{1F476}', 'baby', '6.0'],
  hospital: ['\u{1F3E5}', 'hospital', '6.0'],
  construction: ['\u{1F6A7}', 'construction sign', '6.0'],
  bulb: ['\u{1F4A1}', 'electric light bulb', '6.0'],
  bug: ['\u{1F41B}', 'bug', '6.0'],
  tools: ['\u{1F6E0}', 'hammer and wrench', '7.0'],
  wrench: ['\u{1F527}', 'wrench', '6.0'],
  hourglass: ['\u231B', 'hourglass', '1.1'],
  clock: ['\u{1F570}', 'mantlepiece clock', '7.0'],
  earth_americas: ['\u{1F30E}', 'earth globe americas', '6.0'],
  earth_africa: ['\u{1F30D}', 'earth globe europe-africa', '6.0'],
  earth_asia: ['\u{1F30F}', 'earth globe asia-australia', '6.0'],
  muscle: ['\u{1F4AA}', 'flexed biceps', '6.0'],
  pray: ['\u{1F64F}', 'person with folded hands', '6.0'],
  wave: ['\u{1F44B}', 'waving hand sign', '6.0'],
  clap: ['\u{1F44F}', 'clapping hands sign', '6.0'],
  ok_hand: ['\u{1F44C}', 'ok hand sign', '6.0'],
  raised_hand: ['\u270B', 'raised hand', '6.0'],
  star: ['\u2B50', 'white medium star', '5.1'],
  sparkles: ['\u2728', 'sparkles', '6.0'],
  zap: ['\u26A1', 'high voltage sign', '4.0'],
  robot: ['\u{1F916}', 'robot face', '8.0'],
  thinking: ['\u{1F914}', 'thinking face', '8.0'],
  joy: ['\u{1F602}', 'face with tears of joy', '6.0'],
  cry: ['\u{1F622}', 'crying face', '6.0'],
  sob: ['\u{1F62D}', 'loudly crying face', '6.0'],
  angry: ['\u{1F620}', 'angry face', '6.0'],
  sunglasses: ['\u{1F60E}', 'smiling face with sunglasses', '6.0'],
  nerd: ['\u{1F913}', 'nerd face', '8.0'],
  cat: ['\u{1F431}', 'cat face', '6.0'],
  dog: ['\u{1F436}', 'dog face', '6.0'],
  fox: ['\u{1F98A}', 'fox face', '9.0'],
  tanuki: ['\u{1F99D}', 'raccoon', '11.0'],
  mountain: ['\u26F0', 'mountain', '5.2'],
  tent: ['\u26FA', 'tent', '5.2'],
  gift: ['\u{1F381}', 'wrapped present', '6.0'],
  birthday: ['\u{1F382}', 'birthday cake', '6.0'],
  balloon: ['\u{1F388}', 'balloon', '6.0'],
  mega: ['\u{1F4E3}', 'cheering megaphone', '6.0'],
  loudspeaker: ['\u{1F4E2}', 'public address loudspeaker', '6.0'],
  lock: ['\u{1F512}', 'lock', '6.0'],
  key: ['\u{1F511}', 'key', '6.0'],
  mailbox: ['\u{1F4EB}', 'closed mailbox with raised flag', '6.0'],
  email: ['\u{1F4E7}', 'e-mail symbol', '6.0'],
  100: ['\u{1F4AF}', 'hundred points symbol', '6.0'],
};
