import type { TSchema } from 'typebox';
import type { Cairn } from '../context.js';
import type { ProjectAbility } from '../policies/abilities.js';
import type { ProjectAccess } from '../policies/projects.js';

/**
 * Awardables: what people react to with an emoji (merge requests, issues, snippets, and the notes
 * on them). Each kind registers ONCE, with one object, and src/api/award_emoji/routes.ts serves
 * GitLab's emoji reactions API under its prefix: list, get, award, delete, on the thing itself
 * (`<prefix>/award_emoji[/:award_id]`) and, with `notes`, on each of its notes
 * (`<prefix>/notes/:note_id/award_emoji[/:award_id]`, awardable_type "Note").
 *
 * Adding a kind is: write its registration and add it to AWARDABLES in ./index.ts. Nothing
 * else. Issues (./issue.ts) are the model:
 *
 *   export const issueAwardable = defineAwardable({
 *     type: 'Issue',                              // awardable_type, and the noteable_type of its notes
 *     prefix: '/projects/:id/issues/:issue_iid',  // below /api/v4
 *     params: { issue_iid: RowId },
 *     read: 'read_issue',                         // project ability to see it (404 without)
 *     notes: true,
 *     async find({ cairn, access, params }) {     // 404 when absent or hidden from access.user (confidential)
 *       const { issue } = await findIssueOrFail(cairn.db, access, access.user, Number(params.issue_iid));
 *       return { id: issue.id };
 *     },
 *   });
 *
 * Who may award: whoever may read the thing and has the project's award_emoji ability; only the
 * awarder or an administrator removes an award.
 */
export interface AwardableKind {
  /** `awardable_type` of awards on it, as GitLab writes it; also the `noteable_type` of its notes. */
  type: string;
  /** Its routes' prefix below /api/v4; `:id` is the project. */
  prefix: string;
  /** Schemas of its own path parameters (the project's `:id` is added). */
  params: Record<string, TSchema>;
  /** The project ability that shows it. */
  read: ProjectAbility;
  /** Every call needs a signed-in caller (GitLab's merge request API). */
  signedIn?: boolean;
  /** Its notes take awards too. */
  notes?: boolean;
  /** The one named by the path, for the caller whose project access the guard loaded; throws 404 otherwise. */
  find(ctx: { cairn: Cairn; access: ProjectAccess; params: Record<string, unknown> }): Promise<{ id: number }>;
}

/** A registration, type-checked; checks that its prefix starts with the project's. */
export function defineAwardable(kind: AwardableKind): AwardableKind {
  if (!kind.prefix.startsWith('/projects/:id/')) throw new Error(`awardable ${kind.type}: its prefix must start with /projects/:id/`);
  return kind;
}
