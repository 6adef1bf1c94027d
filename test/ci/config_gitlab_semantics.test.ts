// The .gitlab-ci.yml semantics where Cairn used to differ from GitLab (issue #28): each case is
// GitLab's documented behaviour (docs.gitlab.com/ci/yaml, /ci/inputs) or what its
// Gitlab::Ci::Config entries and YamlProcessor do.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compile, errorsOf, firstError, job, lint, names, pipeline } from '../helpers/ci_config.js';

describe('ci config (GitLab semantics): include:local with wildcards', () => {
  const files = {
    'configs/build.yml': 'build: { stage: build, script: make }\n',
    'configs/test.yml': 'test: { script: t }\n',
    'configs/deploy.yaml': 'deploy: { stage: deploy, script: d }\n',
    'configs/sub/lint.yml': 'lint: { script: l }\n',
    'other/x.yml': 'x: { script: x }\n',
  };

  it('includes every file a single * matches in that folder only, each as an include of its own', async () => {
    const p = await pipeline("include: '/configs/*.yml'\nmain: { script: m }\n", {}, files);
    assert.deepEqual(names(p).sort(), ['build', 'main', 'test']);
    assert.deepEqual(p.includes.map((i) => i.location), ['configs/build.yml', 'configs/test.yml']);
  });

  it('lets ** cross folders, and **/ require a subfolder', async () => {
    assert.deepEqual(names(await pipeline('include: { local: "configs/**.yml" }\nmain: { script: m }\n', {}, files)).sort(), ['build', 'lint', 'main', 'test']);
    assert.deepEqual(names(await pipeline('include: { local: "configs/**/*.yml" }\nmain: { script: m }\n', {}, files)).sort(), ['lint', 'main']);
  });

  it('honours include:rules on a wildcard entry and includes nothing when nothing matches', async () => {
    const yaml = 'include:\n  - local: "configs/*.yml"\n    rules: [{ if: $CI_COMMIT_TAG }]\n  - local: "nowhere/*.yml"\nmain: { script: m }\n';
    assert.deepEqual(names(await pipeline(yaml, {}, files)), ['main']);
    assert.deepEqual(names(await pipeline(yaml, { ref: 'v1', tag: true }, files)).sort(), ['build', 'main', 'test']);
  });

  it('counts every matched file against the 150 includes', async () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 151; i++) many[`ci/j${String(i).padStart(3, '0')}.yml`] = `j${i}: { script: x }\n`;
    assert.equal(await firstError('include: "ci/*.yml"\nmain: { script: m }\n', {}, many), 'Maximum of 150 nested includes are allowed!');
  });
});

