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

export function presentTag(t: TagView, ctx: CommitContext) {
  return {
    name: t.name,
    message: t.annotation ? t.annotation.message.replace(/\n$/, '') : '',
    target: t.target,
    commit: t.commit ? presentCommit(ctx, t.commit) : null,
    release: null,
    protected: t.protected,
    created_at: t.annotation?.tagger ? signatureDate(t.annotation.tagger) : null,
  };
}
