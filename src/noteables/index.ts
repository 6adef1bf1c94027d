import { commitNoteable } from './commit.js';
import { epicNoteable } from './epic.js';
import { issueNoteable } from './issue.js';
import { mergeRequestNoteable } from './merge_request.js';
import type { NoteableKind } from './registry.js';
import { snippetNoteable } from './snippet.js';

/**
 * Every noteable kind, the one registry of issuables: src/api/notes/routes.ts serves discussions
 * and notes for each, src/api/award_emoji, src/api/subscriptions and src/api/resource_label_events
 * what each takes. Add a kind here (see ./registry.ts).
 */
export const NOTEABLES: NoteableKind[] = [commitNoteable, issueNoteable, mergeRequestNoteable, snippetNoteable, epicNoteable];

export { commitNoteable, epicNoteable, issueNoteable, mergeRequestNoteable, snippetNoteable };
export type { FoundNoteable, GroupNoteableKind, NoteableKind, ProjectNoteableKind } from './registry.js';
