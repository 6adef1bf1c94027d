// `npm run bench:peers`: Cairn against its peers, measured in the same run on the same machine.
//
// - Repository reads: each Cairn API read against the cgit page that does the same work on the
//   same bare repository (target: Cairn >= 2x cgit's req/s). cgit runs as a CGI program under
//   lighttpd with its cache off, so each of its requests does its own reads.
// - git clone over HTTP: Cairn against git http-backend under the same lighttpd (target: speed
//   ratio, http-backend's median time over Cairn's, >= 0.95).
// - List endpoints: absolute target, 2,000 req/s on PostgreSQL (no peer).
//
// The repository (bench/peer-repository.ts) is generated once into the storage of a Cairn project;
// lighttpd serves that very directory. The project is public, so clones are anonymous on both
// sides as http-backend's are; API reads send the root token, as API clients do. Cairn runs in
// its own process (bench/lib.ts) on a fresh database: PostgreSQL when DATABASE_URL is set, else
// the embedded PGlite. Load: autocannon with 8 connections (wrk -c8 in the original measurement), BENCH_SECONDS (default 5) per side and row,
// after a warm-up of BENCH_WARMUP seconds (default 1). BENCH_CLONE_RUNS (default 9) clones each.
// BENCH_ONLY=raw,blame (row keys, or the groups reads, clone, lists) runs some rows only;
// BENCH_STRICT=1 exits 1 when a target is missed.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { api, BENCH_TOKEN, load, median, startServer, type BenchServer, type LoadResult } from './lib.js';
import { PEER_REPO_FILE, PEER_REPO_FOLDER, peerRepositoryStream } from './peer-repository.js';
import { ensurePeers, startPeers, type PeerServer } from './peer-servers.js';
import { hashedDiskPath } from '../src/git/repository.js';
import { createBigRepository } from './repository.js';

const SECONDS = Number(process.env.BENCH_SECONDS || 5);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1);
const CLONE_RUNS = Number(process.env.BENCH_CLONE_RUNS || 9);
const COMMITS = Number(process.env.BENCH_COMMITS || 10_000);
const CONNECTIONS = 8;
const READ_TARGET = 2.0;
const CLONE_TARGET = 0.95;
const FRESH_CLONE_TARGET = 1.0;
const STORM_TARGET = 2.0;
const STORM_CLONES = 8;
const STORM_RUNS = Number(process.env.BENCH_STORM_RUNS || 3);
const LIST_TARGET = 2_000;

type Group = 'reads' | 'clone' | 'lists';

export interface PeerRow {
  key: string;
  group: Group;
  name: string;
  peerName?: string;
  cairn?: LoadResult;
  peer?: LoadResult;
  /** For clone: wall times, ms. */
  cairnMs?: number[];
  peerMs?: number[];
  cairnBytes?: number;
  peerBytes?: number;
  /** Cairn/peer for reads (req/s), peer/Cairn for clone (time), Cairn req/s for lists. */
  value: number;
  target: number;
  met: boolean;
}

interface ReadSpec {
  key: string;
  name: string;
  /** Path under /api/v4/projects/:id/repository. */
  cairn: string;
  /** Path under cgit's repository URL. */
  cgit: string;
  /** Extra checks of the two answers beyond "200 with a non-trivial body"; returns a problem or null. */
  check?: (cairn: Buffer, cgit: Buffer) => string | null;
}

const READ_KEYS = ['tree', 'raw', 'file', 'blob', 'commits', 'commit', 'branches', 'tags', 'compare', 'blame', 'archive'];
const LIST_KEYS = ['projects', 'users', 'groups', 'members'];
const CLONE_KEYS = ['clone', 'clone-fresh', 'clone-storm', 'fetch-storm-shallow'];
const ALL_KEYS = [...READ_KEYS, ...CLONE_KEYS, ...LIST_KEYS];

