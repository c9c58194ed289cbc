// Builds the web page `maia serve` serves at `/` (web/main.ts and
// web/app.css: the panel's webview code and styles with the page's host)
// into server/maia-server/web/, where the binary embeds it. The bundle is
// committed: the Rust build needs no node. `sources.txt` records the
// SHA-256 of every source file the bundle was built from (and of the
// package lock, for the dependencies); a protocol test recomputes it and
// fails when the bundle is stale (docs/remote.md).
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(root, '..', '..', 'server', 'maia-server', 'web');
mkdirSync(out, { recursive: true });
const common = { bundle: true, minify: true, legalComments: 'eof', logLevel: 'warning', metafile: true, absWorkingDir: root, charset: 'utf8' };
const js = await build({
  ...common,
  entryPoints: ['web/main.ts'],
  outfile: join(out, 'app.js'),
  platform: 'browser',
  format: 'iife',
  target: ['chrome111', 'safari16.4', 'firefox115'],
});
const css = await build({
  ...common,
  entryPoints: ['web/app.css'],
  outfile: join(out, 'app.css'),
  target: ['chrome111', 'safari16.4', 'firefox115'],
});
const inputs = new Set(['package-lock.json', 'scripts/build-web.mjs']);
for (const meta of [js.metafile, css.metafile]) {
  for (const file of Object.keys(meta.inputs)) {
    // Dependencies are pinned by the package lock. esbuild names them by
    // their real path, which is outside this folder when node_modules is a
    // link: any path through a node_modules folder is a dependency.
    if (file.split(/[\\/]/).includes('node_modules')) continue;
    const own = relative(root, resolve(root, file));
    if (own.startsWith('..')) throw new Error(`a source outside editors/vscode: ${file}`);
    inputs.add(own);
  }
}
const files = [...inputs].sort();
const hash = createHash('sha256');
for (const file of files) {
  hash.update(file).update('\0').update(readFileSync(join(root, file))).update('\0');
}
writeFileSync(
  join(out, 'sources.txt'),
  `sha256 ${hash.digest('hex')}\n# built by \`npm run build:web\` in editors/vscode from (paths relative to it):\n${files.join('\n')}\n`,
);
for (const name of ['app.js', 'app.css']) {
  console.log(`${name}: ${readFileSync(join(out, name)).length} bytes`);
}
