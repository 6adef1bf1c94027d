// Which credential a pull uses, in gitlab-runner's order (helpers/docker/auth): every source's
// registries are collected in order — the job's DOCKER_AUTH_CONFIG variable, the runner's own
// DOCKER_AUTH_CONFIG, then the job's GitLab registry (CI_REGISTRY with CI_REGISTRY_USER and
// CI_REGISTRY_PASSWORD) — a registry named twice keeps its first source, and the image takes the
// entry with the longest matching path (`host/group` before `host`).
import { DOCKER_HUB, type ImageRef } from './ref.js';

export interface RegistryCredential {
  username: string;
  password: string;
  /** Where it came from, for the job log (`$DOCKER_AUTH_CONFIG`); never the secret itself. */
  source?: string;
}

interface Entry {
  path: string;
  source: string;
  credential: RegistryCredential;
}

const SOURCE_JOB = '$DOCKER_AUTH_CONFIG';
const SOURCE_RUNNER = "the runner's DOCKER_AUTH_CONFIG";
const SOURCE_PAYLOAD = 'job payload (GitLab Registry)';

function lowerHost(p: string): string {
  const i = p.indexOf('/');
  return i < 0 ? p.toLowerCase() : p.slice(0, i).toLowerCase() + p.slice(i);
}

function canonicalHost(host: string): string {
  const h = host.toLowerCase();
  return h === 'index.docker.io' || h === 'registry-1.docker.io' || h === 'registry.hub.docker.com' ? DOCKER_HUB : h;
}

/** A DOCKER_AUTH_CONFIG key (`https://index.docker.io/v1/`, `registry.example.com:5000/group`) as a registry path. */
export function registryPath(key: string): string {
  const proto = /^https?:\/\//i;
  if (proto.test(key)) return canonicalHost(key.replace(proto, '').split('/')[0]);
  let p = key.replace(/\/+$/, '');
  const tag = p.lastIndexOf(':');
  const slash = p.lastIndexOf('/');
  if (slash >= 0 && tag > slash) p = p.slice(0, tag);
  p = lowerHost(p);
  const i = p.indexOf('/');
  return i < 0 ? canonicalHost(p) : canonicalHost(p.slice(0, i)) + p.slice(i);
}

function fromDockerAuthConfig(text: string, source: string, warn: (m: string) => void): Entry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    warn(`Failed to resolve credentials from ${source}: ${(err as Error).message}. Credentials from this source will not be used.`);
    return [];
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
    warn(`Failed to resolve credentials from ${source}: not a JSON object. Credentials from this source will not be used.`);
    return [];
  }
  const config = parsed as { auths?: unknown; credsStore?: unknown; credHelpers?: unknown };
  if (config.credsStore || config.credHelpers) warn(`Credential helpers (credsStore, credHelpers) in ${source} are not supported; only its "auths" are used.`);
  if (!config.auths || typeof config.auths !== 'object') return [];
  const entries: Entry[] = [];
  for (const key of Object.keys(config.auths).sort()) {
    const a = (config.auths as Record<string, unknown>)[key] as { auth?: unknown; username?: unknown; password?: unknown } | null;
    if (!a || typeof a !== 'object') continue;
    let username: string | null = null;
    let password: string | null = null;
    if (typeof a.auth === 'string' && a.auth) {
      const decoded = Buffer.from(a.auth, 'base64').toString('utf8');
      const i = decoded.indexOf(':');
      if (i <= 0) {
        warn(`Failed to resolve credentials for ${JSON.stringify(key)} from ${source}: its "auth" is not base64 of user:password.`);
        continue;
      }
      username = decoded.slice(0, i);
      password = decoded.slice(i + 1);
    } else if (typeof a.username === 'string' && typeof a.password === 'string') {
      username = a.username;
      password = a.password;
    }
    if (username === null || password === null) continue;
    entries.push({ path: registryPath(key), source, credential: { username, password, source } });
  }
  return entries;
}

/** The image's path and its parents, longest first: `host/group/app`, `host/group`, `host`. */
function candidatePaths(ref: ImageRef): string[] {
  const paths: string[] = [];
  const parts = `${ref.registry}/${ref.repository}`.split('/');
  for (let n = parts.length; n >= 1; n--) paths.push(parts.slice(0, n).join('/'));
  // gitlab-runner names Docker Hub's official images without `library/` (docker.io/node).
  if (ref.registry === DOCKER_HUB && ref.repository.startsWith('library/')) paths.splice(1, 0, `${DOCKER_HUB}/${ref.repository.slice('library/'.length)}`);
  return paths;
}

/** DOCKER_AUTH_CONFIG (job variable, then runner env/config), then the job's CI_REGISTRY + CI_REGISTRY_USER/CI_REGISTRY_PASSWORD when the registry matches — gitlab-runner's order */
export function credentialsFor(
  ref: ImageRef,
  jobVariables: { key: string; value: string }[],
  runnerDockerAuthConfig?: string,
  onWarning: (message: string) => void = () => {},
): RegistryCredential | null {
  const variable = (key: string): string | null => {
    let value: string | null = null;
    for (const v of jobVariables ?? []) if (v && v.key === key && typeof v.value === 'string') value = v.value;
    return value;
  };
  const entries: Entry[] = [];
  const add = (list: Entry[]) => {
    for (const e of list) if (!entries.some((x) => x.path === e.path)) entries.push(e);
  };
  const jobConfig = variable('DOCKER_AUTH_CONFIG');
  if (jobConfig) add(fromDockerAuthConfig(jobConfig, SOURCE_JOB, onWarning));
  if (runnerDockerAuthConfig) add(fromDockerAuthConfig(runnerDockerAuthConfig, SOURCE_RUNNER, onWarning));
  const ciRegistry = variable('CI_REGISTRY');
  const user = variable('CI_REGISTRY_USER');
  const password = variable('CI_REGISTRY_PASSWORD');
  if (ciRegistry && user && password) add([{ path: registryPath(ciRegistry), source: SOURCE_PAYLOAD, credential: { username: user, password, source: SOURCE_PAYLOAD } }]);

  for (const p of candidatePaths(ref)) {
    const hit = entries.find((e) => e.path === p);
    if (hit) return { ...hit.credential };
  }
  return null;
}
