import { Type } from 'typebox';
import { RowId } from '../params.js';

export const UsageType = Type.Union([Type.Literal('auth'), Type.Literal('signing'), Type.Literal('auth_and_signing')]);

export const KeyIdParams = Type.Object({ key_id: RowId });
export const UserParams = Type.Object({ user_id: Type.String() });
export const UserKeyParams = Type.Object({ user_id: Type.String(), key_id: RowId });
export const UserIdKeyParams = Type.Object({ user_id: RowId, key_id: RowId });

export const FingerprintQuery = Type.Object({ fingerprint: Type.String() });

export const CreateKeyBody = Type.Object({
  title: Type.String(),
  key: Type.String(),
  expires_at: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  usage_type: Type.Optional(UsageType),
});

export const ProjectKeyParams = Type.Object({ id: Type.String(), key_id: RowId });

/** GET /deploy_keys (route() adds page and per_page). */
export const DeployKeyListQuery = Type.Object({ public: Type.Optional(Type.Boolean()) });

export const CreateDeployKeyBody = Type.Object({
  title: Type.String(),
  key: Type.String(),
  expires_at: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});

export const CreateProjectDeployKeyBody = Type.Object({
  title: Type.String(),
  key: Type.String(),
  can_push: Type.Optional(Type.Boolean()),
  expires_at: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});

export const UpdateProjectDeployKeyBody = Type.Object({
  title: Type.Optional(Type.String()),
  can_push: Type.Optional(Type.Boolean()),
});
