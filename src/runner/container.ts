// The image executor's pieces (issue #27): a job's steps and its services run in bubblewrap
// sandboxes whose root is an overlay over an unpacked image (image_source.ts), in the job's own
// network namespace (job_namespace.ts). Here: the container's argv as Docker builds it (entrypoint
// and command), the user an image names (its /etc/passwd, read without following links), the
// names services answer on (GitLab's derived names and aliases), the generated /etc/hosts, the
// environment (the image's Env under the job's variables) and the bwrap arguments.
import fs from 'node:fs';
import path from 'node:path';
import type { ImageConfig } from './image_source.js';
import { Dir, openPath } from './nofollow.js';

/** Docker's PATH when an image sets none. */
export const DEFAULT_IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Docker's rule for a container's command line: an entrypoint given in the job (`[""]` clears
 * it) replaces the image's and the image's CMD is not used; otherwise the image's ENTRYPOINT,
 * then the job's command or else the image's CMD.
 */
export function containerArgv(image: Pick<ImageConfig, 'entrypoint' | 'cmd'>, entrypoint: string[] | null | undefined, command: string[] | null | undefined): string[] {
  if (entrypoint && entrypoint.length) {
    const ep = entrypoint.length === 1 && entrypoint[0] === '' ? [] : entrypoint;
    return [...ep, ...(command ?? [])];
  }
  return [...(image.entrypoint ?? []), ...(command?.length ? command : (image.cmd ?? []))];
}

/** The entrypoint of a build container (the job's override, else the image's): the script is run through it, as the docker executor does. */
export function buildEntrypoint(image: Pick<ImageConfig, 'entrypoint'>, override: string[] | null | undefined): string[] {
  if (override && override.length) return override.length === 1 && override[0] === '' ? [] : override;
  return image.entrypoint ?? [];
}

/**
 * gitlab-runner's shell detection in a container: bash where the image has it, else sh. Run as
 * `sh -c <this> sh <script>`.
 */
export const DETECT_SHELL = [
  'if [ -x /usr/local/bin/bash ]; then exec /usr/local/bin/bash --noprofile --norc "$@"',
  'elif [ -x /usr/bin/bash ]; then exec /usr/bin/bash --noprofile --norc "$@"',
  'elif [ -x /bin/bash ]; then exec /bin/bash --noprofile --norc "$@"',
  'elif [ -x /usr/local/bin/sh ]; then exec /usr/local/bin/sh "$@"',
  'elif [ -x /usr/bin/sh ]; then exec /usr/bin/sh "$@"',
  'elif [ -x /bin/sh ]; then exec /bin/sh "$@"',
  'elif [ -x /busybox/sh ]; then exec /busybox/sh "$@"',
  'else echo "shell not found" >&2; exit 1',
  'fi',
].join('\n');

export interface ImageUser {
  uid: number;
  gid: number;
  /** The user's home directory from /etc/passwd ("/" when the image does not list the user). */
  home: string;
  name: string;
}

export class ContainerError extends Error {}

const MAX_ACCOUNT_FILE = 4 * 1024 * 1024;

/** A regular file at `rel` (no link anywhere on the way) in the image's root, or null. */
function readImageFile(rootfs: string, rel: string[]): string | null {
  let root: Dir;
  try {
    root = Dir.open(rootfs);
  } catch {
    return null;
  }
  try {
    const parent = openPath(root, rel.slice(0, -1));
    if (!('dir' in parent)) return null;
    try {
      let fd: number;
      try {
        fd = fs.openSync(parent.dir.at(rel[rel.length - 1]), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
      } catch {
        return null;
      }
      try {
        const st = fs.fstatSync(fd);
        if (!st.isFile() || st.size > MAX_ACCOUNT_FILE) return null;
        return fs.readFileSync(fd, 'utf8');
      } finally {
        fs.closeSync(fd);
      }
    } finally {
      parent.dir.close();
    }
  } finally {
    root.close();
  }
}

const ID = /^\d{1,10}$/;
const MAX_ID = 2 ** 32 - 2;

/**
 * The user a container runs as (Docker's `user` forms: `name`, `uid`, `name:group`, `uid:gid`),
 * resolved in the image's /etc/passwd and /etc/group; an empty spec is root.
 */
export function resolveImageUser(rootfs: string, spec: string): ImageUser {
  const s = spec.trim();
  if (!s) return lookupPasswd(rootfs, '0') ?? { uid: 0, gid: 0, home: '/root', name: 'root' };
  const [u, g, extra] = s.split(':');
  if (extra !== undefined || !u) throw new ContainerError(`invalid user "${s}": expected name, uid, name:group or uid:gid`);
  const found = lookupPasswd(rootfs, u);
  let user: ImageUser;
  if (found) user = found;
  else if (ID.test(u) && Number(u) <= MAX_ID) user = { uid: Number(u), gid: 0, home: '/', name: u };
  else throw new ContainerError(`unable to find user ${u}: no matching entries in the image's /etc/passwd`);
  if (g !== undefined) {
    if (ID.test(g) && Number(g) <= MAX_ID) user.gid = Number(g);
    else {
      const gid = lookupGroup(rootfs, g);
      if (gid === null) throw new ContainerError(`unable to find group ${g}: no matching entries in the image's /etc/group`);
      user.gid = gid;
    }
  }
  return user;
}

function lookupPasswd(rootfs: string, nameOrId: string): ImageUser | null {
  const text = readImageFile(rootfs, ['etc', 'passwd']);
  if (!text) return null;
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length < 7 || !ID.test(f[2]) || !ID.test(f[3])) continue;
    if (f[0] === nameOrId || (ID.test(nameOrId) && Number(f[2]) === Number(nameOrId))) {
      return { name: f[0], uid: Number(f[2]), gid: Number(f[3]), home: f[5] || '/' };
    }
  }
  return null;
}

