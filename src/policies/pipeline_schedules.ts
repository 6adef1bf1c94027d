import type { User } from '../db/schema/core.js';
import { can, type AbilityActor, type ProjectSubject } from './abilities.js';

/**
 * GitLab's Ci::PipelineSchedulePolicy and Ci::TriggerPolicy: what a user may do to one schedule
 * or trigger token, which depends on who owns it. The project-level abilities they build on
 * (read_pipeline_schedule, admin_pipeline, update_build, admin_build) are in abilities.ts; a
 * protected ref's rule (only who may update the ref may create, edit or play a schedule on it)
 * needs the database and is checked where the schedule is handled (policies/branches.ts canUpdateRef).
 */
type Owned = { owner_id: number | null };

export function ownedBy(actor: AbilityActor, thing: Owned): boolean {
  return !!actor && thing.owner_id === actor.id;
}

/** Delete, take over, read the variables of a schedule: maintainers, and its owner while a developer. */
export function canAdminSchedule(actor: AbilityActor, subject: ProjectSubject, schedule: Owned): boolean {
  return can(actor, 'admin_pipeline', subject) || (ownedBy(actor, schedule) && can(actor, 'update_build', subject));
}

/** Edit a schedule and its variables: its owner while a developer, and administrators. */
export function canUpdateSchedule(actor: AbilityActor, subject: ProjectSubject, schedule: Owned): boolean {
  return (!!actor?.admin && can(actor, 'read_pipeline_schedule', subject)) || (ownedBy(actor, schedule) && can(actor, 'update_build', subject));
}

/** Edit a trigger token (its description): its owner while a maintainer, and administrators. */
export function canAdminTrigger(actor: AbilityActor, subject: ProjectSubject, trigger: Owned): boolean {
  return can(actor, 'admin_build', subject) && (ownedBy(actor, trigger) || !!actor?.admin);
}

/** A trigger's token is shown in full to its owner only (others see its first four characters). */
export function seesTriggerToken(actor: Pick<User, 'id'> | null, trigger: Owned): boolean {
  return !!actor && trigger.owner_id === actor.id;
}
