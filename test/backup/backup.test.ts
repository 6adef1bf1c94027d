// cairn backup create / restore: a backup taken while pushes (real git over HTTP) and API writes
// run, restored on a fresh instance (a new data directory, or a new PostgreSQL database) and
// compared with the source; the quiet point (a push arriving while refs are read waits and is
// wholly absent from the backup); refusals (non-empty target, damaged archive, newer schema,
// hostile entry names and links).
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import { BackupError, createBackup } from '../../src/backup/create.js';
import { MANIFEST, type Manifest } from '../../src/backup/manifest.js';
import { restoreBackup, verifyArchive } from '../../src/backup/restore.js';
import { archiveBytes, readTar, TarWriter } from '../../src/backup/tar.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { Project } from '../../src/db/schema/core.js';
import { openDatabase, type OpenedDatabase } from '../../src/db/index.js';
import { checkRepository } from '../../src/git/repository.js';
import { readRefsSnapshot } from '../../src/git/snapshot.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { acquireWriteLease, releaseWriteLease } from '../../src/services/repository_writes.js';
import { artifactStore } from '../../src/storage/index.js';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';
import { createEmptyDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/serve.js';
import { tarArchive as hostileTar } from '../helpers/tar.js';

const CI_YML = 'test:\n  script: [echo ok]\n';

function gitRun(cwd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('git', args, { cwd, env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@example.com' } }, (err, stdout, stderr) =>
      err ? reject(new Error(`git ${args.join(' ')}: ${stderr}`)) : resolve(stdout.trim()),
    ),
  );
}

/** A clone-less work tree pushing to a project over HTTP. */
class Pusher {
  private n = 0;
  constructor(readonly dir: string, readonly remote: string) {}
  static async make(t: TestContext, base: string, project: Project): Promise<Pusher> {
    const dir = fs.mkdtempSync(path.join(t.tmpDir, 'push-'));
    await gitRun(dir, ['init', '-q', '-b', 'main']);
    const ns = await t.db.selectFrom('namespaces').select('full_path').where('id', '=', project.namespace_id).executeTakeFirstOrThrow();
    const u = new URL(base);
    return new Pusher(dir, `http://root:${ROOT_TOKEN}@${u.host}/${ns.full_path}/${project.path}.git`);
  }
  async commit(): Promise<string> {
    fs.writeFileSync(path.join(this.dir, '.gitlab-ci.yml'), CI_YML);
    fs.writeFileSync(path.join(this.dir, 'n.txt'), `${++this.n} ${crypto.randomBytes(8).toString('hex')}\n`);
    await gitRun(this.dir, ['add', '-A']);
    await gitRun(this.dir, ['commit', '-q', '-m', `change ${this.n}`]);
    return gitRun(this.dir, ['rev-parse', 'HEAD']);
  }
  push(branch = 'main'): Promise<string> {
    return gitRun(this.dir, ['push', '-q', this.remote, `HEAD:refs/heads/${branch}`]);
  }
}

/** A fresh, empty target: a new data directory, and on PostgreSQL a new empty database. */
async function freshTarget(t: TestContext, name: string): Promise<{ config: Config; drop: () => Promise<void> }> {
  const dataDir = path.join(t.tmpDir, `restore-${name}`);
  if (!t.databaseUrl) return { config: loadConfig({ CAIRN_DATA_DIR: dataDir }, { databaseUrl: null, logLevel: 'silent' }), drop: async () => {} };
  const empty = await createEmptyDatabase(t.databaseUrl);
  return { config: loadConfig({ CAIRN_DATA_DIR: dataDir }, { databaseUrl: empty.url, logLevel: 'silent' }), drop: empty.drop };
}

async function rows(db: OpenedDatabase['db'], table: 'issues' | 'notes' | 'ci_pipelines' | 'ci_job_artifacts' | 'projects', projectIds?: number[]) {
  let q = db.selectFrom(table as any).selectAll() as any;
  if (projectIds) q = q.where(table === 'projects' ? 'id' : 'project_id', 'in', projectIds);
  return (await q.orderBy('id').execute()) as Record<string, unknown>[];
}

/** Rewrites an archive's entries (uncompressed) through `edit`; null drops an entry. */
async function rewrite(file: string, out: string, edit: (name: string, body: Buffer) => Buffer | null) {
  const sink = fs.createWriteStream(out);
  const w = new TarWriter(sink);
  for await (const e of readTar(archiveBytes(fs.createReadStream(file)))) {
    const parts: Buffer[] = [];
    for await (const c of e.body) parts.push(c);
    const body = edit(e.name, Buffer.concat(parts));
    if (body) await w.addBuffer(e.name, body);
  }
  await w.finish();
  await new Promise<void>((r) => sink.end(r));
}

describe('cairn backup: create while writes run, restore on a fresh instance', () => {
  let t: TestContext;
  let base: string;
  let quiet: Project;
  let busy: Project;
  let archive: string;
  let manifest: Manifest;

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: base });
    await t.app.listen({ host: '127.0.0.1', port });
    quiet = await t.createProject();
    busy = await t.createProject();
    const q = await Pusher.make(t, base, quiet);
    await q.commit();
    await q.push();
    for (let i = 0; i < 3; i++) {
      const issue = await t.post(`/api/v4/projects/${quiet.id}/issues`, { title: `issue ${i}`, description: `about ${i}` });
      assert.equal(issue.status, 201, issue.text);
      assert.equal((await t.post(`/api/v4/projects/${quiet.id}/issues/${issue.body.iid}/notes`, { body: `note on ${i}` })).status, 201);
    }
    const snippet = await t.post('/api/v4/snippets', { title: 's', visibility: 'private', files: [{ file_path: 'a.txt', content: 'snippet body' }] });
    assert.equal(snippet.status, 201, snippet.text);
    // An artifact: a stored object and its row, on the quiet project's pipeline's job.
    const job = await t.db.selectFrom('ci_builds').select(['id']).where('project_id', '=', quiet.id).executeTakeFirstOrThrow();
    const bytes = crypto.randomBytes(70_000);
    const key = `${quiet.id}/${job.id}/archive-${crypto.randomBytes(4).toString('hex')}`;
    await artifactStore(t.config).put(key, Readable.from([bytes]));
    await t.db.insertInto('ci_job_artifacts').values({ job_id: job.id, project_id: quiet.id, file_type: 'archive', file_format: 'zip', file_name: 'artifacts.zip', size: bytes.length, store_key: key } as any).execute();
  });
  after(async () => {
    await t?.close();
  });

  it('backs up while pushes and API writes run; a push reaching the quiet point waits and is wholly absent', async () => {
    const pusher = await Pusher.make(t, base, busy);
    let stop = false;
    const pushed: string[] = [];
    const pushes = (async () => {
      while (!stop) {
        await pusher.commit();
        await pusher.push();
        pushed.push(await gitRun(pusher.dir, ['rev-parse', 'HEAD']));
      }
    })();
    const issues = (async () => {
      for (let i = 0; !stop; i++) assert.equal((await t.post(`/api/v4/projects/${busy.id}/issues`, { title: `busy ${i}` })).status, 201);
    })();
    while (pushed.length < 2) await new Promise((r) => setTimeout(r, 50));

    // At the quiet point, a push of another project waits until refs are read.
    const late = await Pusher.make(t, base, quiet);
    const lateSha = await late.commit();
    let latePush: Promise<string> | null = null;
    let grant: ReturnType<typeof acquireWriteLease> | null = null;
    archive = path.join(t.tmpDir, 'one.tar');
    const result = await createBackup(t.app.cairn, archive, {
      inWindow: async () => {
        latePush = late.push('late').catch((err) => err);
        // A write lease (what every push, API commit and merge takes first) is not granted here.
        grant = acquireWriteLease(t.db, { type: 'Project', id: quiet.id });
        const waited = await Promise.race([grant.then(() => 'granted'), new Promise((r) => setTimeout(() => r('waiting'), 700))]);
        assert.equal(waited, 'waiting', 'a write lease was granted inside the quiet point');
        const { refs } = await readRefsSnapshot(projectRepoPath(t.app.cairn, quiet));
        assert.ok(!refs.some(([, oid]) => oid === lateSha), 'a push landed inside the quiet point');
      },
    });
    manifest = result.manifest;
    const lease = await grant!;
    assert.ok(lease, 'the lease is granted once the refs are read');
    await releaseWriteLease(t.db, lease.id);
    stop = true;
    await Promise.all([pushes, issues]);
    assert.equal(await latePush, '', 'the push that waited went through afterwards');
    assert.ok(fs.statSync(archive).mode & 0o600);
    assert.equal(fs.statSync(archive).mode & 0o077, 0, 'the archive is private to its owner');
    assert.ok(manifest.repositories.some((r) => r.kind === 'snippet'));
    assert.ok(manifest.objects >= 1);
    assert.ok(manifest.database.migrations.length > 10);
    assert.deepEqual(fs.readdirSync(t.tmpDir).filter((n) => n.startsWith('.cairn-backup-')), [], 'no staging left');
    const lateCommit = lateSha;

    const target = await freshTarget(t, 'one');
    try {
      await restoreBackup(target.config, archive);
      const restored = await openDatabase({ databaseUrl: target.config.databaseUrl, dataDir: target.config.dataDir });
      try {
        const db = restored.db;
        // Every repository is whole, and its refs agree with the rows.
        const projects = await rows(db, 'projects');
        assert.equal(projects.length, (await rows(t.db, 'projects')).length);
        for (const p of projects as any[]) {
          const dir = projectRepoPath({ config: target.config } as any, p);
          await checkRepository(dir);
          const { refs } = await readRefsSnapshot(dir);
          const main = refs.find(([r]) => r === 'refs/heads/main')?.[1];
          const pipelines = await db.selectFrom('ci_pipelines').select(['sha']).where('project_id', '=', p.id).where('source', '=', 'push').execute();
          // Wholly in or wholly not: the branch tip has its pipeline, every pipeline its commit.
          if (main) assert.ok(pipelines.some((x) => x.sha === main), `project ${p.id}: the tip ${main} has no pipeline`);
          for (const x of pipelines) execFileSync('git', ['--git-dir', dir, 'cat-file', '-e', `${x.sha}^{commit}`]);
          assert.ok(!refs.some(([, oid]) => oid === lateCommit), 'the push that waited is not in the backup');
        }
        // The quiet project is exactly as it was: its refs (but the push that waited), HEAD, rows.
        const source = await readRefsSnapshot(projectRepoPath(t.app.cairn, quiet));
        const copy = await readRefsSnapshot(projectRepoPath({ config: target.config } as any, quiet));
        assert.deepEqual(copy, { head: source.head, refs: source.refs.filter(([, oid]) => oid !== lateCommit) });
        assert.ok(copy.refs.length >= 1);
        for (const table of ['issues', 'notes', 'ci_pipelines', 'ci_job_artifacts'] as const) {
          assert.deepEqual(await rows(db, table, [quiet.id]).then((r) => r.filter((x: any) => table !== 'ci_pipelines' || x.sha !== lateCommit)), await rows(t.db, table, [quiet.id]).then((r) => r.filter((x: any) => x.sha !== lateCommit)), table);
        }
        // The busy project's issues: those of the snapshot, unchanged.
        const before = await rows(t.db, 'issues', [busy.id]);
        const after = await rows(db, 'issues', [busy.id]);
        assert.ok(after.length > 0 && after.length <= before.length);
        assert.deepEqual(after, before.slice(0, after.length));
        // Artifacts' bytes came back.
        const art = await db.selectFrom('ci_job_artifacts').select(['store_key', 'size']).execute();
        for (const a of art) {
          const got = await artifactStore(target.config).get(a.store_key);
          const parts: Buffer[] = [];
          for await (const c of got!) parts.push(c as Buffer);
          const orig = await artifactStore(t.config).get(a.store_key);
          const want: Buffer[] = [];
          for await (const c of orig!) want.push(c as Buffer);
          assert.ok(Buffer.concat(parts).equals(Buffer.concat(want)));
        }
        // The secret key came along: the restored instance decrypts what the source encrypted.
        assert.equal(fs.readFileSync(path.join(target.config.dataDir, 'secret_key_base'), 'utf8'), fs.readFileSync(path.join(t.config.dataDir, 'secret_key_base'), 'utf8'));
      } finally {
        await restored.close();
      }
      // The restored instance serves and writes: new rows do not collide with restored ones.
      const database = await openDatabase({ databaseUrl: target.config.databaseUrl, dataDir: target.config.dataDir });
      const app = await buildApp({ config: { ...target.config, rootToken: ROOT_TOKEN } as Config, database, logger: false });
      try {
        const headers = { 'private-token': ROOT_TOKEN };
        const list = await app.inject({ method: 'GET', url: `/api/v4/projects/${quiet.id}/issues`, headers });
        assert.equal(list.statusCode, 200, list.body);
        assert.equal(JSON.parse(list.body).length, 3);
        const made = await app.inject({ method: 'POST', url: `/api/v4/projects/${quiet.id}/issues`, headers, payload: { title: 'after restore' } });
        assert.equal(made.statusCode, 201, made.body);
        assert.equal(JSON.parse(made.body).iid, 4);
        const project = await app.inject({ method: 'POST', url: '/api/v4/projects', headers, payload: { name: 'fresh-after-restore' } });
        assert.equal(project.statusCode, 201, project.body);
        const tree = await app.inject({ method: 'GET', url: `/api/v4/projects/${quiet.id}/repository/files/.gitlab-ci.yml/raw?ref=main`, headers });
        assert.equal(tree.body, CI_YML);
      } finally {
        await app.close();
      }
    } finally {
      await target.drop();
    }
  });

  it('refuses a target that is not empty, and leaves it as it was', async () => {
    const target = await freshTarget(t, 'nonempty');
    try {
      fs.mkdirSync(target.config.dataDir, { recursive: true });
      if (target.config.databaseUrl) {
        // A database that has been used (migrated) is not empty.
        const d = await openDatabase({ databaseUrl: target.config.databaseUrl, dataDir: target.config.dataDir });
        await (await import('../../src/db/migrate.js')).migrateToLatest(d.db);
        await d.close();
        await assert.rejects(restoreBackup(target.config, archive), (e: Error) => e instanceof BackupError && /database is not empty/.test(e.message));
      } else {
        fs.writeFileSync(path.join(target.config.dataDir, 'something'), 'x');
        await assert.rejects(restoreBackup(target.config, archive), (e: Error) => e instanceof BackupError && /is not empty/.test(e.message));
        assert.deepEqual(fs.readdirSync(target.config.dataDir), ['something']);
      }
    } finally {
      await target.drop();
    }
  });

  it('refuses a damaged archive, a newer schema or format, before touching anything', async () => {
    const cases: [string, (name: string, body: Buffer) => Buffer | null, RegExp][] = [
      ['damaged', (name, body) => (name.endsWith('/pack') && body.length ? Buffer.concat([body.subarray(0, 20), Buffer.from([body[20] ^ 1]), body.subarray(21)]) : body), /fails its checksum/],
      ['truncated', (name, body) => (name.startsWith('objects/') ? null : body), /lacks 1 entries|lacks/],
      [
        'newer schema',
        (name, body) => (name === MANIFEST ? Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), database: { ...manifest.database, migrations: [...manifest.database.migrations, '9999_from_the_future'] } })) : body),
        /schema is newer than this Cairn's.*9999_from_the_future/,
      ],
      ['newer format', (name, body) => (name === MANIFEST ? Buffer.from(JSON.stringify({ ...JSON.parse(body.toString()), formatVersion: 2 })) : body), /format version 2/],
    ];
    for (const [label, edit, expected] of cases) {
      const bad = path.join(t.tmpDir, `bad-${label.replace(/ /g, '-')}.tar`);
      await rewrite(archive, bad, edit);
      const target = await freshTarget(t, `bad-${label.replace(/ /g, '-')}`);
      try {
        await assert.rejects(restoreBackup(target.config, bad), (e: Error) => e instanceof BackupError && expected.test(e.message), label);
        assert.ok(!fs.existsSync(target.config.dataDir), `${label}: the data directory was made`);
      } finally {
        await target.drop();
      }
    }
  });

  it('refuses hostile archives: climbing names, absolute names, links, and writes nothing through them', async () => {
    const outside = path.join(t.tmpDir, 'outside');
    fs.mkdirSync(outside);
    const cases: [string, Parameters<typeof hostileTar>[0], RegExp][] = [
      ['dot-dot', [{ name: 'objects/../../../escaped', content: 'x' }], /not a name a Cairn backup has/],
      ['absolute', [{ name: `${outside}/abs`, content: 'x' }], /not a name a Cairn backup has/],
      ['symlink then write', [{ name: 'objects/link', type: 'symlink', linkname: outside }, { name: 'objects/link/evil', content: 'x' }], /not a regular file/],
      ['hard link', [{ name: 'objects/hard', type: 'hardlink', linkname: '/etc/passwd' }], /not a regular file/],
      ['directory', [{ name: 'objects/dir', type: 'dir' }], /not a regular file/],
      ['manifest naming ../', [{ name: 'database/x.ndjson', content: '' }, { name: MANIFEST, content: JSON.stringify({ ...manifest, entries: [{ name: '../x', size: 0, sha256: '' }] }) }], /not in the manifest/],
      ['not a tar', [], /no manifest\.json|not a readable/],
    ];
    for (const [label, entries, expected] of cases) {
      const file = path.join(t.tmpDir, `hostile-${label.replace(/\W+/g, '-')}.tar`);
      fs.writeFileSync(file, label === 'not a tar' ? crypto.randomBytes(2000) : hostileTar(entries));
      const target = await freshTarget(t, `hostile-${label.replace(/\W+/g, '-')}`);
      try {
        await assert.rejects(restoreBackup(target.config, file), (e: Error) => e instanceof BackupError && expected.test(e.message), `${label}: ${expected}`);
        assert.ok(!fs.existsSync(target.config.dataDir), `${label}: the data directory was made`);
      } finally {
        await target.drop();
      }
    }
    assert.deepEqual(fs.readdirSync(outside), []);
    assert.ok(!fs.existsSync(path.join(t.tmpDir, '..', 'escaped')));
  });

  it('gzips on request (and the gzipped archive reads back whole); refuses to overwrite a file', async () => {
    const gz = path.join(t.tmpDir, 'two.tar.gz');
    await createBackup(t.app.cairn, gz, { gzip: true });
    const head = Buffer.alloc(2);
    const fd = fs.openSync(gz, 'r');
    fs.readSync(fd, head, 0, 2, 0);
    fs.closeSync(fd);
    assert.deepEqual([...head], [0x1f, 0x8b]);
    await assert.rejects(createBackup(t.app.cairn, gz), (e: Error) => e instanceof BackupError && /exists already/.test(e.message));
    // Read back whole (every checksum) without a second full restore: the first test restored one.
    const m = await verifyArchive(gz, t.config);
    assert.equal(m.repositories.length, await repositoriesOnDisk(t));
  });
});

async function repositoriesOnDisk(t: TestContext): Promise<number> {
  // Repositories on disk now (the source has not changed since the gzipped backup).
  const projects = await t.db.selectFrom('projects').select(['id', 'repository_storage', 'disk_path']).execute();
  const snippets = await t.db.selectFrom('snippets').select(['id']).execute();
  return projects.filter((p) => fs.existsSync(projectRepoPath(t.app.cairn, p))).length + snippets.length;
}
