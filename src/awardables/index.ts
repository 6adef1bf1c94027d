import { mergeRequestAwardable } from './merge_request.js';
import type { AwardableKind } from './registry.js';

/**
 * Every awardable kind; src/api/award_emoji/routes.ts serves the emoji reactions API for each.
 * Issues (and their notes) register here once the issues API lands: one defineAwardable object
 * (see ./registry.ts for the whole of it).
 */
export const AWARDABLES: AwardableKind[] = [mergeRequestAwardable];

export type { AwardableKind } from './registry.js';
