import crypto from 'node:crypto';

/**
 * OpenSSH public keys ("<type> <base64 blob> [comment]"), parsed by hand: the blob is a
 * sequence of uint32-length-prefixed strings whose first string repeats the type. Node's
 * crypto then checks that the key material is a real key (a point on the curve, an RSA modulus).
 */

export type SshKeyFamily = 'RSA' | 'DSA' | 'ECDSA' | 'ED25519' | 'ECDSA_SK' | 'ED25519_SK';

export interface ParsedSshKey {
  type: string;
  family: SshKeyFamily;
  bits: number;
  blob: Buffer;
  comment: string | null;
  /** "<type> <base64>[ <comment>]" with the blob's line breaks and spaces removed. */
  normalized: string;
  /** MD5 of the blob, colon-separated lowercase hex (ssh-keygen -E md5, without "MD5:"). */
  fingerprintMd5: string;
  /** "SHA256:" + unpadded base64 of the blob's SHA-256, as ssh-keygen prints it. */
  fingerprintSha256: string;
}

const ECDSA_CURVES: Record<string, { curve: string; jwk: string; bits: number; pointLength: number }> = {
  nistp256: { curve: 'nistp256', jwk: 'P-256', bits: 256, pointLength: 65 },
  nistp384: { curve: 'nistp384', jwk: 'P-384', bits: 384, pointLength: 97 },
  nistp521: { curve: 'nistp521', jwk: 'P-521', bits: 521, pointLength: 133 },
};

export const SUPPORTED_KEY_TYPES = [
  'ssh-rsa',
  'ssh-dss',
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'sk-ecdsa-sha2-nistp256@openssh.com',
  'sk-ssh-ed25519@openssh.com',
] as const;

class BlobReader {
  private offset = 0;
  constructor(private readonly buf: Buffer) {}
  string(): Buffer {
    if (this.offset + 4 > this.buf.length) throw new Error('truncated');
    const len = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    if (len > this.buf.length - this.offset) throw new Error('truncated');
    const out = this.buf.subarray(this.offset, this.offset + len);
    this.offset += len;
    return out;
  }
  text(): string {
    return this.string().toString('latin1');
  }
  done(): boolean {
    return this.offset === this.buf.length;
  }
}

/** An SSH mpint as an unsigned big-endian buffer without leading zeros. */
function unsigned(mpint: Buffer): Buffer {
  let i = 0;
  while (i < mpint.length - 1 && mpint[i] === 0) i++;
  return mpint.subarray(i);
}

function bitLength(n: Buffer): number {
  const u = unsigned(n);
  if (u.length === 0 || (u.length === 1 && u[0] === 0)) return 0;
  return (u.length - 1) * 8 + (32 - Math.clz32(u[0]));
}

const b64url = (b: Buffer) => b.toString('base64url');

function checkWithCrypto(jwk: crypto.JsonWebKey): boolean {
  try {
    crypto.createPublicKey({ key: jwk, format: 'jwk' });
    return true;
  } catch {
    return false;
  }
}

/** Reads the blob for `type`; null when it is not a well-formed key of that type. */
function readBlob(type: string, blob: Buffer): { family: SshKeyFamily; bits: number } | null {
  const r = new BlobReader(blob);
  if (r.text() !== type) return null;
  switch (type) {
    case 'ssh-rsa': {
      const e = unsigned(r.string());
      const n = unsigned(r.string());
      if (!r.done()) return null;
      const bits = bitLength(n);
      if (bits < 512 || e.length === 0) return null;
      if (!checkWithCrypto({ kty: 'RSA', n: b64url(n), e: b64url(e) })) return null;
      return { family: 'RSA', bits };
    }
    case 'ssh-dss': {
      const p = r.string();
      r.string();
      r.string();
      r.string();
      if (!r.done()) return null;
      return { family: 'DSA', bits: bitLength(p) };
    }
    case 'ssh-ed25519':
    case 'sk-ssh-ed25519@openssh.com': {
      const pk = r.string();
      if (type !== 'ssh-ed25519') r.string(); // application, e.g. "ssh:"
      if (!r.done() || pk.length !== 32) return null;
      if (!checkWithCrypto({ kty: 'OKP', crv: 'Ed25519', x: b64url(pk) })) return null;
      return { family: type === 'ssh-ed25519' ? 'ED25519' : 'ED25519_SK', bits: 256 };
    }
    default: {
      const m = /^(?:sk-)?ecdsa-sha2-(nistp256|nistp384|nistp521)(@openssh\.com)?$/.exec(type);
      if (!m) return null;
      const sk = type.startsWith('sk-');
      if (sk !== Boolean(m[2]) || (sk && m[1] !== 'nistp256')) return null;
      const curve = ECDSA_CURVES[m[1]];
      if (r.text() !== curve.curve) return null;
      const q = r.string();
      if (sk) r.string();
      if (!r.done() || q.length !== curve.pointLength || q[0] !== 4) return null;
      const half = (q.length - 1) / 2;
      const jwk = { kty: 'EC', crv: curve.jwk, x: b64url(q.subarray(1, 1 + half)), y: b64url(q.subarray(1 + half)) };
      if (!checkWithCrypto(jwk)) return null;
      return { family: sk ? 'ECDSA_SK' : 'ECDSA', bits: curve.bits };
    }
  }
}

function tryParse(type: string, base64: string, comment: string | null): ParsedSshKey | null {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) return null;
  const blob = Buffer.from(base64, 'base64');
  if (blob.length < 8) return null;
  let info: { family: SshKeyFamily; bits: number } | null;
  try {
    info = readBlob(type, blob);
  } catch {
    return null;
  }
  if (!info) return null;
  const md5 = crypto.createHash('md5').update(blob).digest('hex');
  return {
    type,
    family: info.family,
    bits: info.bits,
    blob,
    comment,
    normalized: [type, blob.toString('base64'), comment].filter(Boolean).join(' '),
    fingerprintMd5: md5.match(/../g)!.join(':'),
    fingerprintSha256: 'SHA256:' + crypto.createHash('sha256').update(blob).digest('base64').replace(/=+$/, ''),
  };
}

/**
 * Parses OpenSSH public key text. Like GitLab, a blob wrapped over several lines or split by
 * spaces is joined back: parts are appended until they form a valid key, the rest is the comment.
 */
export function parseSshPublicKey(text: string): ParsedSshKey | null {
  const parts = text.trim().split(/\s+/).filter(Boolean);
  if (parts.length < 2) return null;
  const type = parts[0];
  if (!(SUPPORTED_KEY_TYPES as readonly string[]).includes(type)) return null;
  let base64 = '';
  for (let i = 1; i < parts.length; i++) {
    base64 += parts[i];
    const rest = parts.slice(i + 1).join(' ');
    const parsed = tryParse(type, base64, rest || null);
    if (parsed) return parsed;
  }
  return null;
}
