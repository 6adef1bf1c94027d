// API read benchmark: GET /projects/:id and GET /users?per_page=20 against a floor route that
// serves the same JSON bytes from a bare Fastify process. Prints req/s, p99 and the ratio.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { api, BENCH_TOKEN, load, printTable, ROOT, startServer, type LoadResult } from './lib.js';

export async function runApiBench(): Promise<(LoadResult & { ratio?: number })[]> {
  const server = await startServer();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-floor-'));
  const floorPort = 20000 + Math.floor(Math.random() * 20000);
  let floor: ReturnType<typeof fork> | null = null;
  try {
    const project = await api(server, 'POST', '/projects', { name: 'bench-project', visibility: 'private', initialize_with_readme: true });
    for (let i = 0; i < 40; i++) {
      await api(server, 'POST', '/users', { username: `bench${i}`, name: `Bench User ${i}`, email: `bench${i}@example.com`, password: 'bench-password-1' });
    }
    const headers = { 'private-token': BENCH_TOKEN };
    const projectPath = `/api/v4/projects/${project.id}`;
    const usersPath = '/api/v4/users?per_page=20';
    const projectBytes = await (await fetch(server.url + projectPath, { headers })).arrayBuffer();
    const usersBytes = await (await fetch(server.url + usersPath, { headers })).arrayBuffer();
    fs.writeFileSync(path.join(tmp, 'project.json'), Buffer.from(projectBytes));
    fs.writeFileSync(path.join(tmp, 'users.json'), Buffer.from(usersBytes));

    floor = fork(path.join(ROOT, 'bench/floor-server.ts'), [String(floorPort), `/project=${tmp}/project.json`, `/users=${tmp}/users.json`], {
      execArgv: ['--import', 'tsx'],
      stdio: 'inherit',
    });
    await new Promise((resolve) => floor!.once('message', resolve));
    const floorUrl = `http://127.0.0.1:${floorPort}`;

    // Warm up (JIT, pooled connections, prepared statements) before measuring.
    for (const url of [server.url + projectPath, server.url + usersPath, `${floorUrl}/project`, `${floorUrl}/users`]) {
      await load('warm-up', url, { headers, seconds: 2 });
    }
    const floorProject = await load('floor: same bytes as GET /projects/:id', `${floorUrl}/project`);
    const projectRead = await load('GET /api/v4/projects/:id', server.url + projectPath, { headers });
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
