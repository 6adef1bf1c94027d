// Hostile archives and trees against the runner's artifact handling (artifact_sandbox.ts, as
// job.ts calls it): extraction of a dependency's zip and collection + writing of a job's
// artifacts, each run in the runner's process (the no-follow walk alone) and, where bubblewrap
// works, inside the job's sandbox as the job's user. Every case asserts that nothing outside
// the job's directory changed and that nothing outside it was archived: chained links, links to
// links made later, absolute and `..` links, links planted before, hard links, device files,
// FIFOs, sockets, 60,000 entries, a zip bomb. (`..` and absolute entry names are also in
// runner.test.ts.)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { archiveArtifacts, extractArtifacts, type ArtifactWorkOptions } from '../../src/runner/artifact_sandbox.js';
import { ArtifactLimitError, collectArtifactFiles, DEFAULT_ARTIFACT_LIMITS, writeZip, type ArtifactLimits } from '../../src/runner/artifacts.js';
import { chownTree, removeTree } from '../../src/runner/nofollow.js';
import { detectSandbox } from '../../src/runner/sandbox.js';

const sandbox = detectSandbox();
const modes = [{ sandboxed: false }, ...(sandbox.available ? [{ sandboxed: true }] : [])];
/** A file outside the job's directory that the job's user could read, visible inside the sandbox too. */
const VISIBLE_HOST_FILE = path.resolve('package.json');

const DEEP = 'deep/a/b/c/d/e/f/g/h';

type Entry = [string, string | Buffer | { link: string } | { dir: true }];