describe('ci config (GitLab semantics): CI/CD inputs', () => {
  const template = `spec:
  inputs:
    stage:
      default: test
    env:
      options: [staging, production]
    count:
      type: number
      default: 1
    strict:
      type: boolean
      default: true
    deps:
      type: array
      default: []
    version:
      regex: ^v\\d+\\.\\d+$
      default: v1.0
---
"deploy-$[[ inputs.env ]]":
  stage: $[[ inputs.stage ]]
  parallel: $[[ inputs.count ]]
  allow_failure: $[[ inputs.strict ]]
  needs: $[[ inputs.deps ]]
  script:
    - echo "deploying $[[ inputs.version ]] to $[[ inputs.env ]] x$[[ inputs.count ]]"
`;
  const files = { 't.yml': template };
  const base = 'stages: [build, test, deploy]\nbuild: { stage: build, script: b }\n';

  it('interpolates typed values where a block is a whole value and text inside strings', async () => {
    const p = await pipeline(
      `${base}include:\n  - local: t.yml\n    inputs: { env: production, stage: deploy, count: 2, strict: false, deps: [build], version: v2.3 }\n`,
      {},
      files,
    );
    assert.deepEqual(names(p).sort(), ['build', 'deploy-production 1/2', 'deploy-production 2/2']);
    const d = job(p, 'deploy-production 1/2');
    assert.equal(d.stage, 'deploy');
    assert.equal(d.allowFailure, false);
    assert.deepEqual(d.needs, [{ name: 'build', artifacts: true, optional: false }]);
    assert.deepEqual(d.script, ['echo "deploying v2.3 to production x2"']);
  });

  it('uses the defaults, and reads typed values given as text as GitLab does', async () => {
    const p = await pipeline(`${base}include:\n  - local: t.yml\n    inputs: { env: staging, count: "3", strict: "false" }\n`, {}, files);
    const d = job(p, 'deploy-staging 1/3');
    assert.equal(d.stage, 'test');
    assert.equal(d.allowFailure, false);
    assert.deepEqual(d.needs, [], 'an empty array input is `needs: []`');
    assert.deepEqual(d.script, ['echo "deploying v1.0 to staging x3"']);
  });

  it("gives GitLab's errors for missing, unknown and invalid inputs", async () => {
    const inc = (inputs: string) => `${base}include:\n  - local: t.yml\n    inputs: ${inputs}\n`;
    assert.equal(await firstError(inc('{ stage: x }'), {}, files), '`t.yml`: `env` input: required value has not been provided');
    assert.equal(await firstError(inc('{ env: staging, nope: 1, other: 2 }'), {}, files), '`t.yml`: unknown input arguments: nope, other');
    assert.equal(
      await firstError(inc('{ env: qa }'), {}, files),
      '`t.yml`: `env` input: `qa` cannot be used because it is not in the list of allowed options',
    );
    assert.equal(await firstError(inc('{ env: staging, count: many }'), {}, files), '`t.yml`: `count` input: provided value is not a number');
    assert.equal(await firstError(inc('{ env: staging, strict: maybe }'), {}, files), '`t.yml`: `strict` input: provided value is not a boolean');
    assert.equal(await firstError(inc('{ env: staging, deps: build }'), {}, files), '`t.yml`: `deps` input: provided value is not an array');
    assert.equal(
      await firstError(inc('{ env: staging, version: "2.0" }'), {}, files),
      '`t.yml`: `version` input: provided value does not match required RegEx pattern',
    );
  });

  it('checks the header and the blocks', async () => {
    const one = (t: string, inputs = '{}') => firstError(`a: { script: x }\ninclude:\n  - local: t.yml\n    inputs: ${inputs}\n`, {}, { 't.yml': t });
    assert.equal(await one('spec:\n  inputs:\n    a: { default: x, colour: red }\n---\nj: { script: x }\n'), '`t.yml`: header:spec:inputs:a config contains unknown keys: colour');
    assert.equal(await one('spec:\n  inputs:\n    a: { type: integer, default: 1 }\n---\nj: { script: x }\n'), '`t.yml`: header:spec:inputs:a input type unknown value: integer');
    assert.equal(await one('spec:\n  inputs:\n    a: { type: boolean, default: true, options: [true] }\n---\nj: { script: x }\n'), '`t.yml`: `a` input: Options can only be used with string and number inputs');
    const jobWith = (script: string) => `spec:\n  inputs:\n    a: { default: x }\n---\nj:\n  script: ${script}\n`;
    assert.equal(await one(jobWith('$[[ inputs.b ]]')), '`t.yml`: unknown interpolation key: `b`');
    assert.equal(await one(jobWith('$[[ inputs ]]')), '`t.yml`: invalid interpolation access pattern');
    assert.equal(await one(jobWith('$[[ inputs.a | upcase ]]')), '`t.yml`: no function matching `upcase`: check that the function name, arguments, and types are correct');
    assert.equal(await one(jobWith('$[[ inputs.a | truncate(0,1) | truncate(0,1) | truncate(0,1) | truncate(0,1) ]]')), '`t.yml`: too many functions in interpolation block');
    assert.equal(await one('j: { script: x }\n', '{ a: 1 }'), '`t.yml`: unknown input arguments');
    assert.equal(await one('spec:\n  inputs:\n    n: { type: number, default: 5 }\n---\nj:\n  script: $[[ inputs.n | truncate(0,1) ]]\n'), '`t.yml`: error in `truncate` function: invalid input type: truncate can only be used with string inputs');
  });

  it('applies truncate, expand_vars and posix_escape in order', async () => {
    const t = "spec:\n  inputs:\n    a: { default: 'test $MY_VAR and $NOT_SET' }\n    q: { default: \"it's a \\\"b\\\"\" }\n---\nj:\n  script:\n    - echo $[[ inputs.a | expand_vars | truncate(5,8) ]]\n    - echo $[[ inputs.a | expand_vars ]]\n    - printf %s $[[ inputs.q | posix_escape ]]\n";
    const p = await pipeline('include: t.yml\n', { variables: { MY_VAR: 'my value' } }, { 't.yml': t });
    assert.deepEqual(job(p, 'j').script, ['echo my value', 'echo test my value and $NOT_SET', `printf %s it\\'s\\ a\\ \\"b\\"`]);
  });

  it("interpolates the main file's own spec:inputs with the pipeline's inputs", async () => {
    const yaml = 'spec:\n  inputs:\n    target: { default: staging }\n---\ndeploy:\n  script: "deploy $[[ inputs.target ]]"\n  environment: $[[ inputs.target ]]\n';
    assert.deepEqual(job(await pipeline(yaml), 'deploy').script, ['deploy staging']);
    assert.equal(job(await pipeline(yaml, { inputs: { target: 'production' } }), 'deploy').environment?.name, 'production');
    assert.equal(await firstError(yaml, { inputs: { other: 'x' } }), 'unknown input arguments: other');
    assert.equal(await firstError('spec:\n  inputs:\n    target:\n---\na: { script: x }\n'), '`target` input: required value has not been provided');
  });

  it('keeps !reference tags and splices an array input into a list', async () => {
    const t = 'spec:\n  inputs:\n    extra: { type: array, default: [b, c] }\n---\nj:\n  script:\n    - a\n    - $[[ inputs.extra ]]\n    - !reference [.common, script]\n';
    const p = await pipeline('include: t.yml\n.common: { script: [z] }\n', {}, { 't.yml': t });
    assert.deepEqual(job(p, 'j').script, ['a', 'b', 'c', 'z']);
  });

  it('bounds what interpolation adds: a big input used in many places is "config too large"', async () => {
    const uses = (n: number, block: string) => Array.from({ length: n }, (_, i) => `j${i}:\n  script: ${block}\n`).join('');
    const arrayT = `spec:\n  inputs:\n    big: { type: array, default: [${Array.from({ length: 1000 }, (_, i) => `x${i}`).join(', ')}] }\n---\n${uses(600, '$[[ inputs.big ]]')}`;
    assert.equal(await firstError('include: t.yml\n', {}, { 't.yml': arrayT }), '`t.yml`: config too large');
    const textT = `spec:\n  inputs:\n    s: { default: "${'y'.repeat(50_000)}" }\n---\n${uses(400, 'echo $[[ inputs.s ]]')}`;
    assert.equal(await firstError('include: t.yml\n', {}, { 't.yml': textT }), '`t.yml`: config too large');
  });

  it('passes trigger:include:inputs to the child configuration', async () => {
    const p = await pipeline('child: { trigger: { include: [{ local: c.yml, inputs: { env: prod } }] } }\n');
    assert.deepEqual(job(p, 'child').trigger, {
      kind: 'child',
      include: [{ local: 'c.yml', inputs: { env: 'prod' } }],
      strategy: null,
      forward: { yamlVariables: true, pipelineVariables: false },
    });
    const multi = await pipeline('down: { trigger: { project: group/other, inputs: { env: prod, replicas: 2 } } }\n');
    assert.deepEqual(job(multi, 'down').trigger, {
      kind: 'multi_project',
      project: 'group/other',
      branch: null,
      strategy: null,
      forward: { yamlVariables: true, pipelineVariables: false },
      inputs: { env: 'prod', replicas: 2 },
    });
  });
});

