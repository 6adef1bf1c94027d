// Image references as docker reads them (distribution/reference's grammar): an optional
// registry host (with a port, or an IPv6 address in brackets), a repository path of lowercase
// components, an optional tag, an optional digest. Names without a registry are Docker Hub's
// (`docker.io`), and one-component Docker Hub names are under `library/`. A name that does not
// fit the grammar is refused with an ImageError; what passes can never start with `-`.

export type ImageErrorReason = 'image_pull_failure' | 'runner_system_failure';

/** An image could not be prepared. `message` is one line for the job's log; `reason` the job's failure reason. */
export class ImageError extends Error {
  constructor(
    message: string,
    readonly reason: ImageErrorReason = 'image_pull_failure',
  ) {
    super(message);
    this.name = 'ImageError';
  }
}

export interface ImageRef {
  /** `docker.io`, `registry.example.com:5000`, `[::1]:5000` (lowercase). */
  registry: string;
  /** `library/node`, `group/project/image`. */
  repository: string;
  /** The tag (`latest` when neither a tag nor a digest is given); kept beside a digest, which wins. */
  tag: string | null;
  /** `sha256:<64 hex>` when the name pins one. */
  digest: string | null;
  /** canonical full name */
  name: string;
}

export const DOCKER_HUB = 'docker.io';
const DOCKER_HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com']);

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_COMPONENT = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
/** docker's limit on registry + repository. */
const NAME_MAX = 255;

function invalid(name: string, why: string): ImageError {
  return new ImageError(`invalid image name ${JSON.stringify(name)}: ${why}`);
}

function validDomain(domain: string): boolean {
  let host = domain;
  let port: string | null = null;
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::(\d+))?$/.exec(domain);
  if (v6) {
    port = v6[2] ?? null;
    if (!v6[1].includes(':')) return false;
  } else {
    const i = domain.lastIndexOf(':');
    if (i >= 0) {
      host = domain.slice(0, i);
      port = domain.slice(i + 1);
    }
    if (!host.split('.').every((c) => DOMAIN_COMPONENT.test(c))) return false;
  }
  if (port !== null && (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)) return false;
  return true;
}

/**
 * Parses an image name (`node:22`, `registry.example.com:5000/group/app@sha256:...`). With both a
 * tag and a digest, the digest is what is pulled (as docker does). Throws ImageError.
 */
export function parseImageRef(input: string): ImageRef {
  if (typeof input !== 'string' || input.trim() === '') throw new ImageError('image name is empty');
  const name = input;
  if (/[\s\0]/.test(name) || /[^\x21-\x7e]/.test(name)) throw invalid(name, 'invalid reference format');

  let rest = name;
  let digest: string | null = null;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw invalid(name, 'invalid digest (expected sha256:<64 hex digits>)');
    const [algorithm, hex] = digest.split(':');
    if (algorithm !== 'sha256') throw invalid(name, `unsupported digest algorithm "${algorithm}"`);
    if (!/^[0-9a-f]{64}$/.test(hex)) throw invalid(name, 'invalid digest (expected sha256:<64 lowercase hex digits>)');
  }

  let tag: string | null = null;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw invalid(name, 'invalid tag');
  }
  if (!rest) throw invalid(name, 'invalid reference format');

  let registry = DOCKER_HUB;
  let repository = rest;
  const slash = rest.indexOf('/');
  if (slash >= 0) {
    const first = rest.slice(0, slash);
    if (/[.:]/.test(first) || first === 'localhost' || first.startsWith('[') || first !== first.toLowerCase()) {
      if (!validDomain(first)) throw invalid(name, `invalid registry host "${first}"`);
      registry = first.toLowerCase();
      repository = rest.slice(slash + 1);
    }
  }
  if (DOCKER_HUB_ALIASES.has(registry)) registry = DOCKER_HUB;
  if (repository !== repository.toLowerCase()) throw invalid(name, 'repository name must be lowercase');
  const components = repository.split('/');
  if (!components.every((c) => PATH_COMPONENT.test(c))) throw invalid(name, 'invalid reference format');
  if (registry === DOCKER_HUB && components.length === 1) repository = `library/${repository}`;
  if (registry.length + 1 + repository.length > NAME_MAX) throw invalid(name, `repository name must not be longer than ${NAME_MAX} characters`);
  if (!tag && !digest) tag = 'latest';

  return { registry, repository, tag, digest, name: `${registry}/${repository}${tag ? `:${tag}` : ''}${digest ? `@${digest}` : ''}` };
}

/** What is pulled: `registry/repository@digest` when there is a digest, else `registry/repository:tag`. */
export function pullName(ref: ImageRef): string {
  return `${ref.registry}/${ref.repository}${ref.digest ? `@${ref.digest}` : `:${ref.tag ?? 'latest'}`}`;
}

/** The repository as docker prints it: `node` for docker.io/library/node, `user/app` for docker.io/user/app. */
export function familiarRepository(ref: ImageRef): string {
  if (ref.registry !== DOCKER_HUB) return `${ref.registry}/${ref.repository}`;
  return ref.repository.startsWith('library/') ? ref.repository.slice('library/'.length) : ref.repository;
}

/** The registry host without its port and brackets. */
export function registryHost(registry: string): string {
  const v6 = /^\[([^\]]+)\]/.exec(registry);
  if (v6) return v6[1];
  const i = registry.lastIndexOf(':');
  return i >= 0 ? registry.slice(0, i) : registry;
}

/** localhost, 127.0.0.0/8 and ::1: registries docker talks plain HTTP to without being told. */
export function isLoopbackRegistry(registry: string): boolean {
  const host = registryHost(registry).toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}
