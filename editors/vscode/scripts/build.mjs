// Bundles the extension (CommonJS for VS Code's Node) and the panel's
// webview script (an IIFE for the browser) with esbuild; tsc only type-checks
// and compiles the tests.
import { build } from 'esbuild';

const common = { bundle: true, sourcemap: true, minify: false, logLevel: 'warning', legalComments: 'linked' };
await Promise.all([
  build({
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'out/extension.js',
    platform: 'node',
    format: 'cjs',
    target: 'node18',
    external: ['vscode'],
  }),
  build({
    ...common,
    entryPoints: ['webview/panel.ts'],
    outfile: 'out/webview/panel.js',
    platform: 'browser',
    format: 'iife',
    target: 'chrome114',
  }),
]);
