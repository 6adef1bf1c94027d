import type { FastifyRequest } from 'fastify';

/**
 * An upload refused before its body was read to the end (401, 413...). The client is still
 * sending: closing the connection with the answer makes its next write fail (EPIPE, reset) and
 * it may never see the status. So, once the answer is sent, the rest of the body is read and
 * dropped for a short grace period (a client that reads the answer stops sending), and only then
 * is the connection closed.
 */
export function dropUnreadBody(request: FastifyRequest, graceMs = 5_000): void {
  const req = request.raw;
  if (req.complete || req.destroyed) return;
  // (An injected request, in tests, has no socket to close.)
  const socket = req.socket as typeof req.socket | undefined;
  if (typeof socket?.destroy !== 'function') return;
  let done = false;
  const finish = () => {
    done = true;
    clearTimeout(timer);
  };
  const timer = setTimeout(() => {
    if (!done) socket.destroy();
  }, graceMs);
  timer.unref();
  req.once('end', finish);
  socket.once('close', finish);
  // A refusal may come after part of the body went into a pipe: whatever is piped is dropped now.
  req.unpipe();
  req.on('data', () => {});
  req.resume();
}
