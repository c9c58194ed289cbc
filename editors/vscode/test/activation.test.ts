// Loads the bundled extension with a stand-in `vscode` module (no VS Code
// binary is available): activation registers every contributed command and
// the panel's view, and the view's HTML loads the bundled script and style
// with a nonce. With `maia.lsp.enabled` off no language server is started.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Module = require('node:module');

const root = path.join(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

/** Anything not modelled below: a callable, constructible no-op. */
function anything(): unknown {
  const fn = function () {
    return anything();
  };
  return new Proxy(fn, {
    get: (_t, key) => (key === 'then' ? undefined : key === Symbol.toPrimitive ? () => '' : anything()),
    apply: () => anything(),
    construct: () => anything() as object,
  });
}

interface Uri {
  scheme: string;
  fsPath: string;
  path: string;
  toString(): string;
}
const uri = (p: string): Uri => ({ scheme: 'file', fsPath: p, path: p, toString: () => `file://${p}` });

/** What the edit review (src/review/editor.ts) uses when it is constructed. */
const disposed = { dispose() {} };
const reviewApi = {
  EventEmitter: class {
    event = () => disposed;
    fire() {}
    dispose() {}
  },
  ThemeColor: class {
    constructor(readonly id: string) {}
  },
  OverviewRulerLane: { Left: 1 },
  languages: { registerCodeLensProvider: () => disposed },
};
const reviewWindow = {
  createTextEditorDecorationType: () => disposed,
  onDidChangeVisibleTextEditors: () => disposed,
  visibleTextEditors: [],
};

test('activation registers the contributed commands and the panel view', async () => {
  const commands = new Map<string, unknown>();
  const views = new Map<string, { resolveWebviewView(view: unknown): void }>();
  const disposable = { dispose() {} };
  const settings: Record<string, unknown> = { 'lsp.enabled': false, path: '/nonexistent/maia' };
  const vscode = new Proxy(
    {
      ...reviewApi,
      Uri: {
        file: uri,
        joinPath: (base: Uri, ...parts: string[]) => uri(path.join(base.fsPath, ...parts)),
        parse: (s: string) => uri(s.replace(/^file:\/\//, '')),
        from: (c: { path: string }) => uri(c.path),
      },
      commands: {
        registerCommand: (id: string, fn: unknown) => {
          commands.set(id, fn);
          return disposable;
        },
        executeCommand: async () => undefined,
      },
      window: {
        ...reviewWindow,
        createOutputChannel: () => ({ appendLine() {}, show() {}, dispose() {} }),
        registerWebviewViewProvider: (id: string, provider: { resolveWebviewView(view: unknown): void }) => {
          views.set(id, provider);
          return disposable;
        },
        onDidChangeActiveTextEditor: () => disposable,
        activeTextEditor: undefined,
        showErrorMessage: async () => undefined,
        showWarningMessage: async () => undefined,
      },
      workspace: {
        getConfiguration: () => ({ get: (k: string, d?: unknown) => (k in settings ? settings[k] : d) }),
        registerTextDocumentContentProvider: () => disposable,
        onDidChangeConfiguration: () => disposable,
        onDidChangeTextDocument: () => disposable,
        workspaceFolders: [{ uri: uri(root) }],
        textDocuments: [],
      },
    } as Record<string, unknown>,
    { get: (t, k: string) => (k in t ? t[k] : anything()) },
  );
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = (request: string, ...rest: unknown[]) => (request === 'vscode' ? vscode : original(request, ...rest));
  try {
    const ext = require(path.join(root, manifest.main));
    const subscriptions: { dispose(): void }[] = [];
    await ext.activate({
      subscriptions,
      extensionUri: uri(root),
      globalStorageUri: uri(path.join(root, 'out', 'storage')),
      workspaceState: { get: () => undefined, update: async () => undefined },
    });
    for (const c of manifest.contributes.commands as { command: string }[]) {
      assert.ok(commands.has(c.command), `${c.command} registered at activation`);
    }
    const provider = views.get(manifest.contributes.views.maia[0].id);
    assert.ok(provider, 'the panel view has a provider');
    const posted: unknown[] = [];
    let onMessage: ((m: unknown) => void) | undefined;
    const webview = {
      options: {},
      html: '',
      cspSource: 'vscode-webview://test',
      asWebviewUri: (u: Uri) => ({ toString: () => `vscode-webview://test${u.fsPath}` }),
      onDidReceiveMessage: (fn: (m: unknown) => void) => {
        onMessage = fn;
        return disposable;
      },
      postMessage: async (m: unknown) => {
        posted.push(m);
        return true;
      },
    };
    provider.resolveWebviewView({ webview, visible: true, onDidDispose: () => disposable });
    assert.match(webview.html, new RegExp(`src="vscode-webview://test${path.join(root, 'out', 'webview', 'panel.js')}"`));
    assert.match(webview.html, /href="vscode-webview:\/\/test.*media\/panel\.css"/);
    assert.match(webview.html, /script-src 'nonce-[A-Za-z0-9]+'/);
    assert.deepEqual((webview.options as { enableScripts?: boolean }).enableScripts, true);
    // The webview's `ready` starts maia; a missing binary is reported in the panel.
    onMessage?.({ type: 'ready' });
    const deadline = Date.now() + 5000;
    while (!posted.some((m) => (m as { type: string; state?: string }).state === 'error') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const error = posted.find((m) => (m as { state?: string }).state === 'error') as { message: string; install: boolean };
    assert.ok(error, JSON.stringify(posted));
    assert.equal(error.install, true);
    assert.match(error.message, /cannot find `\/nonexistent\/maia`/);
    for (const s of subscriptions) {
      s.dispose();
    }
    await ext.deactivate();
  } finally {
    loader._load = original;
  }
});

test('maia stderr after the output channel is disposed (a window reload) is dropped, not written to a closed channel', async () => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'maia-act-'));
  // A "maia" that keeps talking on stderr for a while and never answers.
  const fake = path.join(dir, 'maia');
  fs.writeFileSync(fake, '#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do echo "log line $i" >&2; sleep 0.05; done\n', { mode: 0o755 });
  const disposable = { dispose() {} };
  const closedWrites: string[] = [];
  let outputDisposed = false;
  const views = new Map<string, { resolveWebviewView(view: unknown): void }>();
  const settings: Record<string, unknown> = { 'lsp.enabled': false, path: fake };
  const vscode = new Proxy(
    {
      ...reviewApi,
      Uri: { file: uri, joinPath: (base: Uri, ...parts: string[]) => uri(path.join(base.fsPath, ...parts)), from: (c: { path: string }) => uri(c.path), parse: (s: string) => uri(s) },
      commands: { registerCommand: () => disposable, executeCommand: async () => undefined },
      window: {
        ...reviewWindow,
        // VS Code's channel throws "Channel has been closed" once disposed.
        createOutputChannel: () => ({
          appendLine(line: string) {
            if (outputDisposed) {
              closedWrites.push(line);
              throw new Error('Channel has been closed');
            }
          },
          show() {},
          dispose() {
            outputDisposed = true;
          },
        }),
        registerWebviewViewProvider: (id: string, provider: { resolveWebviewView(view: unknown): void }) => {
          views.set(id, provider);
          return disposable;
        },
        onDidChangeActiveTextEditor: () => disposable,
        activeTextEditor: undefined,
        showErrorMessage: async () => undefined,
      },
      workspace: {
        getConfiguration: () => ({ get: (k: string, d?: unknown) => (k in settings ? settings[k] : d) }),
        registerTextDocumentContentProvider: () => disposable,
        onDidChangeConfiguration: () => disposable,
        onDidChangeTextDocument: () => disposable,
        workspaceFolders: [{ uri: uri(dir) }],
        textDocuments: [],
      },
    } as Record<string, unknown>,
    { get: (t, k: string) => (k in t ? t[k] : anything()) },
  );
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);
  process.on('uncaughtException', onUncaught);
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = (request: string, ...rest: unknown[]) => (request === 'vscode' ? vscode : original(request, ...rest));
  try {
    delete require.cache[require.resolve(path.join(root, manifest.main))];
    const ext = require(path.join(root, manifest.main));
    const subscriptions: { dispose(): void }[] = [];
    await ext.activate({
      subscriptions,
      extensionUri: uri(root),
      globalStorageUri: uri(path.join(dir, 'storage')),
      workspaceState: { get: () => undefined, update: async () => undefined },
    });
    const posted: { type: string; state?: string }[] = [];
    let onMessage: ((m: unknown) => void) | undefined;
    views.get(manifest.contributes.views.maia[0].id)!.resolveWebviewView({
      webview: {
        options: {},
        html: '',
        cspSource: 'vscode-webview://test',
        asWebviewUri: (u: Uri) => ({ toString: () => `vscode-webview://test${u.fsPath}` }),
        onDidReceiveMessage: (fn: (m: unknown) => void) => {
          onMessage = fn;
          return disposable;
        },
        postMessage: async (m: { type: string; state?: string }) => {
          posted.push(m);
          return true;
        },
      },
      visible: true,
      onDidDispose: () => disposable,
    });
    onMessage?.({ type: 'ready' });
    // The window reloads while maia is still writing: everything is disposed, in order.
    const deadline = Date.now() + 5000;
    while (!posted.some((m) => m.type === 'status' && m.state === 'starting') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const s of subscriptions) {
      s.dispose();
    }
    await ext.deactivate();
    // Until the fake maia is gone (it reports its exit as a failed start).
    while (!posted.some((m) => m.state === 'error') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(posted.some((m) => m.state === 'error'), 'the fake maia ended');
    assert.deepEqual(closedWrites, [], 'nothing written to the closed channel');
    assert.deepEqual(uncaught, []);
  } finally {
    process.off('uncaughtException', onUncaught);
    loader._load = original;
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
