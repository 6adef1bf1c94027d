import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { startWorker } from '../jobs/queue.js';
import { containerKind, scheduleBulkMoves, type ContainerKindName } from '../services/storage_moves/index.js';

const USAGE = `usage: cairn storage move --from STORAGE --to STORAGE [--kind project|group|snippet] [--no-work]

Schedules a move of every repository of the kind (default: project) on storage --from to
storage --to, and shows its progress on stderr until every move has finished or failed.
This process works the queue too unless --no-work is given (then a running \`cairn serve\` on
the same PostgreSQL does the moves). With the embedded database (no DATABASE_URL) the server
must be stopped first: only one process can open it.`;

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

function bar(done: number, total: number, width = 30): string {
  const filled = total ? Math.round((done / total) * width) : width;
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
}

/** `cairn storage move`: a bulk storage move with a progress bar. Exit status 1 when any move failed. */
export async function storageCommand(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  if (args[0] !== 'move') {
    console.error(USAGE);
    return 2;
  }
  const from = flag(args, '--from');
  const to = flag(args, '--to');
  const kindName = (flag(args, '--kind') ?? 'project') as ContainerKindName;
  if (!from || !to) {
    console.error(USAGE);
    return 2;
  }
  const config = loadConfig(process.env, { logLevel: 'error' });
  for (const s of [from, to]) {
    if (!Object.hasOwn(config.storages, s)) {
      console.error(`unknown storage "${s}" (configured: ${Object.keys(config.storages).join(', ')})`);
      return 2;
    }
  }
  if (from === to) {
    console.error('--from and --to must be different storages');
    return 2;
  }
  const app = await buildApp({ config, logger: false });
  const kind = containerKind(kindName);
  if (!kind) {
    console.error(`no repository storage moves for "${kindName}" in this build`);
    await app.close();
    return 2;
  }
  const stopWorker = args.includes('--no-work') ? null : startWorker(app.cairn, { idleMs: 200 });
  try {
    const moves = await scheduleBulkMoves(app.cairn, kind, from, to);
    const ids = moves.map((m) => Number(m.id));
    const tty = process.stderr.isTTY;
    let last = '';
    for (;;) {
      const rows = ids.length ? await app.cairn.db.selectFrom('repository_storage_moves').select(['state']).where('id', 'in', ids).execute() : [];
      const finished = rows.filter((r) => r.state === 'finished').length;
      const failed = rows.filter((r) => r.state === 'failed' || r.state === 'cleanup_failed').length;
      const line = `${bar(finished + failed, ids.length)} ${finished + failed}/${ids.length} ${kind.name}s moved from ${from} to ${to}, ${failed} failed`;
      if (line !== last) {
        process.stderr.write(tty ? `\r${line}` : `${line}\n`);
        last = line;
      }
      if (finished + failed >= ids.length) {
        if (tty) process.stderr.write('\n');
        return failed ? 1 : 0;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await stopWorker?.();
    await app.close();
  }
}
