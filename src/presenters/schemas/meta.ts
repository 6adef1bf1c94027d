import { Type } from 'typebox';
import { Nullable, strict } from './common.js';

/** Response schemas of the instance metadata and health endpoints (src/api/meta/routes.ts). */

/** GET /version and GET /metadata. */
export const VersionSchema = Type.Object(
  {
    version: Type.String(),
    revision: Type.String(),
    kas: Type.Object(
      { enabled: Type.Boolean(), externalUrl: Nullable(Type.String()), externalK8sProxyUrl: Nullable(Type.String()), version: Nullable(Type.String()) },
      strict,
    ),
    enterprise: Type.Boolean(),
  },
  strict,
);

/** GET /-/liveness. */
export const LivenessSchema = Type.Object({ status: Type.Literal('ok') }, strict);

const CheckSchema = Type.Object({ status: Type.Union([Type.Literal('ok'), Type.Literal('failed')]), message: Type.Optional(Type.String()) }, strict);
/** GET /-/readiness: 200 when every check passes, 503 (same form, `failed`) otherwise. */
export const ReadinessSchema = Type.Object(
  { status: Type.Union([Type.Literal('ok'), Type.Literal('failed')]), master_check: Type.Array(CheckSchema), db_check: Type.Array(CheckSchema) },
  strict,
);
