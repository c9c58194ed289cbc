// The MAIA panel in VS Code: the webview view, and the `EditorHost` that
// serves the agent's requests with VS Code itself (open documents, undoable
// WorkspaceEdits, the diff editor, notifications).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TextDecoder, TextEncoder } from 'node:util';
import * as vscode from 'vscode';
import type * as acp from '@agentclientprotocol/sdk';
import { Launch } from '../acp/connection';
import { acpCommand, DAEMON_TOKEN_SECRET } from '../logic';
import { EditorHost, PanelController, fileAttachment } from './controller';
import { panelHtml } from './html';
import { MissingBinary, Output } from '../notices';
import { Attachment, ToHost, ToWebview } from './protocol';
import { sliceLines } from './text';
import { EditorReview } from '../review/editor';

export const VIEW_ID = 'maia.panel';
const DIFF_SCHEME = 'maia-diff';

/** Read-only documents for the left/right sides of `vscode.diff`. */
class DiffContents implements vscode.TextDocumentContentProvider {
  private readonly texts = new Map<string, string>();
  private next = 0;
  add(filePath: string, text: string): vscode.Uri {
    const key = String(this.next++);
    this.texts.set(key, text);
    if (this.texts.size > 200) {
      this.texts.delete(this.texts.keys().next().value as string);
    }
    return vscode.Uri.from({ scheme: DIFF_SCHEME, path: filePath, query: key });
  }
  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.query) ?? '';
  }
}

