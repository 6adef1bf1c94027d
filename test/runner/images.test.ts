// Images for jobs (src/runner/images): names, credentials, pull policies, and pulls from a real
// registry (Debian's docker-registry on loopback, images built here from busybox-static): by tag
// and by digest, the cache (no registry contact for if-not-present, the same rootfs for an
// unchanged digest), private registries, hostile layers, size limits, multi-platform indexes,
// two stores pulling the same image at once, eviction.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
import {
  credentialsFor,
  detectImageSupport,
  ImageError,
  ImageStore,
  parseImageRef,
  parsePullPolicies,
  registryPath,
  type ImageStoreOptions,
  type PreparedImage,
} from '../../src/runner/images.js';
import { LayerFormatError, LayerTooBigError, measureLayer } from '../../src/runner/images/scan.js';
import { tarArchive, type TarEntry } from '../helpers/tar.js';
import { until } from '../helpers/until.js';
import { buildImage, hostArchitecture, pushImage, registryToolsMissing, startRegistry, type BuiltImage, type TestRegistry } from '../helpers/oci.js';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
/** Whom the rootfs belongs to: another user when we are root (as a runner gives its jobs' uid). */
const OWNER = isRoot ? { uid: 65534, gid: 65534 } : { uid: process.getuid!(), gid: process.getgid!() };
const OTHER_ARCH = hostArchitecture() === 'arm64' ? 'amd64' : 'arm64';

function tmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

async function rejectsImage(p: Promise<unknown>, pattern: RegExp, reason: ImageError['reason'] = 'image_pull_failure'): Promise<ImageError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ImageError, `an ImageError, not ${(err as Error)?.stack ?? err}`);
    assert.match(err.message, pattern);
    assert.equal(err.reason, reason, err.message);
    assert.ok(!err.message.includes('\n'), `one line: ${err.message}`);
    return err;
  }
  assert.fail(`expected an ImageError matching ${pattern}`);
}

describe('image names', () => {
  const cases: Array<[string, { registry: string; repository: string; tag: string | null; digest: string | null; name: string }]> = [
    ['node', { registry: 'docker.io', repository: 'library/node', tag: 'latest', digest: null, name: 'docker.io/library/node:latest' }],
    ['node:22', { registry: 'docker.io', repository: 'library/node', tag: '22', digest: null, name: 'docker.io/library/node:22' }],
    ['user/app:1.0-rc_2', { registry: 'docker.io', repository: 'user/app', tag: '1.0-rc_2', digest: null, name: 'docker.io/user/app:1.0-rc_2' }],
    ['docker.io/node', { registry: 'docker.io', repository: 'library/node', tag: 'latest', digest: null, name: 'docker.io/library/node:latest' }],
    ['index.docker.io/library/node:22', { registry: 'docker.io', repository: 'library/node', tag: '22', digest: null, name: 'docker.io/library/node:22' }],
    ['localhost/app', { registry: 'localhost', repository: 'app', tag: 'latest', digest: null, name: 'localhost/app:latest' }],
    ['localhost:5000/a/b/c:t', { registry: 'localhost:5000', repository: 'a/b/c', tag: 't', digest: null, name: 'localhost:5000/a/b/c:t' }],
    ['Registry.Example.com/group/app', { registry: 'registry.example.com', repository: 'group/app', tag: 'latest', digest: null, name: 'registry.example.com/group/app:latest' }],
    ['[::1]:5000/app:v1', { registry: '[::1]:5000', repository: 'app', tag: 'v1', digest: null, name: '[::1]:5000/app:v1' }],
    ['reg.lan/a__b/c-d.e:x', { registry: 'reg.lan', repository: 'a__b/c-d.e', tag: 'x', digest: null, name: 'reg.lan/a__b/c-d.e:x' }],
  ];
  for (const [input, want] of cases) test(`${input} -> ${want.name}`, () => assert.deepEqual(parseImageRef(input), want));

  const digest = `sha256:${'ab'.repeat(32)}`;
  test('a digest, and a digest with a tag (the digest is what is pulled)', () => {
    assert.deepEqual(parseImageRef(`alpine@${digest}`), { registry: 'docker.io', repository: 'library/alpine', tag: null, digest, name: `docker.io/library/alpine@${digest}` });
    const both = parseImageRef(`reg.lan:5000/app:3@${digest}`);
    assert.equal(both.digest, digest);
    assert.equal(both.tag, '3');
    assert.equal(both.name, `reg.lan:5000/app:3@${digest}`);
  });

  const bad: Array<[string, RegExp]> = [
    ['', /empty/],
    ['   ', /empty/],
    ['Node', /lowercase/],
    ['-rf', /invalid reference format/],
    ['--help:1', /invalid reference format/],
    ['node:', /invalid tag/],
    ['node:-x', /invalid tag/],
    ['node:a b', /invalid reference format/],
    ['node@sha256:abc', /invalid digest/],
    [`node@md5:${'a'.repeat(32)}`, /unsupported digest algorithm/],
    [`node@sha256:${'A'.repeat(64)}`, /invalid digest/],
    ['a//b', /invalid reference format/],
    ['a/../b', /invalid reference format/],
    ['reg.lan:99999/app', /invalid registry host/],
    ['-reg.lan/app', /invalid registry host/],
    ['reg.lan/', /invalid reference format/],
    ['app\n', /invalid reference format/],
    ['app$(id)', /invalid reference format/],
    [`reg.lan/${'a'.repeat(250)}`, /longer than 255/],
    ['node:' + 't'.repeat(129), /invalid tag/],
  ];
  for (const [input, why] of bad) {
    test(`refuses ${JSON.stringify(input).slice(0, 40)}`, () => {
      assert.throws(() => parseImageRef(input), (err: unknown) => err instanceof ImageError && why.test(err.message) && err.reason === 'image_pull_failure');
    });
  }
});

