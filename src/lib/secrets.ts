import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { setting } from '../config.js';

const scrypt = promisify(crypto.scrypt) as (pw: string, salt: Buffer, keylen: number, opts: crypto.ScryptOptions) => Promise<Buffer>;
/**
 * Password hashes: scrypt with N=2^15, r=8, p=1, which needs 32 MiB for each hash. Two reasons
 * for that size. It is nearer OWASP's advice (N=2^17) than N=2^14 was, at about 90 ms a hash.
 * And a block over 32 MiB is the only size glibc's malloc leaves alone: it maps any block bigger
 * than its threshold (128 KiB at start) and, when such a block is freed, raises the threshold to
 * the block's size and the limit under which it keeps freed memory instead of returning it
 * (trim) to twice that, unless the block was over 32 MiB. N=2^14's 16 MiB block therefore made
 * every later allocation up to 16 MiB come from the arenas, and let each arena keep 32 MiB free
 * for good: about 30 MB of idle memory after the first sign-in. Hashes made with other
 * parameters still verify and are rehashed at the next good sign-in (passwordHashOutdated).
 */
export const PASSWORD_HASH_PARAMS: Readonly<{ N: number; r: number; p: number }> = Object.freeze({ N: 32768, r: 8, p: 1 });
let SCRYPT = PASSWORD_HASH_PARAMS;

/**
 * For tests only (test/helpers/app.ts): the scrypt parameters new hashes are made with, and that
 * passwordHashOutdated compares against, in this process. A test suite creates over a thousand
 * users, each hash about 90 ms of CPU at the real cost; GitLab's test environment lowers its
 * password hashing cost the same way (Devise's stretches). test/api/password_hashes.test.ts
 * checks the real parameters. Nothing else calls this.
 */
export function usePasswordHashParams(params: { N: number; r: number; p: number }) {
  SCRYPT = Object.freeze({ ...params });
}
/** Above the 32 MiB the hash needs (Node's default maxmem is exactly 32 MiB). */
const SCRYPT_MAXMEM = 64 * 1024 * 1024;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A random string from [A-Za-z0-9] with no modulo bias. */
export function randomToken(length = 20): string {
  let out = '';
  while (out.length < length) {
    for (const b of crypto.randomBytes(length * 2)) {
      if (b < 248 && out.length < length) out += ALPHABET[b % 62];
    }
  }
  return out;
}

/** Tokens are looked up by this digest; the token itself is never stored. */
export function tokenDigest(token: string): string {
  return crypto.createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Compares two secrets in constant time. Both are hashed first, so timingSafeEqual always sees
 * two 32-byte digests: neither the contents nor the lengths show in the time taken.
 */
export function safeEqual(a: string, b: string): boolean {
  const da = crypto.createHash('sha256').update(a, 'utf8').digest();
  const db = crypto.createHash('sha256').update(b, 'utf8').digest();
  return crypto.timingSafeEqual(da, db);
}

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const key = await scrypt(password, salt, 32, { ...SCRYPT, maxmem: SCRYPT_MAXMEM });
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  if (!stored) return false;
  const [alg, n, r, p, salt, key] = stored.split('$');
  if (alg !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const params = { N: Number(n), r: Number(r), p: Number(p) };
  const actual = await scrypt(password, Buffer.from(salt, 'base64'), expected.length, { ...params, maxmem: Math.max(SCRYPT_MAXMEM, 256 * params.N * params.r) });
  return crypto.timingSafeEqual(actual, expected);
}

/** True when a stored hash was made with other parameters than hashPassword's (rehash it). */
export function passwordHashOutdated(stored: string | null): boolean {
  if (!stored) return false;
  const [alg, n, r, p] = stored.split('$');
  return alg !== 'scrypt' || Number(n) !== SCRYPT.N || Number(r) !== SCRYPT.r || Number(p) !== SCRYPT.p;
}

// ---- encryption of stored secrets (CI variable values) -----------------------------------------
// AES-256-GCM with a key derived from the instance secret: CAIRN_SECRET_KEY_BASE when set (every
// process of one instance must then share it), otherwise a random secret kept in
// <dataDir>/secret_key_base (created once, mode 0600), shared by processes using that directory.

const keys = new Map<string, Buffer>();

function secretKeyBase(dataDir: string): string {
  const fromEnv = setting<string | null>('CAIRN_SECRET_KEY_BASE');
  if (fromEnv) return fromEnv;
  const file = path.join(dataDir, 'secret_key_base');
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  fs.mkdirSync(dataDir, { recursive: true });
  try {
    fs.writeFileSync(file, crypto.randomBytes(48).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return fs.readFileSync(file, 'utf8').trim();
}

function encryptionKey(dataDir: string): Buffer {
  let key = keys.get(dataDir);
  if (!key) {
    key = crypto.createHash('sha256').update('cairn encrypted attributes\0').update(secretKeyBase(dataDir)).digest();
    keys.set(dataDir, key);
  }
  return key;
}

/**
 * A key for signing short-lived credentials of one `purpose` (HMAC-SHA256), derived from the
 * instance secret like the encryption key: every process of the instance derives the same one.
 */
export function signingKey(config: { dataDir: string }, purpose: string): Buffer {
  const id = `${config.dataDir}\0sign:${purpose}`;
  let key = keys.get(id);
  if (!key) {
    key = crypto.createHash('sha256').update(`cairn signed ${purpose}\0`).update(secretKeyBase(config.dataDir)).digest();
    keys.set(id, key);
  }
  return key;
}

/** Encrypts a secret for storage: "v1:" + base64(iv | tag | ciphertext). */
export function encryptSecret(config: { dataDir: string }, plain: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', encryptionKey(config.dataDir), iv);
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return 'v1:' + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

/** The clear text of encryptSecret's output; null when it cannot be decrypted (another key, tampering). */
export function decryptSecret(config: { dataDir: string }, stored: string): string | null {
  if (!stored.startsWith('v1:')) return null;
  const raw = Buffer.from(stored.slice(3), 'base64');
  if (raw.length < 28) return null;
  try {
    const decipher = crypto.createDecipheriv('aes-256-gcm', encryptionKey(config.dataDir), raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}