describe('ci config (GitLab semantics): rules', () => {
  it('makes when: manual set by a rule block the pipeline (allow_failure false), a job-level when: manual not', async () => {
    const p = await pipeline(`
by_rule: { script: x, rules: [{ when: manual }] }
job_level: { script: x, when: manual }
job_level_with_rules: { script: x, when: manual, rules: [{ if: $CI_COMMIT_BRANCH }] }
rule_allows: { script: x, rules: [{ when: manual, allow_failure: true }] }
job_allows: { script: x, allow_failure: true, rules: [{ when: manual }] }
`);
    assert.equal(job(p, 'by_rule').when, 'manual');
    assert.equal(job(p, 'by_rule').allowFailure, false);
    assert.equal(job(p, 'job_level').allowFailure, true);
    assert.equal(job(p, 'job_level_with_rules').when, 'manual');
    assert.equal(job(p, 'job_level_with_rules').allowFailure, true);
    assert.equal(job(p, 'rule_allows').allowFailure, true);
    assert.equal(job(p, 'job_allows').allowFailure, true);
  });

  it('refuses rules: [] as GitLab does', async () => {
    assert.equal(await firstError('a: { script: x, rules: [] }\n'), "jobs:a:rules config can't be blank");
    assert.equal(await firstError('workflow: { rules: [] }\na: { script: x }\n'), "workflow:rules config can't be blank");
    assert.equal((await lint('a: { script: x, rules: [] }\n')).valid, false);
  });
});