function lookupGroup(rootfs: string, name: string): number | null {
  const text = readImageFile(rootfs, ['etc', 'group']);
  if (!text) return null;
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length >= 3 && f[0] === name && ID.test(f[2])) return Number(f[2]);
  }
  return null;
}

/**
 * The names gitlab-runner derives from a service's image: the image name without tag, digest
 * and registry port, with `/` turned into `__`, and (when different) into `-`.
 * `postgres:15` -> postgres; `registry.example.com:5000/group/tutum/wordpress:latest` ->
 * registry.example.com__group__tutum__wordpress, registry.example.com-group-tutum-wordpress.
 */
export function derivedServiceNames(image: string): string[] {
  let name = image.trim();
  const at = name.indexOf('@');
  if (at >= 0) name = name.slice(0, at);
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/')) name = name.slice(0, colon);
  // A reference as Docker reads it (a registry host with an optional port, then path components).
  if (!/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:\d+)?(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$/.test(name)) return [];
  if (!name.includes('/') && /[A-Z]/.test(name)) return [];
  const [, host, , rest] = /^(.*?)(|:[0-9]+)(|\/.*)$/.exec(name)!;
  const service = host + rest;
  const a = service.replace(/\//g, '__');
  const b = service.replace(/\//g, '-');
  return a === b ? [a] : [a, b];
}

/** A service's `alias` value: several names, comma or space separated (gitlab-runner's Aliases()). */
export function splitAliases(alias: string | null | undefined): string[] {
  return String(alias ?? '')
    .replace(/,/g, ' ')
    .split(/\s+/)
    .filter(Boolean);
}

const HOST_NAME = /^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$/;

/** A name /etc/hosts can carry (letters, digits, `.`, `-`, `_`; not starting or ending with `.` or `-`). */
export function validHostName(name: string): boolean {
  return HOST_NAME.test(name) && !name.includes('..');
}

/** The job's /etc/hosts: every name on the loopback, where the services of the job listen. */
export function hostsFile(names: string[]): string {
  const lines = ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback'];
  for (const n of [...new Set(names)]) if (n !== 'localhost' && validHostName(n)) lines.push(`127.0.0.1\t${n}`);
  return lines.join('\n') + '\n';
}

/**
 * The DNS configuration jobs get: the machine's /etc/resolv.conf (pasta forwards the namespace's
 * outbound connections, so the machine's resolvers are reachable unless they are on its
 * loopback). Returns the text, and a warning when every resolver is on loopback.
 */
export function resolvConf(): { text: string; warning: string | null } {
  let text = '';
  try {
    text = fs.readFileSync('/etc/resolv.conf', 'utf8');
  } catch {
    return { text: '', warning: 'this machine has no /etc/resolv.conf: jobs resolve no names but their services' };
  }
  const servers = [...text.matchAll(/^\s*nameserver\s+(\S+)/gm)].map((m) => m[1]);
  const loopback = (s: string) => /^127\./.test(s) || s === '::1';
  if (servers.length && servers.every(loopback)) {
    return { text, warning: `the machine's resolvers (${servers.join(', ')}) are on its loopback, which jobs do not reach: name lookups fail inside jobs (set a real resolver in /etc/resolv.conf)` };
  }
  return { text, warning: null };
}

/** `KEY=value` entries as an object (the first `=` splits; entries without one are dropped). */
export function envEntries(entries: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of entries) {
    const i = e.indexOf('=');
    if (i > 0) out[e.slice(0, i)] = e.slice(i + 1);
  }
  return out;
}

/**
 * A container's environment: the image's Env (PATH from the image, Docker's default when it has
 * none; HOME from the user's passwd entry unless the image sets it), then the job's variables,
 * then what the runner sets (CI_PROJECT_DIR...), as Docker merges a container's Env over its image's.
 */
export function containerEnvironment(imageEnv: string[], user: ImageUser, job: Record<string, string>, runner: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = { PATH: DEFAULT_IMAGE_PATH, HOME: user.home || '/', ...envEntries(imageEnv) };
  return { ...env, ...job, ...runner };
}

/** Docker's default capabilities: what root in a container keeps (inside the job's user namespace only). */
export const DOCKER_DEFAULT_CAPS = [
  'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE', 'CAP_NET_RAW', 'CAP_SYS_CHROOT', 'CAP_MKNOD', 'CAP_AUDIT_WRITE', 'CAP_SETFCAP',
];

export interface ContainerSandboxSpec {
  /** The container's root: the job's overlay over the image (mounted in the job namespace's mount namespace). */
  root: string;
  user: ImageUser;
  hostname: string;
  /** Host paths bound into the container (the build directory, the scripts, /etc/hosts...). */
  binds: { src: string; dest: string; readOnly?: boolean }[];
  cwd: string;
  env: Record<string, string>;
  /** Size of /dev/shm, bytes. */
  shmSize: number;
  /** bwrap has --disable-userns (0.8+): no user namespaces inside the container. */
  disableUserns: boolean;
}

/**
 * bwrap's options for a container, without the command (they go through `--args <fd>`: the
 * environment is in them and must not show in the machine's process list): a user namespace where
 * the container's user is the runner's job user, its own PID, IPC and UTS namespaces, the overlay
 * as `/`, a fresh /proc with /proc/sys read-only, a minimal /dev with its own /dev/shm, the binds.
 * bwrap runs as the job user (the runner drops to it first), so nothing here is privileged
 * outside the container's user namespace.
 */
export function containerSandboxOptions(spec: ContainerSandboxSpec): string[] {
  const args = [
    '--unshare-user', '--uid', String(spec.user.uid), '--gid', String(spec.user.gid),
    '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--hostname', spec.hostname,
    '--die-with-parent', '--new-session',
    '--bind', spec.root, '/',
    '--proc', '/proc', '--ro-bind', '/proc/sys', '/proc/sys',
    '--dev', '/dev',
    '--size', String(spec.shmSize), '--perms', '1777', '--tmpfs', '/dev/shm',
  ];
  for (const b of spec.binds) args.push(b.readOnly ? '--ro-bind' : '--bind', b.src, b.dest);
  if (spec.disableUserns) args.push('--disable-userns');
  args.push('--chdir', spec.cwd);
  // Root in the container gets Docker's capability set (within its own user namespace); another user none.
  if (spec.user.uid === 0) for (const c of DOCKER_DEFAULT_CAPS) args.push('--cap-add', c);
  args.push('--clearenv');
  // An environment cannot carry a NUL byte; here one would also split bwrap's NUL-separated
  // arguments and smuggle options in (`x\0--bind\0/\0/host`): such a variable is left out.
  for (const [k, v] of Object.entries(spec.env)) if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) && !v.includes('\0')) args.push('--setenv', k, v);
  const bad = args.find((a) => a.includes('\0'));
  if (bad !== undefined) throw new ContainerError(`refusing a container option with a NUL byte: ${JSON.stringify(bad.slice(0, 100))}`);
  return args;
}

