// `cairn <command>` (bin/cairn.mjs runs this module): the dispatcher. Each command that is more
// than a few lines lives beside it (token.ts, storage.ts, registration_token.ts, check.ts); the runner's
// commands belong to the runner (src/runner/cli.ts). Commands load their modules on use.
import { checkSettings, ConfigError, loadConfig, settingFlag, settingsFromFlags, settingsHelp } from '../config.js';
import { openDatabase } from '../db/index.js';
import { migrateToLatest } from '../db/migrate.js';
import { CAIRN_VERSION } from '../version.js';

const USAGE = `usage: cairn <command>

commands:
  serve     run the HTTP server (migrates the database first)
  migrate   apply pending database migrations and exit
  runner    Cairn's CI runner: register, run, verify, unregister (cairn runner --help)
  registration-token [--group PATH | --project PATH] [--reset]
            print the runner registration token of the instance (or of a group or project),
            creating it at first need; --reset replaces it
  storage move --from STORAGE --to STORAGE [--kind project|group|snippet] [--no-work]
            move every repository on one storage to another, with a progress bar
  check [--deep]
            check that this installation can run: database, migrations, storages, git, secrets,
            object storage, mail, external URL, CI sandbox (--deep: every repository's integrity)
  token create --user USERNAME --scopes SCOPES [--name NAME] [--expires-at YYYY-MM-DD]
            create a personal access token for a user and print it once (cairn token --help)
  backup create [FILE] [--gzip] | backup restore FILE
            write one archive of the database, repositories, object storage and secrets (while
            the server runs), or restore one into an empty instance (cairn backup --help)
  ssh authorized-keys KEY_TYPE BASE64_KEY
            OpenSSH mode (sshd on port 22, PostgreSQL only): sshd's AuthorizedKeysCommand, which
            makes sshd run \`cairn shell key-N\` for a Cairn key (cairn ssh --help)
  shell key-N
            what sshd runs for a key: serves SSH_ORIGINAL_COMMAND (git, git-lfs-authenticate)
  help      show this text (cairn help COMMAND, or cairn COMMAND --help, describes one)

options:
  -h, --help     show this text
  -v, --version  print Cairn's version

Settings are environment variables (CAIRN_*, DATABASE_URL): see the README.`;

/**
 * `cairn <command> --help` of the commands that have no option parsing of their own (runner and
 * token answer --help themselves): usage, then exit 0 without starting or opening anything.
 */
const COMMAND_HELP: Record<string, string> = {
  serve: `usage: cairn serve [--SETTING VALUE]...

Runs the HTTP server on CAIRN_HOST:CAIRN_PORT: applies pending migrations, creates the
administrator root on first start (printing its generated password once), runs the background
worker (CAIRN_WORKERS=0 turns it off) and the built-in CI runner (CAIRN_BUILTIN_RUNNER=0).
Stops cleanly on SIGINT or SIGTERM. A bad setting stops it at start, naming the variable.

Every setting below is also a flag, which outranks the variable: ${settingFlag('CAIRN_PORT')} 8080 for
CAIRN_PORT, ${settingFlag('CAIRN_DATA_DIR')} DIR, ${settingFlag('DATABASE_URL')} URL (npm start -- --port 8080).

settings (environment variables):
${settingsHelp()}`,
  migrate: `usage: cairn migrate [--data-dir DIR | --database-url URL]

Applies pending database migrations (DATABASE_URL, or the embedded database in CAIRN_DATA_DIR)
and exits. \`cairn serve\` does this too, on start.`,
  'registration-token': `usage: cairn registration-token [--group PATH | --project PATH] [--reset]

Prints the runner registration token of the instance, or of a group or project, creating it at
first need.

options:
  --group PATH     the token of this group (its full path)
  --project PATH   the token of this project (its full path)
  --reset          replace the token with a new one (the old one stops working)
  -h, --help       show this text`,
};

async function main(argv: string[]) {
  const [command = 'help'] = argv;
  if (COMMAND_HELP[command] && argv.slice(1).some((a) => a === '--help' || a === '-h')) {
    console.log(COMMAND_HELP[command]);
    return;
  }
  switch (command) {
    case 'serve': {
      Object.assign(process.env, settingsFromFlags(argv.slice(1)));
      const { serve } = await import('../server.js');
      await serve();
      return;
    }
    case 'migrate': {
      Object.assign(process.env, settingsFromFlags(argv.slice(1), ['server']));
      const config = loadConfig();
      const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      const applied = await migrateToLatest(database.db);
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
      await database.close();
      return;
    }
    case 'runner': {
      checkSettings(['runner']);
      const { runnerCommand } = await import('../runner/cli.js');
      process.exitCode = await runnerCommand(argv.slice(1));
      return;
    }
    case 'registration-token': {
      const { registrationTokenCommand } = await import('./registration_token.js');
      await registrationTokenCommand(argv.slice(1));
      return;
    }
    case 'storage': {
      const { storageCommand } = await import('./storage.js');
      process.exitCode = await storageCommand(argv.slice(1));
      return;
    }
    case 'check': {
      const { checkCommand } = await import('./check.js');
      process.exitCode = await checkCommand(argv.slice(1));
      return;
    }
    case 'backup': {
      const { backupCommand } = await import('./backup.js');
      process.exitCode = await backupCommand(argv.slice(1));
      return;
    }
    case 'ssh': {
      const { sshCommand } = await import('./ssh.js');
      process.exitCode = await sshCommand(argv.slice(1));
      return;
    }
    case 'shell': {
      const { shellCommand } = await import('./ssh.js');
      // Ends at once: stdin may still be open (the SSH connection), and nothing else is left to do.
      process.exit(await shellCommand(argv.slice(1)));
    }
    case 'token': {
      const { tokenCommand } = await import('./token.js');
      process.exitCode = await tokenCommand(argv.slice(1));
      return;
    }
    case '--version':
    case '-v':
    case 'version':
      console.log(`cairn ${CAIRN_VERSION}`);
      return;
    case 'help':
    case '--help':
    case '-h': {
      // `cairn help serve` is `cairn serve --help`.
      const topic = command === 'help' ? argv[1] : undefined;
      if (topic && topic in COMMAND_HELP) console.log(COMMAND_HELP[topic]);
      else if (topic === 'runner' || topic === 'token' || topic === 'storage' || topic === 'check' || topic === 'backup' || topic === 'ssh' || topic === 'shell') await main([topic, '--help']);
      else console.log(USAGE);
      return;
    }
    default:
      console.error(`unknown command "${command}"\n\n${USAGE}`);
      process.exit(2);
  }
}

/** Errors that say all there is to say in their message: one line, no stack. */
const ONE_LINE_CODES = new Set(['EADDRINUSE', 'EADDRNOTAVAIL', 'EACCES']);

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof ConfigError || (err?.syscall === 'listen' && ONE_LINE_CODES.has(err.code))) console.error(err.message);
  else console.error(err);
  process.exit(1);
});
