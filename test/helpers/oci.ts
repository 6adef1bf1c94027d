// OCI images and a registry for tests, made on this machine (no Docker, no internet):
// - buildImage([dir,] options): an OCI image layout built in Node from a busybox-static rootfs
//   (/bin/busybox and links to it), optional extra files and raw (possibly hostile) layers, an
//   image config (env, entrypoint, cmd, workingDir, user, exposedPorts), other platforms; cached
//   under .cache/oci-images/ by a digest of what it was asked for (repeated runs are fast), and
//   copied to `dir` when one is given;
// - startRegistry: Debian's docker-registry on a free 127.0.0.1 port, storage in a temporary
//   directory, with htpasswd (bcrypt) authentication when asked;
// - pushImage: `skopeo copy oci:<layout>:<ref> docker://127.0.0.1:<port>/<name:tag>`.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { tarArchive, type TarEntry } from './tar.js';

export type { TarEntry } from './tar.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CACHE = path.join(ROOT, '.cache', 'oci-images');
const BUSYBOX = '/bin/busybox';

/** Applets linked in /bin (busybox-static has them all; these are the ones jobs and services use). */
export const BUSYBOX_APPLETS = [
  'sh', 'ash', 'ls', 'cat', 'echo', 'env', 'id', 'nc', 'httpd', 'sleep', 'wget', 'mkdir', 'rm', 'cp', 'mv', 'touch',
  'chmod', 'chown', 'ln', 'pwd', 'printf', 'test', '[', 'true', 'false', 'grep', 'sed', 'awk', 'head', 'tail', 'wc',
  'sort', 'tr', 'cut', 'find', 'xargs', 'tar', 'gzip', 'hostname', 'ps', 'kill', 'mount', 'stat', 'readlink', 'basename',
  'dirname', 'date', 'uname', 'whoami', 'seq', 'tee', 'which', 'expr', 'sha256sum', 'md5sum', 'df', 'du', 'ip', 'ping',
];

export interface ImageFile {
  content?: Buffer | string;
  mode?: number;
  type?: 'file' | 'dir' | 'symlink';
  /** Target of a symlink. */
  target?: string;
  uid?: number;
  gid?: number;
}

export interface BuildImageOptions {
  /** Files added to the busybox rootfs (path without a leading slash -> content or details). */
  files?: Record<string, string | Buffer | ImageFile>;
  env?: string[];
  entrypoint?: string[] | null;
  cmd?: string[] | null;
  workingDir?: string;
  user?: string;
  /** Ports such as 80 or '53/udp'. */
  exposedPorts?: Array<number | string>;
  /** Raw layers stacked on top of the base layer, entries written exactly as given (hostile tests). */
  layers?: TarEntry[][];
  /** No busybox base layer (only `files` and `layers`). */
  noBase?: boolean;
  /** The image's platform (default linux/<this machine's arch>). */
  os?: string;
  architecture?: string;
  /** Also build an image index with these other platforms (each a copy marked with /platform.txt). */
  alsoPlatforms?: Array<{ os: string; architecture: string; variant?: string }>;
  /** Layers compressed with gzip (default) or left as plain tar. */
  compress?: boolean;
}

export interface BuiltImage {
  /** The OCI layout directory (read-only: it is shared by every test that asks for the same image). */
  layout: string;
  /** The reference name of the image in the layout (`oci:<layout>:<ref>`). */
  ref: string;
  /** Digest of what `ref` names: the manifest, or the index with alsoPlatforms. */
  digest: string;
  /** Digest of the manifest for this machine's platform. */
  manifestDigest: string;
  /** Digest of that manifest's config (docker's image id). */
  configDigest: string;
}

export function hostArchitecture(): string {
  const map: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64' };
  return map[process.arch] ?? process.arch;
}

const sha256 = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest('hex');

function baseEntries(): TarEntry[] {
  const busybox = fs.readFileSync(BUSYBOX);
  const dirs = ['bin', 'etc', 'root', 'tmp', 'usr', 'usr/bin', 'var', 'var/tmp', 'home', 'dev', 'proc', 'sys', 'run'];
  return [
    ...dirs.map((d): TarEntry => ({ name: `${d}/`, type: 'dir', mode: d === 'tmp' || d === 'var/tmp' ? 0o1777 : d === 'root' ? 0o700 : 0o755 })),
    { name: 'bin/busybox', content: busybox, mode: 0o755 },
    ...BUSYBOX_APPLETS.map((a): TarEntry => ({ name: `bin/${a}`, type: 'symlink', linkname: 'busybox', mode: 0o777 })),
    { name: 'etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' },
    { name: 'etc/group', content: 'root:x:0:\nnogroup:x:65534:\n' },
  ];
}

