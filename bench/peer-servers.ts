// The peers of the repository benchmark: cgit and git http-backend, both as CGI programs under
// lighttpd, serving one bare repository. ensurePeers() finds them and, when lighttpd or cgit is
// missing, installs Debian's packages (`apt-get install -y lighttpd cgit`, after `apt-get
// update` if the first attempt fails); it downloads nothing else. startPeers() runs lighttpd on
// a free loopback port with a configuration generated in a temporary directory.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './lib.js';

export interface PeerPrograms {
  lighttpd: string;
  cgit: string;
  httpBackend: string;
  versions: string;
}

const CGIT = '/usr/lib/cgit/cgit.cgi';

function which(program: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/sbin', '/sbin', '/usr/local/sbin'])) {
    const candidate = path.join(dir || '.', program);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {}
  }
  return null;
}

function apt(args: string[]): boolean {
  console.log(`peers: running apt-get ${args.join(' ')}`);
  const r = spawnSync('apt-get', args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status === 0) return true;
  const tail = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}`.trim().split('\n').slice(-5).join('\n');
  console.log(`peers: apt-get ${args[0]} failed (exit ${r.status}):\n${tail}`);
  return false;
}

/** Finds lighttpd, cgit and git http-backend; installs lighttpd and cgit with apt-get when one is missing. */
export function ensurePeers(): PeerPrograms {
  const missing = () => [which('lighttpd') ? null : 'lighttpd', fs.existsSync(CGIT) ? null : CGIT].filter((m): m is string => m !== null);
  const before = missing();
  if (before.length) {
    console.log(`peers: not found: ${before.join(', ')}; installing Debian's lighttpd and cgit packages`);
    if (!apt(['install', '-y', '-q', 'lighttpd', 'cgit'])) {
      if (!apt(['update', '-q']) || !apt(['install', '-y', '-q', 'lighttpd', 'cgit'])) {
        throw new Error('peers: could not install lighttpd and cgit with apt-get (see above)');
      }
    }
    const after = missing();
    if (after.length) throw new Error(`peers: still missing after apt-get install: ${after.join(', ')}`);
    console.log('peers: installed lighttpd and cgit');
  }
  const lighttpd = which('lighttpd')!;
  const execPath = execFileSync('git', ['--exec-path']).toString().trim();
  const httpBackend = path.join(execPath, 'git-http-backend');
  if (!fs.existsSync(httpBackend)) throw new Error(`peers: ${httpBackend} not found (git --exec-path is ${execPath})`);
  const version = (args: string[], program: string) => {
    const r = spawnSync(program, args, { encoding: 'utf8' });
    return `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0];
  };
  const cgitVersion = spawnSync('dpkg-query', ['-W', '-f', '${Version}', 'cgit'], { encoding: 'utf8' }).stdout || 'unknown version';
  const versions = `${version(['-v'], lighttpd).split(' - ')[0]}; cgit ${cgitVersion}; git http-backend of ${version(['--version'], 'git')}`;
  console.log(`peers: ${before.length ? 'installed' : 'found'} ${lighttpd}, ${CGIT}, ${httpBackend} (${versions})`);
  return { lighttpd, cgit: CGIT, httpBackend, versions };
}

export interface PeerServer {
  /** Base URL of the repository in cgit, ending in a slash: `${cgitRepo}tree/...`. */
  cgitRepo: string;
  /** The file-name prefix cgit gives snapshots of this repository. */
  snapshotPrefix: string;
  /** Clone URL of the repository through git http-backend. */
  gitUrl: string;
  stop(): Promise<void>;
}

/** A lighttpd configuration string literal; refuses what it would have to escape. */
function quote(value: string): string {
  if (/["\\\n]/.test(value)) throw new Error(`peers: unexpected character in ${value}`);
  return `"${value}"`;
}

export async function startPeers(programs: PeerPrograms, gitDir: string, name = 'bench'): Promise<PeerServer> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-peers-'));
  const port = await freePort();
  let child: ChildProcess | null = null;
  const stop = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  try {
    const docroot = path.join(tmp, 'htdocs');
    const projectRoot = path.join(tmp, 'repositories');
    fs.mkdirSync(docroot);
    fs.mkdirSync(projectRoot);
    // http-backend serves GIT_PROJECT_ROOT + the URL path: point <name>.git at the same repository.
    fs.symlinkSync(gitDir, path.join(projectRoot, `${name}.git`));
    const cgitrc = path.join(tmp, 'cgitrc');
    fs.writeFileSync(
      cgitrc,
      [
        '# No cache: every request is served by a fresh cgit process, like every Cairn request does its own reads.',
        'cache-size=0',
        'enable-blame=1',
        'snapshots=tar.gz',
        'virtual-root=/cgit/',
        // The same page length as the Cairn commits list it is compared with (per_page=20).
        'max-commit-count=20',
        `repo.url=${name}`,
        `repo.path=${gitDir}`,
        '',
      ].join('\n'),
    );
    const cgiPath = '/usr/local/bin:/usr/bin:/bin';
    const conf = path.join(tmp, 'lighttpd.conf');
    fs.writeFileSync(
      conf,
      [
        `server.document-root = ${quote(docroot)}`,
        `server.bind = "127.0.0.1"`,
        `server.port = ${port}`,
        `server.errorlog = ${quote(path.join(tmp, 'error.log'))}`,
        `server.upload-dirs = (${quote(tmp)})`,
        'server.modules = ("mod_alias", "mod_cgi", "mod_setenv")',
        // Send CGI output as it comes (the default buffers a whole response, which would delay a clone's pack).
        'server.stream-response-body = 1',
        'server.stream-request-body = 1',
        '$HTTP["url"] =~ "^/cgit(/|$)" {',
        `  alias.url = ("/cgit" => ${quote(programs.cgit)})`,
        '  cgi.assign = ("" => "")',
        `  setenv.add-environment = ("CGIT_CONFIG" => ${quote(cgitrc)}, "PATH" => ${quote(cgiPath)})`,
        '}',
        '$HTTP["url"] =~ "^/git/" {',
        `  alias.url = ("/git" => ${quote(programs.httpBackend)})`,
        '  cgi.assign = ("" => "")',
        `  setenv.add-environment = ("GIT_PROJECT_ROOT" => ${quote(projectRoot)}, "GIT_HTTP_EXPORT_ALL" => "1", "PATH" => ${quote(cgiPath)})`,
        '}',
        '',
      ].join('\n'),
    );
    const check = spawnSync(programs.lighttpd, ['-tt', '-f', conf], { encoding: 'utf8' });
    if (check.status !== 0) throw new Error(`peers: lighttpd rejected its configuration: ${check.stdout}${check.stderr}`);
    let output = '';
    child = spawn(programs.lighttpd, ['-D', '-f', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error(`peers: lighttpd exited during start: ${output}`);
      try {
        const res = await fetch(`${base}/git/${name}.git/info/refs?service=git-upload-pack`);
        await res.arrayBuffer();
        if (res.ok) break;
        if (i > 50) throw new Error(`peers: git http-backend answers ${res.status}: ${fs.readFileSync(path.join(tmp, 'error.log'), 'utf8')}`);
      } catch (err) {
        if (i > 50) throw err;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(`peers: lighttpd (pid ${child.pid}) serves cgit at ${base}/cgit/ and git http-backend at ${base}/git/, config in ${tmp}`);
    return { cgitRepo: `${base}/cgit/${name}/`, snapshotPrefix: name, gitUrl: `${base}/git/${name}.git`, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
