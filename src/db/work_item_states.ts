import { defineMachine } from './state_machine.js';

/**
 * The states of merge requests, issues, epics and milestones: GitLab's state ids and names, and
 * each kind's machine. Finders, presenters, services and pages all read the ids from here.
 */

/** Merge requests' state_id. */
export const MR_STATE = { opened: 1, closed: 2, merged: 3, locked: 4 } as const;
export type MergeRequestStateName = keyof typeof MR_STATE;
/** State names by merge requests' state_id. */
export const MR_STATE_NAMES: Record<number, MergeRequestStateName> = { 1: 'opened', 2: 'closed', 3: 'merged', 4: 'locked' };

export const MERGE_REQUEST_MACHINE = defineMachine('merge_requests', 'state_id', {
  close: { from: [MR_STATE.opened, MR_STATE.locked], to: MR_STATE.closed },
  reopen: { from: [MR_STATE.closed], to: MR_STATE.opened },
  /** A merge starts: one at a time. */
  lock: { from: [MR_STATE.opened], to: MR_STATE.locked },
  /** The merge did not happen (failed, or its process died before the target moved). */
  unlock: { from: [MR_STATE.locked], to: MR_STATE.opened },
  /** The merge commit reached the target. */
  merge: { from: [MR_STATE.locked], to: MR_STATE.merged },
  /** Merge when the pipeline succeeds: recorded while the request is open. */
  autoMerge: { from: [MR_STATE.opened] },
});

/** Issues' state_id. */
export const ISSUE_STATE = { opened: 1, closed: 2 } as const;
/** State names by issues' state_id. */
export const ISSUE_STATE_NAMES: Record<number, 'opened' | 'closed'> = { 1: 'opened', 2: 'closed' };

export const ISSUE_MACHINE = defineMachine('issues', 'state_id', {
  close: { from: [ISSUE_STATE.opened], to: ISSUE_STATE.closed },
  reopen: { from: [ISSUE_STATE.closed], to: ISSUE_STATE.opened },
});

/** Epics' state_id. */
export const EPIC_STATE = { opened: 1, closed: 2 } as const;

export const EPIC_MACHINE = defineMachine('epics', 'state_id', {
  close: { from: [EPIC_STATE.opened], to: EPIC_STATE.closed },
  reopen: { from: [EPIC_STATE.closed], to: EPIC_STATE.opened },
});

/** Milestones' state: each event, the states it leaves and the state it reaches. */
export const MILESTONE_MACHINE = defineMachine('milestones', 'state', {
  close: { from: ['active'], to: 'closed' },
  activate: { from: ['closed'], to: 'active' },
});
