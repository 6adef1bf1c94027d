import { Type } from 'typebox';

export const CreateApplicationBody = Type.Object({
  name: Type.String(),
  redirect_uri: Type.String(),
  scopes: Type.String(),
  confidential: Type.Optional(Type.Boolean()),
});

export const ApplicationIdParams = Type.Object({ id: Type.Integer() });
