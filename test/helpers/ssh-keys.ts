import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** ssh-keygen when the machine has it; otherwise keys made with node:crypto in OpenSSH form. */
function hasSshKeygen(): boolean {
  try {
    execFileSync('ssh-keygen', ['-?'], { stdio: 'ignore' });
    return true;
  } catch (err: any) {
    return err?.code !== 'ENOENT';
  }
}

export const SSH_KEYGEN = hasSshKeygen();

export interface TestSshKey {
  /** The public key line: "<type> <base64> <comment>". */
  text: string;
  /** Path to the .pub file, when made by ssh-keygen. */
  file?: string;
}

function sshString(b: Buffer | string): Buffer {
  const body = Buffer.isBuffer(b) ? b : Buffer.from(b);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

function mpint(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return sshString(v[0] & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

export function makeNodeSshKey(type: string, bits: number, comment: string): TestSshKey {
  if (type === 'ed25519') {
    const jwk = crypto.generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
    const blob = Buffer.concat([sshString('ssh-ed25519'), sshString(Buffer.from(jwk.x!, 'base64url'))]);
    return { text: `ssh-ed25519 ${blob.toString('base64')} ${comment}` };
  }
  if (type === 'rsa') {
    const jwk = crypto.generateKeyPairSync('rsa', { modulusLength: bits }).publicKey.export({ format: 'jwk' });
    const blob = Buffer.concat([sshString('ssh-rsa'), mpint(Buffer.from(jwk.e!, 'base64url')), mpint(Buffer.from(jwk.n!, 'base64url'))]);
    return { text: `ssh-rsa ${blob.toString('base64')} ${comment}` };
  }
  const curve = { 256: 'P-256', 384: 'P-384', 521: 'P-521' }[bits]!;
  const jwk = crypto.generateKeyPairSync('ec', { namedCurve: curve }).publicKey.export({ format: 'jwk' });
  const q = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x!, 'base64url'), Buffer.from(jwk.y!, 'base64url')]);
  const name = `nistp${bits}`;
  const blob = Buffer.concat([sshString(`ecdsa-sha2-${name}`), sshString(name), sshString(q)]);
  return { text: `ecdsa-sha2-${name} ${blob.toString('base64')} ${comment}` };
}

let dir: string | null = null;
let seq = 0;

/** A fresh public key: type 'ed25519' | 'rsa' | 'ecdsa' | 'dsa' (dsa needs ssh-keygen). */
export function makeSshKey(type: 'ed25519' | 'rsa' | 'ecdsa' | 'dsa' = 'ed25519', bits?: number, comment = 'tester@example.com'): TestSshKey {
  if (!SSH_KEYGEN) return makeNodeSshKey(type, bits ?? (type === 'rsa' ? 2048 : 256), comment);
  dir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-ssh-'));
  const file = path.join(dir, `k${process.pid}_${++seq}`);
  const args = ['-q', '-t', type, '-N', '', '-C', comment, '-f', file];
  if (bits) args.push('-b', String(bits));
  execFileSync('ssh-keygen', args, { stdio: 'ignore' });
  return { text: fs.readFileSync(`${file}.pub`, 'utf8').trim(), file: `${file}.pub` };
}

/** ssh-keygen's own fingerprints of a key file: { sha256: 'SHA256:...', md5: 'aa:bb:...' }. */
export function sshKeygenFingerprints(file: string): { sha256: string; md5: string } {
  const sha256 = execFileSync('ssh-keygen', ['-lf', file]).toString().split(' ')[1];
  const md5 = execFileSync('ssh-keygen', ['-E', 'md5', '-lf', file]).toString().split(' ')[1].replace(/^MD5:/, '');
  return { sha256, md5 };
}

export function cleanupSshKeys() {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = null;
}
