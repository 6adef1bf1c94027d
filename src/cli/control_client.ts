// The client side of the control socket of `cairn serve` (src/control/index.ts serves it): the
// socket's place, the request a command sends, and the call that relays the server's answer.
// Commands (token.ts, backup.ts) call it when a live server holds the embedded database.
import net from 'node:net';
import path from 'node:path';

export const CONTROL_DIR = 'control';
export const CONTROL_SOCKET = 'cairn.sock';

export interface CommandIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

export interface ControlRequest {
  command: 'token' | 'backup';
  argv: string[];
  /** The client's working directory: relative paths in argv are its. */
  cwd: string;
}

export const controlSocketPath = (dataDir: string) => path.join(dataDir, CONTROL_DIR, CONTROL_SOCKET);

/** A failure to reach the server: one line for the user. */
export class ControlError extends Error {}

/**
 * Runs a command in the server that holds the data directory, relaying its output to `io`;
 * resolves to its exit code.
 */
export function callControl(dataDir: string, pid: number, req: ControlRequest, io: CommandIo): Promise<number> {
  const file = controlSocketPath(dataDir);
  return new Promise((resolve, reject) => {
    const socket = net.connect(file);
    let buffered = '';
    let exit: number | null = null;
    socket.setEncoding('utf8');
    socket.once('connect', () => socket.write(JSON.stringify(req) + '\n'));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          const msg = JSON.parse(line);
          if (typeof msg.out === 'string') io.out(msg.out);
          else if (typeof msg.err === 'string') io.err(msg.err);
          else if (typeof msg.exit === 'number') exit = msg.exit;
        } catch {
          /* not ours */
        }
      }
    });
    socket.on('error', (err: NodeJS.ErrnoException) =>
      reject(new ControlError(`the embedded database in ${dataDir} is in use by another process (pid ${pid}), which does not answer on the control socket ${file} (${err.code ?? err.message}); stop it first, or start it as cairn serve`)),
    );
    socket.on('close', () => {
      if (exit === null) reject(new ControlError(`cairn serve (pid ${pid}) closed the control connection before the command ended`));
      else resolve(exit);
    });
  });
}
