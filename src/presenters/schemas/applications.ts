import { Type } from 'typebox';
import { strict } from './common.js';

/** Response schemas of src/presenters/applications.ts; the Applications API tests check real responses against them. */
const applicationProps = {
  id: Type.Integer(),
  application_id: Type.String(),
  application_name: Type.String(),
  callback_url: Type.String(),
  confidential: Type.Boolean(),
};
/** GitLab's Entities::Application. */
export const ApplicationSchema = Type.Object(applicationProps, strict);
/** Entities::ApplicationWithSecret: the create and renew-secret answers. */
export const ApplicationWithSecretSchema = Type.Object({ ...applicationProps, secret: Type.String() }, strict);
