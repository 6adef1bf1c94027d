// The image executor's pure parts (src/runner/container.ts): Docker's entrypoint and command
// rule, GitLab's derived service names, aliases, the generated /etc/hosts, users from an image's
// /etc/passwd (never through a link the image made), the container's environment, GitLab's
// /builds paths, and bwrap options that no job value can add to.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import {
  buildEntrypoint, containerArgv, containerEnvironment, containerProjectDir, containerSandboxOptions, ContainerError, DEFAULT_IMAGE_PATH,
  derivedServiceNames, hostsFile, resolveImageUser, splitAliases, validHostName,
} from '../../src/runner/container.js';
import { tmpDir } from './fake_server.js';

const root = tmpDir('cairn-container-unit-');
after(() => fs.rmSync(root, { recursive: true, force: true }));

function image(files: Record<string, string | { link: string }>): string {
  const dir = fs.mkdtempSync(path.join(root, 'img-'));
  for (const [p, c] of Object.entries(files)) {
    const dest = path.join(dir, p);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    if (typeof c === 'string') fs.writeFileSync(dest, c);
    else fs.symlinkSync(c.link, dest);
  }
  return dir;
}

describe('container command line (Docker\'s rule)', () => {
  const img = { entrypoint: ['/docker-entrypoint.sh'], cmd: ['postgres'] };
  test('the image\'s entrypoint and cmd; a given command replaces cmd only', () => {
    assert.deepEqual(containerArgv(img, null, null), ['/docker-entrypoint.sh', 'postgres']);
    assert.deepEqual(containerArgv(img, undefined, ['postgres', '-c', 'fsync=off']), ['/docker-entrypoint.sh', 'postgres', '-c', 'fsync=off']);
    assert.deepEqual(containerArgv({ entrypoint: null, cmd: null }, null, null), []);
  });
  test('a given entrypoint drops the image\'s cmd; [""] clears the entrypoint', () => {
    assert.deepEqual(containerArgv(img, ['/bin/sh', '-c'], null), ['/bin/sh', '-c']);
    assert.deepEqual(containerArgv(img, ['/bin/sh', '-c'], ['echo hi']), ['/bin/sh', '-c', 'echo hi']);
    assert.deepEqual(containerArgv(img, [''], ['redis-server']), ['redis-server']);
    assert.deepEqual(buildEntrypoint(img, null), ['/docker-entrypoint.sh']);
    assert.deepEqual(buildEntrypoint(img, ['']), []);
    assert.deepEqual(buildEntrypoint(img, ['/init']), ['/init']);
  });
});

describe('service names', () => {
  test('GitLab\'s derived names: no tag, digest or registry port; / as __ and as -', () => {
    assert.deepEqual(derivedServiceNames('postgres:15'), ['postgres']);
    assert.deepEqual(derivedServiceNames('postgres'), ['postgres']);
    assert.deepEqual(derivedServiceNames('registry.example.com/group/tutum/wordpress:latest'), ['registry.example.com__group__tutum__wordpress', 'registry.example.com-group-tutum-wordpress']);
    assert.deepEqual(derivedServiceNames('registry.example.com:5000/group/svc:1.2'), ['registry.example.com__group__svc', 'registry.example.com-group-svc']);
    assert.deepEqual(derivedServiceNames('library/redis@sha256:' + 'a'.repeat(64)), ['library__redis', 'library-redis']);
    assert.deepEqual(derivedServiceNames('localhost:5000/db'), ['localhost__db', 'localhost-db']);
  });
  test('names that are not image references derive nothing', () => {
    for (const bad of ['', 'UPPER', 'a b', 'x/../y', '-x', 'a/b;c', 'a\nb']) assert.deepEqual(derivedServiceNames(bad), [], JSON.stringify(bad));
  });
  test('aliases split on commas and spaces; /etc/hosts keeps valid names only', () => {
    assert.deepEqual(splitAliases('db, cache  primary,,'), ['db', 'cache', 'primary']);
    assert.deepEqual(splitAliases(null), []);
    assert.equal(validHostName('registry.example.com__group__svc'), true);
    for (const bad of ['-x', 'x-', '.x', 'a..b', 'a b', 'a/b', 'a\nb', 'x'.repeat(254), '']) assert.equal(validHostName(bad), false, JSON.stringify(bad));
    const hosts = hostsFile(['db', 'db', 'bad name', 'x\n127.0.0.1 evil', 'localhost', 'www']);
    assert.equal(hosts, '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.0.1\tdb\n127.0.0.1\twww\n');
  });
});

