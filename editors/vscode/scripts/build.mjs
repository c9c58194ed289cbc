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
    // zod (in the ACP SDK) probes `typeof navigator`; in VS Code's extension
    // host (Node 22+) reading that global logs `PendingMigrationError:
    // navigator is now a global` on every activation. The extension runs in
    // Node only, where there is no browser to detect.
    define: { navigator: 'undefined' },
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