describe('ci config (GitLab semantics): needs and dependencies', () => {
  it('takes needs:pipeline (a parent pipeline job) as a cross-pipeline dependency, with $VARS expanded', async () => {
    const p = await pipeline(
      `
child_test:
  script: x
  needs:
    - pipeline: $PARENT_PIPELINE_ID
      job: build
    - { pipeline: "42", job: lint, artifacts: false }
`,
      { source: 'parent_pipeline', variables: { PARENT_PIPELINE_ID: '17' } },
    );
    const j = job(p, 'child_test');
    assert.deepEqual(j.needs, []);
    assert.equal(j.schedulingType, 'dag');
    assert.deepEqual(j.crossNeeds, [
      { pipeline: '17', job: 'build', artifacts: true },
      { pipeline: '42', job: 'lint', artifacts: false },
    ]);
    assert.equal(
      await firstError('t: { script: x, needs: [{ pipeline: "1", job: b, optional: true }] }\n'),
      'jobs:t:needs:need config contains unknown keys: optional',
    );
    assert.equal(
      await firstError('t: { script: x, dependencies: [b], needs: [{ pipeline: "1", job: b }] }\n'),
      'jobs:t needs corresponding to dependencies must be from the same pipeline',
    );
  });

  it('accepts dependencies beside needs: [] (GitLab checks them against needs only when needs lists jobs)', async () => {
    const p = await pipeline('build: { stage: build, script: b }\ntest: { script: t, needs: [], dependencies: [build] }\n');
    assert.deepEqual(job(p, 'test').needs, []);
    assert.deepEqual(job(p, 'test').dependencies, ['build']);
    assert.equal(
      await firstError('build: { stage: build, script: b }\nlint: { stage: build, script: l }\ntest: { script: t, needs: [lint], dependencies: [build] }\n'),
      'jobs:test dependencies the build should be part of needs',
    );
  });
});

describe('ci config (GitLab semantics): job names', () => {
  it('fails a pipeline whose expanded parallel:matrix job name is over 255 characters', async () => {
    const long = 'x'.repeat(240);
    const r = await compile(`build:\n  script: b\n  parallel:\n    matrix:\n      - PROVIDER: [aws, "${'y'.repeat(20)}"]\n`.replace('build', long));
    assert.equal(r.ok, false);
    assert.deepEqual((r as { errors: string[] }).errors, [`jobs:${long}: [${'y'.repeat(20)}] name is too long (maximum is 255 characters)`]);
    const errors = await errorsOf(`${'z'.repeat(256)}: { script: x }\n`);
    assert.deepEqual(errors, [`jobs:${'z'.repeat(256)} name is too long (maximum is 255 characters)`]);
  });
});

