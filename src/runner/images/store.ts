// The image cache of a runner: images pulled with skopeo, unpacked with umoci as the rootfs's
// owner, kept as one read-only directory per image manifest digest.
//
//   <dir>/                    0700 root: jobs (another uid) cannot traverse it
//     rootfs/sha256-<hex>/    one entry per platform manifest digest, 0700 root
//       rootfs/               the image's files, all owned by `owner`; never written after it is renamed in
//       image.json            digests, config (env, entrypoint, cmd, ...), size
//     refs/<sha256 of name>.json   `registry/repo:tag` or `registry/repo@digest` -> its digests (last pull)
//     tmp/                    pulls in progress (`pull-*`), auth files (0600), entries being evicted
//
// An entry is built in tmp/ and renamed into rootfs/ in one step; when two processes pull the
// same image at once, the second rename fails and its copy is discarded. Eviction renames an
// entry out before removing it, and puts it back if a prepare touched it meanwhile.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setting } from '../../config.js';
import { Dir, removeTree } from '../nofollow.js';
import type { RegistryCredential } from './credentials.js';
import { familiarRepository, ImageError, isLoopbackRegistry, parseImageRef, pullName, type ImageRef } from './ref.js';
import { LayerFormatError, LayerTooBigError, measureLayer } from './scan.js';
import { detectImageSupport, runTool, skopeoMessage } from './tools.js';

export interface ImageConfig {
  env: string[];
  entrypoint: string[] | null;
  cmd: string[] | null;
  workingDir: string;
  user: string;
  /** TCP ports the image exposes (`EXPOSE 80`), ascending. */
  exposedPorts: number[];
}

export interface PreparedImage {
  ref: ImageRef;
  /** Digest of the platform manifest that was unpacked. */
  digest: string;
  /** The unpacked files: read-only, for an overlay's lower layer. */
  rootfs: string;
  config: ImageConfig;
  /** Digest of the image's config: docker's image id (`Using docker image sha256:...`). */
  imageId: string;
  /** `repo@sha256:...`: what the name resolved to at the registry (an index's digest for a multi-platform image). */
  repoDigest: string;
}

export interface ImageStoreOptions {
  dir: string;
  owner: { uid: number; gid: number };
  skopeo?: string;
  umoci?: string;
  insecureRegistries?: string[];
  log?: (m: string) => void;
  /** Largest image (compressed layers; unpacked files): CAIRN_RUNNER_IMAGE_MAX_SIZE. */
  maxImageBytes?: number;
  /** Disk the unpacked images may use together before eviction: CAIRN_RUNNER_IMAGE_CACHE_BYTES. */
  cacheBytes?: number;
  /** An entry prepared (or touched) more recently than this is never evicted (default a day). */
  evictIdleMs?: number;
  /** setpriv, for a root runner whose owner is another user (default: from PATH). */
  setpriv?: string;
}

export type PullPolicy = 'always' | 'if-not-present' | 'never';
const PULL_POLICIES: readonly PullPolicy[] = ['always', 'if-not-present', 'never'];

interface EntryMeta {
  name: string;
  manifestDigest: string;
  imageId: string;
  config: ImageConfig;
  size: number;
  created: string;
}

interface RefRecord {
  name: string;
  /** What the name resolves to at the registry (the index for a multi-platform image). */
  digest: string;
  /** The platform manifest unpacked for it. */
  manifestDigest: string;
}

const DAY_MS = 24 * 3600 * 1000;
const INSPECT_TIMEOUT = '120s';
const COPY_TIMEOUT = '2h';

function sha256(data: Buffer | string): string {
  return crypto.createHash('sha256').update(data).digest('hex');
}

function hexOf(digest: string): string {
  const m = /^sha256:([0-9a-f]{64})$/.exec(digest);
  if (!m) throw new ImageError(`unsupported digest ${JSON.stringify(digest)}`);
  return m[1];
}

/** This machine's platform as OCI names it. */
export function hostPlatform(): { os: string; architecture: string; variant?: string } {
  const arch: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64', loong64: 'loong64', mips64el: 'mips64le' };
  const architecture = arch[process.arch] ?? process.arch;
  const armVersion = (process.config.variables as { arm_version?: string }).arm_version;
  const variant = architecture === 'arm64' ? 'v8' : architecture === 'arm' && armVersion ? `v${armVersion}` : undefined;
  return { os: 'linux', architecture, ...(variant ? { variant } : {}) };
}

