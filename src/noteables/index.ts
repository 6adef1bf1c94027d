import { commitNoteable } from './commit.js';
import { epicNoteable } from './epic.js';
import { issueNoteable } from './issue.js';
import { mergeRequestNoteable } from './merge_request.js';
import type { NoteableKind } from './registry.js';
import { snippetNoteable } from './snippet.js';

/** Every noteable kind; src/api/notes/routes.ts serves discussions and notes for each. Add a kind here (see ./registry.ts). */
export const NOTEABLES: NoteableKind[] = [commitNoteable, issueNoteable, mergeRequestNoteable, snippetNoteable, epicNoteable];

export { commitNoteable, epicNoteable, issueNoteable, mergeRequestNoteable, snippetNoteable };
export type { FoundNoteable, NoteableKind } from './registry.js';