describe('ci config (GitLab semantics): keyword by keyword', () => {
  it('rules:changes and rules:exists take GitLab forms and give its messages', async () => {
    const files = { 'docs/a.md': '#', 'src/main.go': 'package main', Dockerfile: 'FROM x' };
    const p = await pipeline(
      `
simple: { script: x, rules: [{ exists: Dockerfile }] }
listed: { script: x, rules: [{ exists: ["**/*.md"] }] }
hashed: { script: x, rules: [{ exists: { paths: ["src/*.go"] } }] }
missing: { script: x, rules: [{ exists: { paths: [nope.txt] } }] }
changed: { script: x, rules: [{ changes: { paths: ["docs/**/*"], compare_to: main } }] }
`,
      { changedPaths: async (compareTo) => (compareTo === 'main' ? ['docs/a.md'] : null) },
      files,
    );
    assert.deepEqual(names(p), ['simple', 'listed', 'hashed', 'changed']);
    const err = (rule: string) => firstError(`a: { script: x, rules: [${rule}] }\n`);
    assert.equal(await err('{ changes: { compare_to: main } }'), 'jobs:a:rules:rule:changes config missing required keys: paths');
    assert.equal(await err('{ changes: README.md }'), 'jobs:a:rules:rule:changes should be an array or a hash');
    assert.equal(await err('{ changes: { paths: [a], compare_to: [main] } }'), 'jobs:a:rules:rule:changes compare to should be a string');
    assert.equal(await err(`{ changes: [${Array.from({ length: 51 }, (_, i) => `f${i}`).join(', ')}] }`), 'jobs:a:rules:rule:changes config has too many entries (maximum 50)');
    assert.equal(await err('{ exists: { ref: main, paths: [a] } }'), 'jobs:a:rules:rule:exists config missing required keys: project');
    assert.equal(await err('{ exists: 5 }'), 'jobs:a:rules:rule:exists should be a string, an array of strings, or a hash');
    assert.equal(await err('{ exists: { paths: [a], project: other/project } }'), 'jobs:a:rules:rule:exists project is not supported by Cairn yet (files of another project)');
    assert.equal(await err('{ allow_failure: sometimes }'), 'jobs:a:rules:rule allow failure should be a boolean value');
    assert.equal(await firstError('a: { script: x, rules: "if $A" }\n'), 'jobs:a rules should be an array containing hashes and arrays of hashes');
    assert.equal(await firstError('workflow: { rules: "if $A" }\na: { script: x }\n'), 'workflow:rules config should be a array');
    assert.equal(
      await firstError('workflow: { rules: [{ if: $A, auto_cancel: { on_new_commit: always } }] }\na: { script: x }\n'),
      'workflow:rules:rule:auto_cancel on new commit must be one of: conservative, interruptible, none',
    );
  });

  it('names parallel:matrix jobs with the values in the order written, numbers as written', async () => {
    const p = await pipeline('a: { script: x, parallel: { matrix: [{ V: [1, 2], OS: linux }, { V: "3.10" }] } }\n');
    assert.deepEqual(names(p), ['a: [1, linux]', 'a: [2, linux]', 'a: [3.10]']);
    assert.deepEqual(job(p, 'a: [2, linux]').variables, [
      { key: 'V', value: '2', raw: false },
      { key: 'OS', value: 'linux', raw: false },
    ]);
  });

  it('checks retry as GitLab does for retry: N and retry: {max}', async () => {
    assert.equal(await firstError('a: { script: x, retry: 3 }\n'), 'jobs:a:retry config must be less than or equal to 2');
    assert.equal(await firstError('a: { script: x, retry: { max: 3 } }\n'), 'jobs:a:retry max must be less than or equal to 2');
    assert.equal(await firstError('a: { script: x, retry: { max: 1, when: [network_failure] } }\n'), 'jobs:a:retry when contains unknown values: network_failure');
    assert.equal(await firstError('a: { script: x, retry: soon }\n'), 'jobs:a:retry config has to be either an integer or a hash');
  });

  it('checks release: as GitLab does', async () => {
    const p = await pipeline('a: { script: x, release: { tag_name: $CI_COMMIT_TAG, description: "v1", milestones: m1, assets: { links: [{ name: bin, url: "https://example.com/bin" }] } } }\n');
    assert.deepEqual((job(p, 'a').extra.release as { tag_name: string }).tag_name, '$CI_COMMIT_TAG');
    const err = (release: string) => firstError(`a: { script: x, release: ${release} }\n`);
    assert.equal(await err('{ tag_name: v1 }'), "jobs:a:release description can't be blank");
    assert.equal(await err('{ description: d }'), "jobs:a:release tag name can't be blank");
    assert.equal(await err('{ tag_name: v1, description: d, colour: red }'), 'jobs:a:release config contains unknown keys: colour');
    assert.equal(await err('{ tag_name: v1, description: d, released_at: yesterday }'), 'jobs:a:release released at must be a valid datetime');
    assert.equal(await err('{ tag_name: v1, description: d, assets: { links: [{ url: "https://x.y/z" }] } }'), "jobs:a:release:assets:links:link name can't be blank");
    assert.equal(await err('v1'), 'jobs:a:release config should be a hash');
  });

  it("says an image needs a name as GitLab does", async () => {
    assert.equal(await firstError('a: { script: x, image: { entrypoint: [""] } }\n'), "jobs:a:image name can't be blank");
  });
});
