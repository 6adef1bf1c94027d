import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Secrets Cairn must read back (registration tokens, CI variable values) are kept encrypted
 * with AES-256-GCM. The key comes from CAIRN_SECRET_KEY (any string; hashed to 32 bytes) or,
 * without it, from `$CAIRN_DATA_DIR/secret_key`, created at first need (processes sharing a
 * database must then share that file or set CAIRN_SECRET_KEY alike).
 */
const keys = new Map<string, Buffer>();

function keyFor(dataDir: string): Buffer {
  const env = process.env.CAIRN_SECRET_KEY;
  const id = env ? `env:${env}` : `dir:${dataDir}`;
  let key = keys.get(id);
  if (key) return key;
  let material = env;
  if (!material) {
    const file = path.join(dataDir, 'secret_key');
    try {
      material = fs.readFileSync(file, 'utf8').trim();
    } catch {
      fs.mkdirSync(dataDir, { recursive: true });
      try {
        fs.writeFileSync(file, crypto.randomBytes(32).toString('hex') + '\n', { flag: 'wx', mode: 0o600 });
      } catch (err: any) {
        if (err?.code !== 'EEXIST') throw err;
      }
      material = fs.readFileSync(file, 'utf8').trim();
    }
  }
  key = crypto.createHash('sha256').update(material).digest();
  keys.set(id, key);
  return key;
}

/** `v1:<iv>:<tag>:<ciphertext>`, base64 parts. */
export function encryptSecret(config: { dataDir: string }, plain: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', keyFor(config.dataDir), iv);
  const data = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return `v1:${iv.toString('base64')}:${cipher.getAuthTag().toString('base64')}:${data.toString('base64')}`;
}

/** The plain text, or null when the value cannot be decrypted with this key. */
export function decryptSecret(config: { dataDir: string }, stored: string): string | null {
  const [v, iv, tag, data] = stored.split(':');
  if (v !== 'v1' || !iv || !tag || data === undefined) return null;
  try {
    const decipher = crypto.createDecipheriv('aes-256-gcm', keyFor(config.dataDir), Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}
