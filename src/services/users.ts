import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { User, UsersTable } from '../db/schema/core.js';
import type { Insertable } from 'kysely';
import { hashPassword, passwordHashOutdated, randomToken } from '../lib/secrets.js';
import { ApiError, conflict, validationFailed } from '../plugins/errors.js';
import { pathError, RESERVED_TOP_LEVEL } from '../lib/paths.js';

export type NewUser = Omit<Insertable<UsersTable>, 'encrypted_password'> & { password?: string | null };

/** Creates a user and their personal namespace in one transaction. */
export async function insertUser(db: Database, attrs: NewUser): Promise<User> {
  const { password, ...rest } = attrs;
  const encrypted = password ? await hashPassword(password) : null;
  const run = async (trx: Database) => {
    const user = await trx
      .insertInto('users')
      .values({ ...rest, encrypted_password: encrypted })
      .returningAll()
      .executeTakeFirstOrThrow();
    const ns = await trx
      .insertInto('namespaces')
      .values({
        type: 'User',
        name: user.name,
        path: user.username,
        full_path: user.username,
        full_name: user.name,
        owner_id: user.id,
        visibility_level: 20,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx.updateTable('namespaces').set({ traversal_ids: [ns.id] }).where('id', '=', ns.id).execute();
    return user;
  };
  // Callers already inside a transaction (creating a user with its identity) keep it.
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}

export async function findUserByUsername(db: Database, username: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(username)`, '=', username.toLowerCase()).executeTakeFirst();
}

export async function findUserByLogin(db: Database, login: string): Promise<User | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where((eb) => eb.or([eb(sql`lower(username)`, '=', login.toLowerCase()), eb(sql`lower(email)`, '=', login.toLowerCase())]))
    .executeTakeFirst();
}

export async function personalNamespaceOf(db: Database, userId: number) {
  return db.selectFrom('namespaces').selectAll().where('type', '=', 'User').where('owner_id', '=', userId).executeTakeFirst();
}


export const PASSWORD_MIN_LENGTH = 8;
export const PASSWORD_MAX_LENGTH = 128;
const EMAIL_RE = /^[^@\s]+@[^@\s]+$/;

/** Profile and account attributes POST and PUT /users share. */
export interface UserAttributes {
  name?: string;
  username?: string;
  email?: string;
  password?: string;
  skype?: string;
  linkedin?: string;
  twitter?: string;
  discord?: string;
  website_url?: string;
  organization?: string;
  job_title?: string;
  pronouns?: string;
  bio?: string;
  location?: string;
  public_email?: string;
  commit_email?: string;
  note?: string;
  projects_limit?: number;
  admin?: boolean;
  can_create_group?: boolean;
  external?: boolean;
  private_profile?: boolean | null;
  theme_id?: number;
  color_scheme_id?: number;
  view_diffs_file_by_file?: boolean;
  shared_runners_minutes_limit?: number | null;
  extra_shared_runners_minutes_limit?: number | null;
  extern_uid?: string;
  provider?: string;
}

export interface CreateUserInput extends UserAttributes {
  email: string;
  name: string;
  username: string;
  reset_password?: boolean;
  force_random_password?: boolean;
  skip_confirmation?: boolean;
}

export interface UpdateUserInput extends UserAttributes {
  skip_reconfirmation?: boolean;
}

const PROFILE_FIELDS = [
  'skype', 'linkedin', 'twitter', 'discord', 'website_url', 'organization', 'job_title', 'bio', 'location',
] as const;

type Errors = Record<string, string[]>;
function add(errors: Errors, field: string, message: string) {
  (errors[field] ??= []).push(message);
}

/** The emails a user has verified; public and commit email must be one of them. */
export async function verifiedEmailsOf(_db: Database, user: Pick<User, 'email'>): Promise<string[]> {
  return [user.email.toLowerCase()];
}

/** GitLab's username rules: a valid top-level namespace path that is not a reserved route. */
export function usernameError(username: string): string | null {
  const err = pathError(username);
  if (err) return err;
  if (RESERVED_TOP_LEVEL.has(username.toLowerCase())) return `${username} is a reserved name`;
  return null;
}

function validateAttributes(attrs: UserAttributes, errors: Errors) {
  if (attrs.name !== undefined) {
    if (!attrs.name.trim()) add(errors, 'name', "can't be blank");
    else if (attrs.name.length > 255) add(errors, 'name', 'is too long (maximum is 255 characters)');
  }
  if (attrs.username !== undefined) {
    const err = usernameError(attrs.username);
    if (err) add(errors, 'username', err);
  }
  if (attrs.email !== undefined) {
    if (!attrs.email.trim()) add(errors, 'email', "can't be blank");
    else if (!EMAIL_RE.test(attrs.email) || attrs.email.length > 255) add(errors, 'email', 'is invalid');
  }
  if (attrs.password !== undefined) {
    if (attrs.password.length < PASSWORD_MIN_LENGTH) add(errors, 'password', `is too short (minimum is ${PASSWORD_MIN_LENGTH} characters)`);
    if (attrs.password.length > PASSWORD_MAX_LENGTH) add(errors, 'password', `is too long (maximum is ${PASSWORD_MAX_LENGTH} characters)`);
  }
  if (attrs.projects_limit !== undefined && (attrs.projects_limit < 0 || attrs.projects_limit > 2147483647)) {
    add(errors, 'projects_limit', 'must be greater than or equal to 0');
  }
  // Identities are indexed by (provider, extern_uid): GitLab's string columns hold 255 characters.
  if (attrs.extern_uid !== undefined && attrs.extern_uid.length > 255) add(errors, 'identities.extern_uid', 'is too long (maximum is 255 characters)');
  if (attrs.provider !== undefined && attrs.provider.length > 255) add(errors, 'identities.provider', 'is too long (maximum is 255 characters)');
  if (attrs.bio !== undefined && attrs.bio.length > 255) add(errors, 'bio', 'is too long (maximum is 255 characters)');
  if (attrs.note !== undefined && attrs.note.length > 1000) add(errors, 'note', 'is too long (maximum is 1000 characters)');
  for (const field of ['shared_runners_minutes_limit', 'extra_shared_runners_minutes_limit'] as const) {
    const v = attrs[field];
    if (v !== undefined && v !== null && v < 0) add(errors, field, 'must be greater than or equal to 0');
  }
}

async function emailTaken(db: Database, email: string, exceptId?: number): Promise<boolean> {
  let q = db.selectFrom('users').select('id').where(sql`lower(email)`, '=', email.toLowerCase());
  if (exceptId) q = q.where('id', '!=', exceptId);
  return !!(await q.executeTakeFirst());
}

async function usernameTaken(db: Database, username: string, exceptId?: number): Promise<boolean> {
  let q = db.selectFrom('users').select('id').where(sql`lower(username)`, '=', username.toLowerCase());
  if (exceptId) q = q.where('id', '!=', exceptId);
  return !!(await q.executeTakeFirst());
}

/** A namespace (a group, or another user's) already holds this top-level path. */
async function namespacePathTaken(db: Database, path: string, exceptOwnerId?: number): Promise<boolean> {
  let q = db.selectFrom('namespaces').select('id').where('parent_id', 'is', null).where(sql`lower(path)`, '=', path.toLowerCase());
  if (exceptOwnerId) q = q.where((eb) => eb.or([eb('type', '!=', 'User'), eb('owner_id', '!=', exceptOwnerId)]));
  return !!(await q.executeTakeFirst());
}

async function identityTaken(db: Database, provider: string, externUid: string, exceptUserId?: number): Promise<boolean> {
  let q = db.selectFrom('identities').select('id').where('provider', '=', provider).where(sql`lower(extern_uid)`, '=', externUid.toLowerCase());
  if (exceptUserId) q = q.where('user_id', '!=', exceptUserId);
  return !!(await q.executeTakeFirst());
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === '23505';
}

function profileValues(attrs: UserAttributes) {
  const values: Record<string, unknown> = {};
  for (const f of PROFILE_FIELDS) if (attrs[f] !== undefined) values[f] = attrs[f];
  for (const f of ['pronouns', 'note', 'projects_limit', 'admin', 'can_create_group', 'external', 'theme_id', 'color_scheme_id',
    'view_diffs_file_by_file', 'shared_runners_minutes_limit', 'extra_shared_runners_minutes_limit'] as const) {
    if (attrs[f] !== undefined) values[f] = attrs[f];
  }
  // `private_profile: null` means the default, which is false.
  if (attrs.private_profile !== undefined) values.private_profile = attrs.private_profile ?? false;
  return values;
}

async function checkOwnedEmails(db: Database, user: Pick<User, 'email'>, attrs: UserAttributes, errors: Errors) {
  const verified = await verifiedEmailsOf(db, user);
  for (const field of ['public_email', 'commit_email'] as const) {
    const v = attrs[field];
    if (v && !verified.includes(v.toLowerCase())) add(errors, field, 'is not an email you own');
  }
}

/** POST /users: GitLab's conflicts first (409), then model validation (400). */
export async function createUserByAdmin(db: Database, input: CreateUserInput): Promise<User> {
  if (await emailTaken(db, input.email)) throw conflict('Email has already been taken');
  if (await usernameTaken(db, input.username)) throw conflict('Username has already been taken');
  const errors: Errors = {};
  const randomPassword = input.force_random_password || input.reset_password;
  validateAttributes({ ...input, password: randomPassword ? undefined : input.password }, errors);
  if (!errors.username && (await namespacePathTaken(db, input.username))) add(errors, 'username', 'has already been taken');
  if (input.provider && input.extern_uid && (await identityTaken(db, input.provider, input.extern_uid))) add(errors, 'identities.extern_uid', 'has already been taken');
  await checkOwnedEmails(db, { email: input.email }, input, errors);
  if (Object.keys(errors).length) throw validationFailed(errors);

  try {
    return await db.transaction().execute(async (trx) => {
      const user = await insertUser(trx, {
        ...(profileValues(input) as object),
        name: input.name,
        username: input.username,
        email: input.email,
        password: randomPassword ? randomToken(32) : input.password,
        password_automatically_set: !!randomPassword,
        public_email: input.public_email || null,
        commit_email: input.commit_email || null,
        confirmed_at: input.skip_confirmation ? new Date() : null,
      });
      if (input.provider && input.extern_uid) {
        await trx.insertInto('identities').values({
          user_id: user.id, provider: input.provider, extern_uid: input.extern_uid, saml_provider_id: null,
        }).execute();
      }
      return user;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict('Email has already been taken');
    throw err;
  }
}

/**
 * The contract's Errors table: user modification answers 404 even where a conflict (a
 * duplicate email or username) would fit better; the body still says what clashed.
 */
const modificationConflict = (message: string) => new ApiError(404, { message });

/**
 * PUT /users/:id. An administrator setting another user's password makes it expire at once,
 * so that user must choose a new one.
 */
export async function updateUserByAdmin(db: Database, actor: User, user: User, input: UpdateUserInput): Promise<User> {
  if (input.email && (await emailTaken(db, input.email, user.id))) throw modificationConflict('Email has already been taken');
  if (input.username && (await usernameTaken(db, input.username, user.id))) throw modificationConflict('Username has already been taken');
  const errors: Errors = {};
  validateAttributes(input, errors);
  if (input.username && !errors.username && input.username.toLowerCase() !== user.username.toLowerCase() && (await namespacePathTaken(db, input.username, user.id))) {
    add(errors, 'username', 'has already been taken');
  }
  if (input.provider && input.extern_uid && (await identityTaken(db, input.provider, input.extern_uid, user.id))) add(errors, 'identities.extern_uid', 'has already been taken');
  const newEmail = input.email ?? user.email;
  await checkOwnedEmails(db, { email: newEmail }, input, errors);
  if (Object.keys(errors).length) throw validationFailed(errors);

  const values: Record<string, unknown> = { ...profileValues(input), updated_at: new Date() };
  if (input.name !== undefined) values.name = input.name;
  if (input.username !== undefined) values.username = input.username;
  if (input.email !== undefined) {
    values.email = input.email;
    if (input.skip_reconfirmation) values.confirmed_at = new Date();
  }
  if (input.public_email !== undefined) values.public_email = input.public_email || null;
  if (input.commit_email !== undefined) values.commit_email = input.commit_email || null;
  // A changed primary email leaves public and commit email only while they are still owned.
  if (input.email !== undefined && input.email.toLowerCase() !== user.email.toLowerCase()) {
    const verified = await verifiedEmailsOf(db, { email: input.email });
    const pub = (values.public_email as string | null | undefined) ?? user.public_email;
    if (pub && !verified.includes(pub.toLowerCase())) values.public_email = null;
    const commit = (values.commit_email as string | null | undefined) ?? user.commit_email;
    if (commit && !verified.includes(commit.toLowerCase())) values.commit_email = null;
  }
  if (input.password) {
    values.encrypted_password = await hashPassword(input.password);
    values.password_automatically_set = false;
    values.password_expires_at = actor.id !== user.id ? new Date() : null;
  }

  try {
    return await db.transaction().execute(async (trx) => {
      const updated = await trx.updateTable('users').set(values).where('id', '=', user.id).returningAll().executeTakeFirstOrThrow();
      if (updated.username !== user.username || updated.name !== user.name) {
        await trx.updateTable('namespaces')
          .set({ path: updated.username, full_path: updated.username, name: updated.name, full_name: updated.name, updated_at: new Date() })
          .where('type', '=', 'User').where('owner_id', '=', user.id).execute();
      }
      if (input.provider && input.extern_uid) {
        await trx.insertInto('identities')
          .values({ user_id: user.id, provider: input.provider, extern_uid: input.extern_uid, saml_provider_id: null })
          .onConflict((oc) => oc.columns(['user_id', 'provider']).doUpdateSet({ extern_uid: input.extern_uid!, updated_at: new Date() }))
          .execute();
      }
      return updated;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw modificationConflict('Email has already been taken');
    throw err;
  }
}

/**
 * After a good sign-in with `password`: rehashes a password hash made with older parameters. Only
 * if the hash is still the one checked, so a password changed meanwhile is never overwritten.
 */
export async function upgradePasswordHash(db: Database, user: Pick<User, 'id' | 'encrypted_password'>, password: string): Promise<void> {
  if (!user.encrypted_password || !passwordHashOutdated(user.encrypted_password)) return;
  const encrypted = await hashPassword(password);
  await db.updateTable('users').set({ encrypted_password: encrypted }).where('id', '=', user.id).where('encrypted_password', '=', user.encrypted_password).execute();
}

/** DELETE /users/:id/identities/:provider: false when the user has no such identity. */
export async function deleteIdentity(db: Database, userId: number, provider: string): Promise<boolean> {
  const res = await db.deleteFrom('identities').where('user_id', '=', userId).where('provider', '=', provider).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
