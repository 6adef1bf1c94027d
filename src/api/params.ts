import { Type } from 'typebox';

// Path parameters shared by many routes.
export const IdParams = Type.Object({ id: Type.String() });
