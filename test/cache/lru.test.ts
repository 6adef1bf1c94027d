import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedLru } from '../../src/cache/lru.js';

describe('the render cache: one LRU, one budget for every kind', () => {
  it('evicts the least recently used entry of any partition once the shared budget is exceeded', () => {
    const lru = new BoundedLru(100);
    const a = lru.partition<string>('a', { maxShare: 1 });
    const b = lru.partition<string>('b', { maxShare: 1 });
    a.set('1', 'x', 29); // 30 with its key
    b.set('1', 'y', 29);
    assert.equal(a.get('1'), 'x', 'partitions keep their keys apart');
    assert.equal(b.get('1'), 'y');
    a.get('1'); // a:1 is now the most recently used
    b.set('2', 'z', 49); // 50: 110 in all, over the budget
    assert.equal(b.get('1'), undefined, 'the least recently used entry went, whatever its partition');
    assert.equal(a.get('1'), 'x');
    assert.equal(b.get('2'), 'z');
    assert.ok(lru.bytes <= lru.limit);
  });

  it('does not keep an entry bigger than its share, and shrinks with its budget', async () => {
    const lru = new BoundedLru(1000);
    const p = lru.partition<string>('p', { maxShare: 1 / 10 });
    let computed = 0;
    const big = () => p.getOrCompute('big', async () => (computed++, 'B'.repeat(200)), (v) => v.length);
    await big();
    await big();
    assert.equal(computed, 2, 'too big to keep: computed each time');
    const small = () => p.getOrCompute('small', async () => (computed++, 's'), (v) => v.length);
    await small();
    await small();
    assert.equal(computed, 3, 'kept');
    lru.setBudget(0);
    assert.equal(lru.size, 0);
    assert.equal(lru.bytes, 0);
  });
});
