import type { AwardWithUser } from '../services/award_emoji.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

/** GitLab's AwardEmoji entity. */
export function presentAwardEmoji(ctx: PresentContext, a: AwardWithUser) {
  return {
    id: a.id,
    name: a.name,
    user: presentUserBasic(ctx, a.user),
    created_at: iso(a.created_at),
    updated_at: iso(a.updated_at),
    awardable_id: a.awardable_id,
    awardable_type: a.awardable_type,
  };
}
