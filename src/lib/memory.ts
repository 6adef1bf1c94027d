import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * One full garbage collection, when the process has settled after its start. Starting leaves a
 * lot of garbage V8 would only collect at its next major GC, which an idle server may not reach
 * for a long time: the embedded database's initdb run (its own WebAssembly memory, 128 MB or
 * more, and the dumped data directory), the first queries' parse trees, module compilation.
 * Collected now, the process's idle memory is what it really uses.
 */
export function collectStartupGarbage(): void {
  try {
    let gc = (globalThis as { gc?: () => void }).gc;
    if (!gc) {
      v8.setFlagsFromString('--expose-gc');
      gc = vm.runInNewContext('gc') as () => void;
    }
    gc();
  } catch {
    // Not exposable here: V8 collects on its own schedule.
  }
}
