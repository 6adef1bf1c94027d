import type { Namespace, Project, User } from '../db/schema/core.js';
import { AccessLevel, canSeeVisibility, Visibility } from './access.js';

/**
 * What a user may do, as GitLab's DeclarativePolicy decides it: `can(actor, ability, subject)`.
 * The subject carries the actor's level on it, loaded once by whoever found the subject (a
 * route's guard, a job worker, a page), so a rule here is a pure function: no request, no
 * database. Every numeric access-level comparison about what someone may do lives in this file.
 */

/** Who asks: a user, or nobody (an anonymous caller). */
export type AbilityActor = Pick<User, 'id' | 'admin' | 'external'> | null;

export type FeatureLevel = 'disabled' | 'private' | 'enabled' | 'public';

/** A project and the actor's effective level on it (admins count as owners; 0 for outsiders). */
export interface ProjectSubject {
  project: Pick<Project, 'visibility_level' | 'archived' | 'repository_read_only' | 'settings'>;
  accessLevel: number;
}

/** A group, the actor's effective level on it, and whether the actor reaches something below it. */
export interface GroupSubject {
  group: Pick<Namespace, 'visibility_level' | 'subgroup_creation_level' | 'project_creation_level'>;
  accessLevel: number;
  /** The actor has access to a subgroup or project of this group (GitLab shows such a private group). */
  accessBelow?: boolean;
}

/** The level an actor holds once administrators are counted as owners. */
export function effectiveLevel(actor: AbilityActor, memberLevel: number): number {
  if (!actor) return 0;
  return actor.admin ? Math.max(memberLevel, AccessLevel.OWNER) : memberLevel;
}

/** Project features that, set to "private", are for reporters and up rather than guests (GitLab's feature rules). */
const REPORTER_FEATURES = new Set(['repository', 'merge_requests', 'container_registry', 'environments']);

/** A feature's stored access level (`<feature>_access_level`), with GitLab's defaults. */
export function featureAccessLevel(project: Pick<Project, 'visibility_level' | 'settings'>, feature: string): FeatureLevel {
  const stored = (project.settings as Record<string, unknown> | null)?.[`${feature}_access_level`];
  if (stored === 'disabled' || stored === 'private' || stored === 'enabled' || stored === 'public') return stored;
  if (feature === 'pages') return project.visibility_level === Visibility.PUBLIC ? 'enabled' : 'private';
  return 'enabled';
}

/** May a caller with this level use a project feature? ("private" features are for members.) */
export function featureAvailable(s: ProjectSubject, feature: string): boolean {
  const level = featureAccessLevel(s.project, feature);
  if (level === 'disabled') return false;
  if (level === 'enabled' || level === 'public') {
    // The repository of a private project is for reporters and up, even when "enabled".
    if (feature === 'repository' && s.project.visibility_level === Visibility.PRIVATE) return s.accessLevel >= AccessLevel.REPORTER;
    return true;
  }
  return s.accessLevel >= (REPORTER_FEATURES.has(feature) ? AccessLevel.REPORTER : AccessLevel.GUEST);
}

type Rule<S> = (actor: AbilityActor, subject: S) => boolean;

const readProject: Rule<ProjectSubject> = (a, s) => canSeeVisibility(a as User | null, s.project.visibility_level, s.accessLevel);
const member = (level: number): Rule<ProjectSubject> => (a, s) => !!a && readProject(a, s) && s.accessLevel >= level;
const downloadCode: Rule<ProjectSubject> = (a, s) =>
  readProject(a, s) && (s.project.visibility_level !== Visibility.PRIVATE || s.accessLevel >= AccessLevel.REPORTER);

/**
 * Project abilities. Writability (archived, read-only during a storage move) is not an ability:
 * those refusals carry their own messages (see policies/code.ts).
 */
const PROJECT_RULES = {
  read_project: readProject,
  read_project_member: readProject,
  /** Read the repository: files, commits, branches, tags, archives; clone. */
  download_code: downloadCode,
  read_commit_note: downloadCode,
  create_commit_note: (a, s) => !!a && downloadCode(a, s),
  push_code: (a, s) => !!a && downloadCode(a, s) && s.accessLevel >= AccessLevel.DEVELOPER,
  create_tag: (a, s) => !!a && downloadCode(a, s) && s.accessLevel >= AccessLevel.DEVELOPER,
  /** Change or delete an existing tag (a push that moves one). */
  update_tag: member(AccessLevel.MAINTAINER),
  delete_protected_branch: member(AccessLevel.MAINTAINER),
  create_merge_request_in: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && featureAvailable(s, 'merge_requests'),
  /** Settings, protected branches, deploy keys, sharing, housekeeping. */
  admin_project: member(AccessLevel.MAINTAINER),
  admin_project_member: member(AccessLevel.MAINTAINER),
  /** Rename, change visibility, archive, transfer, delete. */
  owner_project: member(AccessLevel.OWNER),
  /** Edit or delete anyone's note (comment) on the project's noteables; authors may always edit their own. */
  admin_note: member(AccessLevel.MAINTAINER),
  /** Give a new note a `created_at` of one's choosing (imports): owners, and administrators (who count as owners). */
  set_note_created_at: member(AccessLevel.OWNER),
} satisfies Record<string, Rule<ProjectSubject>>;

const readGroup: Rule<GroupSubject> = (a, s) =>
  canSeeVisibility(a as User | null, s.group.visibility_level, s.accessLevel) || (!!a && !!s.accessBelow);
const groupMember = (level: number): Rule<GroupSubject> => (a, s) => !!a && readGroup(a, s) && s.accessLevel >= level;

const GROUP_RULES = {
  read_group: readGroup,
  read_group_member: readGroup,
  admin_group: groupMember(AccessLevel.OWNER),
  admin_group_member: groupMember(AccessLevel.OWNER),
  /** GitLab's subgroup_creation_level: 0 owners, 1 maintainers. */
  create_subgroup: (a, s) =>
    groupMember(s.group.subgroup_creation_level === 0 ? AccessLevel.OWNER : AccessLevel.MAINTAINER)(a, s),
  /** GitLab's project_creation_level: 0 nobody (but admins), 1 maintainers, 2 developers. */
  create_projects: (a, s) =>
    s.group.project_creation_level === 0
      ? !!a?.admin
      : groupMember(s.group.project_creation_level === 1 ? AccessLevel.MAINTAINER : AccessLevel.DEVELOPER)(a, s),
} satisfies Record<string, Rule<GroupSubject>>;

export type ProjectAbility = keyof typeof PROJECT_RULES;
export type GroupAbility = keyof typeof GROUP_RULES;
export const PROJECT_ABILITIES = Object.keys(PROJECT_RULES) as ProjectAbility[];
export const GROUP_ABILITIES = Object.keys(GROUP_RULES) as GroupAbility[];

export function can(actor: AbilityActor, ability: ProjectAbility, subject: ProjectSubject): boolean;
export function can(actor: AbilityActor, ability: GroupAbility, subject: GroupSubject): boolean;
export function can(actor: AbilityActor, ability: ProjectAbility | GroupAbility, subject: ProjectSubject | GroupSubject): boolean {
  if ('project' in subject) {
    const rule = PROJECT_RULES[ability as ProjectAbility];
    if (!rule) throw new Error(`unknown project ability ${ability}`);
    return rule(actor, subject);
  }
  const rule = GROUP_RULES[ability as GroupAbility];
  if (!rule) throw new Error(`unknown group ability ${ability}`);
  return rule(actor, subject);
}