function selectedKeys(): Set<string> {
  // BENCH_ONLY=api (bench/run.ts's section of which this is a part) means all rows.
  const only = (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter((s) => s && s !== 'api');
  if (!only.length) return new Set(ALL_KEYS);
  const keys = new Set<string>();
  for (const k of only) {
    if (k === 'reads') READ_KEYS.forEach((r) => keys.add(r));
    else if (k === 'lists') LIST_KEYS.forEach((r) => keys.add(r));
    else if (k === 'clones') CLONE_KEYS.forEach((r) => keys.add(r));
    else if (ALL_KEYS.includes(k)) keys.add(k);
    else throw new Error(`BENCH_ONLY: unknown row ${k}; rows are ${ALL_KEYS.join(', ')} (groups: reads, clones, lists)`);
  }
  return keys;
}

const kb = (n: number) => (n >= 10_240 ? `${(n / 1024).toFixed(0)} kB` : n >= 1024 ? `${(n / 1024).toFixed(1)} kB` : `${n} B`);
const num = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 0 });
/** Requests per second over the whole run (autocannon's per-second average rounds slow rows to 0). */
const rate = (r: LoadResult) => (r.seconds ? r.requests / r.seconds : 0);
const rps = (n: number) => (n >= 100 ? num(n) : n.toFixed(1));
/** A load's req/s for the table; `< x` when not one request finished within the run. */
const loadRps = (r: LoadResult) => (r.requests ? rps(rate(r)) : `< ${rps(1 / (r.seconds || SECONDS))}`);
/**
 * One more request after a load, answered in full: requests still running when autocannon stopped
 * (a slow list on PGlite, which serves one statement at a time) finish before the next row starts.
 */
async function settle(url: string, headers: Record<string, string> = {}) {
  try {
    await (await fetch(url, { headers, signal: AbortSignal.timeout(120_000) })).arrayBuffer();
  } catch {}
}
const ms = (n: number) => `${n.toFixed(0)} ms`.padStart(7);
const isGzip = (b: Buffer) => b.length > 2 && b[0] === 0x1f && b[1] === 0x8b;

/** GETs a URL that is about to be loaded and fails loudly unless it answers 200 with a real body. */
async function probe(label: string, url: string, headers: Record<string, string>, minBytes: number): Promise<{ body: Buffer; ms: number }> {
  const started = performance.now();
  const res = await fetch(url, { headers });
  const body = Buffer.from(await res.arrayBuffer());
  const ms = performance.now() - started;
  const type = res.headers.get('content-type') ?? '';
  if (res.status !== 200) throw new Error(`check failed: ${label} ${url} answered ${res.status}: ${body.subarray(0, 300).toString()}`);
  if (body.length < minBytes) throw new Error(`check failed: ${label} ${url} answered only ${body.length} bytes: ${body.subarray(0, 300).toString()}`);
  if (type.includes('html') && body.includes("class='error'")) {
    throw new Error(`check failed: ${label} ${url} answered 200 with an error page: ${body.toString().match(/class='error'>([^<]*)/)?.[1]}`);
  }
  if (type.includes('json')) {
    const json = JSON.parse(body.toString());
    if (Array.isArray(json) && json.length === 0) throw new Error(`check failed: ${label} ${url} answered an empty list`);
  }
  return { body, ms };
}

