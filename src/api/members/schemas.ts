import { Type } from 'typebox';
import { BILLABLE_SORTS } from '../../finders/billable_members.js';
import { MAX_ROW_ID } from '../../lib/ids.js';
import { ACCEPTED_ACCESS_LEVELS } from '../../policies/members.js';

/**
 * Input schemas of the members, access requests, billable members and sharing routes, with
 * Grape's wording on failure: a value of the wrong type "is invalid", one outside its list "does
 * not have a valid value" (an integer with `enum` is checked for its type first, as Grape does).
 */

/**
 * A row id in the path (`:user_id`, `:member_id`, `:group_id`): digits, "<name> is invalid"
 * otherwise. Kept a string: an id beyond the integer range names no row and is a 404, which the
 * handler answers (pathInt), where an integer schema would answer 400.
 */
const PathRowId = Type.String({ pattern: '^\\d+$' });

export const MemberParams = Type.Object({ id: Type.String(), user_id: PathRowId });
export const MemberIdParams = Type.Object({ id: Type.String(), member_id: PathRowId });
export const ShareParams = Type.Object({ id: Type.String(), group_id: PathRowId });

/** An access level a membership may be given at all (which ones suit the source is the model's check). */
const AccessLevelParam = Type.Integer({ enum: ACCEPTED_ACCESS_LEVELS });

/**
 * YEAR-MONTH-DAY, or a timestamp that is cut to its date; empty (or null) clears it. That the
 * date exists and the cut are dateParam's (params.ts).
 */
const DateParam = Type.String({ pattern: '^\\s*(?:\\d{4}-\\d{2}-\\d{2}(?:[T ][\\d:.]+(?:Z|[+-]\\d{2}:?\\d{2})?)?)?\\s*$' });

/**
 * Grape's CommaSeparatedToIntegerArray: `name[]=1&name[]=2`, a JSON array, or "1,2". Parsed by
 * intArrayParam (params.ts): a comma list needs splitting, and an id beyond the integer range
 * is left out (it matches nothing) rather than refused. The string form comes first so that a
 * comma list is not wrapped into an array by the validator's coercion.
 */
const IntegerList = Type.Union([Type.String(), Type.Array(Type.Union([Type.Integer(), Type.String()]))]);

export const MemberListQuery = Type.Object({
  query: Type.Optional(Type.String()),
  user_ids: Type.Optional(IntegerList),
  skip_users: Type.Optional(IntegerList),
  state: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('awaiting')])),
  show_seat_info: Type.Optional(Type.Boolean()),
});

export const MemberQuery = Type.Object({ show_seat_info: Type.Optional(Type.Boolean()) });

export const MemberCreateBody = Type.Object({
  access_level: AccessLevelParam,
  /** One user id, or several as "1,2,3" (answered with a status). */
  user_id: Type.Union([Type.String(), Type.Integer()]),
  expires_at: Type.Optional(DateParam),
  invite_source: Type.Optional(Type.String()),
  /** An array or a comma list of ci, code, issues: split and checked by the handler. */
  tasks_to_be_done: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  tasks_project_id: Type.Optional(Type.Integer({ minimum: -MAX_ROW_ID, maximum: MAX_ROW_ID })),
});

export const MemberUpdateBody = Type.Object({
  access_level: AccessLevelParam,
  expires_at: Type.Optional(DateParam),
});

export const MemberDeleteQuery = Type.Object({
  skip_subresources: Type.Optional(Type.Boolean()),
  /** Accepted as GitLab does; Cairn has no issuables of its own to unassign here. */
  unassign_issuables: Type.Optional(Type.Boolean()),
});

export const AccessRequestApproveBody = Type.Object({ access_level: Type.Optional(AccessLevelParam) });

export const BillableMembersQuery = Type.Object({
  search: Type.Optional(Type.String()),
  sort: Type.Optional(Type.Union(BILLABLE_SORTS.map((s) => Type.Literal(s)))),
});

const ShareBody = (levels: number[]) => Type.Object({
  group_id: Type.Integer({ minimum: -MAX_ROW_ID, maximum: MAX_ROW_ID }),
  group_access: Type.Integer({ enum: levels }),
  expires_at: Type.Optional(DateParam),
});
/** A project is shared at most as Maintainer. */
export const ProjectShareBody = ShareBody([10, 20, 30, 40]);
export const GroupShareBody = ShareBody([10, 20, 30, 40, 50]);
