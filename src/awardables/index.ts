import { issueAwardable } from './issue.js';
import { mergeRequestAwardable } from './merge_request.js';
import type { AwardableKind } from './registry.js';
import { snippetAwardable } from './snippet.js';

/**
 * Every awardable kind; src/api/award_emoji/routes.ts serves the emoji reactions API for each.
 * A new kind is one defineAwardable object (see ./registry.ts) added here.
 */
export const AWARDABLES: AwardableKind[] = [issueAwardable, mergeRequestAwardable, snippetAwardable];

export type { AwardableKind } from './registry.js';
