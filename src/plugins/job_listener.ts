// The listener for CI jobs' own requests. A job's network namespace reaches the machine's
// loopback only through the one port its runner forwards (src/runner/sandbox.ts attachNetwork),
// and that port is this listener, never the main one: connections forwarded by pasta come from
// 127.0.0.1, which the main listener trusts as a proxy (X-Forwarded-For) and lets read
// /-/metrics. Here every connection is given the client address JOB_CLIENT_ADDRESS instead and
// the forwarding headers are dropped, so a job can neither pick its address (and slip past
// per-address bans) nor count as loopback. Which listener accepted a connection is a property of
// the socket: nothing two processes could disagree on.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/**
 * The client address of every request that comes in through the job listener: in 100::/64, the
 * IPv6 discard-only prefix (RFC 6666), so it is never a real client's, a proxy's or a
 * monitoring host's. Bans and rate limits keyed by address apply to jobs as one client.
 */
export const JOB_CLIENT_ADDRESS = '100::1';

const JOB_SOCKET = Symbol('cairn.jobSocket');

const FORWARDING_HEADERS = ['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-forwarded-prefix', 'forwarded', 'x-real-ip', 'x-client-ip'];

/** Did this request come in through the job listener? */
export function isJobRequest(raw: http.IncomingMessage): boolean {
  return !!(raw.socket as Socket & { [JOB_SOCKET]?: true })?.[JOB_SOCKET];
}

export interface JobListener {
  port: number;
  close(): Promise<void>;
}

/** Opens the job listener on host:port (port 0: any free one); it closes with the app. */
export async function startJobListener(app: FastifyInstance, opts: { host?: string; port?: number } = {}): Promise<JobListener> {
  await app.ready();
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    for (const h of FORWARDING_HEADERS) delete req.headers[h];
    app.routing(req, res);
  };
  const open = (host: string, port: number) => {
    const server = http.createServer({ requestTimeout: 300_000, headersTimeout: 60_000, keepAliveTimeout: 72_000 }, handler);
    server.on('connection', (socket: Socket) => {
      Object.defineProperty(socket, 'remoteAddress', { value: JOB_CLIENT_ADDRESS, configurable: true });
      Object.defineProperty(socket, 'remoteFamily', { value: 'IPv6', configurable: true });
      (socket as Socket & { [JOB_SOCKET]?: true })[JOB_SOCKET] = true;
    });
    server.on('clientError', (_err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      else socket.destroy();
    });
    return new Promise<http.Server>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port, ipv6Only: host.includes(':') }, () => {
        server.off('error', reject);
        resolve(server);
      });
    });
  };
  const servers = [await open(opts.host ?? '127.0.0.1', opts.port ?? 0)];
  const port = (servers[0].address() as AddressInfo).port;
  // The same port on ::1 too, when the machine has it: a job whose URL says `localhost` may try
  // IPv6 first (pasta forwards each family to the host's loopback of that family).
  if (!opts.host) await open('::1', port).then((s) => servers.push(s), () => undefined);
  let closed: Promise<void> | null = null;
  const close = () =>
    (closed ??= Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve) => {
            server.close(() => resolve());
            server.closeIdleConnections();
            // Long polls and live logs do not hold the server's shutdown up.
            setTimeout(() => server.closeAllConnections(), 5_000).unref();
          }),
      ),
    ).then(() => undefined));
  // Closed with the app (a hook can no longer be added to a listening app).
  app.cairn.closers.push(close);
  return { port, close };
}