/** gitlab-runner's pull policies: a list tried in order; `always` when none is given. */
export function parsePullPolicies(given: string[] | string | undefined | null): PullPolicy[] {
  const list = (Array.isArray(given) ? given : given ? [given] : []).map((p) => String(p).trim()).filter(Boolean);
  if (!list.length) return ['always'];
  const out: PullPolicy[] = [];
  for (const p of list) {
    if (!(PULL_POLICIES as readonly string[]).includes(p)) throw new ImageError(`unsupported pull_policy ${JSON.stringify(p)}: use always, if-not-present or never`);
    if (!out.includes(p as PullPolicy)) out.push(p as PullPolicy);
  }
  return out;
}

function toImageConfig(raw: unknown): ImageConfig {
  const c = ((raw as { config?: unknown })?.config ?? {}) as Record<string, unknown>;
  const strings = (v: unknown): string[] | null => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? (v as string[]) : null);
  const ports = new Set<number>();
  if (c.ExposedPorts && typeof c.ExposedPorts === 'object') {
    for (const key of Object.keys(c.ExposedPorts)) {
      const m = /^(\d{1,5})(?:\/(tcp|udp|sctp))?$/i.exec(key.trim());
      if (m && (m[2] ?? 'tcp').toLowerCase() === 'tcp' && Number(m[1]) >= 1 && Number(m[1]) <= 65535) ports.add(Number(m[1]));
    }
  }
  return {
    env: strings(c.Env) ?? [],
    entrypoint: strings(c.Entrypoint),
    cmd: strings(c.Cmd),
    workingDir: typeof c.WorkingDir === 'string' ? c.WorkingDir : '',
    user: typeof c.User === 'string' ? c.User : '',
    exposedPorts: [...ports].sort((a, b) => a - b),
  };
}

function canceled(name: string): ImageError {
  return new ImageError(`pulling image "${name}" was canceled`, 'runner_system_failure');
}

/** The promise's outcome, or a cancel as soon as `signal` aborts (the work itself goes on for whoever else waits). */
function waitOrAbort<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error('aborted'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function errnoCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException)?.code;
}

function readJson<T>(file: string): T | null {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
  } catch {
    return null;
  }
}

/** Writes a file in one step (temporary name, then rename): readers see the old or the new one. */
function writeAtomic(file: string, data: string, mode = 0o600): void {
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, data, { mode, flag: 'wx' });
  fs.renameSync(tmp, file);
}

export class ImageStore {
  readonly dir: string;
  private readonly owner: { uid: number; gid: number };
  private readonly insecure: Set<string>;
  private readonly maxImageBytes: number;
  private readonly cacheBytes: number;
  private readonly evictIdleMs: number;
  private readonly log: (m: string) => void;
  private readonly opts: ImageStoreOptions;
  private ready = false;
  /** Unpacks in progress in this process, by manifest digest (two jobs wanting one image share one). */
  private readonly flights = new Map<string, Promise<void>>();

  constructor(o: ImageStoreOptions) {
    if (!o || typeof o.dir !== 'string' || !o.dir) throw new ImageError('ImageStore needs a directory', 'runner_system_failure');
    if (!o.owner || !Number.isInteger(o.owner.uid) || !Number.isInteger(o.owner.gid) || o.owner.uid < 0 || o.owner.gid < 0) throw new ImageError('ImageStore needs an owner uid and gid', 'runner_system_failure');
    this.opts = o;
    this.dir = path.resolve(o.dir);
    this.owner = { uid: o.owner.uid, gid: o.owner.gid };
    this.insecure = new Set((o.insecureRegistries ?? setting<string[]>('CAIRN_RUNNER_INSECURE_REGISTRIES')).map((r) => r.toLowerCase()));
    this.maxImageBytes = o.maxImageBytes ?? setting<number>('CAIRN_RUNNER_IMAGE_MAX_SIZE');
    this.cacheBytes = o.cacheBytes ?? setting<number>('CAIRN_RUNNER_IMAGE_CACHE_BYTES');
    this.evictIdleMs = o.evictIdleMs ?? DAY_MS;
    this.log = o.log ?? (() => {});
  }

