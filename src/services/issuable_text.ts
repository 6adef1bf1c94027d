import { validationFailed } from '../plugins/errors.js';

// An issuable's title and description, as GitLab's Issuable validations check them: one rule for
// issues and epics.

const TITLE_MAX = 255;
const DESCRIPTION_MAX = 1_048_576;

/**
 * The title (when creating, or when given) must not be blank and has at most 255 characters; the
 * description at most 1 MiB. Otherwise 400 `{"message": {"title": [...], "description": [...]}}`.
 */
export function checkIssuableText(p: { title?: string; description?: string | null }, creating: boolean): void {
  const errors: Record<string, string[]> = {};
  if (creating || p.title !== undefined) {
    const title = p.title?.trim() ?? '';
    if (!title) errors.title = ["can't be blank"];
    else if ([...title].length > TITLE_MAX) errors.title = [`is too long (maximum is ${TITLE_MAX} characters)`];
  }
  if (p.description && p.description.length > DESCRIPTION_MAX) errors.description = [`is too long (maximum is ${DESCRIPTION_MAX} characters)`];
  if (Object.keys(errors).length) throw validationFailed(errors);
}
