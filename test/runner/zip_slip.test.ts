// extractZip against archives crafted to write outside the destination (`..` and absolute
// names are in runner.test.ts): a symlink leading out, and a chain of symlinks that are each lexically inside but lead
// out when the kernel resolves them (a -> ., b -> a/..).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import yazl from 'yazl';
import { extractZip } from '../../src/runner/artifacts.js';

async function zipFile(file: string, entries: Array<[string, string | { link: string }]>) {
  const zip = new yazl.ZipFile();
  for (const [name, content] of entries) {
    if (typeof content === 'object') zip.addBuffer(Buffer.from(content.link), name, { mode: 0o120777 });
    else zip.addBuffer(Buffer.from(content), name);
  }
  zip.end();
  await new Promise<void>((resolve, reject) => zip.outputStream.pipe(fs.createWriteStream(file)).on('finish', resolve).on('error', reject));
}

test('no entry, directory or link escapes the destination', async () => {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-zipslip-'));
  try {
    const dest = path.join(top, 'a', 'b', 'dest');
    fs.mkdirSync(dest, { recursive: true });
    const file = path.join(top, 'x.zip');
    await zipFile(file, [
      ['ok/inside.txt', 'fine'],
      ['out', { link: '../../..' }],
      ['dot', { link: '.' }],
      ['chain', { link: 'dot/..' }],
      ['chain/escaped-dir/file.txt', 'no'],
      ['dot/via-dot.txt', 'yes'],
      ['good', { link: 'ok/inside.txt' }],
    ]);
    const result = await extractZip(file, dest);
    assert.equal(fs.readFileSync(path.join(dest, 'ok/inside.txt'), 'utf8'), 'fine');
    assert.equal(fs.readFileSync(path.join(dest, 'via-dot.txt'), 'utf8'), 'yes');
    assert.equal(fs.readlinkSync(path.join(dest, 'good')), 'ok/inside.txt');
    assert.ok(!fs.existsSync(path.join(dest, 'out')), 'a link out is not created');
    assert.ok(!fs.lstatSync(path.join(dest, 'chain')).isSymbolicLink(), 'a link resolving out through another link is not created');
    assert.equal(fs.readFileSync(path.join(dest, 'chain/escaped-dir/file.txt'), 'utf8'), 'no', 'the later entry lands inside');
    assert.ok(!fs.existsSync(path.join(top, 'a', 'b', 'escaped-dir')), 'no directory created outside');
    const outside = fs.readdirSync(path.join(top, 'a', 'b'));
    assert.deepEqual(outside, ['dest']);
    assert.ok(result.skipped.includes('out') && result.skipped.includes('chain'), JSON.stringify(result.skipped));
  } finally {
    fs.rmSync(top, { recursive: true, force: true });
  }
});