  /** pullPolicy: gitlab-runner's list semantics (always | if-not-present | never; several allowed; default ['always'] like the docker executor). onLog gets the job-log lines ("Pulling docker image ...", "Using docker image sha256:... for ..."). */
  async prepare(
    name: string,
    o: { pullPolicy?: string[]; credential?: RegistryCredential | null; signal?: AbortSignal; onLog?: (line: string) => void } = {},
  ): Promise<PreparedImage> {
    const onLog = o.onLog ?? (() => {});
    const ref = parseImageRef(name);
    const policies = parsePullPolicies(o.pullPolicy);
    this.ensureLayout();
    onLog(`Using effective pull policy of [${policies.join(' ')}] for container ${name}`);
    let last: ImageError | null = null;
    for (const [i, policy] of policies.entries()) {
      if (i > 0) onLog(`Attempt #${i + 1}: Trying "${policy}" pull policy`);
      try {
        const image = await this.prepareWith(ref, name, policy, o.credential ?? null, o.signal, onLog);
        onLog(`Using docker image ${image.imageId} for ${name} with digest ${image.repoDigest} ...`);
        return image;
      } catch (err) {
        if (o.signal?.aborted) throw canceled(name);
        last = this.asImageError(err);
        onLog(`WARNING: Failed to pull image with policy "${policy}": ${last.message}`);
      }
    }
    throw new ImageError(`failed to pull image "${name}" with specified policies [${policies.join(' ')}]: ${last!.message}`, last!.reason);
  }

  /** Marks an image as in use now (a long job calls it from time to time so eviction leaves its rootfs alone). */
  touch(image: Pick<PreparedImage, 'digest'>): void {
    try {
      const now = new Date();
      fs.utimesSync(path.join(this.entryPath(image.digest), 'image.json'), now, now);
    } catch {
      /* evicted or never there: nothing to keep */
    }
  }

  /**
   * Removes least recently used entries while the cache is over its budget, never one used in
   * the last `evictIdleMs`. Returns the digests removed.
   */
  evict(now = Date.now()): string[] {
    this.ensureLayout();
    const root = path.join(this.dir, 'rootfs');
    const entries = fs
      .readdirSync(root, { withFileTypes: true })
      .filter((e) => e.isDirectory() && /^sha256-[0-9a-f]{64}$/.test(e.name))
      .map((e) => {
        const p = path.join(root, e.name);
        const meta = readJson<EntryMeta>(path.join(p, 'image.json'));
        let mtime = 0;
        try {
          mtime = fs.lstatSync(path.join(p, 'image.json')).mtimeMs;
        } catch {
          /* gone, or half made by hand: oldest */
        }
        return { name: e.name, path: p, size: meta?.size ?? 0, mtime };
      })
      .sort((a, b) => a.mtime - b.mtime);
    let total = entries.reduce((s, e) => s + e.size, 0);
    const removed: string[] = [];
    for (const e of entries) {
      if (total <= this.cacheBytes) break;
      if (now - e.mtime < this.evictIdleMs) continue;
      const trash = path.join(this.dir, 'tmp', `evict-${crypto.randomBytes(8).toString('hex')}`);
      try {
        fs.renameSync(e.path, trash);
      } catch {
        continue;
      }
      // A prepare touches an entry before it checks the entry is there: if it touched this one
      // before we moved it, the touch shows here and the entry goes back. (The time is the
      // file's: some file systems change a directory's own mtime when it moves.)
      let used = 0;
      try {
        used = fs.lstatSync(path.join(trash, 'image.json')).mtimeMs;
      } catch {
        /* none */
      }
      if (now - used < this.evictIdleMs) {
        try {
          fs.renameSync(trash, e.path);
          continue;
        } catch {
          /* pulled again meanwhile: ours is a duplicate */
        }
      }
      removeTree(trash);
      total -= e.size;
      removed.push(`sha256:${e.name.slice('sha256-'.length)}`);
      this.log(`image cache: removed ${removed[removed.length - 1]} (${e.size} bytes)`);
    }
    return removed;
  }

  // ---- internals -------------------------------------------------------------------------------

