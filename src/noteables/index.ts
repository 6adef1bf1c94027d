import { commitNoteable } from './commit.js';
import { issueNoteable } from './issue.js';
import type { NoteableKind } from './registry.js';

/** Every noteable kind; src/api/notes/routes.ts serves discussions and notes for each. Add a kind here (see ./registry.ts). */
export const NOTEABLES: NoteableKind[] = [commitNoteable, issueNoteable];

export { commitNoteable };
export type { FoundNoteable, NoteableKind } from './registry.js';
