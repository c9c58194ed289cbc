// The edit review in the real editor: every file the agent changed in the
// thread (src/review/set.ts) is decorated as VS Code's inline diff does
// (the agent's lines on `diffEditor.insertedLineBackground`, what it
// removed on `diffEditor.removedLineBackground` after the line, gutter
// and overview-ruler marks), with CodeLenses "Keep" / "Undo" per hunk and
// "Keep all" / "Undo all" per file; commands for the hunk at the cursor,
// every file, and next/previous change. Undo is a `WorkspaceEdit` of that
// hunk only (the editor's undo stack keeps it), then the file is saved so
// MAIA reads what the user sees; a file the agent created and nothing else
// changed is deleted. Interaction: docs/editors.md.
import * as fs from 'node:fs';
import { TextDecoder } from 'node:util';
import * as vscode from 'vscode';
import type { Proposal, ReviewHost } from '../panel/controller';
import { Located, UndoneReport, UndoResult } from './hunks';
import { reviewLenses } from './lenses';
import { ReviewSet, TurnFile } from './set';

/** A gutter bar (the SCM colours of VS Code's dark and light themes). */
function bar(color: string, kind: 'line' | 'removed'): vscode.Uri {
  const shape =
    kind === 'line'
      ? `<rect x="5" y="0" width="3" height="20" fill="${color}"/>`
      : `<path d="M4 0 L10 5 L4 10 Z" fill="${color}"/>`;
  return vscode.Uri.parse(`data:image/svg+xml;utf8,${encodeURIComponent(`<svg xmlns="http://www.w3.org/2000/svg" width="14" height="20">${shape}</svg>`)}`);
}

const firstRemoved = (text: string) => {
  const lines = text.split('\n').filter((l, i, all) => l !== '' || i < all.length - 1);
  const shown = (lines[0] ?? '').trim();
  return lines.length > 1 ? `${shown}  (+${lines.length - 1} more removed)` : shown;
};

