import { Type } from 'typebox';
import { Nullable, strict } from './common.js';

/** Response schemas of the OAuth 2.0 provider (src/oauth/): RFC 6749, RFC 7009, OpenID Connect, in GitLab's shapes. */

/** POST /oauth/token (RFC 6749 5.1), as GitLab (Doorkeeper) answers it. */
export const OAuthTokenSchema = Type.Object(
  {
    access_token: Type.String(),
    token_type: Type.Literal('Bearer'),
    /** Seconds the access token lives; null for a token that does not expire. */
    expires_in: Nullable(Type.Integer()),
    /** Optional in RFC 6749; every grant Cairn's token endpoint serves issues one. */
    refresh_token: Type.Optional(Type.String()),
    /** Space-separated scopes. */
    scope: Type.String(),
    /** Seconds since the epoch. */
    created_at: Type.Integer(),
  },
  strict,
);

/** GET /oauth/token/info (Doorkeeper's token info), with the deprecated aliases GitLab still sends. */
export const OAuthTokenInfoSchema = Type.Object(
  {
    resource_owner_id: Nullable(Type.Integer()),
    scope: Type.Array(Type.String()),
    /** Seconds left; null for a token that does not expire. */
    expires_in: Nullable(Type.Integer()),
    application: Nullable(Type.Object({ uid: Type.String() }, strict)),
    /** Seconds since the epoch. */
    created_at: Type.Integer(),
    /** Deprecated alias of `scope`. */
    scopes: Type.Array(Type.String()),
    /** Deprecated alias of `expires_in`. */
    expires_in_seconds: Nullable(Type.Integer()),
  },
  strict,
);

/** POST /oauth/revoke (RFC 7009): an empty object, whether or not the token was known. */
export const OAuthRevokeSchema = Type.Object({}, strict);

/** GET|POST /oauth/userinfo (OpenID Connect UserInfo), GitLab's claims. */
export const OAuthUserinfoSchema = Type.Object(
  {
    sub: Type.String(),
    name: Type.String(),
    nickname: Type.String(),
    preferred_username: Type.String(),
    /** The primary e-mail with the `email` scope, else the public e-mail if any. */
    email: Type.Optional(Type.String()),
    email_verified: Type.Optional(Type.Boolean()),
    website: Type.Optional(Type.String()),
    profile: Type.String(),
    picture: Type.Optional(Type.String()),
    /** Full paths of the groups the user belongs to. */
    groups: Type.Array(Type.String()),
  },
  strict,
);

/** /.well-known/openid-configuration and /.well-known/oauth-authorization-server (RFC 8414). */
export const OAuthServerMetadataSchema = Type.Object(
  {
    issuer: Type.String(),
    authorization_endpoint: Type.String(),
    token_endpoint: Type.String(),
    revocation_endpoint: Type.String(),
    userinfo_endpoint: Type.String(),
    scopes_supported: Type.Array(Type.String()),
    response_types_supported: Type.Array(Type.String()),
    response_modes_supported: Type.Array(Type.String()),
    grant_types_supported: Type.Array(Type.String()),
    token_endpoint_auth_methods_supported: Type.Array(Type.String()),
    revocation_endpoint_auth_methods_supported: Type.Array(Type.String()),
    code_challenge_methods_supported: Type.Array(Type.String()),
    subject_types_supported: Type.Array(Type.String()),
    claims_supported: Type.Array(Type.String()),
  },
  strict,
);
