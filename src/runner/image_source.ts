// What the image executor needs from an image store: a prepared (pulled, unpacked, cached) image
// by name. The shapes are those of `images.ts` (ImageStore.prepare, PreparedImage, ImageConfig),
// restated here so that the executor depends on the behaviour, not on one implementation: the
// runner wires its ImageStore in (openImageStore), tests may give a local stand-in.
import { credentialsFor, detectImageSupport, ImageStore, parseImageRef } from './images.js';

export interface ImageConfig {
  /** `KEY=value` entries of the image's Env. */
  env: string[];
  entrypoint: string[] | null;
  cmd: string[] | null;
  workingDir: string;
  /** The image's USER (`name`, `uid`, `name:group`...), or ''. */
  user: string;
  exposedPorts: number[];
}

export interface PreparedImage {
  /** The image's canonical name (`docker.io/library/alpine:3.19`...). */
  ref: { name: string };
  digest: string;
  /**
   * The unpacked root filesystem: shared, read-only for everyone (the executor mounts an overlay
   * over it), every file owned by the job user of the runner (uid 0 inside the job maps to it).
   */
  rootfs: string;
  config: ImageConfig;
}

export interface PrepareOptions {
  /** `always`, `if-not-present`, `never` (gitlab-runner's list semantics); null: the store's default. */
  pullPolicy: string[] | null;
  /** The job's variables (registry credentials: DOCKER_AUTH_CONFIG, CI_REGISTRY_USER / _PASSWORD). */
  variables: { key: string; value: string }[];
  signal?: AbortSignal;
  /** Lines for the job's log ("Pulling docker image ...", "Using docker image sha256:... for ..."). */
  onLog?: (line: string) => void;
}

export interface ImageSource {
  /** Throws an error whose `reason` is a job failure reason (`image_pull_failure`...) and whose message is one line for the job log. */
  prepare(name: string, o: PrepareOptions): Promise<PreparedImage>;
  /** Marks an image as in use now (a long job: the store's eviction leaves images used within a day alone). */
  touch?(image: PreparedImage): void;
}

/** The failure reason an image error carries (ImageError.reason), else a runner system failure. */
export function imageFailureReason(err: unknown): string {
  const reason = (err as { reason?: unknown } | null)?.reason;
  return typeof reason === 'string' && /^[a-z_]+$/.test(reason) ? reason : 'runner_system_failure';
}

/**
 * The runner's image store (images.ts) as the executor's ImageSource: registry credentials from
 * the job's variables (DOCKER_AUTH_CONFIG, CI_REGISTRY_USER / _PASSWORD) and the runner's own
 * DOCKER_AUTH_CONFIG (CAIRN_RUNNER_DOCKER_AUTH_CONFIG), in gitlab-runner's order. Null, with
 * why, when skopeo or umoci is missing.
 */
export function openImageStore(o: { dir: string; owner: { uid: number; gid: number }; dockerAuthConfig?: string | null; log?: (m: string) => void }): { source: ImageSource } | { source: null; reason: string } {
  const support = detectImageSupport();
  if (!support.available) return { source: null, reason: support.reason ?? 'skopeo and umoci are needed to pull and unpack images' };
  const store = new ImageStore({ dir: o.dir, owner: o.owner, skopeo: support.skopeo, umoci: support.umoci, setpriv: support.setpriv, log: o.log });
  return {
    source: {
      async prepare(name, p) {
        const credential = credentialsFor(parseImageRef(name), p.variables, o.dockerAuthConfig ?? undefined, (m) => p.onLog?.(`WARNING: ${m}`));
        return store.prepare(name, { pullPolicy: p.pullPolicy ?? undefined, credential, signal: p.signal, onLog: p.onLog });
      },
      touch: (image) => store.touch(image),
    },
  };
}
