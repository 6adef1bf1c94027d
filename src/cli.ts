import { loadConfig } from './config.js';
import { openDatabase } from './db/index.js';
import { migrateToLatest } from './db/migrate.js';

const USAGE = `usage: cairn <command>

commands:
  serve     run the HTTP server (migrates the database first)
  migrate   apply pending database migrations and exit
  runner    Cairn's CI runner: register, run, verify, unregister (cairn runner --help)
  registration-token [--group PATH | --project PATH] [--reset]
            print the runner registration token of the instance (or of a group or project),
            creating it at first need; --reset replaces it
  storage move --from STORAGE --to STORAGE [--kind project|group] [--no-work]
            move every repository on one storage to another, with a progress bar
  help      show this text`;

async function main(argv: string[]) {
  const [command = 'help'] = argv;
  switch (command) {
    case 'serve': {
      const { serve } = await import('./server.js');
      await serve();
      return;
    }
    case 'migrate': {
      const config = loadConfig();
      const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
      const applied = await migrateToLatest(database.db);
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'database is up to date');
      await database.close();
      return;
    }
    case 'runner': {
      const { runnerCommand } = await import('./runner/cli.js');
      process.exitCode = await runnerCommand(argv.slice(1));
      return;
    }
    case 'registration-token': {
      const { registrationTokenCommand } = await import('./ci/registration_cli.js');
      await registrationTokenCommand(argv.slice(1));
      return;
    }
    case 'storage': {
      const { storageCommand } = await import('./storage_cli.js');
      process.exitCode = await storageCommand(argv.slice(1));
      return;
    }
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return;
    default:
      console.error(`unknown command "${command}"\n\n${USAGE}`);
      process.exit(2);
  }
}

main(process.argv.slice(2)).catch((err) => {
  console.error(err);
  process.exit(1);
});
