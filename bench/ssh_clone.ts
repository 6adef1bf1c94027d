// Clone over SSH: `git clone` from Cairn's SSH server (src/ssh/) versus OpenSSH's sshd on a
// loopback port whose authorized key forces `git-upload-pack` on the same bare repository (the
// floor: what a git host behind OpenSSH does, minus its own checks). Both with protocol v2 (sshd
// accepts GIT_PROTOCOL), the same client, key type and cipher negotiation left to the defaults.
// Cairn's pack-objects cache is off, so every clone packs afresh on both sides. The repository is
// the 10,000-commit one of bench/repository.ts (BENCH_COMMITS); the server runs in its own
// process (bench/lib.ts), on PostgreSQL when DATABASE_URL is set. Needs root (sshd) and
// /usr/sbin/sshd. Target: Cairn >= 0.9 of sshd's speed.
// Run: `node --import tsx bench/ssh_clone.ts [runs]`.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { BENCH_TOKEN, formatTimings, freePort, median, startServer, timeClones } from './lib.js';
import { createBigRepository } from './repository.js';

export interface SshCloneBenchResult {
  sshdMs: number[];
  cairnMs: number[];
  /** Speed of Cairn relative to sshd, from the medians (1.0 = as fast). */
  ratio: number;
}

export const SSH_CLONE_TARGET = 0.9;

async function waitForPort(port: number) {
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** OpenSSH's sshd on a free loopback port, its one authorized key forced to upload-pack `gitDir`. */
async function startSshd(dir: string, publicKey: string, gitDir: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const hostKey = path.join(dir, 'sshd_host_ed25519_key');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  const authorized = path.join(dir, 'authorized_keys');
  const git = execFileSync('sh', ['-c', 'command -v git-upload-pack || echo "$(git --exec-path)/git-upload-pack"']).toString().trim();
  fs.writeFileSync(authorized, `command="${git} '${gitDir}'",no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty ${publicKey}\n`, { mode: 0o600 });
  const config = path.join(dir, 'sshd_config');
  fs.writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `AuthorizedKeysFile ${authorized}`,
      `PidFile ${path.join(dir, 'sshd.pid')}`,
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'UsePAM no',
      'StrictModes no',
      'AcceptEnv GIT_PROTOCOL',
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const child = spawn('/usr/sbin/sshd', ['-D', '-f', config], { stdio: 'ignore' });
  await waitForPort(port);
  return { port, child };
}

export async function runSshCloneBench(runs = Number(process.env.BENCH_CLONE_RUNS || 7)): Promise<SshCloneBenchResult> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-ssh-clone-'));
  const key = path.join(tmp, 'id_ed25519');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'bench', '-f', key]);
  const publicKey = fs.readFileSync(`${key}.pub`, 'utf8').trim();
  const sshCommand = `ssh -F /dev/null -i ${key} -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR`;
  const env = {
    PATH: process.env.PATH,
    HOME: tmp,
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    LC_ALL: 'C',
    GIT_SSH_COMMAND: sshCommand,
  };
  const sshPort = await freePort();
  const server = await startServer({ CAIRN_SSH_PORT: String(sshPort), CAIRN_SSH_HOST: '127.0.0.1', CAIRN_PACK_OBJECTS_CACHE_MAX_AGE: '0' });
  let sshd: ChildProcess | null = null;
  try {
    const { project, gitDir, importMs } = await createBigRepository(server, 'bench-ssh-clone');
    console.log(`repository: ${process.env.BENCH_COMMITS || 10_000} commits imported in ${importMs} ms`);
    // A fresh connection: the import takes about as long as the server keeps an idle one open.
    const added = await fetch(`${server.url}/api/v4/user/keys`, {
      method: 'POST',
      headers: { 'private-token': BENCH_TOKEN, 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ title: 'bench', key: publicKey }),
    }).catch(() =>
      fetch(`${server.url}/api/v4/user/keys`, {
        method: 'POST',
        headers: { 'private-token': BENCH_TOKEN, 'content-type': 'application/json', connection: 'close' },
        body: JSON.stringify({ title: 'bench', key: publicKey }),
      }),
    );
    if (added.status !== 201) throw new Error(`adding the key: ${added.status} ${await added.text()}`);
    const started = await startSshd(tmp, publicKey, gitDir);
    sshd = started.child;
    const user = os.userInfo().username;
    const cairnArgs = ['-c', 'protocol.version=2', 'clone', '-q', `ssh://git@127.0.0.1:${sshPort}/${project.path_with_namespace}.git`];
    const sshdArgs = ['-c', 'protocol.version=2', 'clone', '-q', `ssh://${user}@127.0.0.1:${started.port}/forced.git`];
    const { floorMs: sshdMs, cairnMs } = await timeClones(tmp, env, sshdArgs, cairnArgs, runs);
    return { sshdMs, cairnMs, ratio: median(sshdMs) / median(cairnMs) };
  } finally {
    sshd?.kill();
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export function printSshCloneResult(r: SshCloneBenchResult): boolean {
  const fmt = formatTimings;
  console.log(`git clone over OpenSSH sshd + git-upload-pack (floor): ${fmt(r.sshdMs)}`);
  console.log(`git clone over Cairn SSH:                             ${fmt(r.cairnMs)}`);
  const met = r.ratio >= SSH_CLONE_TARGET;
  console.log(`speed ratio Cairn/sshd: ${r.ratio.toFixed(2)} (target >= ${SSH_CLONE_TARGET.toFixed(2)}) ${met ? 'OK' : 'BELOW TARGET'}`);
  return !met;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  printSshCloneResult(await runSshCloneBench(process.argv[2] ? Number(process.argv[2]) : undefined));
}
