import { Type } from 'typebox';

export const ApplicationSchema = Type.Object({
  id: Type.Integer(),
  application_id: Type.String(),
  application_name: Type.String(),
  callback_url: Type.String(),
  confidential: Type.Boolean(),
});

export const ApplicationWithSecretSchema = Type.Object({
  ...ApplicationSchema.properties,
  secret: Type.String(),
});

export const CreateApplicationBody = Type.Object({
  name: Type.String(),
  redirect_uri: Type.String(),
  scopes: Type.String(),
  confidential: Type.Optional(Type.Boolean()),
});

export const ApplicationIdParams = Type.Object({ id: Type.Integer() });
