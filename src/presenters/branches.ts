import type { ParsedCommit } from '../git/catfile.js';
import { presentCommit, type CommitLinkContext } from './commit_basic.js';

export interface BranchView {
  name: string;
  commit: ParsedCommit;
  merged: boolean;
  protected: boolean;
  developersCanPush: boolean;
  developersCanMerge: boolean;
  canPush: boolean;
  isDefault: boolean;
}

export function presentBranch(b: BranchView, ctx: CommitLinkContext) {
  return {
    name: b.name,
    commit: presentCommit(b.commit, ctx),
    merged: b.merged,
    protected: b.protected,
    developers_can_push: b.developersCanPush,
    developers_can_merge: b.developersCanMerge,
    can_push: b.canPush,
    default: b.isDefault,
    web_url: `${ctx.externalUrl}/${ctx.projectFullPath}/-/tree/${b.name.split('/').map(encodeURIComponent).join('/')}`,
  };
}
