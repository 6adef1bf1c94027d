import { sql, type RawBuilder } from 'kysely';
import type { User } from '../db/schema/core.js';
import type { Issue } from '../db/schema/work_items.js';
import { AccessLevel } from './access.js';

/**
 * Permission rules that are asked both of one loaded record (JS) and of whole lists (SQL), each
 * written once, its two forms side by side. test/policies/rules_agreement.test.ts checks, for
 * every rule below, that the SQL form selects exactly the rows the JS form allows on a generated
 * population (every access level, admins, external and anonymous callers, each visibility).
 *
 * A level here is a member level: project_access_level / group_access_level in JS, the
 * project_authorizations / group_authorizations functions in SQL (the access rules themselves:
 * migration 0700_access_rules). Whether an administrator passes is the caller's part (they count
 * as owners through effectiveLevel in abilities.ts), except for the rules that take the actor.
 */

type Condition = RawBuilder<boolean>;

/** Who asks, as the rules need it (null: anonymous). */
export type RuleActor = Pick<User, 'id' | 'admin'> | null;

/** A rule that holds from some access level up: the same comparison for a loaded level and in SQL. */
export interface LevelRule {
  readonly min: number;
  /** JS: someone at `level` (a project's or group's level, or one membership's) passes. */
  allows(level: number): boolean;
  /** SQL: the ids of the projects where the user passes (`x in (...)`). */
  projectIds(userId: number): RawBuilder<unknown>;
  /** SQL: the ids of the groups where the user passes. */
  groupIds(userId: number): RawBuilder<unknown>;
  /** SQL: the level in `column` (a membership's, a share's) passes. */
  level(column: RawBuilder<unknown>): Condition;
}

/**
 * The rule "`min` and up". `min` is a real level (minimal access and up): level 0 is having no
 * grant at all, which the SQL form, a filter on the grants, cannot select. A constant bound is
 * written as a literal, as the SQL had it.
 */
export function atLeast(min: number): LevelRule {
  const bound = Number.isSafeInteger(min) ? sql.lit(min) : sql.val(min);
  return {
    min,
    allows: (level) => level >= min,
    projectIds: (userId) => sql`(select pa.project_id from project_authorizations(${userId}) pa where pa.access_level >= ${bound})`,
    groupIds: (userId) => sql`(select ga.group_id from group_authorizations(${userId}) ga where ga.access_level >= ${bound})`,
    level: (column) => sql<boolean>`${column} >= ${bound}`,
  };
}

/** Any grant at all: minimal access and up (there is no grant below it). */
export const ANY_ACCESS = atLeast(AccessLevel.MINIMAL_ACCESS);
/** A member: guest and up (minimal access is not membership of projects, nor a seat, nor a member shown). */
export const MEMBER = atLeast(AccessLevel.GUEST);
/** Reporters and up: confidential issues whoever wrote them, a private project's code and merge requests. */
export const REPORTER = atLeast(AccessLevel.REPORTER);
/** Developers and up: push, erase the jobs they started, artifacts with `artifacts:access: developer`. */
export const DEVELOPER = atLeast(AccessLevel.DEVELOPER);
/** Maintainers and up: the project's or group's runners and deploy keys, settings. */
export const MAINTAINER = atLeast(AccessLevel.MAINTAINER);
/** Owners (the `owned` filters of lists). */
export const OWNER = atLeast(AccessLevel.OWNER);

/** Confidential issues whoever wrote them: reporters and up (GitLab's read_confidential_issues). */
export const CONFIDENTIAL_ISSUE_READER = REPORTER;
/** A runner's jobs are listed in the projects where the caller is a reporter and up (GitLab's RunnerJobsFinder). */
export const RUNNER_JOB_READER = REPORTER;
/** Runners a user manages: those of projects and groups they maintain. */
export const RUNNER_MANAGER = MAINTAINER;
/** Deploy keys a user sees (and renames): those of the projects they maintain (admin_project). */
export const PROJECT_ADMIN = MAINTAINER;
/** A developer may erase the jobs they started themselves (others' need erase_build). */
export const OWN_JOB_ERASER = DEVELOPER;

/**
 * Does the actor read a project's confidential issues, whoever wrote them? Administrators do.
 * JS: over the actor's member level on the project; SQL: the project id in `projectId`.
 */
export const readsConfidentialIssues = {
  allows(actor: RuleActor, memberLevel: number): boolean {
    return !!actor && (actor.admin || CONFIDENTIAL_ISSUE_READER.allows(memberLevel));
  },
  where(actor: RuleActor, projectId: RawBuilder<unknown>): Condition {
    if (!actor) return sql<boolean>`false`;
    if (actor.admin) return sql<boolean>`true`;
    return sql<boolean>`${projectId} in ${CONFIDENTIAL_ISSUE_READER.projectIds(actor.id)}`;
  },
};

/**
 * GitLab's confidential-issue rule: a confidential issue is seen by its author, its assignees,
 * those who read confidential issues (readsConfidentialIssues) and administrators. Whether the
 * caller reads the project's issues at all is read_issue's part.
 */
export const confidentialIssue = {
  allows(actor: RuleActor, issue: Pick<Issue, 'confidential' | 'author_id'>, assigneeIds: number[], mayReadConfidential: boolean): boolean {
    if (!issue.confidential || mayReadConfidential) return true;
    if (!actor) return false;
    return issue.author_id === actor.id || assigneeIds.includes(actor.id);
  },
  /** SQL: the issue aliased `i` passes. */
  where(actor: RuleActor): Condition {
    if (!actor) return sql<boolean>`not i.confidential`;
    if (actor.admin) return sql<boolean>`true`;
    return sql<boolean>`(not i.confidential or i.author_id = ${actor.id}
      or exists (select 1 from issue_assignees a where a.issue_id = i.id and a.user_id = ${actor.id})
      or ${readsConfidentialIssues.where(actor, sql`i.project_id`)})`;
  },
};

/**
 * GitLab's read_job_artifacts on top of read_build: `artifacts:access` (all, developer,
 * maintainer, none) and the older `artifacts:public: false` (= developer) of the job.
 */
export function mayReadJobArtifacts(build: { options: unknown }, accessLevel: number, admin: boolean): boolean {
  const art = (build.options as { artifacts?: { public?: boolean | null; access?: string | null } | null }).artifacts;
  const access = art?.access ?? (art?.public === false ? 'developer' : 'all');
  if (access === 'all') return true;
  if (access === 'none') return false;
  if (admin) return true;
  if (access === 'developer') return DEVELOPER.allows(accessLevel);
  if (access === 'maintainer') return MAINTAINER.allows(accessLevel);
  return false;
}