/** `/builds/<namespace>/<project>` as the docker executor names it (CI_PROJECT_PATH), else `/builds/project-<id>`. */
export function containerProjectDir(projectPath: string | undefined, projectId: string | number | undefined): string {
  const segs = String(projectPath ?? '').split('/');
  if (projectPath && segs.every((s) => /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(s) && s !== '..' && !s.endsWith('.git'))) return path.posix.join('/builds', ...segs);
  return `/builds/project-${/^\d+$/.test(String(projectId ?? '')) ? projectId : '0'}`;
}

/** A probe run inside the job's network namespace: exits 0 once one of the ports accepts a TCP connection, 1 after the timeout. */
export const PORT_PROBE = `
const net = require('node:net');
const [ms, ...ports] = process.argv.slice(1).map(Number);
const end = Date.now() + ms;
const tryPort = (port) => new Promise((resolve) => {
  const s = net.connect({ host: '127.0.0.1', port });
  s.once('connect', () => { s.destroy(); resolve(true); });
  s.once('error', () => resolve(false));
});
(async () => {
  for (;;) {
    for (const p of ports) if (await tryPort(p)) { console.log('port ' + p + ' answers'); process.exit(0); }
    if (Date.now() >= end) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log('no connection to port ' + ports.join(', ') + ' in ' + ms / 1000 + ' s');
  process.exit(1);
})();
`;
