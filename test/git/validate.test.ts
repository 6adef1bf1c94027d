import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  isReadableRefName,
  isSafeRevision,
  isSafeRevisionRange,
  isValidBranchName,
  isValidRefName,
  isValidTagName,
  normalizeRepoPath,
} from '../../src/git/validate.js';

/** Names git's rules have something to say about, and some they accept. */
const NAMES = [
  'main',
  'feature/x',
  'new/one',
  'a@b',
  '@',
  'ü/ñ',
  'v1.0',
  'x.y.z',
  'HEAD',
  'head',
  'refs/heads/x',
  'refs/remotes/origin/x',
  'refs/tags/v1',
  'refs/foo',
  '-x',
  'x-',
  'bad..name',
  'has space',
  'a~b',
  'a^b',
  'a:b',
  'a?b',
  'a*b',
  'a[b',
  'a\\b',
  'a\u0001b',
  'a\u007fb',
  'x.lock',
  'x.lock/y',
  'a/.b',
  '.a',
  'a.',
  'a/',
  '/a',
  'a//b',
  'x@{y',
  '@{-1}',
  'f'.repeat(40),
  'F'.repeat(40),
  'a'.repeat(39),
  'a'.repeat(41),
  'a'.repeat(64),
  'g'.repeat(40),
];

describe('git name validators', () => {
  let dir: string;
  const gitAccepts = (args: string[]) => spawnSync('git', ['check-ref-format', ...args], { cwd: dir, stdio: 'ignore' }).status === 0;

  before(() => {
    // Outside any repository, so that `--branch @` is not expanded to the current branch.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'validate-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('isValidRefName agrees with git check-ref-format on full ref names', () => {
    for (const name of NAMES) {
      for (const ref of [`refs/heads/${name}`, `refs/tags/${name}`, name]) {
        assert.equal(isValidRefName(ref), gitAccepts([ref]), ref);
      }
    }
  });

  it('isValidBranchName is git check-ref-format --branch plus GitLab: no refs/heads/ or refs/remotes/ prefix, no commit-id lookalike', () => {
    const gitlabRefuses = (name: string) => name.startsWith('refs/heads/') || name.startsWith('refs/remotes/') || /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i.test(name);
    for (const name of NAMES) {
      assert.equal(isValidBranchName(name), gitAccepts(['--branch', name]) && !gitlabRefuses(name), name);
    }
    for (const bad of ['f'.repeat(40), 'A'.repeat(40), 'a'.repeat(64), 'HEAD', '-x', '', 'refs/heads/main', 'refs/remotes/origin/main']) {
      assert.equal(isValidBranchName(bad), false, bad);
    }
    for (const good of ['main', 'feature/x', 'a'.repeat(39), 'g'.repeat(40), 'refs/tags/v1', '@']) assert.equal(isValidBranchName(good), true, good);
  });

  it('isValidTagName: a valid refs/tags/<name> that does not start with -', () => {
    for (const name of NAMES) assert.equal(isValidTagName(name), !name.startsWith('-') && gitAccepts([`refs/tags/${name}`]), name);
    assert.equal(isValidTagName(''), false);
  });

  it('a single revision refuses ranges, path lookups and options; a revision range allows a..b and a...b of single revisions', () => {
    for (const rev of ['main', 'v1.0', 'main~2', 'main^', 'main^{commit}', 'HEAD@{1}', 'a'.repeat(40), 'feature/x']) {
      assert.equal(isSafeRevision(rev), true, rev);
      assert.equal(isSafeRevisionRange(rev), true, rev);
    }
    for (const range of ['main..feature', 'main...feature', '..main', 'main..', 'main~1..main']) {
      assert.equal(isSafeRevision(range), false, range);
      assert.equal(isSafeRevisionRange(range), true, range);
    }
    for (const bad of ['', '-main', '--all', 'main:../../', 'main:README.md', ':/message', 'main:', 'a b', 'a\nb', 'a\\b', '..', '...', 'main..-x', '-x..main', 'main..main:../../', 'x'.repeat(1025)]) {
      assert.equal(isSafeRevision(bad), false, JSON.stringify(bad));
      assert.equal(isSafeRevisionRange(bad), false, JSON.stringify(bad));
    }
    assert.equal(isSafeRevision(undefined), false);
    assert.equal(isSafeRevisionRange(null), false);
  });

  it('a readable ref name is a plain ref: no revision operators, object syntax or options', () => {
    for (const ref of ['refs/heads/main', 'refs/tags/v1.0', 'refs/heads/feature/x', `refs/heads/${'f'.repeat(40)}`]) assert.equal(isReadableRefName(ref), true, ref);
    for (const ref of ['refs/heads/main:../../', 'refs/heads/main~1', 'refs/heads/main^{tree}', 'refs/heads/main@{1}', 'refs/heads/', 'refs/heads/a..b', '-refs/heads/x', 'main', `refs/heads/${'x'.repeat(1020)}`]) {
      assert.equal(isReadableRefName(ref), false, ref);
    }
  });

  it('normalizeRepoPath drops trailing slashes and refuses traversal, absolute and option-like paths', () => {
    assert.equal(normalizeRepoPath(''), '');
    assert.equal(normalizeRepoPath('docs/'), 'docs');
    assert.equal(normalizeRepoPath('a/b'), 'a/b');
    for (const bad of ['/etc', '../x', 'a/../b', 'a//b', './a', '-x', 'a\u0000b']) assert.equal(normalizeRepoPath(bad), null, bad);
  });
});
