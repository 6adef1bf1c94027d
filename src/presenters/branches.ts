import type { ParsedCommit } from '../git/catfile.js';
import { presentCommit, type CommitContext } from './commits.js';

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

export function presentBranch(b: BranchView, ctx: CommitContext) {
  return {
    name: b.name,
    commit: presentCommit(ctx, b.commit),
    merged: b.merged,
    protected: b.protected,
    developers_can_push: b.developersCanPush,
    developers_can_merge: b.developersCanMerge,
    can_push: b.canPush,
    default: b.isDefault,
    web_url: `${ctx.baseUrl}/${ctx.projectFullPath}/-/tree/${b.name.split('/').map(encodeURIComponent).join('/')}`,
  };
}