function fileEntries(files: BuildImageOptions['files']): TarEntry[] {
  const entries: TarEntry[] = [];
  const dirs = new Set<string>();
  for (const [name, spec] of Object.entries(files ?? {})) {
    const clean = name.replace(/^\/+/, '');
    const parts = clean.split('/');
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join('/');
      if (!dirs.has(d)) {
        dirs.add(d);
        entries.push({ name: `${d}/`, type: 'dir' });
      }
    }
    const f: ImageFile = typeof spec === 'string' || Buffer.isBuffer(spec) ? { content: spec } : spec;
    const type = f.type ?? 'file';
    if (type === 'dir') entries.push({ name: `${clean}/`, type: 'dir', mode: f.mode, uid: f.uid, gid: f.gid });
    else if (type === 'symlink') entries.push({ name: clean, type: 'symlink', linkname: f.target ?? '', mode: 0o777, uid: f.uid, gid: f.gid });
    else entries.push({ name: clean, content: f.content ?? '', mode: f.mode, uid: f.uid, gid: f.gid });
  }
  return entries;
}

/** A key for the cache: the options with buffers replaced by their digests, and busybox's own. */
function cacheKey(o: BuildImageOptions): string {
  const json = JSON.stringify(
    { o, busybox: o.noBase ? null : fs.statSync(BUSYBOX).size + ':' + fs.statSync(BUSYBOX).mtimeMs, v: 1 },
    (_k, v) => {
      if (v && typeof v === 'object' && v.type === 'Buffer' && Array.isArray(v.data)) return `buffer:${sha256(Buffer.from(v.data))}`;
      return v;
    },
  );
  return sha256(json).slice(0, 32);
}

function writeBlob(layout: string, data: Buffer | string): { digest: string; size: number } {
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data);
  const hex = sha256(buf);
  fs.writeFileSync(path.join(layout, 'blobs', 'sha256', hex), buf);
  return { digest: `sha256:${hex}`, size: buf.length };
}

const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const INDEX = 'application/vnd.oci.image.index.v1+json';

/**
 * An OCI layout of an image built from busybox-static (plus `files`, `layers`); the same options
 * give the same layout, digests included (reproducible: mtime 0, gzip without a timestamp), and
 * it is built once per machine under .cache/oci-images/.
 */
export function buildImage(o?: BuildImageOptions): BuiltImage;
/** The same, copied to the new directory `dir` (which the caller may change or remove). */
export function buildImage(dir: string, o?: BuildImageOptions): BuiltImage;
export function buildImage(a?: string | BuildImageOptions, b?: BuildImageOptions): BuiltImage {
  if (typeof a === 'string') {
    const cached = buildCachedImage(b ?? {});
    fs.cpSync(cached.layout, a, { recursive: true, errorOnExist: true, force: false });
    fs.rmSync(path.join(a, 'cairn-test-image.json'), { force: true });
    return { ...cached, layout: path.resolve(a) };
  }
  return buildCachedImage(a ?? {});
}

