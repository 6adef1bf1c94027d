import { iso, type PresentContext } from './users.js';

/** A milestone row with the full path of its project or group (finders/milestones.ts loads it). */
export interface MilestoneView {
  id: number;
  iid: number;
  project_id: number | null;
  group_id: number | null;
  title: string;
  description: string | null;
  state: string;
  due_date: string | null;
  start_date: string | null;
  created_at: Date;
  updated_at: Date;
  project_full_path: string | null;
  group_full_path: string | null;
}

/** Today as a calendar date (UTC), the day `expired` is measured against. */
export function today(now: Date = new Date()): string {
  return now.toISOString().slice(0, 10);
}

/**
 * GitLab's Milestone: project_id for a project milestone, group_id for a group milestone; expired
 * once its due date has passed.
 */
export function presentMilestone(ctx: PresentContext, m: MilestoneView, day: string = today()) {
  const owner = m.project_id !== null ? { project_id: m.project_id } : { group_id: m.group_id! };
  const webUrl =
    m.project_id !== null ? `${ctx.baseUrl}/${m.project_full_path}/-/milestones/${m.iid}` : `${ctx.baseUrl}/groups/${m.group_full_path}/-/milestones/${m.iid}`;
  return {
    id: m.id,
    iid: m.iid,
    ...owner,
    title: m.title,
    description: m.description,
    state: m.state,
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
    due_date: m.due_date,
    start_date: m.start_date,
    expired: m.due_date !== null && m.due_date < day,
    web_url: webUrl,
  };
}
