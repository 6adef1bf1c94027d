import { Type, type TSchema } from 'typebox';

/** Building blocks shared by the response schemas in this folder. */
export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
export const Timestamp = Type.String({ format: 'date-time' });
/** A calendar date as GitLab prints it (expires_at of tokens and memberships). */
export const DateOnly = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' });
export const Sha = Type.String({ pattern: '^[0-9a-f]{40}$' });
export const strict = { additionalProperties: false } as const;