describe('users from the image', () => {
  const passwd = 'root:x:0:0:root:/root:/bin/sh\nbuilder:x:1000:1000::/home/builder:/bin/sh\nbroken:x:abc:1::/:/bin/sh\n';
  const group = 'root:x:0:\nstaff:x:50:\n';
  test('names, uids, name:group, uid:gid, as Docker resolves them', () => {
    const dir = image({ 'etc/passwd': passwd, 'etc/group': group });
    assert.deepEqual(resolveImageUser(dir, ''), { name: 'root', uid: 0, gid: 0, home: '/root' });
    assert.deepEqual(resolveImageUser(dir, 'builder'), { name: 'builder', uid: 1000, gid: 1000, home: '/home/builder' });
    assert.deepEqual(resolveImageUser(dir, '1000'), { name: 'builder', uid: 1000, gid: 1000, home: '/home/builder' });
    assert.deepEqual(resolveImageUser(dir, '4242'), { name: '4242', uid: 4242, gid: 0, home: '/' }, 'a uid the image does not list');
    assert.equal(resolveImageUser(dir, 'builder:staff').gid, 50);
    assert.equal(resolveImageUser(dir, '1000:7').gid, 7);
    assert.throws(() => resolveImageUser(dir, 'nobody-here'), (e: Error) => e instanceof ContainerError && /unable to find user nobody-here/.test(e.message));
    assert.throws(() => resolveImageUser(dir, 'builder:nogroup'), /unable to find group nogroup/);
    assert.throws(() => resolveImageUser(dir, 'a:b:c'), /invalid user/);
    assert.throws(() => resolveImageUser(dir, 'broken'), /unable to find user broken/, 'an entry with a bad uid is skipped');
  });
  test('an image whose /etc or /etc/passwd is a link is read as having none (the link is never followed)', () => {
    const etcLink = image({ etc: { link: '/etc' } });
    assert.deepEqual(resolveImageUser(etcLink, ''), { uid: 0, gid: 0, home: '/root', name: 'root' });
    assert.throws(() => resolveImageUser(etcLink, '0:root'), /unable to find group root/, "the machine's /etc/group is not read");
    const fileLink = image({ 'etc/passwd': { link: '/etc/passwd' } });
    assert.throws(() => resolveImageUser(fileLink, 'daemon'), /unable to find user daemon/, "the machine's /etc/passwd is not read");
  });
});

describe('environment and paths', () => {
  test("the image's Env, then the job's variables, then the runner's; PATH and HOME defaults", () => {
    const user = { name: 'root', uid: 0, gid: 0, home: '/root' };
    assert.deepEqual(containerEnvironment([], user, {}, {}), { PATH: DEFAULT_IMAGE_PATH, HOME: '/root' });
    const env = containerEnvironment(['PATH=/opt/bin:/bin', 'LANG=C.UTF-8', 'A=image', 'EQ=a=b', 'junk'], user, { A: 'job', B: 'job', CI_PROJECT_DIR: '/evil' }, { CI_PROJECT_DIR: '/builds/g/p' });
    assert.deepEqual(env, { PATH: '/opt/bin:/bin', HOME: '/root', LANG: 'C.UTF-8', A: 'job', EQ: 'a=b', B: 'job', CI_PROJECT_DIR: '/builds/g/p' });
  });
  test('/builds/<namespace>/<project> from CI_PROJECT_PATH, refused when it could leave /builds', () => {
    assert.equal(containerProjectDir('group/sub/project', '7'), '/builds/group/sub/project');
    for (const bad of ['../etc', 'group/../..', '/abs', 'a//b', 'a/.hidden', 'x/y.git', 'a b/c', '']) assert.equal(containerProjectDir(bad, '7'), '/builds/project-7', bad);
    assert.equal(containerProjectDir(undefined, '../1'), '/builds/project-0');
  });
  test("bwrap's options: a NUL byte in a variable cannot smuggle an option in", () => {
    const opts = containerSandboxOptions({
      root: '/r', user: { name: 'root', uid: 0, gid: 0, home: '/root' }, hostname: 'h', binds: [{ src: '/b', dest: '/builds/g/p' }], cwd: '/builds/g/p',
      env: { OK: 'value --bind / /host', EVIL: 'x\0--bind\0/\0/host', 'BAD KEY': 'v' }, shmSize: 1024, disableUserns: true,
    });
    assert.ok(opts.includes('OK'));
    assert.ok(!opts.includes('EVIL') && !opts.includes('BAD KEY'));
    assert.equal(opts.filter((a) => a === '--bind').length, 2, 'the root and the build directory only');
    assert.ok(opts.every((a) => !a.includes('\0')));
    assert.deepEqual(opts.slice(opts.indexOf('--setenv'), opts.indexOf('--setenv') + 3), ['--setenv', 'OK', 'value --bind / /host']);
    assert.throws(() => containerSandboxOptions({ root: '/r', user: { name: 'root', uid: 0, gid: 0, home: '/' }, hostname: 'h\0x', binds: [], cwd: '/', env: {}, shmSize: 1, disableUserns: false }), ContainerError);
    // Root keeps Docker's capabilities inside its namespace; another user none.
    assert.ok(opts.includes('CAP_CHOWN'));
    const user = containerSandboxOptions({ root: '/r', user: { name: 'b', uid: 1000, gid: 1000, home: '/' }, hostname: 'h', binds: [], cwd: '/', env: {}, shmSize: 1, disableUserns: false });
    assert.ok(!user.includes('--cap-add'));
  });
});
