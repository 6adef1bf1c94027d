// Compiles the test files for `npm test` (scripts/test.mjs) ahead of the run: one esbuild build
// with every test file as an entry point and the modules they share split into common chunks, so
// each test process loads a few prebuilt files instead of transpiling hundreds of TypeScript
// modules through tsx's loader thread and resolving hundreds of package modules one by one
// (measured on this 2-core machine: about 2.5 s and 0.6 s of CPU per test file).
//
// Every module keeps its own location: in the sources, `import.meta.url`, `import.meta.dirname`
// and `import.meta.filename` are replaced by the source file's own, so paths computed from them
// (the repository root, src/git/spawner_helper.mjs, fixtures) are the same as under tsx, and code
// that asks whether it runs as TypeScript (src/runner/artifact_sandbox.ts) still sees a .ts file.
// A package whose bundled code finds files from its own location (__dirname, import.meta.url,
// require.resolve, a require of a computed name) is not bundled but loaded from node_modules at
// run time, as are the packages of KEEP_EXTERNAL and those loaded with import() (see
// runtimeLoaded); such a package found during a build is added and the build done again.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** Never bundled: WebAssembly or native code beside the code, loaders, instrumentation. */
const KEEP_EXTERNAL = ['@electric-sql/pglite', 'ssh2', 'cpu-features', 'esbuild', 'tsx', 'playwright-core', 'pg-native', 'fsevents', 's3rver', '@sentry/*', '@esbuild/*'];
/** Found location-dependent by the scan below (listed so that a build need not find them again). */
const KNOWN_LOCATION_DEPENDENT = ['pino', 'thread-stream', 'fast-json-stringify', '@fastify/swagger', '@seriousme/openapi-schema-validator'];
const LOCATION_DEPENDENT = /\b__dirname\b|\b__filename\b|\bimport\.meta\.(?:url|dirname|filename|resolve)\b|\brequire\.resolve\b|\brequire\(\s*[^'"`\s)]/;
const IMPORT_META = /\bimport\.meta\.(url|dirname|filename)\b/g;

/** The package a file under node_modules belongs to (the last node_modules/<name> of its path). */
function packageOf(file) {
  const parts = file.split(path.sep);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0 || at + 1 >= parts.length) return null;
  return parts[at + 1].startsWith('@') ? `${parts[at + 1]}/${parts[at + 2]}` : parts[at + 1];
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

function plugins(runtimePackages, found) {
  const keepSourceLocations = {
    name: 'keep-source-locations',
    setup(build) {
      build.onLoad({ filter: /\.[cm]?tsx?$/ }, async (args) => {
        if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        const source = await fs.promises.readFile(args.path, 'utf8');
        const here = {
          url: JSON.stringify(pathToFileURL(args.path).href),
          dirname: JSON.stringify(path.dirname(args.path)),
          filename: JSON.stringify(args.path),
        };
        return { contents: source.replace(IMPORT_META, (_, which) => here[which]), loader: args.path.endsWith('x') ? 'tsx' : 'ts' };
      });
      // Notes bundled package code that depends on its location (the build is then done again).
      build.onLoad({ filter: /[/\\]node_modules[/\\].*\.[cm]?js$/ }, async (args) => {
        const name = packageOf(args.path);
        if (name && !runtimePackages.has(name) && LOCATION_DEPENDENT.test(await fs.promises.readFile(args.path, 'utf8'))) found.add(name);
        return undefined;
      });
    },
  };
  // Packages loaded at run time, from the very file esbuild resolved (a nested node_modules may
  // hold another version than the top one): the location-dependent ones, and any package loaded
  // with import(): a bundled CommonJS module would then offer its exports as `default` only,
  // where Node finds its named exports too.
  const runtimeLoaded = {
    name: 'runtime-loaded-packages',
    setup(build) {
      const listed = new RegExp(`^(?:${[...runtimePackages].map(escape).join('|')})(?:/|$)`);
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData?.resolving || args.path.startsWith('node:')) return undefined;
        if (args.kind !== 'dynamic-import' && !listed.test(args.path)) return undefined;
        const resolved = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { resolving: true } });
        if (resolved.errors.length || resolved.external || !resolved.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
        return { path: resolved.path, external: true };
      });
    },
  };
  return [keepSourceLocations, runtimeLoaded];
}