describe('pull policies', () => {
  test("gitlab-runner's list: default always, order kept, duplicates dropped, unknown refused", () => {
    assert.deepEqual(parsePullPolicies(undefined), ['always']);
    assert.deepEqual(parsePullPolicies([]), ['always']);
    assert.deepEqual(parsePullPolicies(['if-not-present', 'always', 'if-not-present']), ['if-not-present', 'always']);
    assert.deepEqual(parsePullPolicies('never'), ['never']);
    assert.throws(() => parsePullPolicies(['sometimes']), (e: unknown) => e instanceof ImageError && /unsupported pull_policy "sometimes"/.test(e.message));
  });
});

describe('registry credentials', () => {
  const auth = (u: string, p: string) => Buffer.from(`${u}:${p}`).toString('base64');
  const config = (auths: Record<string, object>) => JSON.stringify({ auths });
  const ref = parseImageRef('registry.example.com:5000/group/app:1');

  test('keys as gitlab-runner normalises them', () => {
    assert.equal(registryPath('https://index.docker.io/v1/'), 'docker.io');
    assert.equal(registryPath('Registry.Example.com:5000'), 'registry.example.com:5000');
    assert.equal(registryPath('registry.example.com:5000/group/'), 'registry.example.com:5000/group');
    assert.equal(registryPath('registry.example.com/group/app:tag'), 'registry.example.com/group/app');
    assert.equal(registryPath('http://reg.lan:5000/v2/'), 'reg.lan:5000');
  });

  test('DOCKER_AUTH_CONFIG from the job, auth or username/password, longest path first', () => {
    const vars = [
      { key: 'DOCKER_AUTH_CONFIG', value: config({ 'registry.example.com:5000': { auth: auth('host', 'h') }, 'registry.example.com:5000/group': { username: 'group', password: 'g:with:colons' } }) },
    ];
    assert.deepEqual(credentialsFor(ref, vars), { username: 'group', password: 'g:with:colons', source: '$DOCKER_AUTH_CONFIG' });
    assert.deepEqual(credentialsFor(parseImageRef('registry.example.com:5000/other/app'), vars), { username: 'host', password: 'h', source: '$DOCKER_AUTH_CONFIG' });
    assert.equal(credentialsFor(parseImageRef('registry.example.com/group/app'), vars), null, 'another port is another registry');
    assert.equal(credentialsFor(parseImageRef('node'), vars), null);
  });

  test("the job's DOCKER_AUTH_CONFIG before the runner's, the runner's before CI_REGISTRY", () => {
    const ci = [
      { key: 'CI_REGISTRY', value: 'registry.example.com:5000' },
      { key: 'CI_REGISTRY_USER', value: 'gitlab-ci-token' },
      { key: 'CI_REGISTRY_PASSWORD', value: 'job-token' },
    ];
    const runner = config({ 'registry.example.com:5000': { auth: auth('runner', 'r') } });
    const job = { key: 'DOCKER_AUTH_CONFIG', value: config({ 'registry.example.com:5000': { auth: auth('job', 'j') } }) };
    assert.equal(credentialsFor(ref, [...ci, job], runner)?.username, 'job');
    assert.equal(credentialsFor(ref, ci, runner)?.username, 'runner');
    assert.deepEqual(credentialsFor(ref, ci), { username: 'gitlab-ci-token', password: 'job-token', source: 'job payload (GitLab Registry)' });
    assert.equal(credentialsFor(parseImageRef('elsewhere.example.com/group/app'), ci), null, 'CI_REGISTRY only for its own registry');
    assert.equal(credentialsFor(ref, ci.slice(0, 2)), null, 'no password, no credential');
  });

  test('Docker Hub keys match docker.io images, official ones too', () => {
    const vars = [{ key: 'DOCKER_AUTH_CONFIG', value: config({ 'https://index.docker.io/v1/': { auth: auth('hub', 'x') } }) }];
    assert.equal(credentialsFor(parseImageRef('node:22'), vars)?.username, 'hub');
    assert.equal(credentialsFor(parseImageRef('user/app'), vars)?.username, 'hub');
  });

  test('a broken DOCKER_AUTH_CONFIG is a warning, not a crash; credential helpers are named as unsupported', () => {
    const warnings: string[] = [];
    assert.equal(credentialsFor(ref, [{ key: 'DOCKER_AUTH_CONFIG', value: '{not json' }], undefined, (w) => warnings.push(w)), null);
    assert.equal(credentialsFor(ref, [{ key: 'DOCKER_AUTH_CONFIG', value: '[1]' }], undefined, (w) => warnings.push(w)), null);
    assert.equal(credentialsFor(ref, [{ key: 'DOCKER_AUTH_CONFIG', value: JSON.stringify({ credsStore: 'pass', auths: { 'registry.example.com:5000': { auth: 'bm9jb2xvbg==' } } }) }], undefined, (w) => warnings.push(w)), null);
    assert.equal(warnings.length, 4, warnings.join('\n'));
    assert.match(warnings[0], /Failed to resolve credentials from \$DOCKER_AUTH_CONFIG/);
    assert.match(warnings[2], /credsStore, credHelpers/);
    assert.match(warnings[3], /not base64 of user:password/);
    assert.ok(!warnings.join('\n').includes('nocolon'));
  });
});

