import type { Namespace, Project, User } from '../db/schema/core.js';
import { AccessLevel, canSeeVisibility, Visibility } from './access.js';
import { CONFIDENTIAL_ISSUE_READER, PROJECT_ADMIN, RUNNER_MANAGER } from './rules.js';

/**
 * What a user may do, as GitLab's DeclarativePolicy decides it: `can(actor, ability, subject)`.
 * The subject carries the actor's level on it, loaded once by whoever found the subject (a
 * route's guard, a job worker, a page), so a rule here is a pure function: no request, no
 * database. Every numeric access-level comparison about what someone may do lives in this file,
 * or, for a rule that is also asked in SQL, in rules.ts beside its SQL form.
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

/** Labels and milestones exist for issues and merge requests: gone when the caller may use neither feature. */
const planningAvailable = (s: ProjectSubject) => featureAvailable(s, 'issues') || featureAvailable(s, 'merge_requests');

const readProject: Rule<ProjectSubject> = (a, s) => canSeeVisibility(a as User | null, s.project.visibility_level, s.accessLevel);
const member = (level: number): Rule<ProjectSubject> => (a, s) => !!a && readProject(a, s) && s.accessLevel >= level;
const downloadCode: Rule<ProjectSubject> = (a, s) =>
  readProject(a, s) && (s.project.visibility_level !== Visibility.PRIVATE || s.accessLevel >= AccessLevel.REPORTER);

/** Issues: their feature on (a "private" feature is for members, guests included). */
const readIssue: Rule<ProjectSubject> = (a, s) => readProject(a, s) && featureAvailable(s, 'issues');

/**
 * Project abilities. Writability (archived, read-only during a storage move) is not an ability:
 * those refusals carry their own messages (see policies/code.ts).
 */
/** CI/CD: the builds (jobs) feature on for the caller (a "private" one is for reporters and up). */
const buildsAvailable = (s: ProjectSubject) => {
  const level = featureAccessLevel(s.project, 'builds');
  return level !== 'disabled' && (level !== 'private' || s.accessLevel >= AccessLevel.REPORTER);
};
const readBuild: Rule<ProjectSubject> = (a, s) =>
  readProject(a, s) && buildsAvailable(s) && (s.accessLevel >= AccessLevel.REPORTER || (s.project.settings as Record<string, unknown> | null)?.public_jobs !== false);

/** Environments: see policies on read_environment below. */
const readEnvironment: Rule<ProjectSubject> = (a, s) =>
  readProject(a, s) && featureAvailable(s, 'environments') && buildsAvailable(s)
  && (s.accessLevel >= AccessLevel.REPORTER
    || (s.project.visibility_level !== Visibility.PRIVATE && (s.project.settings as Record<string, unknown> | null)?.public_jobs !== false));
const writeEnvironment: Rule<ProjectSubject> = (a, s) => member(AccessLevel.DEVELOPER)(a, s) && featureAvailable(s, 'environments') && !s.project.archived;

