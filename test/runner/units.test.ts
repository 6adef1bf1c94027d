// The runner's pure parts: masking across writes, variable expansion, path checks for
// artifacts, failure-reason mapping, the bwrap argument list.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { collectArtifactFiles, normalisePattern, safeEntryName } from '../../src/runner/artifacts.js';
import { supportedFailureReason } from '../../src/runner/job.js';
import { Masker } from '../../src/runner/mask.js';
import { detectSandbox, sandboxArgs } from '../../src/runner/sandbox.js';
import { execFileSync } from 'node:child_process';
import { baseEnvironment, expandVariables, shQuote, stepScript } from '../../src/runner/script.js';
import { tmpDir } from './fake_server.js';

describe('Masker', () => {
  const run = (values: string[], chunks: string[]) => {
    const m = new Masker(values);
    return Buffer.concat([...chunks.map((c) => m.write(Buffer.from(c))), m.end()]).toString();
  };

  test('masks values, also split across any chunk boundary', () => {
    const secret = 'topsecret-123';
    const text = `a ${secret} b ${secret}${secret} c`;
    const expected = 'a [MASKED] b [MASKED][MASKED] c';
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j += 3) {
        assert.equal(run([secret], [text.slice(0, i), text.slice(i, j), text.slice(j)]), expected, `cut at ${i},${j}`);
      }
    }
  });

  test('longest value first; short values (under 8) are not masked; no values passes through', () => {
    assert.equal(run(['password', 'password-long'], ['x password-long y password z']), 'x [MASKED] y [MASKED] z');
    assert.equal(run(['short'], ['a short b']), 'a short b');
    assert.equal(run([], ['plain']), 'plain');
  });

  test('holds back only a possible prefix of a secret', () => {
    const m = new Masker(['abcdefghij']);
    const out = m.write(Buffer.from('hello world, abcde')).toString();
    assert.ok(out.startsWith('hello'));
    assert.equal(out + m.end().toString(), 'hello world, abcde');
  });
});

describe('variables and scripts', () => {
  test('expands $VAR and ${VAR} in non-raw values; raw values stay; $$ is a literal $', () => {
    const v = expandVariables([
      { key: 'A', value: 'alpha' },
      { key: 'B', value: '${A}-$A-$MISSING-$$A' },
      { key: 'R', value: '$A', raw: true },
      { key: 'bad key', value: 'x' },
    ]);
    assert.equal(v.get('B')!.value, 'alpha-alpha--$A');
    assert.equal(v.get('R')!.value, '$A');
    assert.equal(v.has('bad key'), false);
  });

  test('quoting survives quotes, backslashes and newlines, in bash and in a POSIX sh', () => {
    const tricky = `it's a \\ "test" $HOME \`id\`\n\x1b[0m end`;
    assert.equal(shQuote("it's"), `'it'\\''s'`);
    const script = stepScript(['printf "%s|" "$TRICKY" "$PLAIN"', 'if true; then\n  echo multi\nfi'], { TRICKY: tricky, PLAIN: 'x', SHELLOPTS: 'ignored' });
    assert.match(script, /collapsed multi-line command/);
    assert.doesNotMatch(script, /SHELLOPTS/, 'a variable bash keeps read-only is not exported');
    for (const shell of ['bash', 'sh']) {
      const out = execFileSync(shell, [...(shell === 'bash' ? ['--noprofile', '--norc'] : []), '-c', script], { encoding: 'utf8', env: { PATH: process.env.PATH } });
      assert.ok(out.includes(`${tricky}|x|`), `${shell}: ${JSON.stringify(out)}`);
      assert.match(out, /^multi$/m);
    }
    // errexit, and pipefail where the shell has it.
    const failing = stepScript(['false | true', 'echo after-pipe', 'false', 'echo never']);
    const bash = (() => { try { return execFileSync('bash', ['--noprofile', '--norc', '-c', failing], { encoding: 'utf8' }); } catch (e) { return String((e as { stdout: string }).stdout); } })();
    assert.doesNotMatch(bash, /^after-pipe$/m, 'bash: pipefail');
    const sh = (() => { try { return execFileSync('sh', ['-c', failing], { encoding: 'utf8' }); } catch (e) { return String((e as { stdout: string }).stdout); } })();
    assert.doesNotMatch(sh, /^never$/m, 'sh: errexit');
  });

  test('the job environment leaks nothing of the runner process but basics', () => {
    const env = baseEnvironment({ PATH: '/bin', DATABASE_URL: 'postgres://x', CAIRN_ROOT_TOKEN: 't', HOME: '/root', LANG: 'C.UTF-8', https_proxy: 'http://p' });
    assert.deepEqual(Object.keys(env).sort(), ['LANG', 'PATH', 'https_proxy']);
  });
});