const missing = registryToolsMissing();

describe('pulling images from a registry', { skip: missing ? `registry tests skipped: ${missing}` : false }, () => {
  let registry: TestRegistry;
  let privateRegistry: TestRegistry;
  const PRIVATE = { username: 'deployer', password: `s3cret-${crypto.randomBytes(6).toString('hex')}` };
  let base: BuiltImage;
  const roots: string[] = [];

  const store = (extra: Partial<ImageStoreOptions> = {}) => {
    const dir = extra.dir ?? path.join(tmpDir('cairn-images-'), 'cache');
    roots.push(path.dirname(dir));
    return new ImageStore({ dir, owner: OWNER, ...extra });
  };
  const lines = () => {
    const all: string[] = [];
    return { all, onLog: (l: string) => all.push(l) };
  };

  before(async () => {
    base = buildImage({
      files: { 'hello.txt': 'hello from the image\n', 'srv/index.html': '<p>hi</p>' },
      env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'GREETING=hello'],
      entrypoint: ['/bin/sh', '-c'],
      cmd: ['cat /hello.txt'],
      workingDir: '/srv',
      user: 'nobody',
      exposedPorts: [8080, 80, '53/udp'],
    });
    registry = await startRegistry();
    privateRegistry = await startRegistry({ auth: PRIVATE });
    pushImage(base, registry, 'cairn/base:1');
    pushImage(base, privateRegistry, 'team/secret:1', PRIVATE);
  });

  after(async () => {
    await registry?.stop();
    await privateRegistry?.stop();
    for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
  });

  function assertBaseImage(img: PreparedImage) {
    assert.equal(fs.readFileSync(path.join(img.rootfs, 'hello.txt'), 'utf8'), 'hello from the image\n');
    assert.equal(fs.readlinkSync(path.join(img.rootfs, 'bin/sh')), 'busybox');
    const busybox = fs.lstatSync(path.join(img.rootfs, 'bin/busybox'));
    assert.ok(busybox.isFile() && (busybox.mode & 0o111) !== 0);
    assert.equal(busybox.uid, OWNER.uid);
    assert.equal(busybox.gid, OWNER.gid);
    assert.equal(fs.lstatSync(img.rootfs).uid, OWNER.uid);
    assert.deepEqual(img.config, {
      env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'GREETING=hello'],
      entrypoint: ['/bin/sh', '-c'],
      cmd: ['cat /hello.txt'],
      workingDir: '/srv',
      user: 'nobody',
      exposedPorts: [80, 8080],
    });
    assert.equal(img.digest, base.manifestDigest);
    assert.equal(img.imageId, base.configDigest);
  }

  test('by tag: the rootfs, its owner, the config, the log lines; the cache directory is 0700', async () => {
    const s = store();
    const log = lines();
    const img = await s.prepare(`${registry.host}/cairn/base:1`, { onLog: log.onLog });
    assertBaseImage(img);
    assert.equal(img.ref.name, `${registry.host}/cairn/base:1`);
    assert.ok(img.rootfs.startsWith(s.dir + path.sep));
    assert.deepEqual(log.all, [
      `Using effective pull policy of [always] for container ${registry.host}/cairn/base:1`,
      `Pulling docker image ${registry.host}/cairn/base:1 ...`,
      `Using docker image ${base.configDigest} for ${registry.host}/cairn/base:1 with digest ${registry.host}/cairn/base@${base.digest} ...`,
    ]);
    assert.equal(fs.statSync(s.dir).mode & 0o777, 0o700);
    if (isRoot) assert.equal(fs.statSync(s.dir).uid, 0);
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'tmp')), [], 'nothing left in tmp/');
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'rootfs')), [`sha256-${base.manifestDigest.slice(7)}`]);
  });

  test('by digest, and by a tag that does not exist plus the digest (the digest wins)', async () => {
    const s = store();
    const img = await s.prepare(`${registry.host}/cairn/base@${base.digest}`);
    assertBaseImage(img);
    const both = await s.prepare(`${registry.host}/cairn/base:no-such-tag@${base.digest}`);
    assert.equal(both.rootfs, img.rootfs);
    await rejectsImage(s.prepare(`${registry.host}/cairn/base@sha256:${'0'.repeat(64)}`), /manifest for .* not found/);
  });

  test('always: asks the registry, and reuses the rootfs while the digest is unchanged; a moved tag gets the new image', async () => {
    const own = await startRegistry();
    try {
      pushImage(base, own, 'moving/app:stable');
      const s = store();
      const first = await s.prepare(`${own.host}/moving/app:stable`);
      const inode = fs.statSync(first.rootfs).ino;
      const again = await s.prepare(`${own.host}/moving/app:stable`, { pullPolicy: ['always'] });
      assert.equal(again.rootfs, first.rootfs);
      assert.equal(fs.statSync(again.rootfs).ino, inode, 'not unpacked again');

      const v2 = buildImage({ files: { 'hello.txt': 'version 2\n' } });
      pushImage(v2, own, 'moving/app:stable');
      const moved = await s.prepare(`${own.host}/moving/app:stable`);
      assert.equal(moved.digest, v2.manifestDigest);
      assert.notEqual(moved.rootfs, first.rootfs);
      assert.equal(fs.readFileSync(path.join(moved.rootfs, 'hello.txt'), 'utf8'), 'version 2\n');
      assert.equal(fs.readFileSync(path.join(first.rootfs, 'hello.txt'), 'utf8'), 'hello from the image\n', 'the old rootfs is untouched');

      // The registry is gone: `always` fails, clearly; `if-not-present` and `never` use the cache without asking it.
      await own.stop();
      await rejectsImage(s.prepare(`${own.host}/moving/app:stable`), /^failed to pull image ".*" with specified policies \[always\]: .*connection refused/);
      const log = lines();
      const started = performance.now();
      const cached = await s.prepare(`${own.host}/moving/app:stable`, { pullPolicy: ['if-not-present'], onLog: log.onLog });
      const ms = performance.now() - started;
      assert.equal(cached.rootfs, moved.rootfs);
      assert.ok(ms < 1000, `a cached if-not-present prepare took ${ms} ms`);
      assert.ok(log.all.includes('Using locally found image version due to "if-not-present" pull policy'));
      assert.ok(!log.all.some((l) => l.startsWith('Pulling')));
      assert.equal((await s.prepare(`${own.host}/moving/app:stable`, { pullPolicy: ['never'] })).rootfs, moved.rootfs);

      // A list falls through: always fails (warning), if-not-present finds the cached image.
      const fallback = lines();
      const fb = await s.prepare(`${own.host}/moving/app:stable`, { pullPolicy: ['always', 'if-not-present'], onLog: fallback.onLog });
      assert.equal(fb.rootfs, moved.rootfs);
      assert.ok(fallback.all.some((l) => /^WARNING: Failed to pull image with policy "always": /.test(l)), fallback.all.join('\n'));
      assert.ok(fallback.all.includes('Attempt #2: Trying "if-not-present" pull policy'));

      // Another store (another machine, or a fresh cache) has nothing: never fails as GitLab says.
      await rejectsImage(
        store().prepare(`${own.host}/moving/app:stable`, { pullPolicy: ['never'] }),
        new RegExp(`^failed to pull image "${own.host}/moving/app:stable" with specified policies \\[never\\]: No such image: ${own.host}/moving/app:stable$`),
      );
    } finally {
      await own.stop();
    }
  });

  test('unknown images, unknown registries, bad policies, a canceled pull', async () => {
    const s = store();
    await rejectsImage(s.prepare(`${registry.host}/cairn/nope:1`), /manifest for .*cairn\/nope:1 not found/);
    await rejectsImage(s.prepare(`${registry.host}/cairn/base:nope`), /not found/);
    await rejectsImage(s.prepare('127.0.0.1:1/x/y:1'), /connection refused/);
    await rejectsImage(s.prepare(`${registry.host}/cairn/base:1`, { pullPolicy: ['sometimes'] }), /unsupported pull_policy/);
    await rejectsImage(s.prepare('Bad/Name'), /invalid image name/);
    const aborted = new AbortController();
    aborted.abort();
    await rejectsImage(s.prepare(`${registry.host}/cairn/base:1`, { signal: aborted.signal }), /canceled/, 'runner_system_failure');
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'tmp')), []);
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'rootfs')), []);
  });

  test('a private registry: refused without credentials, pulled with DOCKER_AUTH_CONFIG or CI_REGISTRY_USER/PASSWORD; no secret left behind', async () => {
    const name = `${privateRegistry.host}/team/secret:1`;
    const ref = parseImageRef(name);
    const s = store();
    const denied = await rejectsImage(s.prepare(name), /pull access denied for .*team\/secret.*(unauthorized|authentication required)/);
    assert.match(denied.message, /^failed to pull image ".*team\/secret:1" with specified policies \[always\]: /);
    await rejectsImage(s.prepare(name, { credential: { username: PRIVATE.username, password: 'wrong' } }), /pull access denied|unauthorized/);

    const viaAuthConfig = credentialsFor(ref, [
      { key: 'DOCKER_AUTH_CONFIG', value: JSON.stringify({ auths: { [privateRegistry.host]: { auth: Buffer.from(`${PRIVATE.username}:${PRIVATE.password}`).toString('base64') } } }) },
    ]);
    assert.ok(viaAuthConfig);
    const log = lines();
    const img = await s.prepare(name, { credential: viaAuthConfig, onLog: log.onLog });
    assertBaseImage(img);
    assert.ok(log.all.includes('Authenticating with credentials from $DOCKER_AUTH_CONFIG'), log.all.join('\n'));
    assert.ok(!log.all.join('\n').includes(PRIVATE.password));

    const viaCiRegistry = credentialsFor(ref, [
      { key: 'CI_REGISTRY', value: privateRegistry.host },
      { key: 'CI_REGISTRY_USER', value: PRIVATE.username },
      { key: 'CI_REGISTRY_PASSWORD', value: PRIVATE.password },
    ]);
    const fresh = store();
    assertBaseImage(await fresh.prepare(name, { credential: viaCiRegistry }));

    // `always` checks the credential every time, even with the image cached.
    await rejectsImage(fresh.prepare(name), /pull access denied/);
    for (const st of [s, fresh]) {
      assert.deepEqual(fs.readdirSync(path.join(st.dir, 'tmp')), [], 'no auth file left');
      const everything = fs.readdirSync(st.dir, { recursive: true }) as string[];
      for (const f of everything) {
        const p = path.join(st.dir, f);
        if (fs.lstatSync(p).isFile() && fs.lstatSync(p).size < 1e6) assert.ok(!fs.readFileSync(p, 'utf8').includes(PRIVATE.password), `${f} holds the password`);
      }
    }
  });

  test('a multi-platform index: the host platform is unpacked; an index without it, or an image of another platform, is refused', async () => {
    const multi = buildImage({ files: { 'hello.txt': 'multi\n' }, alsoPlatforms: [{ os: 'linux', architecture: OTHER_ARCH }, { os: 'windows', architecture: hostArchitecture() }] });
    pushImage(multi, registry, 'cairn/multi:1');
    const s = store();
    const log = lines();
    const img = await s.prepare(`${registry.host}/cairn/multi:1`, { onLog: log.onLog });
    assert.equal(fs.readFileSync(path.join(img.rootfs, 'platform.txt'), 'utf8'), `linux/${hostArchitecture()}`);
    assert.equal(img.digest, multi.manifestDigest);
    assert.equal(img.repoDigest, `${registry.host}/cairn/multi@${multi.digest}`);
    assert.ok(log.all.some((l) => l.includes(`with digest ${registry.host}/cairn/multi@${multi.digest}`)));
    // Cached: `always` asks for the index only, and finds its platform's rootfs.
    assert.equal((await s.prepare(`${registry.host}/cairn/multi:1`)).rootfs, img.rootfs);

    const foreign = buildImage({ architecture: OTHER_ARCH, alsoPlatforms: [{ os: 'linux', architecture: 's390x' }] });
    pushImage(foreign, registry, 'cairn/foreign-index:1');
    await rejectsImage(s.prepare(`${registry.host}/cairn/foreign-index:1`), new RegExp(`no matching manifest for linux/${hostArchitecture()} in the manifest list entries`));
    const otherArch = buildImage({ architecture: OTHER_ARCH, files: { 'x.txt': 'x' } });
    pushImage(otherArch, registry, 'cairn/other-arch:1');
    await rejectsImage(s.prepare(`${registry.host}/cairn/other-arch:1`), new RegExp(`image architecture "${OTHER_ARCH}"`));
    const windows = buildImage({ os: 'windows', files: { 'x.txt': 'x' } });
    pushImage(windows, registry, 'cairn/windows:1');
    await rejectsImage(s.prepare(`${registry.host}/cairn/windows:1`), /image operating system "windows" cannot be used on this platform/);
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'tmp')), []);
  });

  test('hostile layers stay inside the rootfs and are neutralised', async () => {
    // A world-writable place outside: if anything escaped as the owner, it would land here.
    const outside = tmpDir('cairn-outside-');
    roots.push(outside);
    fs.chmodSync(outside, 0o1777);
    fs.writeFileSync(path.join(outside, 'victim.txt'), 'victim\n');
    fs.chownSync(path.join(outside, 'victim.txt'), OWNER.uid, OWNER.gid);
    const before = fs.readdirSync(outside);
    const hostile = buildImage({
      noBase: true,
      layers: [
        [
          { name: 'ok.txt', content: 'ok' },
          { name: '../escape-dotdot.txt', content: 'x' },
          { name: 'a/../../escape-nested.txt', content: 'x' },
          { name: `${outside}/absolute.txt`, content: 'x' },
          { name: 'abs-link', type: 'symlink', linkname: outside },
          { name: 'abs-link/through-abs-link.txt', content: 'x' },
          { name: 'rel-link', type: 'symlink', linkname: `../../../../../../../..${outside}` },
          { name: 'rel-link/through-rel-link.txt', content: 'x' },
          { name: 'root-link', type: 'symlink', linkname: '/' },
          { name: `root-link${outside}/through-root-link.txt`, content: 'x' },
          { name: 'file-link', type: 'symlink', linkname: `${outside}/victim.txt` },
          { name: 'dev-null', type: 'char', devmajor: 1, devminor: 3 },
          { name: 'dev-sda', type: 'block', devmajor: 8, devminor: 0 },
          { name: 'fifo', type: 'fifo' },
          { name: 'suid', content: '#!/bin/sh\n', mode: 0o4755 },
          { name: 'sgid', content: '#!/bin/sh\n', mode: 0o2755 },
          { name: 'root-owned', content: 'x', uid: 0, gid: 0 },
          { name: 'other-owned', content: 'x', uid: 1000, gid: 1000, mode: 0o600 },
          { name: 'closed/', type: 'dir', mode: 0 },
          { name: 'closed/inside.txt', content: 'x', mode: 0o4700 },
          { name: 'gone.txt', content: 'whited out later' },
          { name: 'opaque/', type: 'dir' },
          { name: 'opaque/old.txt', content: 'old' },
        ],
        [
          { name: 'file-link', content: 'replaces the link, not its target' },
          { name: 'abs-link/layer2.txt', content: 'x' },
          { name: '.wh.gone.txt' },
          { name: 'opaque/.wh..wh..opq' },
          { name: 'opaque/new.txt', content: 'new' },
          { name: '../.wh.victim.txt' },
          { name: 'abs-link/.wh.victim.txt' },
        ],
      ],
    });
    pushImage(hostile, registry, 'cairn/hostile:1');
    const s = store();
    const img = await s.prepare(`${registry.host}/cairn/hostile:1`);

    assert.deepEqual(fs.readdirSync(outside).sort(), before.sort(), 'nothing created outside');
    assert.equal(fs.readFileSync(path.join(outside, 'victim.txt'), 'utf8'), 'victim\n', 'the victim is untouched');
    const inside = (p: string) => path.join(img.rootfs, p);
    for (const p of ['escape-dotdot.txt', 'escape-nested.txt', `${outside}/absolute.txt`, `${outside}/through-abs-link.txt`, `${outside}/through-rel-link.txt`, `${outside}/through-root-link.txt`, `${outside}/layer2.txt`]) {
      assert.ok(fs.lstatSync(inside(p)).isFile(), `${p} is inside the rootfs`);
    }
    assert.equal(fs.readFileSync(inside('file-link'), 'utf8'), 'replaces the link, not its target');
    assert.equal(fs.readlinkSync(inside('abs-link')), outside, 'links are kept as they are (they resolve inside the job)');
    for (const dev of ['dev-null', 'dev-sda']) {
      const st = fs.lstatSync(inside(dev));
      assert.ok(!st.isCharacterDevice() && !st.isBlockDevice(), `${dev} is no device`);
    }
    assert.equal(fs.lstatSync(inside('suid')).mode & 0o7777, 0o755);
    assert.equal(fs.lstatSync(inside('sgid')).mode & 0o7777, 0o755);
    assert.equal(fs.lstatSync(inside('closed/inside.txt')).mode & 0o7777, 0o700);
    assert.equal(fs.lstatSync(inside('closed')).mode & 0o777, 0, 'modes are kept otherwise');
    assert.ok(!fs.existsSync(inside('gone.txt')), 'whiteout applied');
    assert.deepEqual(fs.readdirSync(inside('opaque')), ['new.txt'], 'opaque whiteout applied');
    // Every entry belongs to the owner, none is setuid/setgid or a device.
    const walk = (dir: string): void => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        const st = fs.lstatSync(p);
        assert.equal(`${st.uid}:${st.gid}`, `${OWNER.uid}:${OWNER.gid}`, p);
        if (st.isFile()) assert.equal(st.mode & 0o6000, 0, p);
        assert.ok(!st.isCharacterDevice() && !st.isBlockDevice() && !st.isSocket(), p);
        if (st.isDirectory()) walk(p);
      }
    };
    walk(img.rootfs);

    // A hard link to a file outside cannot be made: the pull fails cleanly, nothing is kept.
    const hardlink = buildImage({ noBase: true, layers: [[{ name: 'ok.txt', content: 'ok' }, { name: 'hl', type: 'hardlink', linkname: `${outside}/victim.txt` }]] });
    pushImage(hardlink, registry, 'cairn/hardlink:1');
    await rejectsImage(s.prepare(`${registry.host}/cairn/hardlink:1`), /could not be unpacked: .*hl/);
    assert.equal(fs.lstatSync(path.join(outside, 'victim.txt')).nlink, 1);
    // The root itself turned into a link (or a file), a whiteout of `..`: refused the same way.
    const rootLink = buildImage({ noBase: true, layers: [[{ name: './', type: 'symlink', linkname: outside }, { name: 'x.txt', content: 'x' }]] });
    pushImage(rootLink, registry, 'cairn/root-link:1');
    await rejectsImage(s.prepare(`${registry.host}/cairn/root-link:1`), /could not be unpacked: .*root directory/);
    const whiteoutUp = buildImage({ noBase: true, layers: [[{ name: 'x.txt', content: 'x' }], [{ name: '.wh...' }]] });
    pushImage(whiteoutUp, registry, 'cairn/whiteout-up:1');
    await rejectsImage(s.prepare(`${registry.host}/cairn/whiteout-up:1`), /could not be unpacked/);
    assert.deepEqual(fs.readdirSync(outside).sort(), before.sort());
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'tmp')), []);
    assert.equal(fs.readdirSync(path.join(s.dir, 'rootfs')).length, 1);
  });

  test('size limits: compressed layers over the limit are not downloaded, a layer that expands beyond it is not unpacked', async () => {
    const bomb = buildImage({ noBase: true, layers: [[{ name: 'zeros', content: Buffer.alloc(16 * 1024 * 1024) }]] });
    pushImage(bomb, registry, 'cairn/bomb:1');
    const s = store({ maxImageBytes: 4 * 1024 * 1024 });
    await rejectsImage(s.prepare(`${registry.host}/cairn/bomb:1`), /too big: its files are more than this runner's limit of 4194304 bytes/);
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'tmp')), []);
    assert.deepEqual(fs.readdirSync(path.join(s.dir, 'rootfs')), []);
    const tiny = store({ maxImageBytes: 64 * 1024 });
    await rejectsImage(tiny.prepare(`${registry.host}/cairn/base:1`), /too big: its layers are \d+ bytes/);
    // Within the limit, the same image is fine.
    assert.equal(fs.statSync(path.join((await store({ maxImageBytes: 32 * 1024 * 1024 }).prepare(`${registry.host}/cairn/bomb:1`)).rootfs, 'zeros')).size, 16 * 1024 * 1024);
  });

  test('two stores on one directory pulling the same image at once end with one rootfs', async () => {
    const dir = path.join(tmpDir('cairn-images-shared-'), 'cache');
    roots.push(path.dirname(dir));
    const a = new ImageStore({ dir, owner: OWNER });
    const b = new ImageStore({ dir, owner: OWNER });
    const name = `${registry.host}/cairn/base:1`;
    const [x, y, z] = await Promise.all([a.prepare(name), b.prepare(name), a.prepare(name)]);
    assert.equal(x.rootfs, y.rootfs);
    assert.equal(x.rootfs, z.rootfs);
    assertBaseImage(x);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'rootfs')), [`sha256-${base.manifestDigest.slice(7)}`]);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'tmp')), []);
  });

  test('the second of two processes to finish unpacking discards its copy and uses the first one', async () => {
    // B's umoci waits (as the owner, outside the cache) until A has finished; B then renames too late.
    const gate = tmpDir('cairn-images-gate-');
    roots.push(gate);
    fs.chmodSync(gate, 0o777);
    const umoci = detectImageSupport().umoci!;
    const script = path.join(gate, 'umoci-after-a.sh');
    fs.writeFileSync(script, `#!/bin/sh\ntouch '${gate}/started'\nwhile [ ! -e '${gate}/go' ]; do sleep 0.05; done\nexec '${umoci}' "$@"\n`, { mode: 0o755 });
    const dir = path.join(tmpDir('cairn-images-race-'), 'cache');
    roots.push(path.dirname(dir));
    const name = `${registry.host}/cairn/base:1`;
    const late = new ImageStore({ dir, owner: OWNER, umoci: script, skopeo: detectImageSupport().skopeo! }).prepare(name);
    await until('the second unpack to start', () => fs.existsSync(path.join(gate, 'started')) || null, 60_000);
    const first = await new ImageStore({ dir, owner: OWNER }).prepare(name);
    const inode = fs.statSync(first.rootfs).ino;
    fs.writeFileSync(path.join(gate, 'go'), '');
    const second = await late;
    assert.equal(second.rootfs, first.rootfs);
    assert.equal(fs.statSync(second.rootfs).ino, inode, "the first rootfs stays; the second copy was discarded");
    assertBaseImage(second);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'rootfs')), [`sha256-${base.manifestDigest.slice(7)}`]);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'tmp')), []);
  });

  test('eviction: least recently used entries beyond the budget, never one used recently', async () => {
    const other = buildImage({ files: { 'other.txt': 'other' } });
    pushImage(other, registry, 'cairn/other:1');
    const dir = path.join(tmpDir('cairn-images-evict-'), 'cache');
    roots.push(path.dirname(dir));
    const keep = new ImageStore({ dir, owner: OWNER, cacheBytes: 1 });
    const first = await keep.prepare(`${registry.host}/cairn/base:1`);
    const second = await keep.prepare(`${registry.host}/cairn/other:1`);
    assert.ok(fs.existsSync(first.rootfs) && fs.existsSync(second.rootfs), 'both were used just now: none evicted');

    // An entry's last use is its image.json's mtime.
    const lastUse = (img: PreparedImage) => path.join(path.dirname(img.rootfs), 'image.json');
    const old = new Date(Date.now() - 3 * 24 * 3600 * 1000);
    fs.utimesSync(lastUse(first), old, old);
    fs.utimesSync(lastUse(second), new Date(old.getTime() + 1000), new Date(old.getTime() + 1000));
    const budgeted = new ImageStore({ dir, owner: OWNER, cacheBytes: 1 });
    budgeted.touch(second);
    assert.deepEqual(budgeted.evict(), [first.digest], 'the older idle one goes; the touched one stays');
    assert.ok(!fs.existsSync(first.rootfs));
    assert.ok(fs.existsSync(second.rootfs));
    // An evicted image is pulled again (the tag record points to a missing entry).
    const back = await budgeted.prepare(`${registry.host}/cairn/base:1`, { pullPolicy: ['if-not-present'] });
    assertBaseImage(back);
    const roomy = new ImageStore({ dir, owner: OWNER, cacheBytes: 10 * 1024 ** 3 });
    assert.deepEqual(roomy.evict(Date.now() + 10 * 24 * 3600 * 1000), [], 'under budget: nothing removed');
    assert.deepEqual(fs.readdirSync(path.join(dir, 'tmp')), []);
  });
});

