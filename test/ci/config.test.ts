import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  commitMessageSkipsCi,
  compilePipeline,
  Expression,
  lintConfig,
  matchGlob,
  parseDuration,
  type CompiledJob,
  type CompiledPipeline,
  type CompileInput,
  type CompileResult,
} from '../../src/ci/config/index.js';
import { MAX_DURATION_SECONDS } from '../../src/ci/config/duration.js';

const SHA = 'a'.repeat(40);

function baseInput(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): CompileInput {
  const ref = over.ref ?? 'main';
  const tag = over.tag ?? false;
  const source = over.source ?? 'push';
  const variables: Record<string, string> = {
    CI_COMMIT_REF_NAME: ref,
    CI_PIPELINE_SOURCE: source,
    CI_DEFAULT_BRANCH: 'main',
    CI_PROJECT_PATH: 'group/project',
    ...(tag ? { CI_COMMIT_TAG: ref } : { CI_COMMIT_BRANCH: ref }),
    ...(over.variables ?? {}),
  };
  return {
    yaml,
    ref,
    tag,
    sha: SHA,
    source,
    commitMessage: 'Update things',
    readLocalFile: async (p) => (Object.hasOwn(files, p) ? files[p] : null),
    ...over,
    variables,
  };
}

async function compile(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<CompileResult> {
  return compilePipeline(baseInput(yaml, over, files));
}

async function pipeline(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<CompiledPipeline> {
  const r = await compile(yaml, over, files);
  assert.equal(r.kind, 'pipeline', JSON.stringify(r));
  return r as CompiledPipeline;
}

async function errorsOf(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<string[]> {
  const r = await compile(yaml, over, files);
  assert.equal(r.ok, false, `expected errors, got ${JSON.stringify(r).slice(0, 300)}`);
  return (r as { errors: string[] }).errors;
}

async function firstError(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<string> {
  return (await errorsOf(yaml, over, files))[0];
}

function job(p: CompiledPipeline, name: string): CompiledJob {
  const j = p.jobs.find((x) => x.name === name);
  assert.ok(j, `job ${name} not in ${p.jobs.map((x) => x.name).join(', ')}`);
  return j;
}

const names = (p: CompiledPipeline) => p.jobs.map((j) => j.name);

describe('ci config: expression language', () => {
  const vars = { A: 'x', EMPTY: '', BR: 'feature/login', P: '/^feat/', UP: 'FEATURE', ONE: '1' };
  const table: Array<[string, boolean]> = [
    ['$A', true],
    ['$EMPTY', false],
    ['$UNDEFINED', false],
    ['$A == "x"', true],
    ["$A == 'x'", true],
    ['$A == "y"', false],
    ['$A != "y"', true],
    ['$UNDEFINED == "x"', false],
    ['$UNDEFINED != "x"', true],
    ['$UNDEFINED == null', true],
    ['$EMPTY == null', false],
    ['$EMPTY == ""', true],
    ['$A != null', true],
    ['"x" == $A', true],
    ['$A == $A', true],
    ['$A == $BR', false],
    ['$BR =~ /^feature/', true],
    ['$BR =~ /^FEATURE/', false],
    ['$BR =~ /^FEATURE/i', true],
    ['$BR !~ /^feature/', false],
    ['$BR !~ /^main$/', true],
    ['$UNDEFINED =~ /.*/', false],
    ['$UNDEFINED !~ /.*/', true],
    ['$BR =~ /feature\\/login/', true],
    ['$BR =~ $P', true],
    ['$A =~ $P', false],
    ['$BR =~ "/login$/"', true],
    ['$A && $BR', true],
    ['$A && $UNDEFINED', false],
    ['$UNDEFINED || $A', true],
    ['$UNDEFINED || $EMPTY', false],
    // && binds tighter than ||
    ['$A || $UNDEFINED && $UNDEFINED', true],
    ['($A || $UNDEFINED) && $UNDEFINED', false],
    ['$A == "x" && ($BR =~ /^main/ || $ONE == "1")', true],
    ['$A == "x" && ($BR =~ /^main/ || $ONE == "2")', false],
    ['((($A)))', true],
    ['null', false],
    ['"text"', true],
    ['$A == "x" || $B', true],
  ];
  for (const [expr, expected] of table) {
    it(`${expr} is ${expected}`, () => {
      assert.equal(Expression.parse(expr).truthful(vars), expected);
    });
  }

  it('runs patterns on RE2: no catastrophic backtracking, no lookaround', () => {
    const t0 = performance.now();
    assert.equal(Expression.parse('$MSG =~ /(a+)+$/').truthful({ MSG: 'a'.repeat(50_000) + '!' }), false);
    assert.ok(performance.now() - t0 < 2000);
    assert.equal(Expression.isValid('$A =~ /(?=x)/'), false);
    assert.equal(Expression.parse('$A =~ /^line2/').truthful({ A: 'line1\nline2' }), false);
    assert.equal(Expression.parse('$A =~ /1.line2/m').truthful({ A: 'line1\nline2' }), true);
  });

  it('refuses invalid syntax', () => {
    for (const bad of ['', '$A ==', '$A = "x"', '"open', '$A == "x" &&', '()', 'foo', '$A == /(/', '$A === "x"', '$ == "x"', '$A == "x")', '($A == "x"']) {
      assert.equal(Expression.isValid(bad), false, bad);
      assert.throws(() => Expression.parse(bad), /invalid expression syntax/);
    }
  });
});

describe('ci config: helpers', () => {
  it('parses durations', () => {
    assert.equal(parseDuration('30 minutes'), 1800);
    assert.equal(parseDuration('1h 30m'), 5400);
    assert.equal(parseDuration('3600'), 3600);
    assert.equal(parseDuration(90), 90);
    assert.equal(parseDuration('1 week'), 604800);
    assert.equal(parseDuration('2 days and 3 hours'), 2 * 86400 + 3 * 3600);
    assert.equal(parseDuration('1:30'), 90);
    assert.equal(parseDuration('soon'), null);
    assert.equal(parseDuration('5 parsecs'), null);
    assert.equal(parseDuration(''), null);
  });

  it('refuses durations too long to be a date (never Infinity or a RangeError later)', () => {
    assert.equal(parseDuration('1000 years'), MAX_DURATION_SECONDS);
    for (const huge of ['999999999999 years', '1001 years', '9'.repeat(400), `${'9'.repeat(400)} seconds`, '99999999999999999:00', 1e300, Infinity]) {
      assert.equal(parseDuration(huge), null, String(huge).slice(0, 40));
    }
  });

  it('reads a long duration text in one pass (300 KB of terms in milliseconds, not seconds)', () => {
    const started = performance.now();
    assert.equal(parseDuration('1s '.repeat(100_000)), 100_000);
    assert.equal(parseDuration(`${'1s and '.repeat(50_000)}x`), null);
    // Linear takes milliseconds; quadratic (the regression this guards against) takes minutes.
    // The bound is loose so that a loaded machine does not fail it.
    assert.ok(performance.now() - started < 5000, `${performance.now() - started} ms`);
  });

  it('matches globs like File.fnmatch with PATHNAME|DOTMATCH|EXTGLOB', () => {
    assert.ok(matchGlob('*.md', 'README.md'));
    assert.ok(!matchGlob('*.md', 'docs/README.md'));
    assert.ok(matchGlob('docs/**/*.md', 'docs/a/b/c.md'));
    assert.ok(matchGlob('docs/**/*.md', 'docs/c.md'));
    assert.ok(matchGlob('**/*.rb', 'lib/a.rb'));
    assert.ok(matchGlob('src/{a,b}.ts', 'src/b.ts'));
    assert.ok(!matchGlob('src/{a,b}.ts', 'src/c.ts'));
    assert.ok(matchGlob('*', '.gitignore'));
    assert.ok(matchGlob('/Dockerfile', 'Dockerfile'));
    assert.ok(matchGlob('file?.txt', 'file1.txt'));
    assert.ok(matchGlob('[a-c].txt', 'b.txt'));
    assert.ok(matchGlob('a(b)+c.txt', 'a(b)+c.txt'), 'regex characters are literal');
    const t0 = performance.now();
    assert.ok(!matchGlob('*a*a*a*a*a*a*a*a*a*a*a*b', 'a'.repeat(3000)));
    assert.ok(performance.now() - t0 < 2000, 'no backtracking');
  });

  it('recognises [skip ci] and [ci skip]', () => {
    assert.ok(commitMessageSkipsCi('Fix typo [skip ci]'));
    assert.ok(commitMessageSkipsCi('[CI SKIP] docs'));
    assert.ok(commitMessageSkipsCi('x\n\n[skip-ci]'));
    assert.ok(!commitMessageSkipsCi('skip ci please'));
  });
});

describe('ci config: structure and errors', () => {
  it('uses the default stages with .pre and .post', async () => {
    const p = await pipeline('a:\n  script: echo\n');
    assert.deepEqual(p.stages, ['.pre', 'build', 'test', 'deploy', '.post']);
    assert.equal(job(p, 'a').stage, 'test');
    assert.equal(job(p, 'a').stageIdx, 2);
  });

  it('takes declared stages (and the deprecated types)', async () => {
    const p = await pipeline('stages: [lint, ship]\na:\n  stage: ship\n  script: x\nb:\n  stage: .pre\n  script: x\n');
    assert.deepEqual(p.stages, ['.pre', 'lint', 'ship', '.post']);
    assert.equal(job(p, 'a').stageIdx, 2);
    assert.equal(job(p, 'b').stageIdx, 0);
    const t = await pipeline('types: [one]\na:\n  type: one\n  script: x\n');
    assert.equal(job(t, 'a').stage, 'one');
  });

  it('refuses a stage that does not exist', async () => {
    assert.equal(
      await firstError('stages: [build]\na:\n  stage: deploy\n  script: x\n'),
      'a job: chosen stage deploy does not exist; available stages are .pre, build, .post',
    );
  });

  it('needs at least one visible job', async () => {
    assert.deepEqual(await errorsOf('.hidden:\n  script: x\n'), ['jobs config should contain at least one visible job']);
    assert.deepEqual(await errorsOf('variables:\n  A: b\n'), ['jobs config should contain at least one visible job']);
  });

  it('excludes hidden jobs and never takes reserved words for jobs', async () => {
    const p = await pipeline(`
image: ruby
services: [postgres]
before_script: [echo b]
after_script: [echo a]
variables: { A: "1" }
cache: { paths: [vendor] }
.hidden: { script: x }
real: { script: x }
`);
    assert.deepEqual(names(p), ['real']);
  });

  it('wants script or trigger in a job', async () => {
    assert.equal(await firstError('a:\n  stage: test\n'), 'jobs:a config should implement a script: or a trigger: keyword');
    assert.equal(await firstError('a: echo\n'), 'jobs:a config should implement a script: or a trigger: keyword');
    assert.equal(await firstError('a:\n  script: []\n'), "jobs:a script can't be blank");
  });

  it('refuses unknown keys', async () => {
    assert.equal(await firstError('a:\n  script: x\n  scrpt: y\n  foo: 1\n'), 'jobs:a config contains unknown keys: scrpt, foo');
    assert.equal(await firstError('default:\n  stage: x\na:\n  script: x\n'), 'default config contains unknown keys: stage');
    assert.equal(await firstError('workflow:\n  foo: 1\na:\n  script: x\n'), 'workflow config contains unknown keys: foo');
  });

  it('refuses job names over 255 characters', async () => {
    const long = 'j'.repeat(256);
    assert.equal(await firstError(`${long}:\n  script: x\n`), `jobs:${long} name is too long (maximum is 255 characters)`);
    await pipeline(`${'j'.repeat(255)}:\n  script: x\n`);
  });

  it('reports bad YAML, a non-hash document and an empty file', async () => {
    assert.match(await firstError('a: [1,\nb'), /^\(<unknown>\): .* at line \d+ column \d+$/);
    assert.equal(await firstError('- a\n- b\n'), 'Invalid configuration format');
    assert.equal(await firstError('   \n'), 'Please provide content of .gitlab-ci.yml');
    assert.equal(await firstError('just a string'), 'Invalid configuration format');
  });

  it('collects several entry errors at once', async () => {
    const errors = await errorsOf('a:\n  script: x\n  when: sometimes\nb:\n  script: x\n  retry: 5\n');
    assert.deepEqual(errors, ['jobs:a when should be one of: on_success, on_failure, always, manual, delayed', 'jobs:b:retry config must be less than or equal to 2']);
  });
});

describe('ci config: scripts, images, variables, defaults', () => {
  it('flattens nested script arrays and keeps strings', async () => {
    const p = await pipeline(`
a:
  before_script: echo before
  script:
    - echo 1
    - [echo 2, [echo 3]]
  after_script: [echo after]
`);
    const a = job(p, 'a');
    assert.deepEqual(a.beforeScript, ['echo before']);
    assert.deepEqual(a.script, ['echo 1', 'echo 2', 'echo 3']);
    assert.deepEqual(a.afterScript, ['echo after']);
    assert.equal(await firstError('a:\n  script: {x: 1}\n'), 'jobs:a:script config should be a string or a nested array of strings up to 10 levels deep');
  });

  it('normalises image and services', async () => {
    const p = await pipeline(`
a:
  image: { name: "ruby:3", entrypoint: [""] }
  services:
    - postgres:16
    - name: redis:7
      alias: cache
      command: [redis-server, --appendonly, "yes"]
      entrypoint: [/bin/sh]
  script: x
b:
  image: alpine
  script: x
`);
    assert.deepEqual(job(p, 'a').image, { name: 'ruby:3', entrypoint: [''] });
    assert.deepEqual(job(p, 'a').services, [
      { name: 'postgres:16' },
      { name: 'redis:7', alias: 'cache', command: ['redis-server', '--appendonly', 'yes'], entrypoint: ['/bin/sh'] },
    ]);
    assert.deepEqual(job(p, 'b').image, { name: 'alpine' });
    assert.deepEqual(job(p, 'b').services, []);
    assert.equal(await firstError('a:\n  image: [x]\n  script: x\n'), 'jobs:a:image config should be a hash or a string');
    assert.equal(await firstError('a:\n  image: {name: x, foo: 1}\n  script: x\n'), 'jobs:a:image config contains unknown keys: foo');
    assert.equal(await firstError('a:\n  services: redis\n  script: x\n'), 'jobs:a:services config should be a array');
  });

  it('inherits default: and the deprecated globals, unless the job overrides or inherit says no', async () => {
    const p = await pipeline(`
default:
  image: node:20
  before_script: [npm ci]
  tags: [docker]
  retry: 1
  timeout: 10m
  interruptible: true
  artifacts: { paths: [out] }
after_script: [echo global-after]
a: { script: x }
b: { script: x, image: ruby, tags: [] }
c:
  script: x
  inherit: { default: false }
d:
  script: x
  inherit: { default: [image] }
`);
    const a = job(p, 'a');
    assert.deepEqual(a.image, { name: 'node:20' });
    assert.deepEqual(a.beforeScript, ['npm ci']);
    assert.deepEqual(a.afterScript, ['echo global-after']);
    assert.deepEqual(a.tags, ['docker']);
    assert.deepEqual(a.retry, { max: 1, when: ['always'], exitCodes: null });
    assert.equal(a.timeout, 600);
    assert.equal(a.interruptible, true);
    assert.deepEqual(a.artifacts?.paths, ['out']);
    assert.deepEqual(job(p, 'b').image, { name: 'ruby' });
    assert.deepEqual(job(p, 'b').tags, []);
    const c = job(p, 'c');
    assert.equal(c.image, null);
    assert.deepEqual(c.beforeScript, []);
    assert.deepEqual(c.tags, []);
    assert.equal(c.interruptible, null);
    const d = job(p, 'd');
    assert.deepEqual(d.image, { name: 'node:20' });
    assert.deepEqual(d.beforeScript, []);
  });

  it('merges global and job variables, honours inherit:variables and expand:false', async () => {
    const p = await pipeline(`
variables:
  G1: one
  G2: { value: two, description: "shown in run pipeline form" }
  N: 5
a:
  script: x
  variables:
    G1: overridden
    J: "$G2/x"
    R: { value: "$NOT_EXPANDED", expand: false }
b:
  script: x
  inherit: { variables: false }
c:
  script: x
  inherit: { variables: [G2] }
`);
    assert.deepEqual(job(p, 'a').variables, [
      { key: 'G1', value: 'overridden', raw: false },
      { key: 'G2', value: 'two', raw: false },
      { key: 'N', value: '5', raw: false },
      { key: 'J', value: '$G2/x', raw: false },
      { key: 'R', value: '$NOT_EXPANDED', raw: true },
    ]);
    assert.deepEqual(job(p, 'b').variables, []);
    assert.deepEqual(job(p, 'c').variables, [{ key: 'G2', value: 'two', raw: false }]);
    assert.deepEqual(p.variables.map((v) => v.key), ['G1', 'G2', 'N']);
  });

  it('refuses variables that are not key/value pairs', async () => {
    assert.equal(await firstError('a:\n  script: x\n  variables: [A]\n'), 'jobs:a:variables config should be a hash of key value pairs, value can be a hash');
    assert.equal(await firstError('variables:\n  A: true\na:\n  script: x\n'), 'variables config should be a hash of key value pairs, value can be a hash');
    assert.equal(await firstError('a:\n  script: x\n  variables:\n    A: { value: x, description: d }\n'), 'jobs:a:variables config uses invalid data keys: description');
  });
});

describe('ci config: when, allow_failure, retry, timeout, tags, artifacts, cache', () => {
  it('takes when and delayed start_in (at most a week)', async () => {
    const p = await pipeline(`
a: { script: x, when: manual }
b: { script: x, when: delayed, start_in: 30 minutes }
c: { script: x, when: always }
d: { script: x, when: on_failure }
`);
    assert.equal(job(p, 'a').when, 'manual');
    assert.equal(job(p, 'a').allowFailure, true, 'manual jobs may fail by default');
    assert.equal(job(p, 'b').when, 'delayed');
    assert.equal(job(p, 'b').startIn, 1800);
    assert.equal(job(p, 'c').when, 'always');
    assert.equal(job(p, 'd').when, 'on_failure');
    assert.equal(await firstError('a: { script: x, when: delayed, start_in: 8 days }'), 'jobs:a start in should not exceed the limit');
    assert.equal(await firstError('a: { script: x, when: delayed }'), 'jobs:a start in should be a duration');
    assert.equal(await firstError('a: { script: x, start_in: 1 hour }'), 'jobs:a start in must be blank');
    assert.equal(await firstError('a: { script: x, when: never }'), 'jobs:a when should be one of: on_success, on_failure, always, manual, delayed');
  });

  it('takes allow_failure as boolean or exit codes', async () => {
    const p = await pipeline(`
a: { script: x, allow_failure: true }
b: { script: x, allow_failure: { exit_codes: [137, 255] } }
c: { script: x, allow_failure: { exit_codes: 1 } }
d: { script: x, when: manual, allow_failure: false }
e: { script: x }
`);
    assert.equal(job(p, 'a').allowFailure, true);
    assert.equal(job(p, 'b').allowFailure, false);
    assert.deepEqual(job(p, 'b').allowFailureExitCodes, [137, 255]);
    assert.deepEqual(job(p, 'c').allowFailureExitCodes, [1]);
    assert.equal(job(p, 'd').allowFailure, false);
    assert.equal(job(p, 'e').allowFailure, false);
    assert.equal(job(p, 'e').allowFailureExitCodes, null);
    assert.equal(await firstError('a: { script: x, allow_failure: maybe }'), 'jobs:a allow failure should be a hash or a boolean value');
  });

  it('takes retry as 0-2 or {max, when}', async () => {
    const p = await pipeline(`
a: { script: x, retry: 2 }
b: { script: x, retry: { max: 1, when: [runner_system_failure, stuck_or_timeout_failure] } }
c: { script: x, retry: { max: 2, when: script_failure, exit_codes: [1] } }
`);
    assert.deepEqual(job(p, 'a').retry, { max: 2, when: ['always'], exitCodes: null });
    assert.deepEqual(job(p, 'b').retry, { max: 1, when: ['runner_system_failure', 'stuck_or_timeout_failure'], exitCodes: null });
    assert.deepEqual(job(p, 'c').retry, { max: 2, when: ['script_failure'], exitCodes: [1] });
    assert.equal(await firstError('a: { script: x, retry: 3 }'), 'jobs:a:retry config must be less than or equal to 2');
    assert.equal(await firstError('a: { script: x, retry: -1 }'), 'jobs:a:retry config must be greater than or equal to 0');
    assert.equal(await firstError('a: { script: x, retry: { max: 1, when: [nope] } }'), 'jobs:a:retry when contains unknown values: nope');
    assert.equal(await firstError('a: { script: x, retry: { max: 1, foo: 1 } }'), 'jobs:a:retry config contains unknown keys: foo');
  });

  it('takes timeout as a human duration', async () => {
    const p = await pipeline('a: { script: x, timeout: 1h 30m }\nb: { script: x, timeout: "3 hours" }\n');
    assert.equal(job(p, 'a').timeout, 5400);
    assert.equal(job(p, 'b').timeout, 10800);
    assert.equal(await firstError('a: { script: x, timeout: forever }'), 'jobs:a:timeout config should be a duration');
    // GitLab's limit is a month; beyond it (or beyond any date) is a config error, not an integer overflow.
    assert.equal(job(await pipeline('a: { script: x, timeout: 30 days }\n'), 'a').timeout, 2_592_000);
    assert.equal(await firstError('a: { script: x, timeout: 31 days }'), 'jobs:a:timeout config should not exceed the limit');
    assert.equal(await firstError('a: { script: x, timeout: 100 years }'), 'jobs:a:timeout config should not exceed the limit');
    assert.equal(await firstError('a: { script: x, timeout: 999999999999 years }'), 'jobs:a:timeout config should be a duration');
    assert.equal(await firstError(`a: { script: x, timeout: ${'9'.repeat(400)} }`), 'jobs:a:timeout config should be a duration');
  });

  it('takes tags, expanding variables', async () => {
    const p = await pipeline('variables: { ARCH: arm64 }\na: { script: x, tags: [docker, "$ARCH"] }\n');
    assert.deepEqual(job(p, 'a').tags, ['docker', 'arm64']);
    assert.equal(await firstError('a: { script: x, tags: docker }'), 'jobs:a:tags config should be an array of strings');
  });

  it('normalises artifacts', async () => {
    const p = await pipeline(`
a:
  script: x
  artifacts:
    name: "report-$CI_JOB_NAME"
    paths: [dist/, coverage/]
    exclude: ["dist/**/*.map"]
    expire_in: 1 week
    when: always
    untracked: true
    expose_as: Build output
    reports:
      junit: [junit.xml]
b:
  script: x
  artifacts: { paths: [x], expire_in: never }
`);
    assert.deepEqual(job(p, 'a').artifacts, {
      name: 'report-$CI_JOB_NAME',
      paths: ['dist/', 'coverage/'],
      exclude: ['dist/**/*.map'],
      untracked: true,
      when: 'always',
      expireIn: '1 week',
      expireInSeconds: 604800,
      expireNever: false,
      exposeAs: 'Build output',
      reports: { junit: ['junit.xml'] },
      public: null,
      access: null,
    });
    assert.equal(job(p, 'b').artifacts?.expireNever, true);
    assert.equal(job(p, 'b').artifacts?.when, 'on_success');
    assert.equal(await firstError('a: { script: x, artifacts: { path: [x] } }'), 'jobs:a:artifacts config contains unknown keys: path');
    assert.equal(await firstError('a: { script: x, artifacts: { paths: [x], when: sometimes } }'), 'jobs:a:artifacts when should be on_success, on_failure or always');
    assert.equal(await firstError('a: { script: x, artifacts: { paths: [x], expire_in: whenever } }'), 'jobs:a:artifacts expire in should be a duration');
    assert.equal(await firstError('a: { script: x, artifacts: { paths: [x], expire_in: 999999999999 years } }'), 'jobs:a:artifacts expire in should be a duration');
    assert.equal(await firstError('a: { script: x, when: delayed, start_in: 999999999999 years }'), 'jobs:a start in should be a duration');
  });

  it('normalises cache (single or list, with defaults)', async () => {
    const p = await pipeline(`
a:
  script: x
  cache: { key: deps, paths: [node_modules/] }
b:
  script: x
  cache:
    - key: { files: [package-lock.json], prefix: npm }
      paths: [.npm/]
      policy: pull
    - paths: [vendor/]
      when: always
`);
    assert.deepEqual(job(p, 'a').cache, [
      { key: 'deps', paths: ['node_modules/'], untracked: false, policy: 'pull-push', when: 'on_success', unprotect: false, fallbackKeys: [] },
    ]);
    const b = job(p, 'b').cache;
    assert.deepEqual(b[0].key, { files: ['package-lock.json'], prefix: 'npm' });
    assert.equal(b[0].policy, 'pull');
    assert.equal(b[1].key, 'default');
    assert.equal(b[1].when, 'always');
    assert.equal(await firstError('a: { script: x, cache: { pathz: [x] } }'), 'jobs:a:cache config contains unknown keys: pathz');
  });

  it('validates cache keys as GitLab does (/ and . / .. refused, key:files and files_commits, prefix, fallback_keys)', async () => {
    const p = await pipeline(`
a:
  script: x
  cache:
    - key: { files: [/Gemfile.lock, package.json] }
    - key: { files_commits: [yarn.lock], prefix: $CI_JOB_NAME }
    - key: 'a.b..c'
      fallback_keys: [one, two, three, four, five]
`);
    const c = job(p, 'a').cache;
    assert.deepEqual(c[0].key, { files: ['Gemfile.lock', 'package.json'] });
    assert.deepEqual(c[1].key, { filesCommits: ['yarn.lock'], prefix: '$CI_JOB_NAME' });
    assert.equal(c[2].key, 'a.b..c');
    assert.deepEqual(c[2].fallbackKeys, ['one', 'two', 'three', 'four', 'five']);
    const err = (cache: string) => firstError(`a: { script: x, cache: ${cache} }`);
    assert.equal(await err('{ key: a/b }'), 'jobs:a:cache:key config cannot contain the "/" character');
    assert.equal(await err('{ key: a%2Fb }'), 'jobs:a:cache:key config cannot contain the "/" character');
    assert.equal(await err("{ key: '.' }"), 'jobs:a:cache:key config cannot be "." or ".."');
    assert.equal(await err("{ key: '%2e%2E' }"), 'jobs:a:cache:key config cannot be "." or ".."');
    assert.equal(await err('{ key: [x] }'), 'jobs:a:cache:key config should be a hash, a string or a symbol');
    assert.equal(await err('{ key: { files: [] } }'), 'jobs:a:cache:key:files config requires at least 1 item');
    assert.equal(await err('{ key: { files: [a, b, c] } }'), 'jobs:a:cache:key:files config has too many items (maximum is 2)');
    assert.equal(await err('{ key: { files: a } }'), 'jobs:a:cache:key:files config should be an array of strings');
    assert.equal(await err('{ key: { prefix: p } }'), 'jobs:a:cache:key config must use exactly one of these keys: files, files_commits');
    assert.equal(await err('{ key: { files: [a], files_commits: [b] } }'), 'jobs:a:cache:key config must use exactly one of these keys: files, files_commits');
    assert.equal(await err('{ key: { files: [a], other: 1 } }'), 'jobs:a:cache:key config contains unknown keys: other');
    assert.equal(await err("{ key: { files: [a], prefix: '..' } }"), 'jobs:a:cache:key:prefix config cannot be "." or ".."');
    assert.equal(await err('{ key: { files: [a], prefix: x/y } }'), 'jobs:a:cache:key:prefix config cannot contain the "/" character');
    assert.equal(await err('{ key: k, fallback_keys: [a, b, c, d, e, f] }'), 'jobs:a:cache fallback keys has to many entries (maximum 5)');
    assert.equal(await err('{ key: k, fallback_keys: a }'), 'jobs:a:cache:fallback_keys config should be an array of strings');
  });

  it('takes coverage, environment, interruptible, resource_group and passes extra keywords through', async () => {
    const p = await pipeline(`
variables: { ENV: staging }
deploy:
  stage: deploy
  script: x
  coverage: '/Total: (\\d+)%/'
  environment:
    name: review/$CI_COMMIT_REF_NAME
    url: https://$CI_COMMIT_REF_NAME.example.com
    on_stop: stop
    auto_stop_in: 1 day
  interruptible: false
  resource_group: deploy-$ENV
  release: { tag_name: v1, description: d }
stop:
  stage: deploy
  script: x
  when: manual
  environment: { name: review/$CI_COMMIT_REF_NAME, action: stop }
`);
    const d = job(p, 'deploy');
    assert.equal(d.coverage, '/Total: (\\d+)%/');
    assert.deepEqual(d.environment, {
      name: 'review/main',
      url: 'https://main.example.com',
      action: 'start',
      onStop: 'stop',
      autoStopIn: '1 day',
      deploymentTier: null,
      kubernetes: null,
    });
    assert.equal(d.interruptible, false);
    assert.equal(d.resourceGroup, 'deploy-staging');
    assert.deepEqual(d.extra, { release: { tag_name: 'v1', description: 'd' } });
    assert.equal(job(p, 'stop').environment?.action, 'stop');
    assert.equal(await firstError('a: { script: x, coverage: "Total" }'), 'jobs:a:coverage config must be a regular expression');
    assert.equal(await firstError('a: { script: x, environment: { name: e, action: destroy } }'), 'jobs:a:environment action should be start, stop, prepare, verify, or access');
    assert.equal(await firstError('a: { script: x, environment: { name: e, on_stop: nope } }'), 'a job: on_stop job nope is not defined');
    assert.equal(await firstError('a: { script: x, interruptible: sometimes }'), 'jobs:a:interruptible config should be a boolean value');
    assert.equal(await firstError('a: { script: x, resource_group: [x] }'), 'jobs:a resource group should be a string');
  });

  it('keeps the file order in index', async () => {
    const p = await pipeline('z: { script: x }\na: { script: x, stage: build }\nm: { script: x }\n');
    assert.deepEqual(p.jobs.map((j) => [j.name, j.index]), [['z', 0], ['a', 1], ['m', 2]]);
  });

  it('gives plain JSON', async () => {
    const p = await pipeline('a: { script: x, rules: [{ if: $CI_COMMIT_BRANCH }], needs: [] }\n');
    assert.deepEqual(JSON.parse(JSON.stringify(p)), p);
  });
});

describe('ci config: rules', () => {
  it('takes the first matching rule and excludes a job when none matches', async () => {
    const yaml = `
a:
  script: x
  rules:
    - if: $CI_COMMIT_BRANCH == "main"
      when: manual
    - if: $CI_COMMIT_TAG
      when: always
b:
  script: x
  rules:
    - if: $CI_COMMIT_BRANCH == "nope"
c:
  script: x
  rules:
    - when: never
d:
  script: x
`;
    const main = await pipeline(yaml);
    assert.deepEqual(names(main), ['a', 'd']);
    assert.equal(job(main, 'a').when, 'manual');
    assert.equal(job(main, 'a').allowFailure, false, 'a rule that makes a job manual makes it block (GitLab)');
    const tag = await pipeline(yaml, { ref: 'v1.0', tag: true });
    assert.equal(job(tag, 'a').when, 'always');
    assert.equal(job(tag, 'a').allowFailure, false);
    const other = await pipeline(yaml, { ref: 'feature' });
    assert.deepEqual(names(other), ['d']);
  });

  it('uses the job when as the rule default and applies rule allow_failure, variables, needs, start_in, interruptible', async () => {
    const p = await pipeline(`
build: { stage: build, script: x }
lint: { stage: build, script: x }
a:
  script: x
  when: manual
  variables: { LEVEL: low }
  needs: [build]
  rules:
    - if: $CI_COMMIT_BRANCH == "main"
      allow_failure: false
      variables: { LEVEL: high, EXTRA: "1" }
      needs: [lint]
      interruptible: true
b:
  script: x
  rules:
    - when: delayed
      start_in: 2 hours
`);
    const a = job(p, 'a');
    assert.equal(a.when, 'manual');
    assert.equal(a.allowFailure, false);
    assert.deepEqual(a.variables, [
      { key: 'LEVEL', value: 'high', raw: false },
      { key: 'EXTRA', value: '1', raw: false },
    ]);
    assert.deepEqual(a.needs, [{ name: 'lint', artifacts: true, optional: false }]);
    assert.equal(a.interruptible, true);
    assert.equal(job(p, 'b').when, 'delayed');
    assert.equal(job(p, 'b').startIn, 7200);
  });

  it('evaluates rules:if with the job and global variables, the pipeline ones winning', async () => {
    const yaml = `
variables: { DEPLOY: "no", TARGET: "prod-$REGION" }
a:
  script: x
  variables: { REGION: eu }
  rules:
    - if: $TARGET == "prod-eu" && $DEPLOY == "yes"
`;
    const none = await compile(yaml);
    assert.equal(none.kind, 'skipped');
    const p = await pipeline(yaml, { variables: { DEPLOY: 'yes' } });
    assert.deepEqual(names(p), ['a']);
  });

  it('evaluates rules:changes (null changes = true) and rules:exists', async () => {
    const yaml = `
variables: { DIR: docs }
docs:
  script: x
  rules:
    - changes: ["$DIR/**/*.md"]
code:
  script: x
  rules:
    - changes: { paths: [src/**/*], compare_to: refs/heads/main }
docker:
  script: x
  rules:
    - exists: [Dockerfile]
`;
    const seenGlobs: string[][] = [];
    const compareTos: Array<string | undefined> = [];
    const p = await pipeline(yaml, {
      changedPaths: async (c) => {
        compareTos.push(c);
        return ['docs/guide/intro.md'];
      },
      fileExists: async (globs) => {
        seenGlobs.push(globs);
        return false;
      },
    });
    assert.deepEqual(names(p), ['docs']);
    assert.deepEqual(seenGlobs, [['Dockerfile']]);
    assert.deepEqual(compareTos.sort(), ['refs/heads/main', undefined].sort());
    const fresh = await pipeline(yaml, { changedPaths: async () => null, fileExists: async () => true });
    assert.deepEqual(names(fresh), ['docs', 'code', 'docker']);
  });

  it('refuses bad rules', async () => {
    assert.equal(await firstError('a: { script: x, rules: [{ if: "$A = 1" }] }'), 'jobs:a:rules:rule if invalid expression syntax');
    assert.equal(await firstError('a: { script: x, rules: [{ iff: $A }] }'), 'jobs:a:rules:rule config contains unknown keys: iff');
    assert.equal(await firstError('a: { script: x, rules: [{ when: later }] }'), 'jobs:a:rules:rule when unknown value: later');
    assert.equal(await firstError('a: { script: x, rules: [{ when: delayed }] }'), "jobs:a:rules:rule start in can't be blank");
    assert.equal(await firstError('a: { script: x, rules: [{ when: manual, start_in: 1h }] }'), 'jobs:a:rules:rule config contains disallowed keys: start_in');
    assert.equal(await firstError('a: { script: x, rules: { if: $A } }'), 'jobs:a rules should be an array containing hashes and arrays of hashes');
    assert.equal(await firstError('a: { script: x, rules: [{ if: $A }], only: [main] }'), 'jobs:a config key may not be used with `rules`: only');
  });

  it('warns when the last rule is a bare when without workflow:rules', async () => {
    const p = await pipeline('a: { script: x, rules: [{ if: $A, when: never }, { when: on_success }] }\n');
    assert.equal(p.warnings.length, 1);
    assert.match(p.warnings[0], /^jobs:a may allow multiple pipelines to run for a single action due to `rules:when` clause with no `workflow:rules`/);
    const q = await pipeline('workflow: { rules: [{ when: always }] }\na: { script: x, rules: [{ when: on_success }] }\n');
    assert.deepEqual(q.warnings, []);
  });

  it('flattens nested rules (as !reference produces them)', async () => {
    const p = await pipeline(`
.rules:
  rules:
    - if: $CI_COMMIT_BRANCH == "nope"
a:
  script: x
  rules:
    - !reference [.rules, rules]
    - if: $CI_COMMIT_BRANCH == "main"
      when: manual
`);
    assert.equal(job(p, 'a').when, 'manual');
  });
});

describe('ci config: only/except', () => {
  const yaml = `
default_only: { script: x }
branches: { script: x, only: [branches] }
tags_only: { script: x, only: [tags] }
main_only: { script: x, only: [main] }
release: { script: x, only: ["/^release-.*$/"] }
mrs: { script: x, only: [merge_requests] }
not_main: { script: x, except: [main] }
sched: { script: x, only: [schedules] }
api_web: { script: x, only: [api, web] }
vars: { script: x, only: { variables: [$DEPLOY == "1"] } }
refs_and_vars: { script: x, only: { refs: [main], variables: [$DEPLOY] } }
scoped: { script: x, only: ["main@group/project"] }
scoped_other: { script: x, only: ["main@other/project"] }
`;
  it('matches refs keywords, names and regexes on a branch push', async () => {
    const p = await pipeline(yaml);
    assert.deepEqual(names(p), ['default_only', 'branches', 'main_only', 'scoped']);
  });

  it('on a tag', async () => {
    const p = await pipeline(yaml, { ref: 'release-1', tag: true });
    assert.deepEqual(names(p), ['default_only', 'tags_only', 'release', 'not_main']);
  });

  it('in a merge request pipeline the default only: [branches, tags] does not match', async () => {
    const p = await pipeline(yaml, { ref: 'feature', source: 'merge_request_event' });
    // not_main has the default only: [branches, tags] too
    assert.deepEqual(names(p), ['mrs']);
  });

  it('by source and variables', async () => {
    assert.deepEqual(names(await pipeline(yaml, { source: 'schedule', variables: { DEPLOY: '1' } })), [
      'default_only', 'branches', 'main_only', 'not_main'.replace('not_main', 'sched'), 'vars', 'refs_and_vars', 'scoped',
    ]);
    assert.ok(names(await pipeline(yaml, { source: 'web' })).includes('api_web'));
    assert.ok(names(await pipeline(yaml, { source: 'api' })).includes('api_web'));
  });

  it('takes only:changes and except:variables', async () => {
    const y = `
a: { script: x, only: { changes: ["*.md"] } }
b: { script: x, except: { variables: [$SKIP_B] } }
c: { script: x }
`;
    assert.deepEqual(names(await pipeline(y, { changedPaths: async () => ['src/x.ts'], variables: { SKIP_B: 'yes' } })), ['c']);
    assert.deepEqual(names(await pipeline(y, { changedPaths: async () => ['README.md'] })), ['a', 'b', 'c']);
  });

  it('drops the default only when workflow:rules exist', async () => {
    const p = await pipeline('workflow: { rules: [{ when: always }] }\na: { script: x }\n', { source: 'merge_request_event' });
    assert.deepEqual(names(p), ['a']);
  });

  it('refuses bad only', async () => {
    assert.equal(await firstError('a: { script: x, only: { foo: [x] } }'), 'jobs:a:only config contains unknown keys: foo');
    assert.equal(await firstError('a: { script: x, only: { refs: main } }'), 'jobs:a:only:refs config should be an array of strings or regular expressions');
    assert.equal(await firstError('a: { script: x, only: { variables: ["$A = 1"] } }'), 'jobs:a:only:variables config should be an array of valid expressions');
  });
});

describe('ci config: needs and dependencies', () => {
  it('takes needs as names or hashes, and needs: [] as explicit', async () => {
    const p = await pipeline(`
build: { stage: build, script: x }
lint: { stage: build, script: x }
test:
  script: x
  needs: [build, { job: lint, artifacts: false }, { job: maybe, optional: true }]
quick:
  script: x
  needs: []
late: { script: x }
`);
    assert.deepEqual(job(p, 'test').needs, [
      { name: 'build', artifacts: true, optional: false },
      { name: 'lint', artifacts: false, optional: false },
    ]);
    assert.equal(job(p, 'test').schedulingType, 'dag');
    assert.deepEqual(job(p, 'quick').needs, []);
    assert.equal(job(p, 'quick').schedulingType, 'dag');
    assert.equal(job(p, 'late').needs, null);
    assert.equal(job(p, 'late').schedulingType, 'stage');
  });

  it('allows needs within the same stage', async () => {
    const p = await pipeline('a: { script: x }\nb: { script: x, needs: [a] }\n');
    assert.deepEqual(job(p, 'b').needs?.map((n) => n.name), ['a']);
  });

  it('refuses unknown needs, later stages, duplicates, cycles and more than 50', async () => {
    assert.equal(await firstError('a: { script: x, needs: [nope] }'), 'a job: undefined need: nope');
    assert.equal(await firstError('a: { script: x, needs: [.hidden] }\n.hidden: { script: x }'), 'a job: undefined need: .hidden');
    assert.equal(
      await firstError('build: { stage: build, script: x, needs: [test] }\ntest: { stage: test, script: x }\n'),
      'build job: need test is not defined in current or prior stages',
    );
    assert.equal(await firstError('a: { script: x }\nb: { script: x, needs: [a, a] }'), 'b has the following needs duplicated: a.');
    assert.equal(await firstError('a: { script: x, needs: [b] }\nb: { script: x, needs: [c] }\nc: { script: x, needs: [a] }\n'), 'The pipeline has circular dependencies');
    const many = Array.from({ length: 51 }, (_, i) => `j${i}: { stage: build, script: x }`).join('\n');
    const list = Array.from({ length: 51 }, (_, i) => `j${i}`).join(', ');
    assert.equal(
      await firstError(`${many}\nt: { script: x, needs: [${list}] }\n`),
      't: one job can only need 50 others, but you have listed 51. See needs keyword documentation for more details',
    );
    assert.equal(await firstError('a: { script: x, needs: "b" }\nb: { script: x }'), 'jobs:a:needs config can only be a Hash or an Array');
  });

  it('refuses needs to a job that rules left out, unless optional', async () => {
    const yaml = `
build: { stage: build, script: x, rules: [{ if: $CI_COMMIT_TAG }] }
test: { script: x, needs: [build] }
`;
    assert.deepEqual(await errorsOf(yaml), [
      "'test' job needs 'build' job, but 'build' does not exist in the pipeline. This might be because of the only, except, or rules keywords. To need a job that sometimes does not exist in the pipeline, use needs:optional.",
    ]);
    const p = await pipeline(yaml.replace('needs: [build]', 'needs: [{ job: build, optional: true }]'));
    assert.deepEqual(job(p, 'test').needs, []);
    await pipeline(yaml, { ref: 'v1', tag: true });
  });

  it('checks dependencies', async () => {
    const p = await pipeline('build: { stage: build, script: x }\ntest: { script: x, dependencies: [build] }\nnone: { script: x, dependencies: [] }\n');
    assert.deepEqual(job(p, 'test').dependencies, ['build']);
    assert.deepEqual(job(p, 'none').dependencies, []);
    assert.equal(job(p, 'build').dependencies, null);
    assert.equal(await firstError('a: { script: x, dependencies: [nope] }'), 'a job: undefined dependency: nope');
    assert.equal(
      await firstError('a: { stage: build, script: x, dependencies: [b] }\nb: { stage: test, script: x }'),
      'a job: dependency b is not defined in current or prior stages',
    );
    assert.equal(
      await firstError('a: { stage: build, script: x }\nc: { stage: build, script: x }\nb: { script: x, needs: [a], dependencies: [c] }'),
      'jobs:b dependencies the c should be part of needs',
    );
    assert.equal(await firstError('a: { script: x, dependencies: build }'), 'jobs:a dependencies should be an array of strings');
  });
});

describe('ci config: parallel', () => {
  it('expands parallel: N into "name i/N" jobs', async () => {
    const p = await pipeline('rspec: { script: x, parallel: 3 }\n');
    assert.deepEqual(names(p), ['rspec 1/3', 'rspec 2/3', 'rspec 3/3']);
    assert.deepEqual(job(p, 'rspec 2/3').parallel, { index: 2, total: 3, matrix: null });
    assert.equal(await firstError('a: { script: x, parallel: 201 }'), 'jobs:a:parallel config must be less than or equal to 200');
    assert.equal(await firstError('a: { script: x, parallel: 0 }'), 'jobs:a:parallel config must be greater than or equal to 1');
    assert.equal(await firstError('a: { script: x, parallel: many }'), 'jobs:a:parallel should be an integer or a hash');
  });

  it('expands parallel:matrix into "name: [a, b]" jobs with their variables', async () => {
    const p = await pipeline(`
build:
  script: x
  variables: { KEEP: "1" }
  parallel:
    matrix:
      - PROVIDER: aws
        STACK: [monitoring, app]
      - PROVIDER: [gcp]
        STACK: data
`);
    assert.deepEqual(names(p), ['build: [aws, monitoring]', 'build: [aws, app]', 'build: [gcp, data]']);
    const j = job(p, 'build: [aws, app]');
    assert.deepEqual(j.parallel, { index: 2, total: 3, matrix: { PROVIDER: 'aws', STACK: 'app' } });
    assert.deepEqual(j.variables, [
      { key: 'KEEP', value: '1', raw: false },
      { key: 'PROVIDER', value: 'aws', raw: false },
      { key: 'STACK', value: 'app', raw: false },
    ]);
    const big = `a:\n  script: x\n  parallel:\n    matrix:\n      - A: [${Array.from({ length: 15 }, (_, i) => i).join(', ')}]\n        B: [${Array.from({ length: 14 }, (_, i) => i).join(', ')}]\n`;
    assert.equal(await firstError(big), 'jobs:a:parallel:matrix config generates too many jobs (maximum is 200)');
  });

  it('expands needs and dependencies on parallel jobs', async () => {
    const p = await pipeline(`
build: { stage: build, script: x, parallel: 2 }
compile:
  stage: build
  script: x
  parallel: { matrix: [{ OS: [linux, mac] }] }
test:
  script: x
  needs: [build, { job: compile, parallel: { matrix: [{ OS: mac }] } }]
  dependencies: [build, compile]
`);
    assert.deepEqual(job(p, 'test').needs?.map((n) => n.name), ['build 1/2', 'build 2/2', 'compile: [mac]']);
    assert.deepEqual(job(p, 'test').dependencies, ['build 1/2', 'build 2/2', 'compile: [linux]', 'compile: [mac]'].filter((d) => d !== 'compile: [linux]' || true));
    assert.equal(
      await firstError('b: { stage: build, script: x, parallel: { matrix: [{ OS: [linux] }] } }\nt: { script: x, needs: [{ job: b, parallel: { matrix: [{ OS: win }] } }] }'),
      't job: undefined need: b: [win]',
    );
  });
});

describe('ci config: include:local', () => {
  it('merges included files under the including file, nested, in order', async () => {
    const files = {
      'ci/base.yml': 'include: ci/deep.yml\nvariables: { FROM: base, BASE: "1" }\n.tmpl: { script: [from-base] }\nbase_job: { script: x }\n',
      'ci/deep.yml': 'deep_job: { script: x }\nvariables: { FROM: deep, DEEP: "1" }\n',
      'ci/other.yml': 'other_job: { script: x, stage: build }\n',
    };
    const p = await pipeline(
      `
include:
  - local: /ci/base.yml
  - ci/other.yml
variables: { FROM: main }
main_job: { extends: .tmpl }
base_job: { script: overridden }
`,
      {},
      files,
    );
    assert.deepEqual(names(p), ['deep_job', 'base_job', 'other_job', 'main_job']);
    assert.deepEqual(job(p, 'main_job').script, ['from-base']);
    assert.deepEqual(job(p, 'base_job').script, ['overridden']);
    assert.deepEqual(p.variables, [
      { key: 'FROM', value: 'main', raw: false },
      { key: 'DEEP', value: '1', raw: false },
      { key: 'BASE', value: '1', raw: false },
    ]);
    assert.deepEqual(p.includes.map((i) => i.location), ['ci/base.yml', 'ci/deep.yml', 'ci/other.yml']);
    assert.equal(p.includes[0].contextSha, SHA);
  });

  it('says which file is missing, empty or not YAML', async () => {
    assert.equal(await firstError('include: nope.yml\na: { script: x }'), 'Local file `nope.yml` does not exist!');
    assert.equal(await firstError('include: e.yml\na: { script: x }', {}, { 'e.yml': '\n' }), 'Local file `e.yml` is empty!');
    assert.equal(await firstError('include: b.yml\na: { script: x }', {}, { 'b.yml': 'a: [1,\n' }), 'Included file `b.yml` does not have valid YAML syntax!');
    assert.equal(await firstError('include: b.txt\na: { script: x }', {}, { 'b.txt': 'x: 1' }), 'Included file `b.txt` does not have YAML extension!');
    assert.equal(await firstError('include: { local: a.yml, remote: "https://x/y.yml" }\na: { script: x }'), 'Include `{"local":"a.yml","remote":"https://x/y.yml"}` needs to match exactly one accessor!');
    assert.match(await firstError('include: "https://example.com/ci.yml"\na: { script: x }'), /not supported/);
  });

  it('stops include loops at 150 includes', async () => {
    assert.equal(await firstError('include: loop.yml\na: { script: x }', {}, { 'loop.yml': 'include: loop.yml\n' }), 'Maximum of 150 nested includes are allowed!');
  });

  it('expands variables in paths and honours include:rules', async () => {
    const files = { 'ci/main.yml': 'm: { script: x }\n', 'ci/tag.yml': 't: { script: x }\n' };
    const yaml = `
include:
  - local: ci/$CI_DEFAULT_BRANCH.yml
  - local: ci/tag.yml
    rules:
      - if: $CI_COMMIT_TAG
a: { script: x }
`;
    assert.deepEqual(names(await pipeline(yaml, {}, files)), ['m', 'a']);
    assert.deepEqual(names(await pipeline(yaml, { ref: 'v1', tag: true }, files)), ['m', 't', 'a']);
  });
});

describe('ci config: extends, anchors, !reference', () => {
  it('resolves multi-level and multiple extends with GitLab deep merge', async () => {
    const p = await pipeline(`
.base:
  image: ruby
  variables: { A: base, B: base }
  script: [base]
  tags: [one, two]
.middle:
  extends: .base
  variables: { B: middle }
  tags: [three]
.other:
  variables: { C: other }
  before_script: [other]
job:
  extends: [.middle, .other]
  variables: { D: job }
`);
    const j = job(p, 'job');
    assert.deepEqual(j.image, { name: 'ruby' });
    assert.deepEqual(j.script, ['base']);
    assert.deepEqual(j.tags, ['three'], 'arrays are replaced, not merged');
    assert.deepEqual(j.beforeScript, ['other']);
    assert.deepEqual(Object.fromEntries(j.variables.map((v) => [v.key, v.value])), { A: 'base', B: 'middle', C: 'other', D: 'job' });
  });

  it('refuses unknown bases, cycles and nesting deeper than 10', async () => {
    assert.equal(await firstError('a: { extends: .nope, script: x }'), 'a: unknown keys in `extends` (.nope)');
    assert.equal(await firstError('.a: { extends: .b }\n.b: { extends: .a }\nj: { extends: .a, script: x }'), '.a: circular dependency detected in `extends`');
    assert.equal(await firstError('.s: x\na: { extends: .s, script: x }'), 'a: invalid base hashes in `extends` (.s)');
    const chain = (n: number) =>
      Array.from({ length: n }, (_, i) => (i === 0 ? '.l0: { script: x }' : `.l${i}: { extends: .l${i - 1} }`)).join('\n') + `\njob: { extends: .l${n - 1} }\n`;
    await pipeline(chain(11)); // job extends .l10 ... .l1 extends .l0: 11 levels
    assert.equal(await firstError(chain(12)), '.l1: nesting too deep in `extends`');
  });

  it('resolves anchors, aliases and merge keys', async () => {
    const p = await pipeline(`
.defaults: &defaults
  image: alpine
  tags: [small]
.scripts: &scripts
  - echo one
  - echo two
a:
  <<: *defaults
  script: *scripts
b:
  <<: *defaults
  tags: [big]
  script:
    - *scripts
    - echo three
`);
    assert.deepEqual(job(p, 'a').image, { name: 'alpine' });
    assert.deepEqual(job(p, 'a').script, ['echo one', 'echo two']);
    assert.deepEqual(job(p, 'b').tags, ['big']);
    assert.deepEqual(job(p, 'b').script, ['echo one', 'echo two', 'echo three']);
  });

  it('resolves !reference tags, also across included files and nested references', async () => {
    const files = { 'shared.yml': '.setup:\n  script: [setup-1, setup-2]\n  variables: { S: "1" }\n' };
    const p = await pipeline(
      `
include: shared.yml
.more:
  script:
    - !reference [.setup, script]
    - more
job:
  variables: !reference [.setup, variables]
  script:
    - !reference [.more, script]
    - main
`,
      {},
      files,
    );
    assert.deepEqual(job(p, 'job').script, ['setup-1', 'setup-2', 'more', 'main']);
    assert.deepEqual(job(p, 'job').variables, [{ key: 'S', value: '1', raw: false }]);
    assert.equal(await firstError('a:\n  script: !reference [.nope, script]\n'), '!reference [".nope", "script"] could not be found');
    assert.match(
      await firstError('.a:\n  script: !reference [.b, script]\n.b:\n  script: !reference [.a, script]\nj: { script: !reference [.a, script] }\n'),
      /^!reference \[".[ab]", "script"\] is part of a circular chain$/,
    );
  });
});

describe('ci config: workflow', () => {
  const yaml = `
workflow:
  name: "Pipeline for $CI_COMMIT_REF_NAME ($KIND)"
  rules:
    - if: $CI_COMMIT_TAG
      when: never
    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH
      variables: { KIND: release, DEPLOY: "yes" }
    - if: $CI_PIPELINE_SOURCE == "web"
variables: { KIND: normal, DEPLOY: "no" }
a:
  script: x
  rules:
    - if: $DEPLOY == "yes"
b: { script: x }
`;
  it('creates the pipeline when a rule matches, with its variables and name', async () => {
    const p = await pipeline(yaml);
    assert.equal(p.workflow.name, 'Pipeline for main (release)');
    assert.deepEqual(p.workflow.variables, { KIND: 'release', DEPLOY: 'yes' });
    assert.deepEqual(names(p), ['a', 'b']);
    assert.deepEqual(job(p, 'b').variables, [
      { key: 'KIND', value: 'release', raw: false },
      { key: 'DEPLOY', value: 'yes', raw: false },
    ]);
    const web = await pipeline(yaml, { ref: 'feature', source: 'web' });
    assert.equal(web.workflow.name, 'Pipeline for feature (normal)');
    assert.deepEqual(names(web), ['b']);
  });

  it('creates no pipeline when no rule matches or the match says never', async () => {
    for (const over of [{ ref: 'feature' }, { ref: 'v1', tag: true }]) {
      const r = await compile(yaml, over);
      assert.deepEqual(r, { ok: true, kind: 'skipped', reason: 'workflow_rules', message: 'Pipeline filtered out by workflow rules.', warnings: [] });
    }
  });

  it('refuses bad workflow rules', async () => {
    assert.equal(await firstError('workflow: { rules: [{ when: manual }] }\na: { script: x }'), 'workflow:rules:rule when unknown value: manual');
    assert.equal(await firstError('workflow: { rules: [{ if: "$A ==" }] }\na: { script: x }'), 'workflow:rules:rule if invalid expression syntax');
  });
});

describe('ci config: pipelines that are not created', () => {
  it('[skip ci] skips without reading the file', async () => {
    const r = await compile('this: is: not: yaml', { commitMessage: 'docs [skip ci]' });
    assert.equal(r.kind, 'skipped');
    assert.equal((r as { reason: string }).reason, 'skip_ci');
    assert.equal((await compile('a: { script: x }', { skipCi: true })).kind, 'skipped');
  });

  it('no job left by rules, or only .pre/.post jobs', async () => {
    const r = await compile('a: { script: x, rules: [{ if: $NOPE }] }');
    assert.equal(r.kind, 'skipped');
    assert.equal((r as { reason: string }).reason, 'no_jobs');
    assert.match((r as { message: string }).message, /^Pipeline will not run for the selected trigger/);
    const edge = await compile('a: { stage: .pre, script: x }\nb: { stage: .post, script: x }');
    assert.equal((edge as { reason: string }).reason, 'no_jobs');
  });
});

describe('ci config: trigger (bridges)', () => {
  it('compiles child and multi-project triggers', async () => {
    const p = await pipeline(`
variables: { DOWNSTREAM: group/deployer }
generate: { stage: build, script: x, artifacts: { paths: [gen.yml] } }
child:
  trigger:
    include: ci/child.yml
    strategy: depend
children:
  trigger:
    include:
      - local: /ci/a.yml
      - artifact: gen.yml
        job: generate
    forward: { pipeline_variables: true }
deploy:
  stage: deploy
  trigger:
    project: $DOWNSTREAM
    branch: stable
    strategy: depend
  variables: { ENV: prod }
short: { stage: deploy, trigger: group/other }
`);
    const child = job(p, 'child');
    assert.equal(child.kind, 'bridge');
    assert.deepEqual(child.trigger, { kind: 'child', include: [{ local: 'ci/child.yml' }], strategy: 'depend', forward: { yamlVariables: true, pipelineVariables: false } });
    assert.deepEqual(child.script, []);
    assert.equal(child.image, null);
    assert.deepEqual(job(p, 'children').trigger, {
      kind: 'child',
      include: [{ local: 'ci/a.yml' }, { artifact: 'gen.yml', job: 'generate' }],
      strategy: null,
      forward: { yamlVariables: true, pipelineVariables: true },
    });
    assert.deepEqual(job(p, 'deploy').trigger, {
      kind: 'multi_project',
      project: 'group/deployer',
      branch: 'stable',
      strategy: 'depend',
      forward: { yamlVariables: true, pipelineVariables: false },
    });
    assert.equal(job(p, 'short').trigger?.kind, 'multi_project');
  });

  it('refuses bad triggers', async () => {
    assert.equal(await firstError('a: { trigger: { include: x.yml, strategy: wait } }'), 'jobs:a:trigger strategy should be depend');
    assert.equal(await firstError('a: { trigger: { branch: x } }'), 'jobs:a:trigger config must specify either project or include');
    assert.equal(await firstError('a: { trigger: p/q, image: x }'), 'jobs:a config contains unknown keys: image');
    assert.equal(
      await firstError('a: { stage: build, trigger: { include: [{ artifact: x.yml, job: gen }] } }\ngen: { stage: test, script: x }'),
      'a job: dependency gen is not defined in current or prior stages',
    );
  });
});

describe('ci config: lint', () => {
  it('gives merged_yaml, includes and jobs', async () => {
    const r = await lintConfig({
      yaml: 'include: extra.yml\n.t: &t { script: [x] }\nbuild:\n  <<: *t\n  stage: build\ntest:\n  extends: .t\n  only: [main]\n',
      readLocalFile: async (p) => (p === 'extra.yml' ? 'extra: { script: make, tags: [docker] }\n' : null),
      sha: SHA,
    });
    assert.equal(r.valid, true);
    assert.deepEqual(r.errors, []);
    assert.doesNotMatch(r.mergedYaml, /include|&t|\*t|<</);
    assert.match(r.mergedYaml, /^extra:\n {2}script: make\n/);
    assert.match(r.mergedYaml, /test:\n {2}script:\n {4}- x\n {2}extends: \.t\n/);
    assert.deepEqual(r.includes, [{ type: 'local', location: 'extra.yml', extra: {}, contextSha: SHA }]);
    assert.deepEqual(
      r.jobs.map((j) => [j.name, j.stage, j.tag_list, j.only]),
      [
        ['extra', 'test', ['docker'], { refs: ['branches', 'tags'] }],
        ['build', 'build', [], { refs: ['branches', 'tags'] }],
        ['test', 'test', [], { refs: ['main'] }],
      ],
    );
  });

  it('reports errors, and with a simulated pipeline the rules-dependent ones', async () => {
    const bad = await lintConfig({ yaml: 'a: { script: x, stage: nope }', readLocalFile: async () => null });
    assert.equal(bad.valid, false);
    assert.deepEqual(bad.errors, ['a job: chosen stage nope does not exist; available stages are .pre, build, test, deploy, .post']);
    assert.match(bad.mergedYaml, /stage: nope/);
    const yaml = 'b: { stage: build, script: x, rules: [{ if: $CI_COMMIT_TAG }] }\nt: { script: x, needs: [b] }\n';
    const staticOk = await lintConfig({ yaml, readLocalFile: async () => null });
    assert.equal(staticOk.valid, true);
    const dry = await lintConfig({ yaml, readLocalFile: async () => null, simulate: { ref: 'main', tag: false, sha: SHA, source: 'push', variables: { CI_COMMIT_BRANCH: 'main' } } });
    assert.equal(dry.valid, false);
    assert.match(dry.errors[0], /^'t' job needs 'b' job/);
  });
});

describe('ci config: size', () => {
  it('compiles a 300-job configuration (the time is printed, not asserted: speed belongs to npm run bench)', async () => {
    const lines = ['stages: [build, test, deploy]', 'variables: { GLOBAL: "1" }', '.tmpl:', '  image: node:20', '  before_script: [npm ci]', '  retry: 1'];
    for (let i = 0; i < 100; i++) lines.push(`build-${i}:`, '  extends: .tmpl', '  stage: build', `  script: [make part-${i}]`, '  artifacts: { paths: [dist/] }');
    for (let i = 0; i < 100; i++) {
      lines.push(`test-${i}:`, '  extends: .tmpl', '  stage: test', `  needs: [build-${i}]`, '  script: [npm test]', '  rules:', '    - if: $CI_COMMIT_BRANCH == "main"', '    - changes: ["src/**/*"]');
    }
    for (let i = 0; i < 100; i++) lines.push(`deploy-${i}:`, '  stage: deploy', '  script: [deploy]', '  environment: { name: "env-' + i + '" }', '  only: [main, /^release/]');
    const yaml = lines.join('\n') + '\n';
    await compile(yaml); // warm-up
    const t0 = performance.now();
    const p = await pipeline(yaml, { changedPaths: async () => ['src/a.ts'] });
    const ms = performance.now() - t0;
    console.log(`# 300-job configuration (${yaml.length} bytes) compiled in ${ms.toFixed(1)} ms`);
    assert.equal(p.jobs.length, 300);
  });
});

describe('ci config: odds and ends', () => {
  it('skips a spec: header document', async () => {
    const p = await pipeline('spec:\n  inputs:\n    env: { default: x }\n---\na: { script: x }\n');
    assert.deepEqual(names(p), ['a']);
    assert.match(await firstError('a: { script: x }\n---\nb: { script: x }\n---\nc: 1\n'), /^\(<unknown>\)/);
  });

  it('gives rules the job predefined variables', async () => {
    const p = await pipeline(`
rspec:
  script: x
  parallel: 2
  rules:
    - if: $CI_NODE_INDEX == "2" && $CI_JOB_STAGE == "test"
named:
  script: x
  rules:
    - if: $CI_JOB_NAME =~ /^nam/
`);
    assert.deepEqual(names(p), ['rspec 2/2', 'named']);
  });

  it('reads YAML as GitLab (Psych) does: yes/on are booleans, y/n are not, duplicate keys: last wins', async () => {
    const p = await pipeline('y: { script: x, interruptible: yes }\nn: { script: x, interruptible: off }\nn: { script: last }\n');
    assert.deepEqual(names(p), ['y', 'n']);
    assert.equal(job(p, 'y').interruptible, true);
    assert.deepEqual(job(p, 'n').script, ['last']);
  });
});
