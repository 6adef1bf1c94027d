import fs from 'node:fs';
import path from 'node:path';
import ssh2 from 'ssh2';

/**
 * The SSH server's host keys, made at first start under `<data dir>/ssh` and kept (clients
 * remember them: a new key every start would be a man-in-the-middle warning): ed25519, and RSA
 * for old clients. Private keys are 0600. Two processes starting at once on one data directory
 * agree on one key each (the first link wins, the other reads it).
 */
const HOST_KEYS = [
  { file: 'ssh_host_ed25519_key', make: () => ssh2.utils.generateKeyPairSync('ed25519') },
  { file: 'ssh_host_rsa_key', make: () => ssh2.utils.generateKeyPairSync('rsa', { bits: 3072 }) },
] as const;

export function hostKeysDir(dataDir: string): string {
  return path.join(dataDir, 'ssh');
}

/** The private host keys in OpenSSH format, generated when missing. */
export function loadHostKeys(dataDir: string): Buffer[] {
  const dir = hostKeysDir(dataDir);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return HOST_KEYS.map(({ file, make }) => {
    const full = path.join(dir, file);
    if (!fs.existsSync(full)) {
      const pair = make();
      const tmp = `${full}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, pair.private, { mode: 0o600 });
      fs.writeFileSync(`${tmp}.pub`, `${pair.public.trim()} cairn\n`, { mode: 0o644 });
      try {
        fs.linkSync(tmp, full);
        fs.renameSync(`${tmp}.pub`, `${full}.pub`);
      } catch (err: any) {
        if (err?.code !== 'EEXIST') throw err;
      } finally {
        fs.rmSync(tmp, { force: true });
        fs.rmSync(`${tmp}.pub`, { force: true });
      }
    }
    const stat = fs.statSync(full);
    if (stat.mode & 0o077) fs.chmodSync(full, 0o600);
    return fs.readFileSync(full);
  });
}
