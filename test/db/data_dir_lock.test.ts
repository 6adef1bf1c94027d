// The lock that makes the embedded database one process's (src/db/data_dir_lock.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { ConfigError } from '../../src/config.js';
import { LOCK_FILE, lockDataDir } from '../../src/db/data_dir_lock.js';

const dirs: string[] = [];
const tmp = () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-lock-'));
  dirs.push(d);
  return d;
};
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

/** A pid that no process has now: a child that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe('data directory lock', () => {
  it('is exclusive: a second open is refused with one line naming the holder, and works again once released', () => {
    const dir = tmp();
    const release = lockDataDir(dir);
    assert.match(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8'), new RegExp(`^${process.pid}( \\d+)?\\n$`));
    assert.throws(
      () => lockDataDir(dir),
      (err: unknown) => err instanceof ConfigError && /^CAIRN_DATA_DIR: the embedded database in .* is in use by this process;/.test(err.message) && !err.message.includes('\n'),
    );
    release();
    assert.ok(!fs.existsSync(path.join(dir, LOCK_FILE)));
    lockDataDir(dir)();
  });

  it("takes over a lock whose process is gone, or whose pid now belongs to another process", () => {
    for (const stale of [`${deadPid()}\n`, `${process.pid} 1\n`, 'garbage']) {
      const dir = tmp();
      fs.writeFileSync(path.join(dir, LOCK_FILE), stale);
      const release = lockDataDir(dir);
      assert.notEqual(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8'), stale);
      release();
      assert.deepEqual(fs.readdirSync(dir), [], 'nothing left beside it');
    }
  });

  it('refuses a lock held by another live process, and never removes a lock that is not its own', () => {
    const dir = tmp();
    // pid 1 is alive (and is not this process); no start time: taken as the owner.
    fs.writeFileSync(path.join(dir, LOCK_FILE), '1\n');
    assert.throws(() => lockDataDir(dir), /in use by another process \(pid 1\)/);
    assert.equal(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8'), '1\n');
    // A release after another process took the lock leaves that lock alone.
    const dir2 = tmp();
    const release = lockDataDir(dir2);
    fs.writeFileSync(path.join(dir2, LOCK_FILE), '1\n');
    release();
    assert.equal(fs.readFileSync(path.join(dir2, LOCK_FILE), 'utf8'), '1\n');
  });
});