  private asImageError(err: unknown): ImageError {
    if (err instanceof ImageError) return err;
    const e = err as NodeJS.ErrnoException;
    this.log(`image: ${e?.stack ?? String(err)}`);
    return new ImageError(`the runner could not prepare the image: ${e?.code ? `${e.code}: ` : ''}${(e?.message ?? String(err)).split('\n')[0]}`, 'runner_system_failure');
  }

  private entryPath(digest: string): string {
    return path.join(this.dir, 'rootfs', `sha256-${hexOf(digest)}`);
  }

  private refPath(pulled: string): string {
    return path.join(this.dir, 'refs', `${sha256(pulled)}.json`);
  }

  /** Creates the cache's directories (0700) and checks that `dir` is a directory of ours. */
  private ensureLayout(): void {
    if (this.ready) return;
    try {
      fs.mkdirSync(path.dirname(this.dir), { recursive: true, mode: 0o700 });
      try {
        fs.mkdirSync(this.dir, { mode: 0o700 });
      } catch (err) {
        if (errnoCode(err) !== 'EEXIST') throw err;
      }
      const st = fs.lstatSync(this.dir);
      if (!st.isDirectory()) throw new ImageError(`the image cache ${this.dir} is not a directory`, 'runner_system_failure');
      if (typeof process.getuid === 'function' && st.uid !== process.getuid()) throw new ImageError(`the image cache ${this.dir} belongs to uid ${st.uid}, not to the runner`, 'runner_system_failure');
      if ((st.mode & 0o777) !== 0o700) fs.chmodSync(this.dir, 0o700);
      for (const sub of ['rootfs', 'refs', 'tmp']) {
        try {
          fs.mkdirSync(path.join(this.dir, sub), { mode: 0o700 });
        } catch (err) {
          if (errnoCode(err) !== 'EEXIST') throw err;
        }
      }
      this.sweepTmp();
      this.ready = true;
    } catch (err) {
      if (err instanceof ImageError) throw err;
      throw new ImageError(`the image cache ${this.dir} cannot be used: ${(err as Error).message}`, 'runner_system_failure');
    }
  }

  /** Leftovers of processes that died mid-pull (older than a day: no pull takes that long). */
  private sweepTmp(): void {
    const tmp = path.join(this.dir, 'tmp');
    for (const name of fs.readdirSync(tmp)) {
      try {
        if (Date.now() - fs.lstatSync(path.join(tmp, name)).mtimeMs > DAY_MS) removeTree(path.join(tmp, name));
      } catch {
        /* another process took it */
      }
    }
  }

  /** The cached entry for a manifest digest, touched (its image.json's mtime is its last use: see evict), or null. */
  private openEntry(ref: ImageRef, manifestDigest: string, repoDigest: string): PreparedImage | null {
    const p = this.entryPath(manifestDigest);
    try {
      const now = new Date();
      fs.utimesSync(path.join(p, 'image.json'), now, now);
    } catch {
      return null;
    }
    const meta = readJson<EntryMeta>(path.join(p, 'image.json'));
    const rootfs = path.join(p, 'rootfs');
    let isDir = false;
    try {
      isDir = fs.lstatSync(rootfs).isDirectory();
    } catch {
      /* missing */
    }
    if (!meta || !isDir) return null;
    return { ref, digest: manifestDigest, rootfs, config: meta.config, imageId: meta.imageId, repoDigest };
  }

  private localImage(ref: ImageRef): PreparedImage | null {
    const record = readJson<RefRecord>(this.refPath(pullName(ref)));
    if (!record || record.name !== pullName(ref)) return null;
    return this.openEntry(ref, record.manifestDigest, `${familiarRepository(ref)}@${record.digest}`);
  }

  private async prepareWith(ref: ImageRef, name: string, policy: PullPolicy, credential: RegistryCredential | null, signal: AbortSignal | undefined, onLog: (l: string) => void): Promise<PreparedImage> {
    const local = this.localImage(ref);
    if (policy === 'never') {
      if (!local) throw new ImageError(`No such image: ${name}`);
      return local;
    }
    if (policy === 'if-not-present' && local) {
      onLog(`Using locally found image version due to "if-not-present" pull policy`);
      return local;
    }
    return this.pull(ref, name, credential, signal, onLog);
  }

  private tlsVerify(ref: ImageRef): boolean {
    if (isLoopbackRegistry(ref.registry)) return false;
    const host = ref.registry.replace(/:\d+$/, '');
    return !this.insecure.has(ref.registry) && !this.insecure.has(host);
  }

