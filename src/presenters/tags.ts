import { signatureDate, type ParsedCommit } from '../git/catfile.js';
import type { ParsedTag } from '../git/refs.js';
import { presentCommit, type CommitContext } from './commits.js';

export interface TagView {
  name: string;
  /** What the ref points at: the tag object for annotated tags, else the commit. */
  target: string;
  annotation: ParsedTag | null;
  commit: ParsedCommit | null;
  protected: boolean;
}

/** The tag's release as GitLab's tag entity shows it (null without one, or for who may not read releases). */
export type TagRelease = { tag_name: string; description: string } | null;

export function presentTag(t: TagView, ctx: CommitContext, release: TagRelease = null) {
  return {
    name: t.name,
    message: t.annotation ? t.annotation.message.replace(/\n$/, '') : '',
    target: t.target,
    commit: t.commit ? presentCommit(ctx, t.commit) : null,
    release,
    protected: t.protected,
    created_at: t.annotation?.tagger ? signatureDate(t.annotation.tagger) : null,
  };
}
