// `cairn runner register | run | unregister | verify`.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { RunnerClient } from './client.js';
import { dataDir, defaultConfigPath, readRunnerConfig, writeRunnerConfig } from './config.js';
import { defaultBuildsDir, jobOwner, NoIsolationError, Runner, unisolatedAllowed } from './runner.js';
import { openImageStore } from './image_source.js';
import { imageCacheDir } from './images.js';
import { setting } from '../config.js';
import { detectSandbox } from './sandbox.js';

export const RUNNER_USAGE = `usage: cairn runner <command> [options]

Cairn's runner: runs CI jobs isolated with bubblewrap, in their image: with their services:
(as root, with skopeo and umoci installed) or else in bash on this machine's filesystem, for any
server that speaks GitLab's runner protocol. It says at start which executor it has.

commands:
  register     register this runner with a server and save its configuration
  run          ask the server for jobs and run them
  verify       check that the server still knows this runner
  unregister   remove this runner from the server and delete its configuration

\`cairn runner <command> --help\` describes each.`;

const HELP: Record<string, string> = {
  register: `usage: cairn runner register --url <server> --token <registration token> [options]

  --url <url>            the server's base URL, e.g. http://127.0.0.1:8080
  --token <token>        a registration token (instance, group or project)
  --description <text>   the runner's description
  --tag-list <a,b>       tags; jobs with tags go only to runners having them all
  --run-untagged         also take jobs without tags (the default when no tags are given)
  --locked               lock the runner to its current projects
  --paused               register paused
  --maximum-timeout <s>  the longest job timeout this runner accepts, seconds
  --config <path>        where to save the configuration (mode 0600)
                         default: $CAIRN_RUNNER_CONFIG or $CAIRN_DATA_DIR/runner/config.json`,
  run: `usage: cairn runner run [options]

  --config <path>        the configuration written by \`register\`
  --concurrent <n>       jobs run at once (default: the configuration's, else 1)
  --builds-dir <path>    where job directories are made (default: <tmp>/cairn-builds-<uid>)
  --allow-unisolated     run jobs even without bubblewrap (also CAIRN_RUNNER_ALLOW_UNISOLATED=1);
                         without it the runner refuses to start when bwrap cannot isolate jobs
  --hide <path>          another path jobs must not see (repeatable); Cairn's data directory
                         ($CAIRN_DATA_DIR) and the configuration are always hidden
  --once                 run one job, then exit (its status is the exit code)

Stops on SIGINT/SIGTERM after the running jobs finish; a second signal kills them (reported failed).`,
  verify: `usage: cairn runner verify [--config <path>]`,
  unregister: `usage: cairn runner unregister [--config <path>]

  Deletes the runner on the server (DELETE /api/v4/runners) and removes the configuration file.`,
};

function fail(msg: string): never {
  console.error(`cairn runner: ${msg}`);
  process.exit(2);
}

export async function runnerCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === 'help' || sub === '--help' || sub === '-h') {
    console.log(RUNNER_USAGE);
    return 0;
  }
  if (!(sub in HELP)) fail(`unknown command "${sub}"\n\n${RUNNER_USAGE}`);
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(HELP[sub]);
    return 0;
  }
  try {
    switch (sub) {
      case 'register':
        return await register(rest);
      case 'run':
        return await run(rest);
      case 'verify':
        return await verify(rest);
      case 'unregister':
        return await unregister(rest);
    }
  } catch (err) {
    // Expected failures (no configuration, a refused token, an unreachable server) are one line.
    console.error(`cairn runner: ${(err as Error).message}`);
    return 1;
  }
  return 2;
}

function parse(args: string[], options: NonNullable<NonNullable<Parameters<typeof parseArgs>[0]>['options']>) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values as Record<string, string | boolean | string[] | undefined>;
  } catch (err) {
    fail((err as Error).message);
  }
}

