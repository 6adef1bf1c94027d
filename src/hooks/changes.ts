/**
 * The `changes` block of an update's payload: each field that changed, as { previous, current },
 * in the payload's own forms (timestamps in ISO 8601).
 */
export const ISSUE_HOOK_FIELDS = ['title', 'description', 'confidential', 'discussion_locked', 'due_date', 'milestone_id', 'issue_type', 'state_id', 'closed_at', 'time_estimate', 'updated_at'] as const;
export const MERGE_REQUEST_HOOK_FIELDS = ['title', 'description', 'source_branch', 'target_branch', 'milestone_id', 'discussion_locked', 'squash', 'state_id', 'merge_status', 'time_estimate', 'updated_at'] as const;

const form = (v: unknown) => (v instanceof Date ? v.toISOString() : v === undefined ? null : v);

export function rowChanges<T extends object>(before: T, after: T, fields: readonly string[]): Record<string, { previous: unknown; current: unknown }> {
  const out: Record<string, { previous: unknown; current: unknown }> = {};
  for (const f of fields) {
    const previous = form((before as Record<string, unknown>)[f]);
    const current = form((after as Record<string, unknown>)[f]);
    if (JSON.stringify(previous) !== JSON.stringify(current)) out[f === 'issue_type' ? 'type' : f] = { previous, current };
  }
  return out;
}
