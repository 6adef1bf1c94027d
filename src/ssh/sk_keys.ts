import crypto from 'node:crypto';

/**
 * Signatures of FIDO security keys (`sk-ssh-ed25519@openssh.com`,
 * `sk-ecdsa-sha2-nistp256@openssh.com`), which ssh2 does not verify, by OpenSSH's PROTOCOL.u2f:
 * the authenticator signs SHA256(application) || flags || counter || SHA256(data), and the SSH
 * signature carries the flags and counter after the signature proper. ssh2 hands over the
 * signature with the algorithm name and its own length taken off: for ed25519 the 64 signature
 * bytes, for ECDSA the mpints r and s, then flags (1 byte) and counter (4 bytes).
 * The user-presence flag (0x01) is required, as sshd requires it by default.
 */
export const SK_ALGORITHMS = ['sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com'] as const;

const USER_PRESENT = 0x01;

class Reader {
  private pos = 0;
  constructor(private readonly buf: Buffer) {}
  string(): Buffer {
    if (this.pos + 4 > this.buf.length) throw new Error('truncated');
    const len = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    if (len > this.buf.length - this.pos) throw new Error('truncated');
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }
  bytes(n: number): Buffer {
    if (this.pos + n > this.buf.length) throw new Error('truncated');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  rest(): Buffer {
    return this.buf.subarray(this.pos);
  }
  get done() {
    return this.pos === this.buf.length;
  }
}

const sha256 = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest();

/** An unsigned big-endian integer (an SSH mpint's body) left-padded to `size` bytes. */
function fixed(mpint: Buffer, size: number): Buffer | null {
  let i = 0;
  while (i < mpint.length - 1 && mpint[i] === 0) i++;
  const v = mpint.subarray(i);
  if (v.length > size) return null;
  return Buffer.concat([Buffer.alloc(size - v.length), v]);
}

/** Whether `signature` (as ssh2 passes it) is `keyBlob`'s security key signing `data`. */
export function verifySkSignature(keyBlob: Buffer, signature: Buffer, data: Buffer): boolean {
  try {
    const key = new Reader(keyBlob);
    const type = key.string().toString('latin1');
    if (type === 'sk-ssh-ed25519@openssh.com') {
      const pk = key.string();
      const application = key.string();
      if (!key.done || pk.length !== 32) return false;
      const sig = new Reader(signature);
      const raw = sig.bytes(64);
      const flags = sig.bytes(1);
      const counter = sig.bytes(4);
      if (!sig.done || !(flags[0] & USER_PRESENT)) return false;
      const signed = Buffer.concat([sha256(application), flags, counter, sha256(data)]);
      const publicKey = crypto.createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: pk.toString('base64url') }, format: 'jwk' });
      return crypto.verify(null, signed, publicKey, raw);
    }
    if (type === 'sk-ecdsa-sha2-nistp256@openssh.com') {
      if (key.string().toString('latin1') !== 'nistp256') return false;
      const q = key.string();
      const application = key.string();
      if (!key.done || q.length !== 65 || q[0] !== 4) return false;
      const sig = new Reader(signature);
      const r = fixed(sig.string(), 32);
      const s = fixed(sig.string(), 32);
      const flags = sig.bytes(1);
      const counter = sig.bytes(4);
      if (!sig.done || !r || !s || !(flags[0] & USER_PRESENT)) return false;
      const signed = Buffer.concat([sha256(application), flags, counter, sha256(data)]);
      const publicKey = crypto.createPublicKey({
        key: { kty: 'EC', crv: 'P-256', x: q.subarray(1, 33).toString('base64url'), y: q.subarray(33).toString('base64url') },
        format: 'jwk',
      });
      return crypto.verify('sha256', signed, { key: publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.concat([r, s]));
    }
    return false;
  } catch {
    return false;
  }
}