/** Entry names yazl refuses (`..`, absolute) are written with a stand-in of the same length, then patched in. */
async function zipFile(file: string, entries: Entry[], compress = true) {
  const zip = new yazl.ZipFile();
  const patches: Array<[Buffer, Buffer]> = [];
  for (const [given, content] of entries) {
    let name = given;
    if (given.startsWith('/') || given.split('/').includes('..')) {
      name = given.replace(/\.\./g, 'XX').replace(/^\//, 'Z');
      patches.push([Buffer.from(name), Buffer.from(given)]);
    }
    if (typeof content === 'string' || Buffer.isBuffer(content)) zip.addBuffer(Buffer.from(content), name, { compress });
    else if ('link' in content) zip.addBuffer(Buffer.from(content.link), name, { mode: 0o120777 });
    else zip.addEmptyDirectory(name);
  }
  zip.end();
  await new Promise<void>((resolve, reject) => zip.outputStream.pipe(fs.createWriteStream(file)).on('finish', resolve).on('error', reject));
  if (!patches.length) return;
  let data = fs.readFileSync(file);
  for (const [from, to] of patches) {
    for (let at = data.indexOf(from); at >= 0; at = data.indexOf(from, at + 1)) to.copy(data, at);
  }
  fs.writeFileSync(file, data);
}

/** A fast file system for the test trees when there is one (60,000 files on a busy disk take minutes). */
const TEST_TMP = (() => {
  try {
    fs.accessSync('/dev/shm', fs.constants.W_OK);
    return '/dev/shm';
  } catch {
    return os.tmpdir();
  }
})();

async function readZip(file: string): Promise<Map<string, { link: boolean; data: Buffer }>> {
  const out = new Map<string, { link: boolean; data: Buffer }>();
  const zip = await new Promise<yauzl.ZipFile>((res, rej) => yauzl.open(file, { lazyEntries: true }, (e, z) => (e ? rej(e) : res(z!))));
  await new Promise<void>((resolve, reject) => {
    zip.on('entry', (entry: yauzl.Entry) => {
      zip.openReadStream(entry, (err, s) => {
        if (err) return reject(err);
        const chunks: Buffer[] = [];
        s!.on('data', (c: Buffer) => chunks.push(c));
        s!.on('end', () => {
          out.set(entry.fileName, { link: ((entry.externalFileAttributes >>> 16) & 0o170000) === 0o120000, data: Buffer.concat(chunks) });
          zip.readEntry();
        });
      });
    });
    zip.on('end', resolve);
    zip.on('error', reject);
    zip.readEntry();
  });
  return out;
}

/** Every path under dir but skip (kind, content or link target, mode, owner): what must not change. */
function snapshot(dir: string, skip: string): Map<string, string> {
  const out = new Map<string, string>();
  const visit = (p: string) => {
    if (p === skip) return;
    const st = fs.lstatSync(p);
    const what = st.isSymbolicLink() ? `link ${fs.readlinkSync(p)}` : st.isFile() ? `file ${crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')}` : st.isDirectory() ? 'dir' : 'other';
    out.set(p, `${what} ${st.mode} ${st.uid}`);
    if (st.isDirectory()) for (const e of fs.readdirSync(p)) visit(path.join(p, e));
  };
  visit(dir);
  return out;
}

interface Job {
  top: string;
  host: string;
  secret: string;
  jobDir: string;
  build: string;
  tmp: string;
  work: (limits?: Partial<ArtifactLimits>) => ArtifactWorkOptions;
  /** The tree is made by the test as root: hand it to the job's user as job.ts does. */
  handOver: () => void;
  done: () => void;
}

function makeJob(sandboxed: boolean): Job {
  const top = fs.mkdtempSync(path.join(TEST_TMP, 'cairn-escape-'));
  fs.chmodSync(top, 0o755);
  const host = path.join(top, 'host');
  fs.mkdirSync(host, { mode: 0o777 });
  fs.chmodSync(host, 0o777);
  const secret = `HOST-SECRET-${crypto.randomBytes(8).toString('hex')}`;
  fs.writeFileSync(path.join(host, 'secret.txt'), secret, { mode: 0o644 });
  const builds = path.join(top, 'builds');
  const jobDir = path.join(builds, 'job-1');
  const build = path.join(jobDir, 'build');
  const tmp = path.join(jobDir, 'tmp');
  fs.mkdirSync(build, { recursive: true });
  fs.mkdirSync(tmp);
  const runAs = sandboxed ? (sandbox.runAs ?? null) : null;
  return {
    top,
    host,
    secret,
    jobDir,
    build,
    tmp,
    work: (limits = {}) => ({
      sandbox: sandboxed ? { bwrap: sandbox.bwrap!, jobDir, hidden: [builds], runAs } : null,
      limits: { ...DEFAULT_ARTIFACT_LIMITS, ...limits },
      timeoutSec: 120,
    }),
    handOver: () => {
      if (!runAs) return;
      chownTree(build, runAs.uid, runAs.gid);
      fs.chmodSync(jobDir, 0o711);
      fs.chmodSync(tmp, 0o711);
    },
    done: () => fs.rmSync(top, { recursive: true, force: true }),
  };
}

for (const [m, { sandboxed }] of modes.entries()) {
  /** The big cases once, in the last mode (the sandbox where there is one). */
  const big = m === modes.length - 1 ? test : test.skip;
  const where = sandboxed ? `inside the job's sandbox${sandbox.runAs ? ` as uid ${sandbox.runAs.uid}` : ''}` : 'in the runner process';

  describe(`extracting a dependency's zip, ${where}`, () => {
    const cases: Array<{ name: string; entries: Entry[]; plant?: (j: Job) => void; check?: (j: Job, r: { count: number; warnings: string[] }) => void }> = [
      {
        // The reported exploit: y's target names z, which does not exist yet when y is made.
        name: 'a link through a link made later (y -> z/../.., z -> ../../..)',
        entries: [
          ['deep/a/b/y', { link: 'z/../../../host' }],
          ['deep/a/b/z', { link: '../../..' }],
          ['deep/a/b/y/PROOF.txt', 'pwned'],
          ['deep/a/b/y/new-dir/PROOF.txt', 'pwned'],
        ],
        check: (j, r) => {
          assert.ok(r.warnings.some((w) => w.startsWith('deep/a/b/y/PROOF.txt: deep/a/b/y is a symlink')), r.warnings.join('\n'));
          assert.equal(fs.readlinkSync(path.join(j.build, 'deep/a/b/y')), 'z/../../../host', 'the link itself is kept, as a link');
        },
      },
      {
        name: 'chained links: a -> ., b -> a/.., then entries below b and a',
        entries: [
          ['a', { link: '.' }],
          ['b', { link: 'a/..' }],
          ['b/escaped-dir/PROOF.txt', 'pwned'],
          ['a/via-a.txt', 'no'],
          ['ok/inside.txt', 'fine'],
          ['good', { link: 'ok/inside.txt' }],
        ],
        check: (j) => {
          assert.equal(fs.readFileSync(path.join(j.build, 'ok/inside.txt'), 'utf8'), 'fine');
          assert.equal(fs.readlinkSync(path.join(j.build, 'good')), 'ok/inside.txt');
          assert.ok(!fs.existsSync(path.join(j.build, 'via-a.txt')), 'nothing is written through an in-tree link either');
        },
      },
      { name: 'an absolute link, then an entry below it', entries: [['abs', { link: '/tmp' }], ['abs2', { link: 'HOST' }], ['abs2/PROOF.txt', 'pwned']] },
      { name: 'a `..` link, then entries below it', entries: [['up', { link: '../../../host' }], ['up/PROOF.txt', 'pwned'], ['up/sub/PROOF.txt', 'pwned']] },
      { name: '`..` and absolute entry names', entries: [['../../../host/PROOF.txt', 'pwned'], ['/PROOF.txt', 'pwned'], ['x/../../../../host/x-PROOF.txt', 'pwned']] },
      {
        name: 'a file entry over a link planted before (replaced, not written through)',
        plant: (j) => fs.symlinkSync(path.join(j.host, 'secret.txt'), path.join(j.build, 'planted')),
        entries: [['planted', 'replaced']],
        check: (j) => {
          assert.ok(fs.lstatSync(path.join(j.build, 'planted')).isFile());
          assert.equal(fs.readFileSync(path.join(j.build, 'planted'), 'utf8'), 'replaced');
        },
      },
      {
        name: 'entries below a directory link planted before',
        plant: (j) => fs.symlinkSync(j.host, path.join(j.build, 'planted-dir')),
        entries: [['planted-dir/PROOF.txt', 'pwned'], ['planted-dir/', { dir: true }], ['planted-dir/sub/', { dir: true }]],
      },
      {
        name: 'a link entry over a directory, then a file through the new link',
        entries: [['d/', { dir: true }], ['d/f.txt', 'x'], ['d', { link: '../../../host' }], ['d/PROOF.txt', 'pwned']],
      },
    ];
    for (const c of cases) {
      test(c.name, async () => {
        const j = makeJob(sandboxed);
        try {
          const entries = c.entries.map(([n, v]): Entry => [n, typeof v === 'object' && 'link' in v ? { link: v.link.replace('HOST', j.host) } : v]);
          c.plant?.(j);
          j.handOver();
          const zip = path.join(j.tmp, 'dep.zip');
          await zipFile(zip, entries);
          const before = snapshot(j.top, j.jobDir);
          const r = await extractArtifacts(zip, j.build, j.work());
          assert.deepEqual(snapshot(j.top, j.jobDir), before, 'nothing outside the job directory changed');
          assert.ok(!fs.existsSync(path.join(j.host, 'PROOF.txt')));
          assert.ok(!fs.existsSync(path.join(j.host, 'new-dir')));
          assert.deepEqual(fs.readdirSync(j.jobDir).sort(), ['build', 'tmp']);
          // Each PROOF entry is reported, or landed inside as a regular file below real directories.
          for (const [n] of entries.filter(([n]) => n.endsWith('PROOF.txt'))) {
            if (r.warnings.some((w) => w.startsWith(`${n}: `))) continue;
            let p = j.build;
            for (const seg of n.split('/')) {
              p = path.join(p, seg);
              assert.ok(!fs.lstatSync(p).isSymbolicLink(), `${n} was extracted through a link: ${r.warnings.join('\n')}`);
            }
            assert.equal(fs.readFileSync(p, 'utf8'), 'pwned');
          }
          c.check?.(j, r);
        } finally {
          j.done();
        }
      });
    }

    big('60,000 entries are extracted; one more than the entry limit is refused', async () => {
      const j = makeJob(sandboxed);
      try {
        j.handOver();
        // Made with writeZip from a scratch tree (yazl's addBuffer alone takes long for 60,000).
        const scratch = path.join(j.top, 'scratch');
        for (let d = 0; d < 100; d++) {
          fs.mkdirSync(path.join(scratch, `many/d${d}`), { recursive: true });
          for (let i = d; i < 60_000; i += 100) fs.writeFileSync(path.join(scratch, `many/d${d}/f${i}.txt`), `${i}`);
        }
        const zip = path.join(j.tmp, 'many.zip');
        await writeZip(scratch, collectArtifactFiles(scratch, ['many']).files, zip);
        const r = await extractArtifacts(zip, j.build, j.work());
        assert.equal(r.count, 60_000);
        assert.equal(fs.readFileSync(path.join(j.build, 'many/d7/f59907.txt'), 'utf8'), '59907');
        await assert.rejects(extractArtifacts(zip, j.build, j.work({ maxEntries: 59_999 })), (e: Error) => e instanceof ArtifactLimitError && /60000 entries, more than the limit of 59999/.test(e.message));
      } finally {
        j.done();
      }
    });

    test('a zip bomb is stopped at the expanded-size limit', async () => {
      const j = makeJob(sandboxed);
      try {
        j.handOver();
        const zip = path.join(j.tmp, 'bomb.zip');
        const zeros = Buffer.alloc(8 * 1024 * 1024);
        await zipFile(zip, [['a.bin', zeros], ['b.bin', zeros], ['c.bin', zeros]]);
        assert.ok(fs.statSync(zip).size < 200_000, 'it compresses well');
        await assert.rejects(extractArtifacts(zip, j.build, j.work({ maxBytes: 10 * 1024 * 1024 })), (e: Error) => e instanceof ArtifactLimitError && /expands to more than 10 MiB/.test(e.message));
        assert.ok(!fs.existsSync(path.join(j.build, 'b.bin')), 'stopped before the entry over the limit');
      } finally {
        j.done();
      }
    });
  });

  describe(`collecting and archiving a job's artifacts, ${where}`, () => {
    const cases: Array<{ name: string; make: (j: Job) => void; paths: string[]; format?: 'zip' | 'gzip'; expect?: (entries: Map<string, { link: boolean; data: Buffer }>, warnings: string[]) => void }> = [
      {
        // The reported exploit: declared paths through a chained link lead to any file of the machine.
        name: 'declared paths through chained links (y -> z/../.., z -> ../../..)',
        // Nine levels down: y's target reads as staying inside, and reaches / through z.
        make: (j) => {
          fs.mkdirSync(path.join(j.build, DEEP), { recursive: true });
          fs.symlinkSync('../'.repeat(9), path.join(j.build, DEEP, 'z'));
          fs.symlinkSync(`z${'/..'.repeat(9)}`, path.join(j.build, DEEP, 'y'));
        },
        paths: [`${DEEP}/y/HOSTFILE`, `${DEEP}/y/VISIBLEFILE`, `${DEEP}/y/etc/shadow`, 'deep'],
        expect: (entries, warnings) => {
          assert.ok(warnings.some((w) => w.startsWith(`${DEEP}/y/etc/shadow: ${DEEP}/y is a symlink`)), warnings.join('\n'));
          assert.deepEqual([...entries.keys()].sort(), [`${DEEP}/y`, `${DEEP}/z`]);
          assert.ok([...entries.values()].every((e) => e.link), 'links are archived as links');
        },
      },
      {
        name: 'absolute links to a file and to a directory',
        make: (j) => {
          fs.symlinkSync(path.join(j.host, 'secret.txt'), path.join(j.build, 'abs-file'));
          fs.symlinkSync(j.host, path.join(j.build, 'abs-dir'));
          fs.symlinkSync(VISIBLE_HOST_FILE, path.join(j.build, 'abs-visible'));
        },
        paths: ['abs-file', 'abs-dir/secret.txt', 'abs-dir', 'abs-visible', '*'],
      },
      {
        name: '`..` links, and declared paths that leave the directory',
        make: (j) => {
          fs.symlinkSync('../../../host', path.join(j.build, 'up'));
          fs.symlinkSync(path.relative(j.build, VISIBLE_HOST_FILE), path.join(j.build, 'up-visible'));
        },
        paths: ['up/secret.txt', 'up', 'up-visible', '../../../host/secret.txt', '/etc/shadow', '**'],
      },
      {
        name: 'a hard link to a file the job does not own',
        make: (j) => {
          fs.chownSync(path.join(j.host, 'secret.txt'), 12345, 12345);
          fs.linkSync(path.join(j.host, 'secret.txt'), path.join(j.build, 'hard'));
          fs.writeFileSync(path.join(j.build, 'own.txt'), 'mine');
        },
        paths: ['hard', '.'],
        expect: (entries, warnings) => {
          assert.deepEqual([...entries.keys()], ['own.txt']);
          assert.ok(warnings.some((w) => w.startsWith('hard: ')), warnings.join('\n'));
        },
      },
      {
        name: 'device files, FIFOs and sockets are skipped, never opened',
        make: (j) => {
          execFileSync('mkfifo', [path.join(j.build, 'fifo')]);
          fs.mkdirSync(path.join(j.build, 'dir'));
          execFileSync('mkfifo', [path.join(j.build, 'dir/fifo')]);
          try {
            execFileSync('mknod', [path.join(j.build, 'dir/null'), 'c', '1', '3'], { stdio: 'ignore' });
          } catch {
            /* no CAP_MKNOD here */
          }
          fs.writeFileSync(path.join(j.build, 'dir/ok.txt'), 'ok');
        },
        paths: ['fifo', 'dir', 'dir/null', 'sock'],
        format: 'zip',
        expect: (entries, warnings) => {
          assert.deepEqual([...entries.keys()], ['dir/ok.txt']);
          assert.ok(warnings.some((w) => w.startsWith('fifo: not a regular file')), warnings.join('\n'));
          assert.ok(warnings.some((w) => w.startsWith('dir/fifo: not a regular file')), warnings.join('\n'));
        },
      },
      {
        name: 'gzip reports through links',
        make: (j) => {
          fs.symlinkSync(path.join(j.host, 'secret.txt'), path.join(j.build, 'report.xml'));
          fs.symlinkSync('../../../host', path.join(j.build, 'reports'));
          fs.mkdirSync(path.join(j.build, 'real'));
          fs.writeFileSync(path.join(j.build, 'real/report.xml'), '<testsuite/>');
        },
        paths: ['report.xml', 'reports/secret.txt', 'real/report.xml'],
        format: 'gzip',
      },
    ];
    for (const c of cases) {
      test(c.name, async () => {
        const j = makeJob(sandboxed);
        let server: net.Server | null = null;
        try {
          // Made after the build directory is the job's (chowning a hard link would chown its target).
          j.handOver();
          c.make(j);
          if (c.paths.includes('sock')) {
            server = net.createServer();
            await new Promise<void>((r) => server!.listen(path.join(j.build, 'sock'), r));
          }
          const paths = c.paths.map((p) => p.replace('HOSTFILE', path.join(j.host, 'secret.txt').slice(1)).replace('VISIBLEFILE', VISIBLE_HOST_FILE.slice(1)));
          const out = path.join(j.tmp, 'out');
          const before = snapshot(j.top, j.jobDir);
          const r = await archiveArtifacts(j.build, { paths, exclude: [], format: c.format ?? 'zip' }, out, j.work());
          assert.deepEqual(snapshot(j.top, j.jobDir), before, 'nothing outside the job directory changed');
          const visible = fs.readFileSync(VISIBLE_HOST_FILE, 'utf8');
          if (r.count === 0) return;
          if ((c.format ?? 'zip') === 'gzip') {
            const all = (await import('node:zlib')).gunzipSync(fs.readFileSync(out)).toString();
            assert.equal(all, '<testsuite/>');
            return;
          }
          const entries = await readZip(out);
          for (const [name, e] of entries) {
            assert.ok(!e.data.includes(j.secret), `${name} holds the host's secret`);
            assert.ok(e.link || !e.data.equals(Buffer.from(visible)), `${name} holds a file from outside`);
          }
          c.expect?.(entries, r.warnings);
        } finally {
          server?.close();
          j.done();
        }
      });
    }

    big('60,000 files are archived; a sparse file over the size limit is refused', async () => {
      const j = makeJob(sandboxed);
      try {
        for (let d = 0; d < 100; d++) {
          fs.mkdirSync(path.join(j.build, `many/d${d}`), { recursive: true });
          for (let i = d; i < 60_000; i += 100) fs.writeFileSync(path.join(j.build, `many/d${d}/f${i}.txt`), `${i}`);
        }
        fs.writeFileSync(path.join(j.build, 'sparse.bin'), '');
        fs.truncateSync(path.join(j.build, 'sparse.bin'), 64 * 1024 * 1024);
        j.handOver();
        const out = path.join(j.tmp, 'out.zip');
        const r = await archiveArtifacts(j.build, { paths: ['many'], exclude: [], format: 'zip' }, out, j.work());
        assert.equal(r.count, 60_000);
        const names = await new Promise<number>((res, rej) => yauzl.open(out, { lazyEntries: true }, (e, z) => (e ? rej(e) : (res(z!.entryCount), z!.close()))));
        assert.equal(names, 60_000);
        await assert.rejects(archiveArtifacts(j.build, { paths: ['sparse.bin'], exclude: [], format: 'zip' }, out, j.work({ maxBytes: 32 * 1024 * 1024 })), (e: Error) => e instanceof ArtifactLimitError && /larger than 32 MiB/.test(e.message));
        await assert.rejects(archiveArtifacts(j.build, { paths: ['many/d1'], exclude: [], format: 'zip' }, out, j.work({ maxEntries: 10 })), (e: Error) => e instanceof ArtifactLimitError && /more than 10 files/.test(e.message));
      } finally {
        j.done();
      }
    });
  });
}

describe('the job directory and the helper', () => {
  test('removeTree removes a tree full of links without following any', () => {
    const j = makeJob(false);
    try {
      fs.symlinkSync(j.host, path.join(j.build, 'to-host'));
      fs.symlinkSync(path.join(j.host, 'secret.txt'), path.join(j.build, 'to-secret'));
      fs.mkdirSync(path.join(j.build, 'd/e'), { recursive: true });
      fs.symlinkSync('../../../../../host', path.join(j.build, 'd/e/up'));
      execFileSync('mkfifo', [path.join(j.build, 'd/fifo')]);
      fs.chmodSync(path.join(j.build, 'd/e'), 0o500);
      const before = snapshot(j.top, j.jobDir);
      removeTree(j.jobDir);
      assert.ok(!fs.existsSync(j.jobDir));
      assert.deepEqual(snapshot(j.top, j.jobDir), before);
      assert.equal(fs.readFileSync(path.join(j.host, 'secret.txt'), 'utf8'), j.secret);
    } finally {
      j.done();
    }
  });

  test('the sandboxed work is killed at its timeout', { skip: !sandbox.available }, async () => {
    const j = makeJob(true);
    try {
      j.handOver();
      const zip = path.join(j.tmp, 'dep.zip');
      await zipFile(zip, [['a.txt', 'a']]);
      await assert.rejects(extractArtifacts(zip, j.build, { ...j.work(), timeoutSec: 0.001 }), (e: Error) => e instanceof ArtifactLimitError && /took longer than 0.001s/.test(e.message));
    } finally {
      j.done();
    }
  });
});