export class MaiaPanel implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private readonly controller: PanelController;
  private readonly diffs = new DiffContents();
  private readonly disposables: vscode.Disposable[] = [];
  /** Messages posted while the view is not resolved yet. */
  private queue: ToWebview[] = [];
  private lastEditor: vscode.TextEditor | undefined;
  private readonly review: EditorReview;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: Output,
    private readonly missing: MissingBinary,
  ) {
    this.review = new EditorReview((label) => this.post({ type: 'reviewCount', label }));
    this.controller = new PanelController(this.host());
    this.disposables.push(
      this.review,
      vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, this.diffs),
      vscode.window.onDidChangeActiveTextEditor((e) => {
        if (e && e.document.uri.scheme === 'file') {
          this.lastEditor = e;
        }
      }),
    );
    this.lastEditor = vscode.window.activeTextEditor;
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.context.extensionUri, 'media');
    const script = vscode.Uri.joinPath(this.context.extensionUri, 'out', 'webview', 'panel.js');
    view.webview.options = { enableScripts: true, localResourceRoots: [media, vscode.Uri.joinPath(this.context.extensionUri, 'out', 'webview')] };
    view.webview.html = panelHtml({
      scriptUri: view.webview.asWebviewUri(script).toString(),
      styleUri: view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'panel.css')).toString(),
      cspSource: view.webview.cspSource,
    });
    view.webview.onDidReceiveMessage((m: ToHost) => {
      if (m.type === 'ready') {
        const queued = this.queue;
        this.queue = [];
        for (const q of queued) {
          void view.webview.postMessage(q);
        }
      }
      void this.controller.onMessage(m);
    });
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
      }
    });
  }

  private post(message: ToWebview): void {
    if (this.view) {
      void this.view.webview.postMessage(message);
    } else if (message.type !== 'update') {
      // Without a view there is nothing to stream into; the thread is replayed when it opens.
      this.queue.push(message);
    }
  }

  /** The first workspace folder; without one, the extension's own storage folder. */
  private root(): string {
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    if (folder) {
      return folder;
    }
    const own = this.context.globalStorageUri.fsPath;
    fs.mkdirSync(own, { recursive: true });
    return own;
  }

  private host(): EditorHost {
    const panel = this;
    return {
      get cwd() {
        return panel.root();
      },
      launch: async (): Promise<Launch> => {
        const cfg = vscode.workspace.getConfiguration('maia');
        const url = cfg.get<string>('daemon.url')?.trim();
        const token = url ? await this.context.secrets.get(DAEMON_TOKEN_SECRET) : undefined;
        const cmd = acpCommand(
          { path: cfg.get<string>('path'), args: cfg.get('acpArgs'), env: cfg.get('env') },
          process.env,
          { url, token },
        );
        return { ...cmd, cwd: this.root() };
      },
      post: (m) => this.post(m),
      review: this.review,
      panelVisible: () => !!this.view?.visible,
      openDiff: async (filePath, oldText, newText) => {
        const left = this.diffs.add(filePath, oldText ?? '');
        const right = this.diffs.add(filePath, newText);
        const name = path.basename(filePath);
        const title = oldText === null ? `${name} (new file, proposed by MAIA)` : `${name} ↔ MAIA's edit`;
        await vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true });
      },
      openRevertDiff: async (filePath, restored, kind) => {
        // Left: the file as it is now (gone when MAIA deleted it); right: what Restore puts back.
        const now = kind === 'deleted' || !fs.existsSync(filePath) ? this.diffs.add(filePath, '') : vscode.Uri.file(filePath);
        const back = this.diffs.add(filePath, kind === 'created' ? '' : (restored ?? ''));
        const name = path.basename(filePath);
        const what = kind === 'created' ? 'deleted by Restore' : kind === 'deleted' ? 'recreated by Restore' : 'after Restore';
        await vscode.commands.executeCommand('vscode.diff', now, back, `${name}: now ↔ ${what}`, { preview: true });
      },
      openLocation: async (filePath, line) => {
        const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(filePath));
        const pos = new vscode.Position(Math.max(0, (line ?? 1) - 1), 0);
        await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, pos), preview: true });
      },
      insertText: async (text) => {
        const editor = vscode.window.activeTextEditor ?? this.lastEditor;
        if (!editor) {
          void vscode.window.showWarningMessage('MAIA: open an editor to insert the code into.');
          return;
        }
        await editor.edit((b) => {
          for (const sel of editor.selections) {
            b.replace(sel, text);
          }
        });
        await vscode.window.showTextDocument(editor.document, editor.viewColumn);
      },
      copyText: (text) => Promise.resolve(vscode.env.clipboard.writeText(text)),
      searchFiles: async (query) => {
        const pattern = query ? `**/*${query.replace(/[[\]{}*?]/g, '')}*` : '**/*';
        const found = await vscode.workspace.findFiles(pattern, '**/{node_modules,.git,target,out,dist}/**', 30);
        return found.map((u) => ({ uri: u.toString(), path: vscode.workspace.asRelativePath(u, false) })).sort((a, b) => a.path.length - b.path.length);
      },
      readTextFile: async (r: acp.ReadTextFileRequest) => {
        const uri = vscode.Uri.file(r.path);
        // The open document, with unsaved edits; else the disk.
        const open = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === uri.fsPath);
        const text = open ? open.getText() : new TextDecoder().decode(await vscode.workspace.fs.readFile(uri));
        return { content: sliceLines(text, r.line, r.limit) };
      },
      writeTextFile: async (r: acp.WriteTextFileRequest) => {
        const uri = vscode.Uri.file(r.path);
        const edit = new vscode.WorkspaceEdit();
        let exists = true;
        try {
          await vscode.workspace.fs.stat(uri);
        } catch {
          exists = false;
        }
        if (exists) {
          const doc = await vscode.workspace.openTextDocument(uri);
          const all = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
          edit.replace(uri, all, r.content, { label: 'MAIA', needsConfirmation: false });
        } else {
          edit.createFile(uri, { ignoreIfExists: true, contents: new TextEncoder().encode(r.content) });
        }
        if (!(await vscode.workspace.applyEdit(edit))) {
          throw new Error(`VS Code refused the edit of ${r.path}`);
        }
        // The rest of MAIA's tools read the disk: save (undo still works).
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === uri.fsPath);
        if (doc?.isDirty) {
          await doc.save();
        }
      },
      notifyPermission: async (title, options) => {
        const labels = options.map((o) => o.name);
        const picked = await vscode.window.showWarningMessage(title, ...labels, 'Show panel');
        if (picked === 'Show panel') {
          await this.reveal();
          return undefined;
        }
        return options.find((o) => o.name === picked)?.optionId;
      },
      startFailed: (message, notInstalled) => {
        if (notInstalled) {
          this.missing.report(message);
          return;
        }
        void vscode.window.showErrorMessage(`MAIA: ${message}`, 'Show log').then((a) => {
          if (a === 'Show log') {
            this.output.show(true);
          }
        });
      },
      savedSession: () => this.context.workspaceState.get<string>('maia.acp.session'),
      saveSession: (id) => void this.context.workspaceState.update('maia.acp.session', id),
      savedUsage: (sessionId) => {
        const saved = this.context.workspaceState.get<{ sessionId: string; update: acp.SessionUpdate }>('maia.acp.usage');
        return saved?.sessionId === sessionId ? saved.update : undefined;
      },
      saveUsage: (sessionId, update) => void this.context.workspaceState.update('maia.acp.usage', { sessionId, update }),
      log: (line) => this.output.appendLine(line),
    };
  }

  async reveal(focusInput = false): Promise<void> {
    await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
    if (focusInput) {
      this.post({ type: 'focusInput' });
    }
  }

  async addSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.uri.scheme !== 'file') {
      void vscode.window.showWarningMessage('MAIA: open a file first.');
      return;
    }
    const sel = editor.selection;
    let attachment: Attachment;
    if (sel.isEmpty) {
      attachment = fileAttachment(editor.document.uri.fsPath, this.root());
    } else {
      const endLine = sel.end.character === 0 && sel.end.line > sel.start.line ? sel.end.line : sel.end.line + 1;
      attachment = {
        kind: 'selection',
        uri: editor.document.uri.toString(),
        name: vscode.workspace.asRelativePath(editor.document.uri, false),
        text: editor.document.getText(sel),
        startLine: sel.start.line + 1,
        endLine,
      };
    }
    await this.reveal();
    this.controller.attach(attachment);
  }

  async addFiles(uri?: vscode.Uri, all?: vscode.Uri[]): Promise<void> {
    const uris = all?.length ? all : uri ? [uri] : vscode.window.activeTextEditor ? [vscode.window.activeTextEditor.document.uri] : [];
    await this.reveal();
    for (const u of uris.filter((x) => x.scheme === 'file')) {
      this.controller.attach(fileAttachment(u.fsPath, this.root()));
    }
  }

  newThread(): Promise<void> {
    return this.controller.onMessage({ type: 'newThread' });
  }

  cancel(): Promise<void> {
    return this.controller.cancel();
  }

  restart(): Promise<void> {
    return this.controller.restart();
  }

  dispose(): void {
    void this.controller.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
