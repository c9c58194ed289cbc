// The panel's HTML shell. The webview script (out/webview/panel.js) builds
// everything inside <body>; this file has no `vscode` import so the browser
// tests load the very same page.
import { randomBytes } from 'node:crypto';

export interface PanelAssets {
  scriptUri: string;
  styleUri: string;
  /** The webview's resource origin (`webview.cspSource`). */
  cspSource: string;
  nonce?: string;
  /** Extra markup for <head> (the tests' fake `acquireVsCodeApi`). */
  head?: string;
}

export function newNonce(): string {
  return randomBytes(16).toString('base64').replace(/[^A-Za-z0-9]/g, '');
}

export function panelHtml(assets: PanelAssets): string {
  const nonce = assets.nonce ?? newNonce();
  const csp = [
    "default-src 'none'",
    `style-src ${assets.cspSource}`,
    `img-src ${assets.cspSource} data:`,
    `font-src ${assets.cspSource}`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${assets.styleUri}">
<title>MAIA</title>
${assets.head ?? ''}
</head>
<body>
<div id="app" data-nonce="${nonce}"></div>
<script nonce="${nonce}" src="${assets.scriptUri}"></script>
</body>
</html>
`;
}
