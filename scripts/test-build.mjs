// Compiles the test files for `npm test` (scripts/test.mjs) ahead of the run: one esbuild build
// with every test file as an entry point and the modules they share (src/, test/helpers/) split
// into common chunks, so each test process loads a few prebuilt files instead of transpiling
// hundreds of TypeScript modules through tsx's loader thread (measured: about 2.5 s of CPU per
// test file, a third of the suite's CPU time on a 2-core machine).
//
// Every module keeps its own location: `import.meta.url`, `import.meta.dirname` and
// `import.meta.filename` are replaced by the source file's own, so paths computed from them
// (the repository root, src/git/spawner_helper.mjs, fixtures) are the same as under tsx, and code
// that asks whether it runs as TypeScript (src/runner/artifact_sandbox.ts) still sees a .ts file.
// Packages stay external: they load from node_modules as they do under tsx.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const IMPORT_META = /\bimport\.meta\.(url|dirname|filename)\b/g;

const keepSourceLocations = {
  name: 'keep-source-locations',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?tsx?$/ }, async (args) => {
      const source = await fs.promises.readFile(args.path, 'utf8');
      const here = {
        url: JSON.stringify(pathToFileURL(args.path).href),
        dirname: JSON.stringify(path.dirname(args.path)),
        filename: JSON.stringify(args.path),
      };
      return { contents: source.replace(IMPORT_META, (_, which) => here[which]), loader: args.path.endsWith('x') ? 'tsx' : 'ts' };
    });
  },
};

/**
 * Builds `files` (absolute paths under `root`) into `outDir`, keeping their paths relative to
 * `root` with the extension .mjs. Returns the built files in the same order.
 */
export async function buildTests(root, files, outDir) {
  const esbuild = await import('esbuild');
  fs.rmSync(outDir, { recursive: true, force: true });
  try {
    await esbuild.build({
      entryPoints: files,
      outdir: outDir,
      outbase: root,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      packages: 'external',
      sourcemap: 'linked',
      sourcesContent: false,
      logLevel: 'error',
      plugins: [keepSourceLocations],
    });
  } finally {
    await esbuild.stop?.();
  }
  return files.map((f) => {
    const rel = path.relative(root, f);
    return path.join(outDir, rel.replace(/\.[cm]?[jt]sx?$/, '.mjs'));
  });
}