  private tools(): { skopeo: string; umoci: string } {
    if (this.opts.skopeo && this.opts.umoci) return { skopeo: this.opts.skopeo, umoci: this.opts.umoci };
    const s = detectImageSupport();
    if (!this.opts.skopeo && !s.skopeo) throw new ImageError(`images cannot be pulled on this runner: ${s.reason}`, 'runner_system_failure');
    if (!this.opts.umoci && !s.umoci) throw new ImageError(`images cannot be unpacked on this runner: ${s.reason}`, 'runner_system_failure');
    return { skopeo: this.opts.skopeo ?? s.skopeo!, umoci: this.opts.umoci ?? s.umoci! };
  }

  /** The environment skopeo gets: nothing of the runner's but PATH, proxies and CA settings; its HOME is empty. */
  private skopeoEnv(home: string): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: home, TMPDIR: path.join(this.dir, 'tmp'), LANG: 'C', LC_ALL: 'C' };
    for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'SSL_CERT_FILE', 'SSL_CERT_DIR']) if (process.env[k]) env[k] = process.env[k];
    return env;
  }

  /** skopeo's global options: a policy file when the system has none (skopeo refuses to copy without one). */
  private skopeoGlobal(timeout: string): string[] {
    const args = ['--command-timeout', timeout];
    if (!fs.existsSync('/etc/containers/policy.json')) {
      const policy = path.join(this.dir, 'policy.json');
      if (!fs.existsSync(policy)) writeAtomic(policy, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
      args.push('--policy', policy);
    }
    return args;
  }

  private registryError(ref: ImageRef, name: string, stderr: string): ImageError {
    const msg = skopeoMessage(stderr);
    if (/\bunauthorized\b|authentication required|\bdenied\b|\b401\b|\b403\b/i.test(msg)) {
      return new ImageError(`pull access denied for ${familiarRepository(ref)}, repository does not exist or may require authentication: ${msg}`);
    }
    if (/manifest unknown|not found|name unknown/i.test(msg)) return new ImageError(`manifest for ${name} not found: ${msg}`);
    return new ImageError(msg);
  }

  private async pull(ref: ImageRef, name: string, credential: RegistryCredential | null, signal: AbortSignal | undefined, onLog: (l: string) => void): Promise<PreparedImage> {
    const tools = this.tools();
    onLog(`Pulling docker image ${name} ...`);
    if (credential?.source) onLog(`Authenticating with credentials from ${credential.source}`);
    const tmp = path.join(this.dir, 'tmp');
    const work = fs.mkdtempSync(path.join(tmp, 'pull-'));
    // The auth file is beside the work directory, not in it: the unpack runs as another user there.
    const authfile = path.join(tmp, `auth-${crypto.randomBytes(12).toString('hex')}.json`);
    try {
      fs.chmodSync(work, 0o711);
      const home = path.join(work, 'home');
      fs.mkdirSync(home, { mode: 0o700 });
      const auths: Record<string, { auth: string }> = {};
      if (credential) auths[ref.registry] = { auth: Buffer.from(`${credential.username}:${credential.password}`).toString('base64') };
      fs.writeFileSync(authfile, JSON.stringify({ auths }), { mode: 0o600, flag: 'wx' });
      const env = this.skopeoEnv(home);
      const tls = this.tlsVerify(ref);
      const source = (reference: string) => `docker://${reference}`;

      // 1. What the name is now, at the registry.
      const inspect = async (reference: string) => {
        const r = await runTool(tools.skopeo, [...this.skopeoGlobal(INSPECT_TIMEOUT), 'inspect', '--raw', '--authfile', authfile, `--tls-verify=${tls}`, source(reference)], { cwd: work, env, signal, stdoutMax: 4 * 1024 * 1024 });
        if (r.aborted) throw canceled(name);
        if (r.spawnError) throw new ImageError(`skopeo could not be started: ${r.spawnError.message}`, 'runner_system_failure');
        if (r.code !== 0) throw this.registryError(ref, name, r.stderr);
        return r.stdout;
      };
      const top = await inspect(pullName(ref));
      const topDigest = `sha256:${sha256(top)}`;
      if (ref.digest && ref.digest !== topDigest) throw new ImageError(`the registry answered a manifest of digest ${topDigest} for ${name}`);
      const repoDigest = `${familiarRepository(ref)}@${topDigest}`;
      const topManifest = this.parseManifest(top, name);
      let manifestDigest = topDigest;
      let manifest = topManifest;
      if (Array.isArray(topManifest.manifests)) {
        manifestDigest = this.choosePlatform(topManifest.manifests, name);
        const cached = this.openEntry(ref, manifestDigest, repoDigest);
        if (cached) {
          this.remember(ref, topDigest, manifestDigest);
          return cached;
        }
        const platformRaw = await inspect(`${ref.registry}/${ref.repository}@${manifestDigest}`);
        if (`sha256:${sha256(platformRaw)}` !== manifestDigest) throw new ImageError(`the registry answered a manifest of another digest for ${name}`);
        manifest = this.parseManifest(platformRaw, name);
        if (Array.isArray(manifest.manifests)) throw new ImageError(`${name} is an index of indexes, which is not supported`);
      }
      const cached = this.openEntry(ref, manifestDigest, repoDigest);
      if (cached) {
        this.remember(ref, topDigest, manifestDigest);
        return cached;
      }
      const compressed = (manifest.layers ?? manifest.fsLayers ?? []).reduce((s, l) => s + (typeof l.size === 'number' && l.size > 0 ? l.size : 0), 0);
      if (compressed > this.maxImageBytes) throw new ImageError(`image ${name} is too big: its layers are ${compressed} bytes, more than this runner's limit of ${this.maxImageBytes} (CAIRN_RUNNER_IMAGE_MAX_SIZE)`);

      // 2. Blobs and unpack, once per digest in this process (a second job asking for the same
      // image meanwhile waits for the first; if the first fails, it tries itself). Across
      // processes, the first to rename its copy into place wins.
      for (let attempt = 0; ; attempt++) {
        let flight = this.flights.get(manifestDigest);
        const mine = !flight;
        if (!flight) {
          flight = this.fetchAndUnpack(work, authfile, env, tls, tools, ref, name, manifestDigest, signal).finally(() => this.flights.delete(manifestDigest));
          this.flights.set(manifestDigest, flight);
        }
        try {
          await waitOrAbort(flight, signal);
          break;
        } catch (err) {
          if (mine || signal?.aborted || attempt > 0) throw err;
        }
      }
      const entry = this.openEntry(ref, manifestDigest, repoDigest);
      if (!entry) throw new ImageError(`the unpacked image ${manifestDigest} disappeared from the cache`, 'runner_system_failure');
      this.remember(ref, topDigest, manifestDigest);
      try {
        this.evict();
      } catch (err) {
        this.log(`image cache eviction failed: ${(err as Error).message}`);
      }
      return entry;
    } finally {
      fs.rmSync(authfile, { force: true });
      try {
        removeTree(work);
      } catch (err) {
        this.log(`could not remove ${work}: ${(err as Error).message}`);
      }
    }
  }

  private remember(ref: ImageRef, digest: string, manifestDigest: string): void {
    const pulled = pullName(ref);
    writeAtomic(this.refPath(pulled), JSON.stringify({ name: pulled, digest, manifestDigest } satisfies RefRecord));
  }

  private parseManifest(raw: Buffer, name: string): { manifests?: Array<{ digest?: unknown; platform?: { os?: unknown; architecture?: unknown; variant?: unknown } }>; layers?: Array<{ size?: unknown }>; fsLayers?: Array<{ size?: unknown }> } {
    try {
      const m = JSON.parse(raw.toString('utf8'));
      if (m && typeof m === 'object') return m;
    } catch {
      /* below */
    }
    throw new ImageError(`the registry's manifest for ${name} is not valid JSON`);
  }

  private choosePlatform(manifests: Array<{ digest?: unknown; platform?: { os?: unknown; architecture?: unknown; variant?: unknown } }>, name: string): string {
    const host = hostPlatform();
    const matching = manifests.filter((m) => typeof m.digest === 'string' && m.platform?.os === host.os && m.platform?.architecture === host.architecture);
    const chosen = matching.find((m) => (m.platform?.variant ?? host.variant) === host.variant) ?? matching[0];
    if (!chosen) {
      const has = manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`).filter((p) => p !== 'unknown/unknown');
      throw new ImageError(`no matching manifest for ${host.os}/${host.architecture} in the manifest list entries of ${name}${has.length ? ` (it has ${[...new Set(has)].join(', ')})` : ''}`);
    }
    const digest = chosen.digest as string;
    hexOf(digest);
    return digest;
  }

  /** skopeo copy of exactly that manifest into `work/layout` (layers as gzip: umoci reads no zstd), then unpack. */
  private async fetchAndUnpack(
    work: string,
    authfile: string,
    env: NodeJS.ProcessEnv,
    tls: boolean,
    tools: { skopeo: string; umoci: string },
    ref: ImageRef,
    name: string,
    manifestDigest: string,
    signal?: AbortSignal,
  ): Promise<void> {
    const copy = await runTool(
      tools.skopeo,
      [
        ...this.skopeoGlobal(COPY_TIMEOUT),
        'copy',
        '--quiet',
        '--retry-times',
        '2',
        '--src-authfile',
        authfile,
        `--src-tls-verify=${tls}`,
        '--dest-compress-format',
        'gzip',
        `docker://${ref.registry}/${ref.repository}@${manifestDigest}`,
        'oci:layout:image',
      ],
      { cwd: work, env, signal, stdoutMax: 1024 * 1024 },
    );
    fs.rmSync(authfile, { force: true });
    if (copy.aborted) throw canceled(name);
    if (copy.spawnError) throw new ImageError(`skopeo could not be started: ${copy.spawnError.message}`, 'runner_system_failure');
    if (copy.code !== 0) throw this.registryError(ref, name, copy.stderr);
    await this.unpack(work, ref, name, manifestDigest, tools.umoci, signal);
  }

  /** Layout in `work` (made by skopeo) -> `work/entry/{rootfs,image.json}` -> `rootfs/sha256-<hex>`. */
  private async unpack(work: string, ref: ImageRef, name: string, manifestDigest: string, umoci: string, signal?: AbortSignal): Promise<void> {
    const target = this.entryPath(manifestDigest);
    if (fs.existsSync(target)) return;
    const layout = path.join(work, 'layout');
    const index = readJson<{ manifests?: Array<{ digest?: string }> }>(path.join(layout, 'index.json'));
    const blob = (digest: unknown) => path.join(layout, 'blobs', 'sha256', hexOf(String(digest)));
    const manifest = readJson<{ config?: { digest?: string }; layers?: Array<{ digest?: string; mediaType?: string }> }>(blob(index?.manifests?.[0]?.digest));
    if (!manifest?.config?.digest || !Array.isArray(manifest.layers)) throw new ImageError(`the image ${name} has no readable manifest`);
    const configRaw = fs.readFileSync(blob(manifest.config.digest));
    const config = JSON.parse(configRaw.toString('utf8')) as { os?: string; architecture?: string };
    const imageId = `sha256:${sha256(configRaw)}`;
    const host = hostPlatform();
    if (config.os && config.os !== host.os) throw new ImageError(`image operating system "${config.os}" cannot be used on this platform`);
    if (config.architecture && config.architecture !== host.architecture) {
      throw new ImageError(`image architecture "${config.architecture}" (${config.os ?? 'linux'}/${config.architecture}) does not match this machine (${host.os}/${host.architecture})`);
    }

    // Measured before unpacking: a layer that expands beyond the limit is never written out.
    let unpacked = 0;
    for (const layer of manifest.layers) {
      try {
        const size = await measureLayer(blob(layer.digest), this.maxImageBytes - unpacked, signal);
        unpacked += size.bytes;
      } catch (err) {
        if (err instanceof LayerTooBigError) throw new ImageError(`image ${name} is too big: its files are more than this runner's limit of ${this.maxImageBytes} bytes (CAIRN_RUNNER_IMAGE_MAX_SIZE)`);
        if (err instanceof LayerFormatError) throw new ImageError(`image ${name} has an unreadable layer: ${err.message}`);
        if (signal?.aborted) throw canceled(name);
        throw err;
      }
    }

    const entry = path.join(work, 'entry');
    fs.mkdirSync(entry, { mode: 0o700 });
    fs.chownSync(entry, this.owner.uid, this.owner.gid);
    // umoci runs as the owner (files are theirs, device nodes cannot be made, and a flaw in it
    // cannot write outside what the owner may write), from inside the work directory: relative
    // names, so it needs no way through the root-only cache directory.
    const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
    let command = umoci;
    let args = ['--log', 'error', 'raw', 'unpack', '--rootless', '--image', 'layout:image', 'entry/rootfs'];
    if (uid !== this.owner.uid) {
      if (uid !== 0) throw new ImageError(`the runner (uid ${uid}) cannot unpack images for uid ${this.owner.uid}: only root can`, 'runner_system_failure');
      const setpriv = this.opts.setpriv ?? detectImageSupport().setpriv;
      if (!setpriv) throw new ImageError('setpriv (util-linux) is needed to unpack images as their owner', 'runner_system_failure');
      args = [`--reuid=${this.owner.uid}`, `--regid=${this.owner.gid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--', umoci, ...args];
      command = setpriv;
    }
    const r = await runTool(command, args, { cwd: work, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', LANG: 'C', LC_ALL: 'C' }, signal, stdoutMax: 1024 * 1024 });
    if (r.aborted) throw canceled(name);
    if (r.spawnError) throw new ImageError(`umoci could not be started: ${r.spawnError.message}`, 'runner_system_failure');
    if (r.code !== 0) {
      const why = r.stderr.split('\n').map((l) => l.replace(/^\s*[⨯•]\s*/, '').trim()).filter(Boolean).pop() ?? `exit ${r.code}`;
      throw new ImageError(`image ${name} could not be unpacked: ${why}`);
    }

    const size = await neutralise(entry, 'rootfs', this.owner);
    const meta: EntryMeta = { name: ref.name, manifestDigest, imageId, config: toImageConfig(config), size, created: new Date().toISOString() };
    fs.writeFileSync(path.join(entry, 'image.json'), JSON.stringify(meta), { mode: 0o600, flag: 'wx' });
    if (uid === 0) fs.lchownSync(entry, 0, 0);
    fs.chmodSync(entry, 0o700);
    try {
      fs.renameSync(entry, target);
    } catch (err) {
      // Another process unpacked it first: theirs is the same image.
      if (errnoCode(err) !== 'ENOTEMPTY' && errnoCode(err) !== 'EEXIST') throw err;
    }
  }
}

/**
 * After umoci, as root, without following any link: every file's owner is `owner`, device nodes
 * and sockets are removed, setuid and setgid bits are cleared on files. Returns the disk use.
 */
async function neutralise(parent: string, name: string, owner: { uid: number; gid: number }): Promise<number> {
  const top = Dir.open(parent);
  const runnerUid = typeof process.getuid === 'function' ? process.getuid() : 0;
  let size = 0;
  let visited = 0;
  const visit = async (dir: Dir, entry: string): Promise<void> => {
    if (++visited % 2000 === 0) await new Promise((r) => setImmediate(r));
    const st = dir.lstat(entry);
    if (!st) return;
    if (st.isCharacterDevice() || st.isBlockDevice() || st.isSocket()) {
      fs.unlinkSync(dir.at(entry));
      return;
    }
    if (st.uid !== owner.uid || st.gid !== owner.gid) fs.lchownSync(dir.at(entry), owner.uid, owner.gid);
    size += st.blocks !== undefined ? st.blocks * 512 : st.size;
    if (st.isFile() && st.mode & 0o6000) {
      const fd = fs.openSync(dir.at(entry), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
      try {
        const f = fs.fstatSync(fd);
        if (f.ino === st.ino && f.dev === st.dev) fs.fchmodSync(fd, f.mode & 0o1777);
      } finally {
        fs.closeSync(fd);
      }
    }
    if (!st.isDirectory()) return;
    // A runner that is not root may need to open a directory the image made unreadable (its own).
    const closed = runnerUid !== 0 && (st.mode & 0o500) !== 0o500;
    if (closed) fs.chmodSync(dir.at(entry), (st.mode & 0o7777) | 0o700);
    const sub = dir.child(entry);
    if (!sub) return;
    try {
      for (const e of sub.entries()) await visit(sub, e.name);
    } finally {
      sub.close();
      if (closed) fs.chmodSync(dir.at(entry), st.mode & 0o7777);
    }
  };
  try {
    await visit(top, name);
  } finally {
    top.close();
  }
  return size;
}