describe('artifact paths', () => {
  test('patterns that leave the build directory are refused', () => {
    assert.equal(normalisePattern('../x'), null);
    assert.equal(normalisePattern('a/../../x'), null);
    assert.equal(normalisePattern('/etc/passwd'), null);
    assert.equal(normalisePattern('./a/b/'), 'a/b');
    assert.equal(normalisePattern('a/./b/../c'), 'a/c');
  });

  test('zip entry names that escape are refused', () => {
    for (const bad of ['../x', '/abs', 'a/../../x', 'C:/win', '..', 'a\\..\\..\\x']) assert.equal(safeEntryName(bad), null, bad);
    assert.equal(safeEntryName('a/b/../c.txt'), 'a/c.txt');
    assert.equal(safeEntryName('./x'), 'x');
  });

  test('collects globs and directories, applies exclude, skips outward symlinks and symlinked directories', () => {
    const dir = tmpDir('cairn-collect-');
    try {
      const b = path.join(dir, 'build');
      fs.mkdirSync(path.join(b, 'out/sub'), { recursive: true });
      fs.mkdirSync(path.join(dir, 'outside'));
      fs.writeFileSync(path.join(dir, 'outside/secret'), 's');
      fs.writeFileSync(path.join(b, 'out/a.txt'), 'a');
      fs.writeFileSync(path.join(b, 'out/sub/b.log'), 'b');
      fs.writeFileSync(path.join(b, 'top.log'), 't');
      fs.symlinkSync(path.join(dir, 'outside'), path.join(b, 'out/dirlink'));
      fs.symlinkSync('../outside/secret', path.join(b, 'rel-escape'));
      const r = collectArtifactFiles(b, ['out', '**/*.log', 'rel-escape', 'out/dirlink/secret'], ['out/sub/**']);
      assert.deepEqual(r.files, ['out/a.txt', 'top.log']);
      assert.ok(r.warnings.some((w) => w.includes('rel-escape')));
      assert.ok(r.warnings.some((w) => w.includes('out/dirlink')));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('failure reasons', () => {
  test('reasons the server does not list are mapped to ones it knows', () => {
    assert.equal(supportedFailureReason('script_failure', []), 'script_failure');
    assert.equal(supportedFailureReason('job_execution_timeout', undefined), 'job_execution_timeout');
    assert.equal(supportedFailureReason('job_canceled', ['unknown_failure']), 'unknown_failure');
    assert.equal(supportedFailureReason('job_canceled', undefined), 'unknown_failure');
    assert.equal(supportedFailureReason('image_pull_failure', ['script_failure']), 'runner_system_failure');
    assert.equal(supportedFailureReason('runner_interrupted', ['runner_interrupted']), 'runner_interrupted');
    // GitLab lists no runner_interrupted: a job stopped by its runner's shutdown is a system failure there (retry: when).
    assert.equal(supportedFailureReason('runner_interrupted', ['unknown_failure', 'script_failure', 'runner_system_failure']), 'runner_system_failure');
  });
});

describe('sandbox arguments', () => {
  test('hidden paths become tmpfs (dirs) or /dev/null (files) before the job dir is bound back', () => {
    const dir = tmpDir('cairn-sandbox-');
    try {
      fs.mkdirSync(path.join(dir, 'data'));
      fs.writeFileSync(path.join(dir, 'config.json'), '{}');
      fs.mkdirSync(path.join(dir, 'builds/job-1'), { recursive: true });
      const jobDir = path.join(dir, 'builds/job-1');
      const args = sandboxArgs({ bwrap: 'bwrap', jobDir, cwd: jobDir, hidden: [path.join(dir, 'data'), path.join(dir, 'config.json'), path.join(dir, 'builds'), path.join(dir, 'missing')] }, ['bash', 'x.sh']);
      const s = args.join(' ');
      assert.match(s, /^--ro-bind \/ \/ /);
      assert.ok(s.includes(`--tmpfs ${path.join(dir, 'data')}`));
      assert.ok(s.includes(`--ro-bind /dev/null ${path.join(dir, 'config.json')}`));
      assert.ok(s.indexOf(`--tmpfs ${path.join(dir, 'builds')}`) < s.indexOf(`--bind ${jobDir} ${jobDir}`));
      assert.ok(!s.includes('missing'));
      assert.ok(args.includes('--unshare-pid') && args.includes('--die-with-parent'));
      assert.deepEqual(args.slice(-5), ['--cap-drop', 'ALL', '--', 'bash', 'x.sh']);
      const dropped = sandboxArgs({ bwrap: 'bwrap', jobDir, cwd: jobDir, hidden: [], runAs: { uid: 65534, gid: 65534, setpriv: '/usr/bin/setpriv' } }, ['bash', 'x.sh']);
      const at = dropped.indexOf('/usr/bin/setpriv');
      assert.ok(at > 0 && dropped[at - 1] === '--');
      assert.deepEqual(dropped.slice(at + 1), ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--', 'bash', 'x.sh']);
      // A network namespace of its own and /run hidden, unless the operator asked for the host's network.
      assert.ok(args.includes('--unshare-net'));
      if (fs.lstatSync('/run').isDirectory()) assert.ok(s.includes('--tmpfs /run'));
      assert.ok(!sandboxArgs({ bwrap: 'bwrap', jobDir, cwd: jobDir, hidden: [], network: 'host' }, ['true']).includes('--unshare-net'));
      const limited = sandboxArgs(
        { bwrap: 'bwrap', jobDir, cwd: jobDir, hidden: [], runAs: { uid: 65534, gid: 65534, setpriv: '/usr/bin/setpriv' }, syncFds: { info: 3, block: 4 }, tmpSize: 1024, rlimits: { prlimit: '/usr/bin/prlimit', nproc: 10, data: null, fsize: 2048 } },
        ['bash', 'x.sh'],
      );
      const l = limited.join(' ');
      assert.ok(l.includes('--info-fd 3 --block-fd 4'));
      assert.ok(l.startsWith('--ro-bind / / --dev /dev --proc /proc --size 1024 --tmpfs /tmp --size 1024 --tmpfs /var/tmp'));
      // The limits apply to the job's user, after setpriv dropped root.
      assert.ok(l.endsWith('--no-new-privs -- /usr/bin/prlimit --nproc=10 --fsize=2048 -- bash x.sh'), l);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // bwrap makes a tmpfs root's and 0755: a job dropped to an unprivileged user could not write /tmp.
  test('the private /tmp is world-writable and sticky for a job that runs as another user', (t) => {
    const dir = tmpDir('cairn-sandbox-');
    try {
      const jobDir = path.join(dir, 'job');
      fs.mkdirSync(jobDir);
      const spec = { bwrap: 'bwrap', jobDir, cwd: jobDir, hidden: [], tmpSize: 1 << 20, tmpSticky: true };
      assert.ok(sandboxArgs(spec, ['true']).join(' ').startsWith('--ro-bind / / --dev /dev --proc /proc --size 1048576 --perms 1777 --tmpfs /tmp --size 1048576 --perms 1777 --tmpfs /var/tmp'));
      const sandbox = detectSandbox();
      if (!sandbox.available || !sandbox.runAs || !sandbox.tmpfsPerms) return t.skip('needs bwrap 0.5+ and a root runner that drops to a job user');
      const r = spawnSync(sandbox.bwrap!, sandboxArgs({ ...spec, bwrap: sandbox.bwrap!, runAs: sandbox.runAs }, ['sh', '-c', 'stat -c %a /tmp /var/tmp; echo x > /tmp/t && echo x > /var/tmp/t && id -u']), { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `1777\n1777\n${sandbox.runAs.uid}\n`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
