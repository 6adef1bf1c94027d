import type { Label } from '../db/schema/work_items.js';
import type { User } from '../db/schema/core.js';
import { textColorFor } from '../lib/colors.js';
import { renderMarkdown } from '../lib/markdown.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

export interface LabelCounts {
  open_issues_count: number;
  closed_issues_count: number;
  open_merge_requests_count: number;
}

/** What the label forms show beyond the row; callers load it for a whole page (finders/labels.ts). */
export interface LabelExtras {
  /** Issue and merge request counts, only when asked for (`with_counts`). */
  counts?: LabelCounts;
  subscribed: boolean;
}

/** GitLab's LabelBasic: the label as issues, merge requests and label events show it. */
export function presentLabelBasic(label: Label) {
  return {
    id: label.id,
    name: label.title,
    color: label.color,
    description: label.description,
    description_html: label.description === null ? null : renderMarkdown(label.description),
    text_color: textColorFor(label.color),
  };
}

/** GitLab's Label (and GroupLabel): the basic form, counts when asked for, and the caller's subscription. */
export function presentLabel(label: Label, extras: LabelExtras) {
  return {
    ...presentLabelBasic(label),
    ...(extras.counts ?? {}),
    subscribed: extras.subscribed,
  };
}

/** GitLab's ProjectLabel: a label as a project sees it, with its priority there. */
export function presentProjectLabel(label: Label, priority: number | null, extras: LabelExtras) {
  return {
    ...presentLabel(label, extras),
    priority,
    is_project_label: label.project_id !== null,
  };
}

export interface LabelEventRow {
  event: { id: number; action: string; target_type: string; target_id: number; created_at: Date };
  label: Label | null;
  user: User | null;
}

/** GitLab's ResourceLabelEvent: one label added to or removed from an issue or merge request. */
export function presentResourceLabelEvent(ctx: PresentContext, row: LabelEventRow) {
  return {
    id: row.event.id,
    user: row.user ? presentUserBasic(ctx, row.user) : null,
    created_at: iso(row.event.created_at),
    resource_type: row.event.target_type,
    resource_id: row.event.target_id,
    label: row.label ? presentLabelBasic(row.label) : null,
    action: row.event.action,
  };
}