describe('image store setup', { skip: missing ? `skipped: ${missing}` : false }, () => {
  test('a cache directory that is not ours, or not a directory, is a clear runner error', async () => {
    const root = tmpDir('cairn-images-bad-');
    try {
      const file = path.join(root, 'file');
      fs.writeFileSync(file, '');
      await rejectsImage(new ImageStore({ dir: file, owner: OWNER }).prepare('127.0.0.1:1/a:1', { pullPolicy: ['never'] }), /is not a directory/, 'runner_system_failure');
      if (isRoot) {
        const foreign = path.join(root, 'foreign');
        fs.mkdirSync(foreign);
        fs.chownSync(foreign, 65534, 65534);
        await rejectsImage(new ImageStore({ dir: foreign, owner: OWNER }).prepare('127.0.0.1:1/a:1', { pullPolicy: ['never'] }), /belongs to uid 65534/, 'runner_system_failure');
      }
      const loose = path.join(root, 'loose');
      fs.mkdirSync(loose, { mode: 0o755 });
      fs.chmodSync(loose, 0o755);
      await rejectsImage(new ImageStore({ dir: loose, owner: OWNER }).prepare('127.0.0.1:1/a:1', { pullPolicy: ['never'] }), /No such image/);
      assert.equal(fs.statSync(loose).mode & 0o777, 0o700, 'tightened to 0700');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('layer sizes, measured before unpacking', () => {
  const dir = tmpDir('cairn-layers-');
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, data: Buffer) => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, data);
    return p;
  };
  const entries: TarEntry[] = [
    { name: 'd/', type: 'dir' },
    { name: 'd/small.txt', content: 'x'.repeat(1000) },
    { name: `d/${'long-name-'.repeat(20)}.txt`, content: 'y'.repeat(3000) },
    { name: 'd/link', type: 'symlink', linkname: `${'t'.repeat(150)}` },
    { name: 'd/hard', type: 'hardlink', linkname: 'd/small.txt' },
    { name: 'dev', type: 'char', devmajor: 1, devminor: 3 },
  ];
  const expected = 6 * 512 + 1000 + 3000;

  test('plain and gzip tar give the same figure: files plus a block per entry, pax headers not counted as entries', async () => {
    const tar = tarArchive(entries);
    assert.deepEqual(await measureLayer(write('plain.tar', tar), 1e9), { bytes: expected, entries: 6 });
    assert.deepEqual(await measureLayer(write('layer.tar.gz', zlib.gzipSync(tar)), 1e9), { bytes: expected, entries: 6 });
  });

  test('stops at the limit (a gzip bomb is not read to its end), refuses what is not a tar', async () => {
    const bomb = write('bomb.tar.gz', zlib.gzipSync(tarArchive([{ name: 'zeros', content: Buffer.alloc(64 * 1024 * 1024) }])));
    await assert.rejects(measureLayer(bomb, 1024 * 1024), LayerTooBigError);
    await assert.rejects(measureLayer(write('junk', crypto.randomBytes(4096)), 1e9), LayerFormatError);
    await assert.rejects(measureLayer(write('bad.gz', Buffer.concat([Buffer.from([0x1f, 0x8b]), crypto.randomBytes(100)])), 1e9), LayerFormatError);
    await assert.rejects(measureLayer(write('z.zst', Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0])), 1e9), /zstd/);
    const manyEmpty = write('many.tar', tarArchive(Array.from({ length: 3000 }, (_, i) => ({ name: `f${i}` }))));
    await assert.rejects(measureLayer(manyEmpty, 1000 * 512), LayerTooBigError, 'empty files count too');
  });
});
