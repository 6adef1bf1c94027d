import { Type } from 'typebox';
import { Timestamp, strict } from './common.js';
import { UserBasicSchema } from './users.js';

/** GitLab's AwardEmoji entity (src/presenters/award_emoji.ts). */
export const AwardEmojiSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    user: UserBasicSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
    awardable_id: Type.Integer(),
    awardable_type: Type.String(),
  },
  strict,
);
