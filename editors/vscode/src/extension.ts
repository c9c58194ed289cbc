// MAIA for VS Code: starts `maia lsp` with vscode-languageclient. The client
// already gives the code actions (lightbulb, Refactor… menu), the refactor
// preview for MAIA's edits (one annotated edit per hunk with
// `needsConfirmation`: a checkbox per hunk, Apply / Discard), permission
// prompts as notifications and `$/progress` in the status bar. This file
// adds "MAIA: Ask about selection", opens answers beside the editor, and
// shows each turn as a notification progress with a Cancel button.
//
// The MAIA panel (src/panel/) is separate: a webview view in its own
// activity-bar container that runs `maia acp`, one process per window.
import * as vscode from 'vscode';
import { MaiaPanel, VIEW_ID } from './panel/view';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  ShowDocumentParams,
  ShowDocumentResult,
  WorkDoneProgressCancelNotification,
} from 'vscode-languageclient/node';
import { askArgument, commandExists, DAEMON_TOKEN_SECRET, Intent, isAnswerUri, serverCommand, StreamMessage, TurnTracker } from './logic';
import { MissingBinary, Output } from './notices';
import { notFoundMessage } from './acp/connection';

let client: LanguageClient | undefined;
let missing: MissingBinary | undefined;
let output: Output | undefined;
/** Set when the extension is deactivated (window reload or close). */
let closing = false;

/** Whether the language server can take requests now. */
function serving(): boolean {
  return !closing && !!client?.isRunning();
}

/** Requests VS Code makes on its own (code actions, hovers) while they run. */
const inflight = new Set<vscode.CancellationTokenSource>();

/**
 * Runs a provider request unless the client is stopping. VS Code asks for
 * code actions in the same batch of messages that reloads the window; a
 * request that entered the client just before `deactivate` stopped it fails
 * with "Starting server failed" in the log. So the request waits for the
 * batch to be handled (one turn of the event loop) and runs only if the
 * client still serves; requests still waiting when it stops are cancelled.
 */
async function quietly<T>(token: vscode.CancellationToken, fallback: T, run: (token: vscode.CancellationToken) => vscode.ProviderResult<T>): Promise<T> {
  if (!serving()) {
    return fallback;
  }
  await new Promise((resolve) => setImmediate(resolve));
  if (!serving() || token.isCancellationRequested) {
    return fallback;
  }
  const source = new vscode.CancellationTokenSource();
  const link = token.onCancellationRequested(() => source.cancel());
  inflight.add(source);
  try {
    return (await run(source.token)) ?? fallback;
  } finally {
    inflight.delete(source);
    link.dispose();
    source.dispose();
  }
}

/** Stops the language client, its waiting requests cancelled first. */
async function stopClient(): Promise<void> {
  for (const source of inflight) {
    source.cancel();
  }
  const old = client;
  client = undefined;
  await old?.stop();
}
const tracker = new TurnTracker();
/** Notification progress per turn token. */
const progressSinks = new Map<string, { report: (message: string) => void; finish: () => void }>();

function lspCommand() {
  const cfg = vscode.workspace.getConfiguration('maia');
  return serverCommand({ path: cfg.get<string>('path'), args: cfg.get('args'), env: cfg.get('env') }, process.env);
}

function makeClient(): LanguageClient {
  const server = lspCommand();
  const serverOptions: ServerOptions = {
    command: server.command,
    args: server.args,
    options: { env: server.env },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file' }],
    outputChannelName: 'MAIA',
    middleware: {
      // Not while the client stops (see `quietly`).
      provideCodeActions: (document, range, context, token, next) =>
        quietly(token, [] as (vscode.Command | vscode.CodeAction)[], (t) => next(document, range, context, t)),
      provideHover: (document, position, token, next) =>
        quietly<vscode.Hover | undefined>(token, undefined, (t) => next(document, position, t)),
      window: {
        showDocument: async (params: ShowDocumentParams, next): Promise<ShowDocumentResult> => {
          if (params.external || !isAnswerUri(params.uri)) {
            const r = await next(params, new vscode.CancellationTokenSource().token);
            return r && typeof r === 'object' && 'success' in r ? r : { success: false };
          }
          try {
            const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(params.uri));
            await vscode.window.showTextDocument(doc, {
              viewColumn: vscode.ViewColumn.Beside,
              preserveFocus: true,
              preview: false,
            });
            return { success: true };
          } catch {
            return { success: false };
          }
        },
      },
    },
  };
  return new LanguageClient('maia', 'MAIA', serverOptions, clientOptions);
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const server = lspCommand();
  if (!commandExists(server.command, server.env.PATH)) {
    // Said once for the panel and the language client; the client is not
    // started (it would add notifications of its own).
    missing?.report(notFoundMessage(server.command));
    return;
  }
  client = makeClient();
  context.subscriptions.push(
    client.onNotification('maia/stream', (msg: StreamMessage) => onStream(msg)),
  );
  try {
    await client.start();
  } catch (e) {
    // The language client has shown its own notification; the detail goes to the log.
    output?.appendLine(`MAIA: cannot start \`${server.command} ${server.args.join(' ')}\`: ${e}`);
  }
}

function onStream(msg: StreamMessage): void {
  const update = tracker.update(msg);
  if (!update) {
    return;
  }
  const token = update.turn.token;
  if (update.kind === 'begin') {
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: update.turn.title, cancellable: true },
      (progress, cancel) =>
        new Promise<void>((resolve) => {
          progressSinks.set(token, {
            report: (message) => progress.report({ message }),
            finish: resolve,
          });
          cancel.onCancellationRequested(() => {
            // The server's progress token is cancellable: this stops the turn.
            void client?.sendNotification(WorkDoneProgressCancelNotification.type, { token });
          });
        }),
    );
  } else if (update.kind === 'progress') {
    progressSinks.get(token)?.report(update.message);
  } else {
    progressSinks.get(token)?.finish();
    progressSinks.delete(token);
    if (!update.ok) {
      void vscode.window.showWarningMessage(update.message);
    }
  }
}

