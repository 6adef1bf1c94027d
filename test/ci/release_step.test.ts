// The `release:` keyword in the job payload (issue #32): the `release` step after `script`, as
// GitLab's Releaser writes it, run here by a real shell with stand-in `release-cli` and `glab`
// programs that record their arguments: values arrive as written, CI variables expanded, and
// hostile values (quotes, $(...), backquotes, newlines) never run anything. Cairn's runner reads
// the same line back (src/runner/release.ts) to the same fields.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { descriptionFrom, releaseCliLine, releaseFields } from '../../src/runner/release.js';
import { expandVariables } from '../../src/runner/script.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, ProtocolRunner } from '../helpers/ci.js';

const HOSTILE = 'it\'s "quoted" $(touch pwned1) `touch pwned2` ${X:-$(touch pwned3)} \\ back\\slash\nsecond line; touch pwned4 $$ 100% $CI_COMMIT_SHA';

function recorder(dir: string, name: string, version?: string) {
  const file = path.join(dir, name);
  fs.writeFileSync(
    file,
    [
      '#!/bin/sh',
      version ? `if [ "$1" = "--version" ]; then echo "glab ${version} (2025-01-01)"; exit 0; fi` : '',
      `n=$(ls "${dir}" | grep -c '^call-' || true)`,
      `for a in "$@"; do printf '%s\\0' "$a"; done > "${dir}/call-$n"`,
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
}

function calls(dir: string): string[][] {
  return fs.readdirSync(dir).filter((f) => f.startsWith('call-')).sort().map((f) => fs.readFileSync(path.join(dir, f), 'utf8').split('\0').slice(0, -1));
}

describe('release: keyword, the job payload', () => {
  let t: TestContext;
  let payload: any;
  let sha: string;

  before(async () => {
    t = await createTestContext();
    const project = await t.createProject();
    const yaml = [
      'publish:',
      '  script: [echo build]',
      '  after_script: [echo done]',
      '  release:',
      '    tag_name: v$CI_PIPELINE_IID',
      '    tag_message: "Tag for ${CI_COMMIT_SHA}"',
      '    name: Release $CI_COMMIT_SHA',
      `    description: ${JSON.stringify(HOSTILE)}`,
      '    ref: $CI_COMMIT_SHA',
      '    released_at: "2026-01-02T03:04:05Z"',
      '    milestones: [m1, "m 2"]',
      '    assets:',
      '      links:',
      '        - name: "bin $(touch pwned5)"',
      '          url: "https://example.com/$CI_COMMIT_SHA/bin?a=1&b=`id`"',
      '          link_type: package',
      '          filepath: /bin/tool',
      '',
    ].join('\n');
    sha = await commitFiles(t, project, { '.gitlab-ci.yml': yaml });
    const job = await (await ProtocolRunner.register(t)).takeJob();
    assert.ok(job);
    payload = job.payload;
  });
  after(() => t.close());

  it('adds the release step after script, before after_script, on_success and not allowed to fail', () => {
    const steps = payload.steps as Array<Record<string, unknown>>;
    assert.deepEqual(steps.map((s) => s.name), ['script', 'release', 'after_script']);
    const release = steps[1];
    assert.equal(release.when, 'on_success');
    assert.equal(release.allow_failure, false);
    assert.equal(release.timeout, steps[0].timeout);
    assert.equal((release.script as string[]).length, 1);
    const script = (release.script as string[])[0];
    assert.match(script, /^if command -v glab /);
    assert.match(script, /release-cli create --name "Release \$CI_COMMIT_SHA" --description /);
    assert.match(script, /glab release create -R \$CI_PROJECT_PATH "v\$CI_PIPELINE_IID" --assets-links /);
    assert.match(script, /--no-update --no-close-milestone/);
    assert.ok(payload.variables.some((v: { key: string }) => v.key === 'CI_SERVER_FQDN'));
  });

  it('a job without release: has no release step', async () => {
    const t2 = await createTestContext();
    try {
      const p = await t2.createProject();
      await commitFiles(t2, p, { '.gitlab-ci.yml': 'a: { script: [x] }\n' });
      const job = await (await ProtocolRunner.register(t2)).takeJob();
      assert.deepEqual(job!.payload.steps.map((s: { name: string }) => s.name), ['script']);
    } finally {
      await t2.close();
    }
  });

  const run = (tools: Array<[string, string?]>) => {
    const dir = fs.mkdtempSync(path.join(t.tmpDir, 'release-'));
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    for (const [name, version] of tools) recorder(bin, name, version);
    const env: Record<string, string> = { PATH: `${bin}:/usr/bin:/bin`, HOME: dir };
    for (const v of payload.variables) env[v.key] = v.value;
    const script = payload.steps[1].script[0];
    const r = spawnSync('bash', ['-e', '-c', script], { cwd: dir, env, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr + r.stdout);
    for (const f of ['pwned1', 'pwned2', 'pwned3', 'pwned4', 'pwned5']) assert.ok(!fs.existsSync(path.join(dir, f)), `${f} was not created`);
    return { out: r.stdout, calls: calls(bin) };
  };
  const expectedDescription = () => HOSTILE.replace('$$', '$').replace('$CI_COMMIT_SHA', sha);
  const iid = () => payload.variables.find((v: { key: string }) => v.key === 'CI_PIPELINE_IID').value;

  it('release-cli gets every field, variables expanded, hostile text literal', () => {
    const { out, calls: c } = run([['release-cli']]);
    assert.match(out, /Warning: release-cli will not be supported/);
    assert.equal(c.length, 1);
    const link = { name: 'bin $(touch pwned5)', url: `https://example.com/${sha}/bin?a=1&b=\`id\``, link_type: 'package', filepath: '/bin/tool' };
    // The link is a JSON document (key order is the stored options').
    assert.deepEqual(JSON.parse(c[0].at(-1)!), link);
    assert.deepEqual(c[0].slice(0, -1), [
      'create',
      '--name', `Release ${sha}`,
      '--description', expectedDescription(),
      '--tag-name', `v${iid()}`,
      '--tag-message', `Tag for ${sha}`,
      '--ref', sha,
      '--released-at', '2026-01-02T03:04:05Z',
      '--milestone', 'm1',
      '--milestone', 'm 2',
      '--assets-link',
    ]);
  });

  it('glab 1.58.0 or newer: auth login with the job token, then glab release create', () => {
    const { calls: c } = run([['glab', '1.60.2'], ['release-cli']]);
    assert.equal(c.length, 2, JSON.stringify(c));
    const token = payload.variables.find((v: { key: string }) => v.key === 'CI_JOB_TOKEN').value;
    assert.deepEqual(c[0].slice(0, 4), ['auth', 'login', '--job-token', token]);
    assert.deepEqual(JSON.parse(c[1][6]), [{ name: 'bin $(touch pwned5)', url: `https://example.com/${sha}/bin?a=1&b=\`id\``, link_type: 'package', filepath: '/bin/tool' }]);
    assert.deepEqual(c[1], [
      'release', 'create', '-R', payload.variables.find((v: { key: string }) => v.key === 'CI_PROJECT_PATH').value, `v${iid()}`,
      '--assets-links', c[1][6],
      '--milestone', 'm1,m 2',
      '--name', `Release ${sha}`,
      '--experimental-notes-text-or-file', expectedDescription(),
      '--ref', sha,
      '--tag-message', `Tag for ${sha}`,
      '--released-at', '2026-01-02T03:04:05Z',
      '--no-update', '--no-close-milestone',
    ]);
  });

  it('an older glab falls back to release-cli', () => {
    const { calls: c } = run([['glab', '1.40.0'], ['release-cli']]);
    assert.equal(c.length, 1);
    assert.equal(c[0][0], 'create');
  });

  it("Cairn's runner reads the release-cli line back to the same fields the shell gives", () => {
    const { calls: c } = run([['release-cli']]);
    const line = releaseCliLine(payload.steps[1].script);
    assert.ok(line);
    const fields = releaseFields(line, expandVariables(payload.variables));
    assert.deepEqual(fields, {
      name: c[0][2], description: c[0][4], tag_name: c[0][6], tag_message: c[0][8], ref: c[0][10], released_at: c[0][12],
      milestones: ['m1', 'm 2'], links: [JSON.parse(c[0][18])],
    });
  });

  it('refuses a release-cli line that needs a shell (a GitLab server does not escape $(...))', () => {
    const vars = expandVariables([]);
    assert.throws(() => releaseFields('release-cli create --description "$(id)" --tag-name "v1"', vars), /shell expansions/);
    assert.throws(() => releaseFields('release-cli create --description "`id`" --tag-name "v1"', vars), /backquotes/);
    assert.throws(() => releaseFields('release-cli create --tag-name v1; id', vars), /not one Cairn can read/);
    assert.deepEqual(releaseFields('release-cli create --tag-name "v\\$1 \\"x\\""', vars), { tag_name: 'v$1 "x"', milestones: [], links: [] });
  });

  it('a description naming a file in the project directory is its contents; links, .., absolute paths and text are not read', () => {
    const dir = fs.mkdtempSync(path.join(t.tmpDir, 'desc-'));
    fs.mkdirSync(path.join(dir, 'docs'));
    fs.writeFileSync(path.join(dir, 'docs', 'NOTES.md'), '# Notes\n');
    fs.symlinkSync('/etc', path.join(dir, 'etc'));
    fs.symlinkSync('/etc/hostname', path.join(dir, 'host.md'));
    fs.writeFileSync(path.join(dir, 'big.md'), Buffer.alloc(1024 * 1024 + 1, 'a'));
    assert.equal(descriptionFrom('./docs/NOTES.md', dir), '# Notes\n');
    assert.equal(descriptionFrom('docs/NOTES.md', dir), '# Notes\n');
    for (const text of ['etc/hostname', 'host.md', '../NOTES.md', 'docs/../docs/NOTES.md', '/etc/hostname', 'docs/NOTES.md and more', 'missing.md', 'docs']) {
      assert.equal(descriptionFrom(text, dir), text);
    }
    assert.throws(() => descriptionFrom('big.md', dir), /larger than 1 MiB/);
  });
});