/**
 * Builds `files` (absolute paths under `root`) into `outDir`, keeping their paths relative to
 * `root` with the extension .mjs. Returns the built files in the same order, and for each whether
 * it uses the database (usesDatabase below).
 */
export async function buildTests(root, files, outDir) {
  const esbuild = await import('esbuild');
  const runtimePackages = new Set(KNOWN_LOCATION_DEPENDENT);
  let metafile;
  try {
    for (;;) {
      const found = new Set();
      fs.rmSync(outDir, { recursive: true, force: true });
      const result = await esbuild.build({
        entryPoints: files,
        absWorkingDir: root,
        outdir: outDir,
        outbase: root,
        outExtension: { '.js': '.mjs' },
        bundle: true,
        splitting: true,
        format: 'esm',
        platform: 'node',
        target: 'node20',
        external: KEEP_EXTERNAL,
        // Functions and classes keep their names (esbuild renames some, test/api/artifacts.test.ts
        // checks a store's class name).
        keepNames: true,
        sourcemap: 'linked',
        sourcesContent: false,
        logLevel: 'error',
        // Bundled CommonJS packages call require() for Node's own modules.
        banner: { js: "import { createRequire as __cairnTestRequire } from 'node:module'; const require = __cairnTestRequire(import.meta.url);" },
        plugins: plugins(runtimePackages, found),
        metafile: true,
      });
      if (found.size === 0) {
        metafile = result.metafile;
        break;
      }
      for (const name of found) runtimePackages.add(name);
    }
  } finally {
    await esbuild.stop?.();
  }
  const built = files.map((f) => path.join(outDir, path.relative(root, f).replace(/\.[cm]?[jt]sx?$/, '.mjs')));
  return { files: built, usesDatabase: usesDatabase(root, files, outDir, metafile) };
}

/** What makes a test depend on which database it runs on: it opens one, or starts Cairn's CLI. */
const DATABASE_MODULE = 'src/db/index.ts';
const NAMES_DATABASE = /\bDATABASE_URL\b|bin\/cairn\.mjs|\brunCairn\b|\bstartServe\b/;

/**
 * For each test file (in order), whether it uses the database: whether the modules it loads
 * (followed through the shared chunks of the build) include src/db/index.ts, or a test module it
 * loads names DATABASE_URL or runs `cairn` (bin/cairn.mjs) in a child process.
 */
function usesDatabase(root, files, outDir, metafile) {
  const rel = (p) => path.relative(root, path.resolve(root, p));
  const outputs = new Map(Object.entries(metafile.outputs).map(([out, o]) => [rel(out), o]));
  const namesDatabase = new Map();
  const sourceNamesDatabase = (input) => {
    if (!namesDatabase.has(input)) {
      namesDatabase.set(input, input.startsWith('test/') && NAMES_DATABASE.test(fs.readFileSync(path.join(root, input), 'utf8')));
    }
    return namesDatabase.get(input);
  };
  return files.map((file) => {
    const entry = rel(path.join(outDir, path.relative(root, file).replace(/\.[cm]?[jt]sx?$/, '.mjs')));
    const seen = new Set();
    const stack = [entry];
    while (stack.length) {
      const out = outputs.get(stack.pop());
      if (!out) continue;
      for (const input of Object.keys(out.inputs)) {
        const source = rel(input);
        if (source === DATABASE_MODULE || sourceNamesDatabase(source)) return true;
      }
      for (const imp of out.imports) {
        const next = rel(imp.path);
        if (!imp.external && !seen.has(next)) {
          seen.add(next);
          stack.push(next);
        }
      }
    }
    return false;
  });
}
