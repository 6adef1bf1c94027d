// A local stand-in for the runner's image store (src/runner/images.ts) in the image executor's
// tests: "images" are root filesystems built from busybox-static (/bin/busybox and a link per
// applet, /etc/passwd, /etc/group), owned by the runner's job user like the real store's, with the
// config (Env, Entrypoint, Cmd, ExposedPorts...) each test gives. No registry, no network.
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { ImageConfig, ImageSource, PrepareOptions, PreparedImage } from '../../src/runner/image_source.js';
import { chownTree } from '../../src/runner/nofollow.js';

export const BUSYBOX = ['/bin/busybox', '/usr/bin/busybox'].find((p) => fs.existsSync(p)) ?? null;

export interface StandInImage extends Partial<ImageConfig> {
  /** Extra files: path in the image -> content (or a symlink: { link: target }). */
  files?: Record<string, string | { link: string } | { content: string; mode: number }>;
}

export class PullError extends Error {
  constructor(
    message: string,
    readonly reason = 'image_pull_failure',
  ) {
    super(message);
  }
}

/** Builds the image directories once per name; `prepare` answers by name as ImageStore.prepare does. */
export class BusyboxImages implements ImageSource {
  /** Every prepare call: name and options. */
  readonly calls: { name: string; pullPolicy: string[] | null; variables: string[] }[] = [];
  private readonly built = new Map<string, PreparedImage>();

  constructor(
    readonly dir: string,
    readonly owner: { uid: number; gid: number },
    readonly images: Record<string, StandInImage>,
  ) {
    if (!BUSYBOX) throw new Error('busybox-static is not installed (apt-get install busybox-static)');
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  async prepare(name: string, o: PrepareOptions): Promise<PreparedImage> {
    this.calls.push({ name, pullPolicy: o.pullPolicy, variables: o.variables.map((v) => v.key) });
    const spec = this.images[name];
    if (!spec) throw new PullError(`failed to pull image "${name}": manifest unknown (the test registry has no such image)`);
    const cached = this.built.get(name);
    if (cached) {
      o.onLog?.(`Using docker image ${cached.digest} for ${name} ...`);
      return cached;
    }
    o.onLog?.(`Pulling docker image ${name} ...`);
    const digest = `sha256:${crypto.createHash('sha256').update(name + JSON.stringify(spec)).digest('hex')}`;
    const rootfs = path.join(this.dir, digest.replace(':', '-'));
    fs.rmSync(rootfs, { recursive: true, force: true });
    buildBusyboxRoot(rootfs, spec.files ?? {});
    chownTree(rootfs, this.owner.uid, this.owner.gid);
    // Nobody writes a cached image: read-only for everyone but its owner, as the store leaves it.
    const image: PreparedImage = {
      ref: { name: name.includes('/') ? name : `docker.io/library/${name}` },
      digest,
      rootfs,
      config: {
        env: spec.env ?? ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
        entrypoint: spec.entrypoint ?? null,
        cmd: spec.cmd ?? ['sh'],
        workingDir: spec.workingDir ?? '',
        user: spec.user ?? '',
        exposedPorts: spec.exposedPorts ?? [],
      },
    };
    this.built.set(name, image);
    o.onLog?.(`Using docker image ${digest} for ${name} ...`);
    return image;
  }
}

/** A root filesystem: /bin/busybox, a link per applet in /bin, /etc/passwd and /etc/group, /tmp, /root. */
export function buildBusyboxRoot(root: string, files: NonNullable<StandInImage['files']> = {}) {
  for (const d of ['bin', 'etc', 'tmp', 'root', 'usr/bin', 'var/www']) fs.mkdirSync(path.join(root, d), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
  fs.chmodSync(path.join(root, 'root'), 0o700);
  fs.copyFileSync(BUSYBOX!, path.join(root, 'bin', 'busybox'));
  fs.chmodSync(path.join(root, 'bin', 'busybox'), 0o755);
  const applets = execFileSync(BUSYBOX!, ['--list'], { encoding: 'utf8' }).split('\n').filter((a) => /^[A-Za-z0-9_.[-]+$/.test(a) && a !== 'busybox');
  for (const a of applets) {
    const p = path.join(root, 'bin', a);
    if (!fs.existsSync(p)) fs.symlinkSync('busybox', p);
  }
  fs.writeFileSync(path.join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\nbuilder:x:1000:1000:builder:/home/builder:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n');
  fs.writeFileSync(path.join(root, 'etc', 'group'), 'root:x:0:\nbuilder:x:1000:\nstaff:x:50:\nnogroup:x:65534:\n');
  for (const [p, content] of Object.entries(files)) {
    const dest = path.join(root, p);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    if (typeof content === 'string') fs.writeFileSync(dest, content);
    else if ('link' in content) fs.symlinkSync(content.link, dest);
    else fs.writeFileSync(dest, content.content, { mode: content.mode });
  }
}
