import crypto from 'node:crypto';
import { safeEqual, signingKey } from '../lib/secrets.js';

/**
 * The credential `git-lfs-authenticate` hands out over SSH (GitLab's LFS token): HTTP Basic with
 * the user's name (`lfs+deploy-key-<id>` for a deploy key) and a signed, expiring token naming
 * the SSH key, the project and the operation. Nothing is stored: every process of the instance
 * checks the signature with the key derived from the instance secret (lib/secrets.ts). The LFS
 * endpoints (api/git_http/lfs.ts) accept it for that project only, for downloads, and for uploads
 * when it was issued for upload; git over HTTP does not accept it at all. The key is looked up
 * again on every use, so deleting the key, its expiry or a blocked account ends it at once.
 */

export type LfsOperation = 'download' | 'upload';

/** How long the credential lasts (GitLab's LfsToken: two hours). */
export const LFS_TOKEN_EXPIRES_IN = 7200;

const PREFIX = 'lfst1.';

export interface LfsTokenClaims {
  /** The SSH key (user key or deploy key) it was issued to. */
  keyId: number;
  projectId: number;
  operation: LfsOperation;
  /** Unix seconds. */
  expiresAt: number;
}

const b64url = (b: Buffer) => b.toString('base64url');

function sign(config: { dataDir: string }, body: string): string {
  return b64url(crypto.createHmac('sha256', signingKey(config, 'lfs token')).update(PREFIX + body).digest());
}

export function isLfsToken(password: string): boolean {
  return password.startsWith(PREFIX);
}

/** The Basic user name that goes with a key's token. */
export function lfsTokenUsername(key: { id: number; type: string | null }, username: string): string {
  return key.type === 'DeployKey' ? `lfs+deploy-key-${key.id}` : username;
}

export function issueLfsToken(config: { dataDir: string }, claims: Omit<LfsTokenClaims, 'expiresAt'>, now = Date.now()): { token: string; expiresIn: number } {
  const expiresAt = Math.floor(now / 1000) + LFS_TOKEN_EXPIRES_IN;
  const body = b64url(Buffer.from(JSON.stringify({ k: claims.keyId, p: claims.projectId, o: claims.operation, e: expiresAt })));
  return { token: `${PREFIX}${body}.${sign(config, body)}`, expiresIn: LFS_TOKEN_EXPIRES_IN };
}

/** The claims of a genuine, unexpired token; null for anything else. */
export function verifyLfsToken(config: { dataDir: string }, token: string, now = Date.now()): LfsTokenClaims | null {
  if (!isLfsToken(token) || token.length > 1024) return null;
  const [body, signature, extra] = token.slice(PREFIX.length).split('.');
  if (!body || !signature || extra !== undefined) return null;
  if (!safeEqual(sign(config, body), signature)) return null;
  let c: any;
  try {
    c = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!c || !Number.isSafeInteger(c.k) || !Number.isSafeInteger(c.p) || (c.o !== 'download' && c.o !== 'upload') || !Number.isSafeInteger(c.e)) return null;
  if (c.e * 1000 <= now) return null;
  return { keyId: c.k, projectId: c.p, operation: c.o, expiresAt: c.e };
}