function buildCachedImage(o: BuildImageOptions): BuiltImage {
  const key = cacheKey(o);
  const layout = path.join(CACHE, key);
  const ref = 'latest';
  const infoFile = path.join(layout, 'cairn-test-image.json');
  try {
    return JSON.parse(fs.readFileSync(infoFile, 'utf8')) as BuiltImage;
  } catch {
    /* build it */
  }
  fs.mkdirSync(CACHE, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(CACHE, `.build-${key}-`));
  fs.mkdirSync(path.join(tmp, 'blobs', 'sha256'), { recursive: true });
  fs.writeFileSync(path.join(tmp, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const compress = o.compress ?? true;

  const layerBlob = (entries: TarEntry[]) => {
    const tar = tarArchive(entries);
    const blob = compress ? zlib.gzipSync(tar, { level: 6 }) : tar;
    const { digest, size } = writeBlob(tmp, blob);
    return { descriptor: { mediaType: `application/vnd.oci.image.layer.v1.tar${compress ? '+gzip' : ''}`, digest, size }, diffId: `sha256:${sha256(tar)}` };
  };

  const platformImage = (platform: { os: string; architecture: string; variant?: string }, marker: string | null) => {
    const layerLists: TarEntry[][] = [];
    const first = [...(o.noBase ? [] : baseEntries()), ...fileEntries(o.files)];
    if (marker !== null) first.push({ name: 'platform.txt', content: marker });
    if (first.length) layerLists.push(first);
    layerLists.push(...(o.layers ?? []));
    const layers = layerLists.map(layerBlob);
    const exposed: Record<string, object> = {};
    for (const p of o.exposedPorts ?? []) exposed[typeof p === 'number' ? `${p}/tcp` : p.includes('/') ? p : `${p}/tcp`] = {};
    const config = {
      created: '1970-01-01T00:00:00Z',
      architecture: platform.architecture,
      ...(platform.variant ? { variant: platform.variant } : {}),
      os: platform.os,
      config: {
        ...(o.user !== undefined ? { User: o.user } : {}),
        ...(o.exposedPorts?.length ? { ExposedPorts: exposed } : {}),
        Env: o.env ?? ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
        ...(o.entrypoint ? { Entrypoint: o.entrypoint } : {}),
        ...(o.cmd !== null ? { Cmd: o.cmd ?? ['sh'] } : {}),
        ...(o.workingDir ? { WorkingDir: o.workingDir } : {}),
      },
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) },
      history: layers.map(() => ({ created: '1970-01-01T00:00:00Z', created_by: 'cairn test/helpers/oci.ts' })),
    };
    const configBlob = writeBlob(tmp, JSON.stringify(config));
    const manifest = {
      schemaVersion: 2,
      mediaType: MANIFEST,
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configBlob },
      layers: layers.map((l) => l.descriptor),
    };
    return { manifest: writeBlob(tmp, JSON.stringify(manifest)), config: configBlob, platform };
  };

  const host = { os: o.os ?? 'linux', architecture: o.architecture ?? hostArchitecture() };
  const main = platformImage(host, o.alsoPlatforms?.length ? `${host.os}/${host.architecture}` : null);
  let top: { digest: string; size: number; mediaType: string } = { ...main.manifest, mediaType: MANIFEST };
  if (o.alsoPlatforms?.length) {
    const others = o.alsoPlatforms.map((p) => platformImage(p, `${p.os}/${p.architecture}${p.variant ? `/${p.variant}` : ''}`));
    const index = {
      schemaVersion: 2,
      mediaType: INDEX,
      manifests: [...others, main].map((m) => ({ mediaType: MANIFEST, ...m.manifest, platform: m.platform })),
    };
    top = { ...writeBlob(tmp, JSON.stringify(index)), mediaType: INDEX };
  }
  fs.writeFileSync(
    path.join(tmp, 'index.json'),
    JSON.stringify({ schemaVersion: 2, manifests: [{ ...top, annotations: { 'org.opencontainers.image.ref.name': ref } }] }),
  );
  const info: BuiltImage = { layout, ref, digest: top.digest, manifestDigest: main.manifest.digest, configDigest: main.config.digest };
  fs.writeFileSync(path.join(tmp, 'cairn-test-image.json'), JSON.stringify(info));
  try {
    fs.renameSync(tmp, layout);
  } catch (err) {
    // Another test process built the same image meanwhile: theirs is identical.
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!fs.existsSync(infoFile)) throw err;
  }
  return info;
}

// ---- registry ----------------------------------------------------------------------------------

export interface TestRegistry {
  /** host:port, e.g. 127.0.0.1:41234 */
  host: string;
  port: number;
  /** Requests the registry has logged so far (its access log is read as it arrives, so a count right after a synchronous push may lag). */
  requests(): number;
  stop(): Promise<void>;
}

/** Whether the tools the registry tests need are installed (the reason when not). */
export function registryToolsMissing(): string | null {
  const missing = ['skopeo', 'umoci', 'docker-registry'].filter((t) => spawnSync('sh', ['-c', 'command -v "$1"', 'sh', t]).status !== 0);
  if (!fs.existsSync(BUSYBOX) || !isStaticElf(BUSYBOX)) missing.push('busybox-static (/bin/busybox, statically linked)');
  try {
    htpasswdLine('probe', 'probe');
  } catch {
    missing.push('htpasswd (apache2-utils)');
  }
  if (missing.length) return `not installed: ${missing.join(', ')} (Debian: apt-get install skopeo umoci docker-registry busybox-static apache2-utils)`;
  return null;
}