export class EditorReview implements ReviewHost, vscode.Disposable {
  readonly set = new ReviewSet();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly lenses = new vscode.EventEmitter<void>();
  private readonly added = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor('diffEditor.insertedLineBackground'),
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.addedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
    dark: { gutterIconPath: bar('#2ea043', 'line') },
    light: { gutterIconPath: bar('#1a7f37', 'line') },
  });
  private readonly removed = vscode.window.createTextEditorDecorationType({
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.deletedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
    dark: { gutterIconPath: bar('#f85149', 'removed') },
    light: { gutterIconPath: bar('#cf222e', 'removed') },
  });
  private readonly userEdited = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor('diffEditor.unchangedRegionBackground'),
    overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.modifiedForeground'),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
    dark: { gutterIconPath: bar('#d29922', 'line') },
    light: { gutterIconPath: bar('#9a6700', 'line') },
  });

  constructor(private readonly onCount: (label: string) => void) {
    this.disposables.push(
      this.lenses,
      this.added,
      this.removed,
      this.userEdited,
      vscode.languages.registerCodeLensProvider({ scheme: 'file' }, {
        onDidChangeCodeLenses: this.lenses.event,
        provideCodeLenses: (doc) => this.codeLenses(doc),
      }),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (this.set.get(e.document.uri.fsPath)) {
          this.refresh();
        }
      }),
      vscode.window.onDidChangeVisibleTextEditors(() => this.refresh()),
      vscode.commands.registerCommand('maia.review.keep', (path?: string, id?: string) => this.keep(path, id)),
      vscode.commands.registerCommand('maia.review.undo', (path?: string, id?: string) => this.undo(path, id)),
      vscode.commands.registerCommand('maia.review.keepFile', (path?: string) => this.keepFile(path)),
      vscode.commands.registerCommand('maia.review.undoFile', (path?: string) => this.undoFile(path)),
      vscode.commands.registerCommand('maia.review.keepAll', () => this.run('keepAll')),
      vscode.commands.registerCommand('maia.review.undoAll', () => this.run('undoAll')),
      vscode.commands.registerCommand('maia.review.next', () => this.go(1)),
      vscode.commands.registerCommand('maia.review.previous', () => this.go(-1)),
    );
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
  }

  // ---------- ReviewHost ----------

  addTurn(files: TurnFile[]): void {
    this.set.addTurn(files);
    this.refresh();
  }

  clear(): void {
    this.set.clear();
    this.refresh();
  }

  takeUndone(): UndoneReport[] {
    return this.set.takeUndone();
  }

  giveBack(reports: UndoneReport[]): void {
    this.set.giveBack(reports);
  }

  async run(action: 'next' | 'keepAll' | 'undoAll'): Promise<void> {
    if (action === 'next') {
      await this.go(1);
      return;
    }
    for (const path of this.set.paths()) {
      if (action === 'keepAll') {
        this.set.keepFile(path);
      } else {
        await this.undoFile(path);
      }
    }
    this.refresh();
  }

  /** Proposals shown for permission cards: how to answer each, by path. */
  private readonly proposals = new Map<string, (text: string | undefined) => void>();

  async propose(path: string, before: string, proposed: string): Promise<Proposal> {
    const doc = await this.document(path);
    if (doc.isDirty || doc.getText() !== before || this.set.get(path)) {
      void vscode.window.showWarningMessage('MAIA: the file has unsaved or unreviewed changes; answer in the panel instead.');
      return { declined: 'the file has unsaved or unreviewed changes' };
    }
    // The proposal is unsaved text in the document: auto save would write it
    // to disk before the user answered. The message says how to turn it off,
    // with a button to the setting (VS Code for the web and code-server have
    // it on by default).
    const autoSave = vscode.workspace.getConfiguration('files', doc.uri).get<string>('autoSave', 'off');
    if (autoSave !== 'off') {
      const open = 'Open the auto save setting';
      void vscode.window
        .showWarningMessage(
          `MAIA: auto save is on ("files.autoSave": "${autoSave}"), so a proposal shown in the editor would be saved before you answer. Answer in the panel (Open diff shows the change), or set "files.autoSave" to "off" (File > Auto Save) to review in the editor.`,
          open,
        )
        .then((choice) => (choice === open ? vscode.commands.executeCommand('workbench.action.openSettings', 'files.autoSave') : undefined));
      return { declined: `auto save is on ("files.autoSave": "${autoSave}"); set it to "off" to review in the editor` };
    }
    const edit = new vscode.WorkspaceEdit();
    edit.replace(doc.uri, new vscode.Range(doc.positionAt(0), doc.positionAt(before.length)), proposed);
    if (!(await vscode.workspace.applyEdit(edit))) {
      return { declined: 'the editor refused the change' };
    }
    this.set.addProposal(path, before, proposed);
    const shown = await vscode.window.showTextDocument(doc, { preview: false });
    const first = this.set.hunks(path, doc.getText())[0];
    if (first) {
      const pos = new vscode.Position(Math.min(first.line, Math.max(doc.lineCount - 1, 0)), 0);
      shown.selection = new vscode.Selection(pos, pos);
      shown.revealRange(new vscode.Range(pos, pos), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
    this.refresh();
    return new Promise((resolve) => this.proposals.set(path, (text) => resolve(text === undefined ? undefined : { kept: text })));
  }

  async dropProposal(path: string): Promise<void> {
    const answer = this.proposals.get(path);
    this.proposals.delete(path);
    if (this.set.get(path)?.proposal) {
      await this.restore(path);
    }
    this.set.settle(path, undefined);
    answer?.(undefined);
    this.refresh();
  }

  /** The document of a proposal back to the file on disk (MAIA checks it is unchanged, then writes). */
  private async restore(path: string): Promise<void> {
    const doc = await this.document(path);
    const disk = new TextDecoder().decode(await vscode.workspace.fs.readFile(doc.uri));
    if (doc.getText() !== disk) {
      const edit = new vscode.WorkspaceEdit();
      edit.replace(doc.uri, new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length)), disk);
      await vscode.workspace.applyEdit(edit);
    }
    if (doc.isDirty) {
      await doc.save();
    }
  }

  /**
   * A proposal whose hunks are all kept or undone is answered with the text
   * kept, once its document is back to the disk's text (MAIA then writes it).
   */
  private settleProposals(): void {
    for (const [path, answer] of [...this.proposals]) {
      const f = this.set.get(path);
      const now = this.text(path);
      if (!f || now === undefined || f.locate(now).length === 0) {
        this.proposals.delete(path);
        this.set.settle(path, now);
        void this.restore(path).finally(() => answer(now));
      }
    }
  }

  // ---------- state ----------

  /** The text of `path` now: the open document's, else the disk's. */
  private text(path: string): string | undefined {
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.scheme === 'file' && d.uri.fsPath === path);
    if (doc) {
      return doc.getText();
    }
    try {
      return fs.readFileSync(path, 'utf8');
    } catch {
      return undefined;
    }
  }

  private refresh(): void {
    this.settleProposals();
    for (const editor of vscode.window.visibleTextEditors) {
      this.decorate(editor);
    }
    this.lenses.fire();
    const { label, changes } = this.set.count((p) => this.text(p));
    void vscode.commands.executeCommand('setContext', 'maia.reviewing', changes > 0);
    this.onCount(label);
  }

  private hunksOf(doc: vscode.TextDocument): Located[] {
    return doc.uri.scheme === 'file' ? this.set.hunks(doc.uri.fsPath, doc.getText()) : [];
  }

  private decorate(editor: vscode.TextEditor): void {
    const doc = editor.document;
    const added: vscode.DecorationOptions[] = [];
    const removed: vscode.DecorationOptions[] = [];
    const edited: vscode.DecorationOptions[] = [];
    const last = Math.max(doc.lineCount - 1, 0);
    for (const h of this.hunksOf(doc)) {
      const diff = new vscode.MarkdownString();
      diff.appendMarkdown(h.state === 'userEdited' ? '**MAIA changed these lines; you edited them since.**\n\n' : "**MAIA's change**\n\n");
      diff.appendCodeblock([...h.baseLines.map((l) => `- ${l}`), ...h.agentLines.map((l) => `+ ${l}`)].join('').trimEnd(), 'diff');
      if (h.lines > 0) {
        const range = new vscode.Range(h.line, 0, h.line + h.lines - 1, 0);
        (h.state === 'userEdited' ? edited : added).push({ range, hoverMessage: diff });
      }
      if (h.baseLines.length) {
        const at = Math.min(h.line, last);
        const line = doc.lineAt(at);
        removed.push({
          range: new vscode.Range(at, line.range.end.character, at, line.range.end.character),
          hoverMessage: diff,
          renderOptions: {
            after: {
              contentText: `  − ${firstRemoved(h.baseLines.join(''))}`,
              backgroundColor: new vscode.ThemeColor('diffEditor.removedLineBackground'),
              color: new vscode.ThemeColor('descriptionForeground'),
              textDecoration: 'line-through',
              margin: '0 0 0 1em',
            },
          },
        });
      }
    }
    editor.setDecorations(this.added, added);
    editor.setDecorations(this.removed, removed);
    editor.setDecorations(this.userEdited, edited);
  }

  private codeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    return reviewLenses(doc.uri.fsPath, this.hunksOf(doc), doc.lineCount).map(
      (l) =>
        new vscode.CodeLens(new vscode.Range(l.line, 0, l.line, 0), {
          title: l.title,
          tooltip: l.tooltip,
          command: l.command,
          arguments: l.arguments,
        }),
    );
  }

  /** The hunk under the cursor (or its removal point on the line). */
  private atCursor(): { path: string; hunk: Located } | undefined {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      return undefined;
    }
    const line = editor.selection.active.line;
    const hunk = this.hunksOf(editor.document).find((h) => line >= h.line && line < h.line + Math.max(h.lines, 1));
    return hunk ? { path: editor.document.uri.fsPath, hunk } : undefined;
  }

  // ---------- actions ----------

  private async document(path: string): Promise<vscode.TextDocument> {
    return vscode.workspace.openTextDocument(vscode.Uri.file(path));
  }

  private async keep(path?: string, id?: string): Promise<void> {
    if (!path || !id) {
      const here = this.atCursor();
      if (!here) {
        void vscode.window.showInformationMessage('MAIA: no change to review at the cursor.');
        return;
      }
      ({ path } = here);
      id = here.hunk.id;
    }
    const now = this.text(path);
    if (now !== undefined && this.set.keep(path, id, now)) {
      this.refresh();
    }
  }

  private async keepFile(path?: string): Promise<void> {
    path ??= vscode.window.activeTextEditor?.document.uri.fsPath;
    if (path) {
      this.set.keepFile(path);
      this.refresh();
    }
  }

  /** Applies undo results of one file as one `WorkspaceEdit`, saves, and queues their reports. */
  private async apply(doc: vscode.TextDocument, results: UndoResult[]): Promise<void> {
    const edit = new vscode.WorkspaceEdit();
    const wasDirty = doc.isDirty;
    let deletes = false;
    for (const r of results) {
      if (r.kind === 'edit') {
        edit.replace(doc.uri, new vscode.Range(doc.positionAt(r.edit.start), doc.positionAt(r.edit.end)), r.edit.text);
      } else if (r.kind === 'delete') {
        deletes = true;
      }
    }
    if (deletes) {
      edit.deleteFile(doc.uri, { ignoreIfNotExists: true });
    }
    if (!(await vscode.workspace.applyEdit(edit))) {
      void vscode.window.showWarningMessage('MAIA: the undo could not be applied; nothing changed.');
      return;
    }
    // A proposal is written by MAIA once answered; a change already written is saved.
    if (!deletes && !wasDirty && !this.set.get(doc.uri.fsPath)?.proposal) {
      await doc.save();
    }
    for (const r of results) {
      this.set.undoApplied(r);
    }
  }

  private async undo(path?: string, id?: string): Promise<void> {
    if (!path || !id) {
      const here = this.atCursor();
      if (!here) {
        void vscode.window.showInformationMessage('MAIA: no change to review at the cursor.');
        return;
      }
      ({ path } = here);
      id = here.hunk.id;
    }
    const doc = await this.document(path);
    const r = this.set.undo(path, id, doc.getText());
    if (r.kind === 'refused') {
      void vscode.window.showInformationMessage(`MAIA: not undone: ${r.reason}.`);
    } else {
      await this.apply(doc, [r]);
    }
    this.refresh();
  }

  /** Undoes every hunk of the file not edited by the user, bottom first (one edit). */
  private async undoFile(path?: string): Promise<void> {
    path ??= vscode.window.activeTextEditor?.document.uri.fsPath;
    if (!path || !this.set.get(path)) {
      return;
    }
    const doc = await this.document(path);
    let now = doc.getText();
    const results: UndoResult[] = [];
    for (;;) {
      const pending = this.set.hunks(path, now).filter((h) => h.state === 'pending');
      const h = pending[pending.length - 1];
      if (!h) {
        break;
      }
      const r = this.set.undo(path, h.id, now);
      if (r.kind === 'refused') {
        break;
      }
      results.push(r);
      if (r.kind === 'delete') {
        break;
      }
      now = now.slice(0, r.edit.start) + r.edit.text + now.slice(r.edit.end);
    }
    if (results.length) {
      await this.apply(doc, results);
    }
    this.refresh();
  }

  /** Next (1) or previous (-1) change over every file under review. */
  private async go(step: 1 | -1): Promise<void> {
    const spots: { path: string; line: number }[] = [];
    for (const path of this.set.paths()) {
      const now = this.text(path);
      for (const h of now === undefined ? [] : this.set.hunks(path, now)) {
        spots.push({ path, line: h.line });
      }
    }
    if (!spots.length) {
      void vscode.window.showInformationMessage('MAIA: no changes to review.');
      return;
    }
    const editor = vscode.window.activeTextEditor;
    const here = { path: editor?.document.uri.fsPath ?? '', line: editor?.selection.active.line ?? -1 };
    const cmp = (a: { path: string; line: number }, b: { path: string; line: number }) =>
      a.path === b.path ? a.line - b.line : a.path < b.path ? -1 : 1;
    const target =
      step === 1
        ? (spots.find((s) => cmp(s, here) > 0) ?? spots[0])
        : ([...spots].reverse().find((s) => cmp(s, here) < 0) ?? spots[spots.length - 1]);
    const doc = await this.document(target.path);
    const shown = await vscode.window.showTextDocument(doc, { preview: false });
    const pos = new vscode.Position(Math.min(target.line, Math.max(doc.lineCount - 1, 0)), 0);
    shown.selection = new vscode.Selection(pos, pos);
    shown.revealRange(new vscode.Range(pos, pos), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }
}