function readSpecs(sha: { main: string; base: string; commit: string; blob: string }, snapshotPrefix: string): ReadSpec[] {
  const file = encodeURIComponent(PEER_REPO_FILE);
  const sameBytes = (cairn: Buffer, cgit: Buffer) => (cairn.equals(cgit) ? null : `bodies differ (${cairn.length} vs ${cgit.length} bytes)`);
  return [
    {
      key: 'tree',
      name: `tree of ${PEER_REPO_FOLDER}`,
      cairn: `/tree?path=${encodeURIComponent(PEER_REPO_FOLDER)}`,
      cgit: `tree/${PEER_REPO_FOLDER}`,
      check: (c) => (JSON.parse(c.toString()).length >= 20 ? null : 'Cairn listed fewer than 20 entries'),
    },
    { key: 'raw', name: 'raw file', cairn: `/files/${file}/raw?ref=main`, cgit: `plain/${PEER_REPO_FILE}`, check: sameBytes },
    {
      key: 'file',
      name: 'file metadata and content',
      cairn: `/files/${file}?ref=main`,
      cgit: `tree/${PEER_REPO_FILE}`,
      check: (c) => (JSON.parse(c.toString()).content ? null : 'Cairn answered no content'),
    },
    { key: 'blob', name: 'raw blob by id', cairn: `/blobs/${sha.blob}/raw`, cgit: `blob/?id=${sha.blob}`, check: sameBytes },
    {
      key: 'commits',
      name: 'commits, 20 a page',
      cairn: '/commits?per_page=20',
      cgit: 'log/',
      check: (c, g) =>
        JSON.parse(c.toString()).length !== 20
          ? 'Cairn answered a page of other than 20 commits'
          : (g.toString().match(/<td><a href='[^']*\/commit\/\?id=/g) ?? []).length !== 20
            ? 'cgit showed other than 20 commits'
            : null,
    },
    { key: 'commit', name: 'single commit', cairn: `/commits/${sha.commit}`, cgit: `commit/?id=${sha.commit}` },
    {
      key: 'branches',
      name: 'branches list',
      cairn: '/branches',
      cgit: 'refs/heads',
      check: (c, g) => (JSON.parse(c.toString()).length === 4 && g.includes('feature/docs') ? null : 'expected the 4 branches on both'),
    },
    {
      key: 'tags',
      name: 'tags list',
      cairn: '/tags',
      cgit: 'refs/tags',
      check: (c, g) => (JSON.parse(c.toString()).length === 10 && g.includes('v1.9.0') ? null : 'expected the 10 tags on both'),
    },
    {
      key: 'compare',
      name: 'compare main~5...main',
      cairn: `/compare?from=${sha.base}&to=main`,
      cgit: `diff/?id=main&id2=${sha.base}`,
      check: (c) => (JSON.parse(c.toString()).commits?.length === 5 ? null : 'Cairn compared other than 5 commits'),
    },
    { key: 'blame', name: 'blame', cairn: `/files/${file}/blame?ref=main`, cgit: `blame/${PEER_REPO_FILE}` },
    {
      key: 'archive',
      name: 'archive .tar.gz',
      cairn: `/archive.tar.gz?sha=${sha.main}`,
      cgit: `snapshot/${snapshotPrefix}-${sha.main}.tar.gz`,
      check: (c, g) => (isGzip(c) && isGzip(g) ? null : 'expected gzip data from both'),
    },
  ];
}

function git(args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`git ${args.join(' ')} exited ${code}: ${stderr}`))));
  });
}

interface CloneRowOptions {
  key: string;
  name: string;
  target: number;
  /** The pack-objects cache to empty before each Cairn clone (or storm), so every run makes its pack. */
  packCache: string;
}

