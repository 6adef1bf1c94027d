import { Type } from 'typebox';
import { DateOnly, Nullable, Timestamp, strict } from './common.js';

/** Response schemas of src/presenters/tokens.ts; contract tests check real responses against them. */
const patProps = {
  id: Type.Integer(),
  name: Type.String(),
  revoked: Type.Boolean(),
  created_at: Timestamp,
  description: Nullable(Type.String()),
  scopes: Type.Array(Type.String()),
  user_id: Type.Integer(),
  last_used_at: Nullable(Timestamp),
  active: Type.Boolean(),
  expires_at: Nullable(DateOnly),
};
export const PersonalAccessTokenSchema = Type.Object(patProps, strict);
export const PersonalAccessTokenWithTokenSchema = Type.Object({ ...patProps, token: Type.String() }, strict);
const impersonationProps = { ...patProps, impersonation: Type.Boolean() };
export const ImpersonationTokenSchema = Type.Object(impersonationProps, strict);
export const ImpersonationTokenWithTokenSchema = Type.Object({ ...impersonationProps, token: Type.String() }, strict);
/** GitLab's ResourceAccessToken: a project or group access token, with its bot's access level there. */
const resourceTokenProps = { ...patProps, access_level: Nullable(Type.Integer()) };
export const ResourceAccessTokenSchema = Type.Object(resourceTokenProps, strict);
export const ResourceAccessTokenWithTokenSchema = Type.Object({ ...resourceTokenProps, token: Type.String() }, strict);