async function ask(intent: Intent, withPrompt: boolean): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== 'file') {
    void vscode.window.showWarningMessage('MAIA: open a file and select some code first.');
    return;
  }
  if (!client || !client.isRunning()) {
    void vscode.window.showErrorMessage(
      lspEnabled()
        ? 'MAIA: the server is not running (see the MAIA output).'
        : 'MAIA: the selection commands need "maia.lsp.enabled"; the MAIA panel works without it.',
    );
    return;
  }
  let prompt: string | undefined;
  if (withPrompt) {
    prompt = await vscode.window.showInputBox({
      title: 'Ask MAIA about the selection',
      prompt: 'Your question (empty: explain the selection)',
      ignoreFocusOut: true,
    });
    if (prompt === undefined) {
      return;
    }
  }
  const sel = editor.selection;
  const arg = askArgument(
    editor.document.uri.toString(),
    editor.document.version,
    {
      start: { line: sel.start.line, character: sel.start.character },
      end: { line: sel.end.line, character: sel.end.character },
    },
    intent,
    prompt,
  );
  try {
    await client.sendRequest(ExecuteCommandRequest.type, { command: 'maia.ask', arguments: [arg] });
  } catch (e) {
    void vscode.window.showErrorMessage(`MAIA: ${e instanceof Error ? e.message : e}`);
  }
}

async function runOnServer(command: string, done: (result: unknown) => string): Promise<void> {
  if (!client || !client.isRunning()) {
    return;
  }
  const editor = vscode.window.activeTextEditor;
  const arg = editor && editor.document.uri.scheme === 'file' ? { uri: editor.document.uri.toString() } : {};
  try {
    const result = await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] });
    void vscode.window.showInformationMessage(done(result));
  } catch (e) {
    void vscode.window.showErrorMessage(`MAIA: ${e instanceof Error ? e.message : e}`);
  }
}

function lspEnabled(): boolean {
  return vscode.workspace.getConfiguration('maia').get<boolean>('lsp.enabled', true);
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  closing = false;
  const out = new Output(vscode.window.createOutputChannel('MAIA Agent'));
  output = out;
  missing = new MissingBinary(context.extensionUri, out);
  const panel = new MaiaPanel(context, out, missing);
  context.subscriptions.push(
    out,
    panel,
    vscode.window.registerWebviewViewProvider(VIEW_ID, panel, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.commands.registerCommand('maia.focusInput', () => panel.reveal(true)),
    vscode.commands.registerCommand('maia.addSelection', () => panel.addSelection()),
    vscode.commands.registerCommand('maia.addFile', (uri?: vscode.Uri, all?: vscode.Uri[]) => panel.addFiles(uri, all)),
    vscode.commands.registerCommand('maia.panelNewThread', () => panel.newThread()),
    vscode.commands.registerCommand('maia.panelCancel', () => panel.cancel()),
    vscode.commands.registerCommand('maia.panelRestart', () => panel.restart()),
    vscode.commands.registerCommand('maia.setDaemonToken', () => setDaemonToken(context, panel)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('maia.daemon.url')) {
        void panel.restart();
      }
    }),
  );
  context.subscriptions.push(
    vscode.commands.registerCommand('maia.askSelection', () => ask('ask', true)),
    vscode.commands.registerCommand('maia.explainSelection', () => ask('explain', false)),
    vscode.commands.registerCommand('maia.fixSelection', () => ask('fix', false)),
    vscode.commands.registerCommand('maia.cancelTurn', () =>
      runOnServer('maia.cancel', (r) => `MAIA: cancelled ${(r as { cancelled?: number })?.cancelled ?? 0} turn(s)`),
    ),
    vscode.commands.registerCommand('maia.newConversation', () =>
      runOnServer('maia.newSession', () => 'MAIA: the next question starts a new conversation'),
    ),
    vscode.commands.registerCommand('maia.restartServer', async () => {
      await stopClient();
      if (lspEnabled()) {
        await start(context);
      }
    }),
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration('maia.path')) {
        missing?.reset();
      }
      if (e.affectsConfiguration('maia.lsp.enabled')) {
        await stopClient();
        if (lspEnabled()) {
          await start(context);
        }
      }
    }),
    {
      dispose: () => {
        closing = true;
        void stopClient();
      },
    },
  );
  if (lspEnabled()) {
    await start(context);
  }
}

/** Keeps the daemon's token in SecretStorage (never in settings.json); empty removes it. */
async function setDaemonToken(context: vscode.ExtensionContext, panel: MaiaPanel): Promise<void> {
  const token = await vscode.window.showInputBox({
    title: 'MAIA: Set Daemon Token',
    prompt: 'The token `maia serve token add NAME` printed (kept in the editor\'s secret storage; empty removes it)',
    password: true,
    ignoreFocusOut: true,
  });
  if (token === undefined) {
    return;
  }
  if (token.trim()) {
    await context.secrets.store(DAEMON_TOKEN_SECRET, token.trim());
  } else {
    await context.secrets.delete(DAEMON_TOKEN_SECRET);
  }
  if (vscode.workspace.getConfiguration('maia').get<string>('daemon.url')?.trim()) {
    await panel.restart();
  }
}

export async function deactivate(): Promise<void> {
  closing = true;
  await stopClient();
}
