// Which executor this machine offers (issue #27), decided once at the runner's start and logged:
//  - `image`: jobs with `image:` (and their `services:`) run in the image (container.ts): needs
//    bubblewrap, a root runner whose jobs run as an unprivileged user, nsenter/mount/unshare
//    (util-linux), kernel overlayfs, and an image store (skopeo + umoci, images.ts). Jobs without
//    an image run in the shell sandbox, or in the runner's default image when one is set;
//  - `shell`: bubblewrap over the machine's filesystem (sandbox.ts); a job's image and services
//    are ignored, as gitlab-runner's shell executor ignores them, with a warning in its log;
//  - `none`: no bubblewrap: runners refuse jobs unless unisolated jobs are allowed.
import { detectOverlay } from './job_namespace.js';
import type { ImageSource } from './image_source.js';
import { findOnPath, type SandboxStatus } from './sandbox.js';

export interface ImageExecutor {
  source: ImageSource;
  nsenter: string;
  mount: string;
  /** bwrap understands --disable-userns (0.8+). */
  disableUserns: boolean;
}

export interface ExecutorChoice {
  name: 'image' | 'shell' | 'none';
  image: ImageExecutor | null;
  /** Why jobs' images are not run here (null with the image executor). */
  imageUnavailable: string | null;
  /** One line for the runner's log. */
  summary: string;
}

export interface DetectExecutorOptions {
  sandbox: SandboxStatus;
  /** The image store, or null with why there is none (skopeo or umoci missing...). */
  images: { source: ImageSource } | { source: null; reason: string };
  /** A directory on the filesystem job directories are made on (the overlay trial runs there). */
  workDir: string;
  /** The runner's default image (CAIRN_RUNNER_DEFAULT_IMAGE), for the summary. */
  defaultImage?: string | null;
}

/** The image executor's needs, checked in order; the first one missing is the reason. */
export function detectExecutor(o: DetectExecutorOptions): ExecutorChoice {
  const s = o.sandbox;
  if (!s.available) return { name: 'none', image: null, imageUnavailable: s.reason, summary: `executor: none (${s.reason})` };
  let reason: string | null = null;
  const nsenter = findOnPath('nsenter');
  const mount = findOnPath('mount');
  const unshare = findOnPath('unshare');
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) reason = 'the image executor needs a runner started as root (it mounts overlays and enters namespaces); this one runs as uid ' + (process.getuid?.() ?? '?');
  else if (!s.runAs) reason = 'the image executor maps root in a container to the unprivileged job user (CAIRN_RUNNER_JOB_UID), and jobs run as root here';
  else if (!nsenter || !mount || !unshare) reason = 'nsenter, mount and unshare (util-linux) are needed by the image executor';
  else if (!o.images.source) reason = o.images.reason;
  else {
    const overlay = detectOverlay({ unshare, mount, dir: o.workDir });
    if (!overlay.ok) reason = overlay.reason!;
  }
  const tools = `bubblewrap ${s.bwrap}${s.pasta ? ', pasta' : ''}`;
  if (reason || !o.images.source) {
    return {
      name: 'shell',
      image: null,
      imageUnavailable: reason,
      summary: `executor: shell (${tools}): jobs run on this machine's filesystem, read-only; their image: and services: are ignored (${reason})`,
    };
  }
  return {
    name: 'image',
    image: { source: o.images.source, nsenter: nsenter!, mount: mount!, disableUserns: !!s.disableUserns },
    imageUnavailable: null,
    summary: `executor: image (${tools}, overlayfs): jobs with image: run in it, with their services; jobs without ${o.defaultImage ? `run in ${o.defaultImage}` : "run on this machine's filesystem, read-only (shell)"}`,
  };
}
