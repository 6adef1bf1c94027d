import type { OAuthApplication } from '../db/schema/oauth.js';

/** GitLab's Entities::Application. */
export function presentApplication(app: OAuthApplication) {
  return {
    id: app.id,
    application_id: app.uid,
    application_name: app.name,
    callback_url: app.redirect_uri,
    confidential: app.confidential,
  };
}

/** Entities::ApplicationWithSecret: only the create and renew-secret responses carry the secret. */
export function presentApplicationWithSecret(app: OAuthApplication, secret: string) {
  return { ...presentApplication(app), secret };
}
