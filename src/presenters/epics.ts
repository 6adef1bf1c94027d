import type { Epic, Label } from '../db/schema/work_items.js';
import type { User } from '../db/schema/core.js';
import { presentLabelBasic } from './labels.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';
import { EPIC_STATE } from '../db/work_item_states.js';

/** What an epic's form shows beyond its row, loaded for a page at once (finders/epics.ts). */
export interface EpicExtras {
  groupFullPath: string;
  author: User | null;
  labels: Label[];
  upvotes: number;
  downvotes: number;
}

/** GitLab's default epic colour. */
const EPIC_COLOR = '#1068bf';

/**
 * GitLab's Epic entity. Dates are fixed dates only (no milestones feed them): a set start or due
 * date is a fixed one, and start_date/end_date show it.
 */
export function presentEpic(ctx: PresentContext, epic: Epic, x: EpicExtras, opts: { labelDetails?: boolean } = {}) {
  const api = `${ctx.baseUrl}/api/v4/groups/${epic.group_id}`;
  const webUrl = `${ctx.baseUrl}/groups/${x.groupFullPath}/-/epics/${epic.iid}`;
  return {
    id: epic.id,
    iid: epic.iid,
    group_id: epic.group_id,
    parent_id: null,
    parent_iid: null,
    title: epic.title,
    description: epic.description,
    state: epic.state_id === EPIC_STATE.closed ? ('closed' as const) : ('opened' as const),
    confidential: epic.confidential,
    web_url: webUrl,
    web_edit_url: `${webUrl}/edit`,
    reference: `&${epic.iid}`,
    references: { short: `&${epic.iid}`, relative: `&${epic.iid}`, full: `${x.groupFullPath}&${epic.iid}` },
    author: x.author ? presentUserBasic(ctx, x.author) : null,
    start_date: epic.start_date,
    start_date_is_fixed: epic.start_date !== null,
    start_date_fixed: epic.start_date,
    start_date_from_milestones: null,
    start_date_from_inherited_source: null,
    end_date: epic.due_date,
    due_date: epic.due_date,
    due_date_is_fixed: epic.due_date !== null,
    due_date_fixed: epic.due_date,
    due_date_from_milestones: null,
    due_date_from_inherited_source: null,
    created_at: iso(epic.created_at)!,
    updated_at: iso(epic.updated_at)!,
    closed_at: iso(epic.closed_at),
    labels: opts.labelDetails ? x.labels.map((l) => presentLabelBasic(l)) : x.labels.map((l) => l.title),
    upvotes: x.upvotes,
    downvotes: x.downvotes,
    color: EPIC_COLOR,
    text_color: '#FFFFFF',
    _links: { self: `${api}/epics/${epic.iid}`, epic_issues: `${api}/epics/${epic.iid}/issues`, group: api, parent: null },
  };
}
