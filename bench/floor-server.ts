// The floor: a bare Fastify process serving fixed JSON bytes, with no database and no hooks.
// Usage: node --import tsx bench/floor-server.ts <port> <route>=<file> ...
import fs from 'node:fs';
import Fastify from 'fastify';

const [portArg, ...routes] = process.argv.slice(2);
const app = Fastify({ logger: false });
for (const spec of routes) {
  const [route, file] = spec.split('=');
  const bytes = fs.readFileSync(file);
  app.get(route, (_req, reply) => {
    reply.header('content-type', 'application/json').send(bytes);
  });
}
await app.listen({ host: '127.0.0.1', port: Number(portArg) });
process.send?.('ready');