/** Snippets: their feature on (a "private" feature is for members, guests included). */
const readSnippets: Rule<ProjectSubject> = (a, s) => readProject(a, s) && featureAvailable(s, 'snippets');

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
  /** Merge requests: their feature on, and a private project's for reporters and up (they show its code). */
  read_merge_request: (a, s) => downloadCode(a, s) && featureAvailable(s, 'merge_requests'),
  /** Open a merge request from this project's branches (push rights on the source). */
  create_merge_request_from: (a, s) => !!a && downloadCode(a, s) && s.accessLevel >= AccessLevel.DEVELOPER && featureAvailable(s, 'merge_requests'),
  /** Edit, close, reopen, assign any merge request (its author may too, whatever the level). */
  update_merge_request: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && featureAvailable(s, 'merge_requests'),
  destroy_merge_request: member(AccessLevel.OWNER),
  /** Settings, protected branches, deploy keys, sharing, housekeeping. */
  admin_project: member(PROJECT_ADMIN.min),
  admin_project_member: member(AccessLevel.MAINTAINER),
  /** List, create, rotate and revoke project access tokens: maintainers and up. */
  manage_resource_access_tokens: member(AccessLevel.MAINTAINER),
  /** Rename, change visibility, archive, transfer, delete. */
  owner_project: member(AccessLevel.OWNER),
  /** Delete a tag through the API (GitLab's admin_tag: developers; a push that deletes one needs update_tag). */
  delete_tag: (a, s) => !!a && downloadCode(a, s) && s.accessLevel >= AccessLevel.DEVELOPER,
  /** See labels: whoever may see the project's issues or merge requests (GitLab prevents both when both features are off). */
  read_label: (a, s) => readProject(a, s) && planningAvailable(s),
  /** Create, edit, prioritize, promote and delete labels: reporters and up, not on archived projects. */
  admin_label: (a, s) => member(AccessLevel.REPORTER)(a, s) && planningAvailable(s) && !s.project.archived,
  /** See milestones: as labels. */
  read_milestone: (a, s) => readProject(a, s) && planningAvailable(s),
  /** Create, edit, close and delete milestones: reporters and up, not on archived projects. */
  admin_milestone: (a, s) => member(AccessLevel.REPORTER)(a, s) && planningAvailable(s) && !s.project.archived,
  /** Ask to join: for callers who are not members yet (a pending request and the source's setting are checked where they are loaded). */
  request_access: (a, s) => !!a && readProject(a, s) && s.accessLevel < AccessLevel.GUEST,
  /** Edit or delete anyone's note (comment) on the project's noteables; authors may always edit their own. */
  admin_note: member(AccessLevel.MAINTAINER),
  /** Give a new note a `created_at` of one's choosing (imports): owners, and administrators (who count as owners). */
  set_note_created_at: member(AccessLevel.OWNER),
  /** Resolve anyone's merge request threads: developers and up (a note's author and the merge request's author may too). */
  resolve_note: member(AccessLevel.DEVELOPER),
  /** Fork the project: signed in, its code readable and its forking feature available to the caller. */
  fork_project: (a, s) => !!a && downloadCode(a, s) && featureAvailable(s, 'forking'),
  /** Mark the project as a fork of another (POST /projects/:id/fork/:forked_from_id) or undo it (DELETE /projects/:id/fork). */
  link_forked_project: member(AccessLevel.OWNER),
  remove_fork_project: member(AccessLevel.OWNER),
  /** React with an emoji (on what the caller may read): any signed-in caller who sees the project, as GitLab's guest access. */
  award_emoji: (a, s) => !!a && readProject(a, s),
  /** See the project's issues (a confidential one also needs read_confidential_issues, or to be its author or an assignee). */
  read_issue: readIssue,
  /** Open issues: any signed-in caller who sees them (non-members too on public and internal projects, as GitLab's guest access). */
  create_issue: (a, s) => !!a && readIssue(a, s) && !s.project.archived,
  /** Comment on issues: as create_issue. */
  create_issue_note: (a, s) => !!a && readIssue(a, s) && !s.project.archived,
  /** Edit, close and reopen any issue (their authors and assignees may too, whatever the level). */
  update_issue: (a, s) => member(AccessLevel.REPORTER)(a, s) && readIssue(a, s) && !s.project.archived,
  /** Set an issue's labels, milestone, assignees, due date, lock (GitLab drops those fields silently for others). */
  admin_issue: (a, s) => member(AccessLevel.REPORTER)(a, s) && readIssue(a, s) && !s.project.archived,
  /** See confidential issues whoever wrote them: reporters and up. */
  read_confidential_issues: (a, s) => member(CONFIDENTIAL_ISSUE_READER.min)(a, s) && readIssue(a, s),
  destroy_issue: (a, s) => member(AccessLevel.OWNER)(a, s) && readIssue(a, s),
  /** Give a new issue its own `created_at` or `iid` (imports): owners and administrators. */
  set_issue_created_at: (a, s) => member(AccessLevel.OWNER)(a, s) && readIssue(a, s),
  set_issue_iid: (a, s) => member(AccessLevel.OWNER)(a, s) && readIssue(a, s),
  /** CI/CD: see pipelines and jobs. The builds feature on; reporters and up, or anyone who sees the project when its jobs are public (public_jobs). */
  read_pipeline: readBuild,
  read_build: readBuild,
  /** Run a pipeline (POST /pipeline, play manual jobs): developers and up, not on archived projects. */
  create_pipeline: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s) && !s.project.archived,
  /** Retry and cancel pipelines: developers and up. */
  update_pipeline: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s) && !s.project.archived,
  /** Delete a pipeline: owners. */
  destroy_pipeline: (a, s) => member(AccessLevel.OWNER)(a, s) && buildsAvailable(s),
  /** Administer pipelines (GitLab's admin_pipeline): maintainers; any pipeline schedule, whoever owns it. */
  admin_pipeline: (a, s) => member(AccessLevel.MAINTAINER)(a, s) && buildsAvailable(s),
  /** Pass variables to pipelines (API, schedules): developers and up. */
  set_pipeline_variables: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s),
  /** See pipeline schedules: reporters and up (each schedule's own rules: policies/pipeline_schedules.ts). */
  read_pipeline_schedule: (a, s) => member(AccessLevel.REPORTER)(a, s) && buildsAvailable(s),
  /** Create pipeline schedules: whoever may run pipelines (a protected ref: who may update it). */
  create_pipeline_schedule: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s) && !s.project.archived,
  /** The project's CI settings that run pipelines: trigger tokens (GitLab's admin_build): maintainers. */
  admin_build: (a, s) => member(AccessLevel.MAINTAINER)(a, s) && buildsAvailable(s),
  /** Cancel, retry and play jobs: developers and up. */
  update_build: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s) && !s.project.archived,
  /** Erase any job (its log and artifacts): maintainers; a developer may erase the jobs they started (checked where the job is loaded). */
  erase_build: (a, s) => member(AccessLevel.MAINTAINER)(a, s) && buildsAvailable(s),
  /** Releases: whoever sees the project and its releases feature (a release's code, only who may download it: presenters/releases.ts). */
  read_release: (a, s) => readProject(a, s) && featureAvailable(s, 'releases'),
  /** Create, edit and delete releases and their links: developers and up, not on archived projects. */
  create_release: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && featureAvailable(s, 'releases') && !s.project.archived,
  update_release: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && featureAvailable(s, 'releases') && !s.project.archived,
  destroy_release: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && featureAvailable(s, 'releases') && !s.project.archived,
  /** Resource groups (resource_group:): see them and the jobs that hold or wait for them, change their process mode: developers and up. */
  read_resource_group: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s),
  update_resource_group: (a, s) => member(AccessLevel.DEVELOPER)(a, s) && buildsAvailable(s) && !s.project.archived,
  /** The project's runners: list, enable and disable them (GitLab's admin_runner on a project): maintainers. */
  admin_project_runners: member(RUNNER_MANAGER.min),
  /** Delete a job's artifacts, expire a project's artifacts in bulk: maintainers. */
  destroy_artifacts: (a, s) => member(AccessLevel.MAINTAINER)(a, s) && buildsAvailable(s),
  /** Project CI/CD variables: maintainers. */
  admin_cicd_variables: member(AccessLevel.MAINTAINER),
  /** Monitor settings (error tracking settings and client keys): maintainers. */
  admin_operations: member(AccessLevel.MAINTAINER),
  /** See the errors of the project's error tracker: reporters and up. */
  read_sentry_issue: member(AccessLevel.REPORTER),
  /** Resolve, ignore or reopen tracked errors: reporters and up. */
  update_sentry_issue: (a, s) => member(AccessLevel.REPORTER)(a, s) && !s.project.archived,
  /**
   * Environments and deployments: the environments feature on, and reporters and up, or (a public
   * or internal project whose jobs are public) whoever sees the project's pipelines.
   */
  read_environment: readEnvironment,
  read_deployment: readEnvironment,
  /** Create, edit, stop and delete (stopped) environments, report deployments: developers and up, not on archived projects. */
  create_environment: writeEnvironment,
  update_environment: writeEnvironment,
  stop_environment: writeEnvironment,
  destroy_environment: writeEnvironment,
  create_deployment: writeEnvironment,
  update_deployment: writeEnvironment,
  /** Delete deployments: maintainers. */
  destroy_deployment: (a, s) => member(AccessLevel.MAINTAINER)(a, s) && featureAvailable(s, 'environments'),
  /** The project's snippets: its snippets feature on for the caller (each snippet's own visibility: policies/snippets.ts). */
  read_snippet: readSnippets,
  /** Create project snippets: reporters and up, not on archived projects. */
  create_snippet: (a, s) => member(AccessLevel.REPORTER)(a, s) && readSnippets(a, s) && !s.project.archived,
  /** Comment on a project snippet the caller may read (checked where it is loaded): signed in, not on archived projects. */
  create_snippet_note: (a, s) => !!a && readSnippets(a, s) && !s.project.archived,
} satisfies Record<string, Rule<ProjectSubject>>;

