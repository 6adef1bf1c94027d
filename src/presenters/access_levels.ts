/**
 * The access levels of protected branches and protected environments: who a level admits, in
 * GitLab's words (`access_level_description`), shared by both presenters.
 */

/** Names of the users and groups that levels name (loaded by the caller: presenters do no I/O). */
export interface AccessLevelNames {
  users: Map<number, string>;
  groups: Map<number, string>;
}

/** GitLab's human names of the roles a level may admit. */
const ROLE_DESCRIPTIONS: Record<number, string> = {
  0: 'No one',
  30: 'Developers + Maintainers',
  40: 'Maintainers',
  60: 'Administrators',
};

/** A level's description: the user's or group's name when it names one, else its role's (GitLab's humanize). */
export function accessLevelDescription(
  level: { access_level: number | null; user_id: number | null; group_id: number | null },
  names: AccessLevelNames,
): string {
  if (level.user_id !== null) return names.users.get(level.user_id) ?? '';
  if (level.group_id !== null) return names.groups.get(level.group_id) ?? '';
  return ROLE_DESCRIPTIONS[level.access_level ?? 40] ?? String(level.access_level);
}