async function register(args: string[]): Promise<number> {
  const v = parse(args, {
    url: { type: 'string' },
    token: { type: 'string' },
    'registration-token': { type: 'string' },
    description: { type: 'string' },
    'tag-list': { type: 'string' },
    'run-untagged': { type: 'boolean' },
    locked: { type: 'boolean' },
    paused: { type: 'boolean' },
    'maximum-timeout': { type: 'string' },
    config: { type: 'string' },
  });
  const url = (v.url as string | undefined) ?? process.env.CI_SERVER_URL;
  const token = (v.token as string | undefined) ?? (v['registration-token'] as string | undefined) ?? process.env.REGISTRATION_TOKEN;
  if (!url) fail('--url is required');
  if (!token) fail('--token is required');
  const tags = String(v['tag-list'] ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const maxTimeout = v['maximum-timeout'] === undefined ? undefined : Number(v['maximum-timeout']);
  if (maxTimeout !== undefined && (!Number.isInteger(maxTimeout) || maxTimeout <= 0)) fail('--maximum-timeout must be a positive number of seconds');
  const file = path.resolve((v.config as string | undefined) ?? defaultConfigPath());
  const client = new RunnerClient(url);
  const description = (v.description as string | undefined) ?? `cairn runner on ${(await import('node:os')).hostname()}`;
  const runUntagged = v['run-untagged'] === true || tags.length === 0;
  const r = await client.register(token, { description, tagList: tags, runUntagged, locked: v.locked === true, paused: v.paused === true, maximumTimeout: maxTimeout });
  writeRunnerConfig(file, { url: client.baseUrl, token: r.token, id: r.id, token_expires_at: r.token_expires_at, description, tag_list: tags, run_untagged: runUntagged, locked: v.locked === true });
  console.log(`Runner registered (id ${r.id}); configuration saved to ${file}`);
  return 0;
}

async function verify(args: string[]): Promise<number> {
  const v = parse(args, { config: { type: 'string' } });
  const file = path.resolve((v.config as string | undefined) ?? defaultConfigPath());
  const c = readRunnerConfig(file);
  const ok = await new RunnerClient(c.url).verify(c.token);
  console.log(ok ? `Runner ${c.id ?? ''} is valid on ${c.url}` : `Runner ${c.id ?? ''} is not known to ${c.url} any more`);
  return ok ? 0 : 1;
}

async function unregister(args: string[]): Promise<number> {
  const v = parse(args, { config: { type: 'string' } });
  const file = path.resolve((v.config as string | undefined) ?? defaultConfigPath());
  const c = readRunnerConfig(file);
  const ok = await new RunnerClient(c.url).unregister(c.token);
  fs.rmSync(file, { force: true });
  console.log(ok ? `Runner ${c.id ?? ''} unregistered; ${file} removed` : `The server did not know this runner (403); ${file} removed`);
  return 0;
}

async function run(args: string[]): Promise<number> {
  const v = parse(args, {
    config: { type: 'string' },
    concurrent: { type: 'string' },
    'builds-dir': { type: 'string' },
    'allow-unisolated': { type: 'boolean' },
    hide: { type: 'string', multiple: true },
    once: { type: 'boolean' },
  });
  const file = path.resolve((v.config as string | undefined) ?? defaultConfigPath());
  const c = readRunnerConfig(file);
  const concurrent = v.concurrent !== undefined ? Number(v.concurrent) : (c.concurrent ?? 1);
  if (!Number.isInteger(concurrent) || concurrent < 1) fail('--concurrent must be a positive integer');
  const allowUnisolated = unisolatedAllowed(v['allow-unisolated'] === true || c.allow_unisolated === true);
  const hidden = [dataDir(), path.dirname(file), file, ...((v.hide as string[] | undefined) ?? [])];
  const sandbox = detectSandbox();
  const imagesDir = imageCacheDir();
  const store = openImageStore({ dir: imagesDir, owner: jobOwner(sandbox), dockerAuthConfig: setting<string | null>('CAIRN_RUNNER_DOCKER_AUTH_CONFIG') });
  let exitCode = 0;
  let runner!: Runner;
  runner = new Runner({
    url: c.url,
    token: c.token,
    concurrent: v.once ? 1 : concurrent,
    buildsDir: (v['builds-dir'] as string | undefined) ?? c.builds_dir ?? defaultBuildsDir(),
    allowUnisolated,
    hiddenPaths: hidden,
    sandbox,
    images: store.source,
    imagesUnavailable: store.source ? undefined : store.reason,
    imagesDir,
    description: c.description,
    log: (m) => console.log(`${new Date().toISOString()} ${m}`),
    onJobDone: (_id, outcome) => {
      if (v.once) {
        exitCode = outcome.state === 'success' ? 0 : 1;
        void runner.stop();
      }
    },
  });
  let signals = 0;
  const onSignal = (sig: string) => {
    signals++;
    if (signals > 1) {
      console.log(`${sig} again: killing the running jobs`);
      void runner.stop({ killJobs: true });
      return;
    }
    console.log(`${sig}: finishing running jobs (${runner.activeJobs}), send again to exit now`);
    void runner.stop();
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  console.log(`${new Date().toISOString()} runner ${c.id ?? ''} polling ${c.url} (concurrent ${concurrent}, ${sandbox.available ? 'bubblewrap isolation' : 'NO isolation'})`);
  try {
    await runner.start();
  } catch (err) {
    if (err instanceof NoIsolationError) {
      console.error(`cairn runner: ${err.message}`);
      return 3;
    }
    throw err;
  }
  await runner.stop();
  if (runner.fatal) return 1;
  return exitCode;
}