const readGroup: Rule<GroupSubject> = (a, s) =>
  canSeeVisibility(a as User | null, s.group.visibility_level, s.accessLevel) || (!!a && !!s.accessBelow);
const groupMember = (level: number): Rule<GroupSubject> => (a, s) => !!a && readGroup(a, s) && s.accessLevel >= level;

const GROUP_RULES = {
  read_group: readGroup,
  read_group_member: readGroup,
  admin_group: groupMember(AccessLevel.OWNER),
  admin_group_member: groupMember(AccessLevel.OWNER),
  /** List, create, rotate and revoke group access tokens: owners. */
  manage_resource_access_tokens: groupMember(AccessLevel.OWNER),
  /** GitLab's subgroup_creation_level: 0 owners, 1 maintainers. */
  create_subgroup: (a, s) =>
    groupMember(s.group.subgroup_creation_level === 0 ? AccessLevel.OWNER : AccessLevel.MAINTAINER)(a, s),
  /** GitLab's project_creation_level: 0 nobody (but admins), 1 maintainers, 2 developers. */
  create_projects: (a, s) =>
    s.group.project_creation_level === 0
      ? !!a?.admin
      : groupMember(s.group.project_creation_level === 1 ? AccessLevel.MAINTAINER : AccessLevel.DEVELOPER)(a, s),
  /** Group labels: whoever reads the group. */
  read_label: readGroup,
  /** Create, edit and delete group labels (and promote project labels into the group): reporters and up. */
  admin_label: groupMember(AccessLevel.REPORTER),
  /** Group milestones: whoever reads the group. */
  read_milestone: readGroup,
  /** Create, edit, close and delete group milestones: reporters and up. */
  admin_milestone: groupMember(AccessLevel.REPORTER),
  /** Ask to join: for callers who are not members yet (a pending request and the group's setting are checked where they are loaded). */
  request_access: (a, s) => !!a && readGroup(a, s) && s.accessLevel < AccessLevel.GUEST,
  /** GitLab's read_namespace_via_membership (GET /namespaces/:id): members only, visibility is not enough. */
  read_namespace_via_membership: groupMember(AccessLevel.GUEST),
  /** Epics (GitLab premium): whoever reads the group sees its epics; confidential ones need read_confidential_epic. */
  read_epic: readGroup,
  /** The group's runners (GET /groups/:id/runners): maintainers and owners. */
  read_group_runners: groupMember(RUNNER_MANAGER.min),
  read_confidential_epic: groupMember(AccessLevel.REPORTER),
  /** Create epics: reporters and up. */
  create_epic: groupMember(AccessLevel.REPORTER),
  /** Edit, close and reopen epics: reporters and up. */
  admin_epic: groupMember(AccessLevel.REPORTER),
  /** Delete epics: owners. */
  destroy_epic: groupMember(AccessLevel.OWNER),
  /** Edit or delete anyone's note on the group's noteables (epics): maintainers and up, as on projects. */
  admin_note: groupMember(AccessLevel.MAINTAINER),
  /** Backdate a new note: owners and administrators. */
  set_note_created_at: groupMember(AccessLevel.OWNER),
  /** Group CI/CD variables: maintainers. */
  admin_cicd_variables: groupMember(AccessLevel.MAINTAINER),
  /** List, create and delete the group's deploy tokens: maintainers and owners. */
  admin_deploy_token: groupMember(AccessLevel.MAINTAINER),
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
