import { Type } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';
import { ProjectIdentitySchema } from './projects.js';
import { UserExtendedSchema } from './users.js';

/** Response schemas of src/presenters/keys.ts; contract tests check real responses against them. */
const UsageType = Type.Union([Type.Literal('auth'), Type.Literal('signing'), Type.Literal('auth_and_signing')]);

const sshKeyProps = {
  id: Type.Integer(),
  title: Type.String(),
  created_at: Timestamp,
  expires_at: Nullable(Timestamp),
  key: Type.String(),
  usage_type: UsageType,
};
/** GitLab's SSHKey entity. */
export const SshKeySchema = Type.Object(sshKeyProps, strict);
const withUserProps = { ...sshKeyProps, user: Nullable(UserExtendedSchema) };
/** GET /keys/:id and the fingerprint lookup of a user key. */
export const SshKeyWithUserSchema = Type.Object(withUserProps, strict);

export const DeployKeysProjectRowSchema = Type.Object(
  {
    id: Type.Integer(),
    deploy_key_id: Type.Integer(),
    project_id: Type.Integer(),
    created_at: Timestamp,
    updated_at: Timestamp,
    can_push: Type.Boolean(),
  },
  strict,
);
/** The fingerprint lookup of a deploy key. */
export const DeployKeyWithUserSchema = Type.Object({ ...withUserProps, deploy_keys_projects: Type.Array(DeployKeysProjectRowSchema) }, strict);

const deployKeyProps = {
  ...sshKeyProps,
  /** The MD5 fingerprint; absent for keys that only have a SHA256 one. */
  fingerprint: Type.Optional(Type.String()),
  fingerprint_sha256: Type.String(),
};
/** GitLab's DeployKey entity. */
export const DeployKeySchema = Type.Object(deployKeyProps, strict);
/** The admin list of deploy keys. */
export const DeployKeyWithProjectsSchema = Type.Object(
  {
    ...deployKeyProps,
    projects_with_write_access: Type.Array(ProjectIdentitySchema),
    projects_with_readonly_access: Type.Array(ProjectIdentitySchema),
  },
  strict,
);
/** A project's deploy key (DeployKeysProject entity). */
export const DeployKeysProjectSchema = Type.Object({ ...deployKeyProps, can_push: Type.Boolean() }, strict);
