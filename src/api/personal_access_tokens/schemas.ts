import { Type, type Static } from 'typebox';
import type { TokenFilters } from '../../finders/tokens.js';
import { calendarDateParam, RowId, timestampParam } from '../params.js';

const Str = Type.String();
const Bool = Type.Boolean();
/** Arrays arrive as `scopes[]=a&scopes[]=b`, a JSON array, or GitLab's comma-separated string. */
export const StringList = Type.Union([Type.Array(Type.String()), Type.String()]);

export const ImpersonationTokenParams = Type.Object({ user_id: RowId, impersonation_token_id: RowId });

/** GitLab's PersonalAccessTokensFinder filters, as the token lists take them (personal, project and group access tokens). */
export const TokenFilterFields = {
  revoked: Type.Optional(Bool),
  state: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('inactive')])),
  created_before: Type.Optional(Str),
  created_after: Type.Optional(Str),
  last_used_before: Type.Optional(Str),
  last_used_after: Type.Optional(Str),
  expires_before: Type.Optional(Str),
  expires_after: Type.Optional(Str),
  search: Type.Optional(Str),
};

/** The finder's filters from a token list's query; 400 for a malformed date or time. */
export function tokenFilters(q: { [K in keyof typeof TokenFilterFields]?: Static<(typeof TokenFilterFields)[K]> } & { sort?: string }): TokenFilters {
  return {
    revoked: q.revoked,
    state: q.state,
    createdBefore: timestampParam('created_before', q.created_before),
    createdAfter: timestampParam('created_after', q.created_after),
    lastUsedBefore: timestampParam('last_used_before', q.last_used_before),
    lastUsedAfter: timestampParam('last_used_after', q.last_used_after),
    expiresBefore: dateParam('expires_before', q.expires_before),
    expiresAfter: dateParam('expires_after', q.expires_after),
    search: q.search || undefined,
    sort: q.sort,
  };
}

/** GET /personal_access_tokens (route() adds page and per_page). */
export const TokenListQuery = Type.Object({
  user_id: Type.Optional(Type.Union([RowId, Type.Literal('')])),
  ...TokenFilterFields,
  sort: Type.Optional(Str),
});

export const ImpersonationListQuery = Type.Object({
  state: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('active'), Type.Literal('inactive')])),
});

export const RotateBody = Type.Object({ expires_at: Type.Optional(Str) });

export const CreateTokenBody = Type.Object({
  name: Str,
  scopes: StringList,
  description: Type.Optional(Type.Union([Str, Type.Null()])),
  expires_at: Type.Optional(Type.Union([Str, Type.Null()])),
});

export const CreateImpersonationTokenBody = Type.Object({
  name: Str,
  scopes: Type.Optional(StringList),
  description: Type.Optional(Type.Union([Str, Type.Null()])),
  expires_at: Type.Optional(Type.Union([Str, Type.Null()])),
});

export function scopeList(v: string[] | string | undefined): string[] {
  if (v === undefined) return [];
  const list = Array.isArray(v) ? v : [v];
  return list.flatMap((s) => String(s).split(',')).map((s) => s.trim()).filter(Boolean);
}

/** A Grape `Date` parameter: YYYY-MM-DD (a datetime is cut to its date); 400 "<name> is invalid" otherwise. */
export function dateParam(name: string, v: string | null | undefined): string | undefined {
  return calendarDateParam(name, v, { time: 'allowed' });
}
