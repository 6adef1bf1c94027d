import { Type } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';

/** Response schemas of src/presenters/deploy_tokens.ts. */
const deployTokenProps = {
  id: Type.Integer(),
  name: Type.String(),
  username: Type.String(),
  expires_at: Nullable(Timestamp),
  scopes: Type.Array(Type.String()),
  revoked: Type.Boolean(),
  expired: Type.Boolean(),
};
/** GitLab's DeployToken entity. */
export const DeployTokenSchema = Type.Object(deployTokenProps, strict);
/** GitLab's DeployTokenWithToken: the answer of a create, the only time the token is shown. */
export const DeployTokenWithTokenSchema = Type.Object({ ...deployTokenProps, token: Type.String() }, strict);