async function cloneRow(cairnUrl: string, peerUrl: string, o: CloneRowOptions): Promise<PeerRow> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-peers-clone-'));
  const env = { PATH: process.env.PATH, HOME: tmp, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
  try {
    let n = 0;
    const clone = async (url: string, keep = false) => {
      const dest = path.join(tmp, `clone-${++n}`);
      const start = performance.now();
      await git(['clone', '-q', url, dest], env);
      const ms = performance.now() - start;
      if (!keep) fs.rmSync(dest, { recursive: true, force: true });
      return { ms, dest };
    };
    // Warm-up clones, kept to check both served the same history.
    const describe = (dir: string) => {
      const refs = execFileSync('git', ['-C', dir, 'for-each-ref', '--format=%(objectname) %(refname)'], { env }).toString().trim().split('\n');
      const objects = execFileSync('git', ['-C', dir, 'count-objects', '-v'], { env }).toString();
      const packKb = Number(objects.match(/size-pack: (\d+)/)?.[1] ?? 0);
      return { refs: refs.map((r) => r.replace(/refs\/remotes\/origin\//, 'refs/heads/')).filter((r) => !r.endsWith('/HEAD')).sort(), packKb };
    };
    const cairnClone = await clone(cairnUrl, true);
    const peerClone = await clone(peerUrl, true);
    const a = describe(cairnClone.dest);
    const b = describe(peerClone.dest);
    if (a.refs.join('\n') !== b.refs.join('\n')) throw new Error(`check failed: the clones differ:\nCairn:\n${a.refs.join('\n')}\nhttp-backend:\n${b.refs.join('\n')}`);
    console.log(`check git clone: Cairn ${cairnUrl} ${a.refs.length} refs, pack ${kb(a.packKb * 1024)}; http-backend ${peerUrl} ${b.refs.length} refs, pack ${kb(b.packKb * 1024)}`);
    fs.rmSync(cairnClone.dest, { recursive: true, force: true });
    fs.rmSync(peerClone.dest, { recursive: true, force: true });
    const cairnMs: number[] = [];
    const peerMs: number[] = [];
    for (let i = 0; i < CLONE_RUNS; i++) {
      peerMs.push((await clone(peerUrl)).ms);
      fs.rmSync(o.packCache, { recursive: true, force: true });
      cairnMs.push((await clone(cairnUrl)).ms);
    }
    const value = median(peerMs) / median(cairnMs);
    return {
      key: o.key,
      group: 'clone',
      name: o.name,
      peerName: 'git http-backend',
      cairnMs,
      peerMs,
      cairnBytes: a.packKb * 1024,
      peerBytes: b.packKb * 1024,
      value,
      target: o.target,
      met: value >= o.target,
    };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Pushes every branch and tag of `source` over HTTP to a new public project with default git
 * settings, waits for the housekeeping the push schedules, and returns the project's clone URL.
 */
async function freshPush(server: BenchServer, source: string): Promise<string> {
  const project = await api(server, 'POST', '/projects', { name: `fresh-${Date.now()}`, visibility: 'public' });
  const auth = new URL(server.url);
  auth.username = 'root';
  auth.password = BENCH_TOKEN;
  const env = { PATH: process.env.PATH, HOME: os.tmpdir(), GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
  const started = performance.now();
  await git(['--git-dir', source, 'push', '-q', `${auth.toString().replace(/\/$/, '')}/${project.path_with_namespace}.git`, 'refs/heads/*:refs/heads/*', 'refs/tags/*:refs/tags/*'], env);
  const pushed = performance.now();
  const gitDir = path.join(server.dataDir, 'repositories', hashedDiskPath('project', project.id));
  for (let i = 0; !fs.existsSync(path.join(gitDir, 'cairn-full-repack')); i++) {
    if (i > 600) throw new Error(`housekeeping did not run within 2 minutes of the push to ${gitDir}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  console.log(`fresh push: ${((pushed - started) / 1000).toFixed(1)} s; housekept ${((performance.now() - pushed) / 1000).toFixed(1)} s later (the job waits 5 s for more pushes)`);
  return `${server.url}/${project.path_with_namespace}.git`;
}

const pktLine = (s: string) => (s.length + 4).toString(16).padStart(4, '0') + s;

/** One upload-pack request (protocol v0, stateless): the bytes of the pack in the answer. */
async function uploadPack(url: string, body: string): Promise<number> {
  const res = await fetch(`${url}/git-upload-pack`, { method: 'POST', headers: { 'content-type': 'application/x-git-upload-pack-request' }, body });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200 || bytes.indexOf('PACK') < 0) throw new Error(`upload-pack at ${url}: ${res.status}, no pack in ${bytes.length} bytes: ${bytes.subarray(0, 200).toString('latin1')}`);
  return bytes.length;
}

async function stormRow(cairnUrl: string, peerUrl: string, o: { key: string; wants: string[]; depth: number; packCache: string }): Promise<PeerRow> {
  const caps = 'multi_ack_detailed no-done side-band-64k thin-pack ofs-delta agent=cairn-bench';
  const body =
    o.wants.map((w, i) => pktLine(`want ${w}${i === 0 ? ` ${caps}` : ''}\n`)).join('') +
    (o.depth ? pktLine(`deepen ${o.depth}\n`) : '') +
    '0000' +
    pktLine('done\n');
  const cairnBytes = await uploadPack(cairnUrl, body);
  const peerBytes = await uploadPack(peerUrl, body);
  const round = async (url: string) => {
    const start = performance.now();
    await Promise.all(Array.from({ length: STORM_CLONES }, () => uploadPack(url, body)));
    return performance.now() - start;
  };
  const cairnMs: number[] = [];
  const peerMs: number[] = [];
  for (let i = 0; i < STORM_RUNS; i++) {
    peerMs.push(await round(peerUrl));
    fs.rmSync(o.packCache, { recursive: true, force: true });
    cairnMs.push(await round(cairnUrl));
  }
  const value = median(peerMs) / median(cairnMs);
  return {
    key: o.key,
    group: 'clone',
    name: `${STORM_CLONES} identical upload-pack requests at once, ${o.depth ? `main with depth ${o.depth}` : 'every ref'} (median wall time)`,
    peerName: 'git http-backend',
    cairnMs,
    peerMs,
    cairnBytes,
    peerBytes,
    value,
    target: STORM_TARGET,
    met: value >= STORM_TARGET,
  };
}

/** Runs fn over items, `width` at a time. */
async function inParallel<T>(items: T[], width: number, fn: (item: T) => Promise<unknown>) {
  const queue = [...items];
  await Promise.all(Array.from({ length: width }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
  }));
}

async function seedLists(server: BenchServer, keys: Set<string>): Promise<{ membersProjectId?: number }> {
  const started = Date.now();
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);
  const userIds: number[] = [];
  if (keys.has('users') || keys.has('members')) {
    await inParallel(range(120), 8, async (i) => {
      const u = await api(server, 'POST', '/users', { username: `peer-user-${i}`, name: `Peer User ${i}`, email: `peer-user-${i}@example.com`, password: 'bench-password-1' });
      userIds.push(u.id);
    });
  }
  if (keys.has('projects')) {
    await inParallel(range(120), 8, (i) => api(server, 'POST', '/projects', { name: `list-project-${i}`, visibility: i % 3 === 0 ? 'private' : 'public' }));
  }
  if (keys.has('groups')) {
    await inParallel(range(120), 8, (i) => api(server, 'POST', '/groups', { name: `list-group-${i}`, path: `list-group-${i}` }));
  }
  let membersProjectId: number | undefined;
  if (keys.has('members')) {
    const project = await api(server, 'POST', '/projects', { name: 'members-list', visibility: 'private' });
    membersProjectId = project.id;
    const sorted = [...userIds].sort((a, b) => a - b).slice(0, 100);
    const added = await api(server, 'POST', `/projects/${project.id}/members`, { user_id: sorted.join(','), access_level: 30 });
    if (added?.status && added.status !== 'success') throw new Error(`adding members failed: ${JSON.stringify(added)}`);
  }
  console.log(`seeded ${userIds.length} users, ${keys.has('projects') ? 120 : 0} projects, ${keys.has('groups') ? 120 : 0} groups, ${membersProjectId ? 100 : 0} project members in ${Date.now() - started} ms`);
  return { membersProjectId };
}

export interface PeersBenchResult {
  database: string;
  peers?: string;
  repository?: string;
  rows: PeerRow[];
}

export async function runPeersBench(): Promise<PeersBenchResult> {
  const keys = selectedKeys();
  const database = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)';
  const wantsRepo = READ_KEYS.some((k) => keys.has(k)) || CLONE_KEYS.some((k) => keys.has(k));
  const wantsLists = LIST_KEYS.some((k) => keys.has(k));
  const programs = wantsRepo ? ensurePeers() : null;
  const rows: PeerRow[] = [];
  const headers = { 'private-token': BENCH_TOKEN };
  const result: PeersBenchResult = { database, peers: programs?.versions, rows };

  const server = await startServer();
  let peers: PeerServer | null = null;
  const cleanUp = async () => {
    await peers?.stop();
    peers = null;
    await server.stop();
  };
  // Ctrl-C or a kill still stops lighttpd and Cairn and drops the database.
  const onSignal = (signal: NodeJS.Signals) => {
    console.error(`\n${signal}: stopping lighttpd and Cairn`);
    cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    if (wantsRepo) {
      const started = Date.now();
      const { project, gitDir } = await createBigRepository(server, 'peer-bench', { stream: peerRepositoryStream(COMMITS), visibility: 'public', recomputeDeltas: true });
      const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' };
      const rev = (r: string) => execFileSync('git', ['--git-dir', gitDir, 'rev-parse', r], { env }).toString().trim();
      const sha = { main: rev('main'), base: rev('main~5'), commit: rev('main~3'), blob: rev('main:README.md') };
      const files = execFileSync('git', ['--git-dir', gitDir, 'ls-tree', '-r', '--name-only', 'main'], { env }).toString().trim().split('\n').length;
      const packBytes = fs
        .readdirSync(path.join(gitDir, 'objects/pack'))
        .filter((f) => f.endsWith('.pack'))
        .reduce((sum, f) => sum + fs.statSync(path.join(gitDir, 'objects/pack', f)).size, 0);
      result.repository = `${COMMITS} commits on main, ${files} files, 4 branches, 10 tags, pack ${(packBytes / 2 ** 20).toFixed(1)} MiB (bitmaps, commit-graph)`;
      console.log(`repository: ${result.repository}; generated and housekept in ${Date.now() - started} ms at ${gitDir}`);
      peers = await startPeers(programs!, gitDir);
      const cairnBase = `${server.url}/api/v4/projects/${project.id}/repository`;

      const specs = readSpecs(sha, peers.snapshotPrefix).filter((s) => keys.has(s.key));
      for (const spec of specs) {
        const cairnUrl = cairnBase + spec.cairn;
        const cgitUrl = peers.cgitRepo + spec.cgit;
        const { body: cairnBody, ms: cairnMs } = await probe(`Cairn ${spec.key}`, cairnUrl, headers, 200);
        const { body: cgitBody, ms: cgitMs } = await probe(`cgit ${spec.key}`, cgitUrl, {}, 200);
        const problem = spec.check?.(cairnBody, cgitBody);
        if (problem) throw new Error(`check failed: ${spec.key}: ${problem}`);
        console.log(`check ${spec.key.padEnd(8)} 200 Cairn ${kb(cairnBody.length).padStart(7)} ${ms(cairnMs)} GET /api/v4/projects/:id/repository${spec.cairn}`);
        console.log(`${''.padEnd(14)} 200 cgit  ${kb(cgitBody.length).padStart(7)} ${ms(cgitMs)} GET /cgit/${peers.snapshotPrefix}/${spec.cgit}`);
        if (WARMUP > 0) {
          await load('warm-up', cgitUrl, { seconds: WARMUP, connections: CONNECTIONS });
          await settle(cgitUrl);
          await load('warm-up', cairnUrl, { headers, seconds: WARMUP, connections: CONNECTIONS });
          await settle(cairnUrl, headers);
        }
        const peer = await load(`cgit /${spec.cgit}`, cgitUrl, { seconds: SECONDS, connections: CONNECTIONS });
        await settle(cgitUrl);
        const cairn = await load(`Cairn ${spec.cairn}`, cairnUrl, { headers, seconds: SECONDS, connections: CONNECTIONS });
        await settle(cairnUrl, headers);
        const value = rate(peer) ? rate(cairn) / rate(peer) : NaN;
        const row: PeerRow = {
          key: spec.key,
          group: 'reads',
          name: spec.name,
          peerName: `cgit /${spec.cgit.replace(/[0-9a-f]{40}/g, '<sha>')}`,
          cairn,
          peer,
          cairnBytes: cairnBody.length,
          peerBytes: cgitBody.length,
          value,
          target: READ_TARGET,
          met: value >= READ_TARGET && cairn.errors === 0 && peer.errors === 0,
        };
        rows.push(row);
        console.log(`  ${spec.key}: Cairn ${loadRps(cairn)} req/s, cgit ${loadRps(peer)} req/s, ratio ${value.toFixed(2)}${cairn.errors || peer.errors ? ` (errors: Cairn ${cairn.errors}, cgit ${peer.errors})` : ''}`);
      }

      const packCache = path.join(server.dataDir, 'cache', 'pack-objects');
      const cloneRows: [string, () => Promise<string>, Omit<CloneRowOptions, 'key' | 'packCache'>][] = [
        ['clone', async () => `${server.url}/${project.path_with_namespace}.git`, { name: 'git clone (median wall time)', target: CLONE_TARGET }],
        // The same history pushed over HTTP to a new project, once its housekeeping ran: as fast as the packed repository?
        ['clone-fresh', () => freshPush(server, gitDir), { name: 'git clone right after a first push (median wall time)', target: FRESH_CLONE_TARGET }],
      ];
      for (const [key, cairnUrl, o] of cloneRows) {
        if (!keys.has(key)) continue;
        const row = await cloneRow(await cairnUrl(), peers.gitUrl, { ...o, key, packCache });
        rows.push(row);
        console.log(`  ${key}: Cairn ${median(row.cairnMs!).toFixed(0)} ms, http-backend ${median(row.peerMs!).toFixed(0)} ms, ratio ${row.value.toFixed(2)}`);
      }
      // A CI storm: the same upload-pack request from STORM_CLONES clients at once, the server's
      // work only (the clients read and drop the answer: a real git client's index-pack and
      // checkout on this same machine would be most of the time measured). Full: a clone of every
      // ref; shallow: a fetch of main with depth 20, what runners ask (no bitmap can serve it).
      for (const [key, depth] of [['clone-storm', 0], ['fetch-storm-shallow', 20]] as const) {
        if (!keys.has(key)) continue;
        const wants = depth ? [execFileSync('git', ['--git-dir', gitDir, 'rev-parse', 'main'], { env }).toString().trim()]
          : execFileSync('git', ['--git-dir', gitDir, 'for-each-ref', '--format=%(objectname)'], { env }).toString().trim().split('\n');
        const row = await stormRow(`${server.url}/${project.path_with_namespace}.git`, peers.gitUrl, { key, wants, depth, packCache });
        rows.push(row);
        console.log(`  ${key}: Cairn ${median(row.cairnMs!).toFixed(0)} ms, http-backend ${median(row.peerMs!).toFixed(0)} ms, ratio ${row.value.toFixed(2)}`);
      }
      await peers.stop();
      peers = null;
    }

    if (wantsLists) {
      const { membersProjectId } = await seedLists(server, keys);
      const lists: [string, string][] = [];
      for (const perPage of [20, 100]) {
        if (keys.has('projects')) lists.push(['projects', `/projects?per_page=${perPage}`]);
        if (keys.has('users')) lists.push(['users', `/users?per_page=${perPage}`]);
        if (keys.has('groups')) lists.push(['groups', `/groups?per_page=${perPage}`]);
        if (keys.has('members')) lists.push(['members', `/projects/${membersProjectId}/members/all?per_page=${perPage}`]);
      }
      for (const [key, p] of lists) {
        const url = `${server.url}/api/v4${p}`;
        const { body, ms: took } = await probe(`Cairn ${key}`, url, headers, 200);
        const perPage = Number(new URL(url).searchParams.get('per_page'));
        const length = JSON.parse(body.toString()).length;
        if (length !== perPage) throw new Error(`check failed: ${p} listed ${length} rows, expected a full page of ${perPage}`);
        const name = `GET ${p.replace(/\/projects\/\d+\//, '/projects/:id/')}`;
        console.log(`check ${key.padEnd(8)} 200 Cairn ${kb(body.length).padStart(7)} ${ms(took)} ${name} (${length} rows)`);
        if (WARMUP > 0) {
          await load('warm-up', url, { headers, seconds: WARMUP, connections: CONNECTIONS });
          await settle(url, headers);
        }
        const cairn = await load(name, url, { headers, seconds: SECONDS, connections: CONNECTIONS });
        await settle(url, headers);
        rows.push({ key, group: 'lists', name, cairn, cairnBytes: body.length, value: rate(cairn), target: LIST_TARGET, met: rate(cairn) >= LIST_TARGET && cairn.errors === 0 });
        console.log(`  ${name}: ${loadRps(cairn)} req/s${cairn.errors ? ` (errors: ${cairn.errors})` : ''}`);
      }
    }
    return result;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanUp();
  }
}

export function printPeersResult(r: PeersBenchResult) {
  console.log(`\ndatabase: ${r.database}; autocannon -c ${CONNECTIONS}, ${SECONDS} s per side and row after ${WARMUP} s of warm-up; ${CLONE_RUNS} clones each`);
  if (r.repository) console.log(`repository: ${r.repository}`);
  if (r.peers) console.log(`peers: ${r.peers}, cgit with cache-size=0`);
  console.log('');
  console.log('| key | row | Cairn | peer | peer figure | Cairn/peer | target | | bytes Cairn / peer |');
  console.log('|---|---|---:|---|---:|---:|---|---|---:|');
  const mark = (row: PeerRow) => (row.met ? '✓' : '✗');
  const bytes = (row: PeerRow) => (row.peerBytes === undefined ? kb(row.cairnBytes ?? 0) : `${kb(row.cairnBytes ?? 0)} / ${kb(row.peerBytes)}`);
  for (const row of r.rows) {
    if (row.group === 'reads') {
      console.log(`| ${row.key} | ${row.name} | ${loadRps(row.cairn!)} req/s | ${row.peerName} | ${loadRps(row.peer!)} req/s | ${Number.isNaN(row.value) ? '—' : row.value.toFixed(2)} | ≥ ${READ_TARGET.toFixed(1)} | ${mark(row)} | ${bytes(row)} |`);
    } else if (row.group === 'clone') {
      console.log(`| ${row.key} | ${row.name} | ${median(row.cairnMs!).toFixed(0)} ms | ${row.peerName} | ${median(row.peerMs!).toFixed(0)} ms | ${row.value.toFixed(2)} | ≥ ${row.target} | ${mark(row)} | ${bytes(row)} packs |`);
    } else {
      console.log(`| ${row.key} | ${row.name} | ${loadRps(row.cairn!)} req/s | | | | ≥ ${num(LIST_TARGET)} req/s${r.database === 'PostgreSQL' ? '' : ' (on PostgreSQL)'} | ${mark(row)} | ${bytes(row)} |`);
    }
  }
  for (const clone of r.rows.filter((row) => row.group === 'clone')) {
    console.log(`\n${clone.key} times, ms: Cairn ${clone.cairnMs!.map((x) => x.toFixed(0)).join(', ')}; http-backend ${clone.peerMs!.map((x) => x.toFixed(0)).join(', ')}`);
  }
  const failed = r.rows.filter((row) => (row.cairn?.errors ?? 0) + (row.peer?.errors ?? 0) > 0);
  if (failed.length) {
    console.log('\nnon-2xx answers or socket errors under load:');
    for (const row of failed) {
      console.log(`  ${row.name}: Cairn ${row.cairn!.non2xx} non-2xx, ${row.cairn!.errors - row.cairn!.non2xx} other errors` +
        (row.peer ? `; ${row.peerName} ${row.peer.non2xx} non-2xx, ${row.peer.errors - row.peer.non2xx} other errors` : ''));
    }
  } else {
    console.log('\nno non-2xx answers or socket errors under load');
  }
  const few: string[] = [];
  for (const row of r.rows) {
    const loads: [string, LoadResult | undefined][] = [['Cairn', row.cairn], [row.peerName ?? 'peer', row.peer]];
    for (const [who, l] of loads) if (l && l.requests < 2 * CONNECTIONS) few.push(`${row.key} (${row.name}): ${who} completed ${l.requests} requests`);
  }
  if (few.length) {
    console.log(`\ntoo few requests for a steady figure (each took about as long as the run, or longer; raise BENCH_SECONDS):`);
    for (const line of few) console.log(`  ${line}`);
  }
  const missed = r.rows.filter((row) => !row.met);
  console.log(`\n${r.rows.length - missed.length} of ${r.rows.length} rows meet their target${missed.length ? `; missed: ${missed.map((row) => row.key + (row.group === 'lists' ? ` ${row.name.match(/per_page=\d+/)?.[0]}` : '')).join(', ')}` : ''}`);
  return missed.length;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    const missed = printPeersResult(await runPeersBench());
    if (missed && process.env.BENCH_STRICT === '1') process.exitCode = 1;
  } catch (err) {
    console.error(`bench:peers failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  }
}
