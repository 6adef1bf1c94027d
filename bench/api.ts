// API read benchmark: GET /projects/:id and GET /users?per_page=20 against a floor route that
// serves the same JSON bytes from a bare Fastify process. Prints req/s, p99 and the ratio.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { api, BENCH_TOKEN, load, printTable, ROOT, startServer, type LoadResult } from './lib.js';

/** `users: false` leaves out the users list (bench/peers.ts measures the list endpoints). */
export async function runApiBench(opts: { users?: boolean } = {}): Promise<(LoadResult & { ratio?: number })[]> {
  const withUsers = opts.users ?? true;
  const server = await startServer();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-floor-'));
  const floorPort = 20000 + Math.floor(Math.random() * 20000);
  let floor: ReturnType<typeof fork> | null = null;
  try {
    const project = await api(server, 'POST', '/projects', { name: 'bench-project', visibility: 'private', initialize_with_readme: true });
    for (let i = 0; i < (withUsers ? 40 : 0); i++) {
      await api(server, 'POST', '/users', { username: `bench${i}`, name: `Bench User ${i}`, email: `bench${i}@example.com`, password: 'bench-password-1' });
    }
    const headers = { 'private-token': BENCH_TOKEN };
    const projectPath = `/api/v4/projects/${project.id}`;
    const usersPath = '/api/v4/users?per_page=20';
    const projectBytes = await (await fetch(server.url + projectPath, { headers })).arrayBuffer();
    fs.writeFileSync(path.join(tmp, 'project.json'), Buffer.from(projectBytes));
    const routes = [`/project=${tmp}/project.json`];
    if (withUsers) {
      const usersBytes = await (await fetch(server.url + usersPath, { headers })).arrayBuffer();
      fs.writeFileSync(path.join(tmp, 'users.json'), Buffer.from(usersBytes));
      routes.push(`/users=${tmp}/users.json`);
    }

    floor = fork(path.join(ROOT, 'bench/floor-server.ts'), [String(floorPort), ...routes], {
      execArgv: ['--import', 'tsx'],
      stdio: 'inherit',
    });
    await new Promise((resolve) => floor!.once('message', resolve));
    const floorUrl = `http://127.0.0.1:${floorPort}`;

    // Warm up (JIT, pooled connections, prepared statements) before measuring.
    const warmUrls = [server.url + projectPath, `${floorUrl}/project`];
    if (withUsers) warmUrls.push(server.url + usersPath, `${floorUrl}/users`);
    for (const url of warmUrls) await load('warm-up', url, { headers, seconds: 2 });
    const floorProject = await load('floor: same bytes as GET /projects/:id', `${floorUrl}/project`);
    const projectRead = await load('GET /api/v4/projects/:id', server.url + projectPath, { headers });
    if (!withUsers) return [floorProject, { ...projectRead, ratio: projectRead.rps / floorProject.rps }];
    const floorUsers = await load('floor: same bytes as GET /users?per_page=20', `${floorUrl}/users`);
    const usersList = await load('GET /api/v4/users?per_page=20', server.url + usersPath, { headers });
    return [
      floorProject,
      { ...projectRead, ratio: projectRead.rps / floorProject.rps },
      floorUsers,
      { ...usersList, ratio: usersList.rps / floorUsers.rps },
    ];
  } finally {
    floor?.kill();
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`database: ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite (embedded)'}`);
  printTable(await runApiBench());
}