/** An ELF executable without a program interpreter (PT_INTERP): it runs in an image without libraries. */
function isStaticElf(file: string): boolean {
  const b = fs.readFileSync(file);
  if (b.length < 64 || b.readUInt32BE(0) !== 0x7f454c46) return false;
  const is64 = b[4] === 2;
  const le = b[5] === 1;
  const u16 = (o: number) => (le ? b.readUInt16LE(o) : b.readUInt16BE(o));
  const u32 = (o: number) => (le ? b.readUInt32LE(o) : b.readUInt32BE(o));
  const phoff = is64 ? Number(le ? b.readBigUInt64LE(32) : b.readBigUInt64BE(32)) : u32(28);
  const phentsize = u16(is64 ? 54 : 42);
  const phnum = u16(is64 ? 56 : 44);
  for (let i = 0; i < phnum; i++) if (u32(phoff + i * phentsize) === 3) return false;
  return true;
}

/** A bcrypt htpasswd line (docker-registry accepts bcrypt only): htpasswd (apache2-utils), else Python's crypt. */
function htpasswdLine(username: string, password: string): string {
  const h = spawnSync('htpasswd', ['-nbB', '-C', '4', username, password], { encoding: 'utf8' });
  if (h.status === 0 && h.stdout.includes(':$2')) return h.stdout.trim();
  const py = spawnSync(
    'python3',
    ['-W', 'ignore', '-c', 'import crypt,sys; print(sys.argv[1] + ":" + crypt.crypt(sys.argv[2], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))', username, password],
    { encoding: 'utf8' },
  );
  if (py.status === 0 && py.stdout.includes(':$2')) return py.stdout.trim();
  throw new Error('cannot make a bcrypt password hash for the test registry: install apache2-utils (htpasswd)');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function probe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/v2/', timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200 || res.statusCode === 401);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}

/**
 * Debian's docker-registry on a free port of 127.0.0.1 (plain HTTP), its storage in a temporary
 * directory removed by stop(). With `auth`, only that user gets in (htpasswd).
 */
export async function startRegistry(o: { auth?: { username: string; password: string } } = {}): Promise<TestRegistry> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-registry-'));
  fs.mkdirSync(path.join(dir, 'storage'));
  let auth = '';
  if (o.auth) {
    fs.writeFileSync(path.join(dir, 'htpasswd'), htpasswdLine(o.auth.username, o.auth.password) + '\n');
    auth = `auth:\n  htpasswd:\n    realm: cairn-test\n    path: ${path.join(dir, 'htpasswd')}\n`;
  }
  let lastError = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    fs.writeFileSync(
      path.join(dir, 'config.yml'),
      `version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: ${path.join(dir, 'storage')}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n  secret: cairn-test-secret\n${auth}`,
    );
    const child: ChildProcess = spawn('docker-registry', ['serve', path.join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', OTEL_TRACES_EXPORTER: 'none' } });
    let requests = 0;
    let output = '';
    const onData = (b: Buffer) => {
      const s = b.toString();
      output = (output + s).slice(-4000);
      // One access-log line per request the registry served.
      requests += s.split('\n').filter((l) => /"(GET|HEAD|PUT|POST|PATCH|DELETE) \/v2\//.test(l)).length;
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    let exited = false;
    child.once('exit', () => (exited = true));
    const deadline = Date.now() + 30_000;
    while (!exited && Date.now() < deadline && !(await probe(port))) await new Promise((r) => setTimeout(r, 100));
    if (!exited && Date.now() < deadline) {
      const probes = requests;
      return {
        host: `127.0.0.1:${port}`,
        port,
        requests: () => requests - probes,
        stop: async () => {
          if (!exited) {
            const gone = new Promise((r) => child.once('exit', r));
            child.kill('SIGTERM');
            await gone;
          }
          fs.rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    child.kill('SIGKILL');
    lastError = output.trim().split('\n').slice(-3).join(' / ');
  }
  fs.rmSync(dir, { recursive: true, force: true });
  throw new Error(`docker-registry did not start: ${lastError}`);
}

/**
 * Copies an image into the registry as `name` (`repo:tag`), the whole index with alsoPlatforms.
 * `image`: what buildImage returned, or an OCI layout directory (its `latest` reference).
 */
export function pushImage(image: BuiltImage | string, registry: { host: string }, name: string, auth?: { username: string; password: string }): void {
  const source = typeof image === 'string' ? `oci:${path.resolve(image)}:latest` : `oci:${image.layout}:${image.ref}`;
  const args = ['copy', '--quiet', '--all', '--dest-tls-verify=false', ...(auth ? ['--dest-creds', `${auth.username}:${auth.password}`] : []), source, `docker://${registry.host}/${name}`];
  const r = spawnSync('skopeo', args, { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`skopeo copy to ${registry.host}/${name} failed: ${(r.stderr || r.error?.message || '').trim()}`);
}
