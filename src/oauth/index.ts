// The OAuth 2.0 provider's public face for other areas (git over HTTP calls authenticateOAuthToken,
// or resolveCredential(cairn, 'bearer', token), which reaches the same resolver).
export { authenticateOAuthToken, oauthAccessTokenResolver } from './tokens.js';
