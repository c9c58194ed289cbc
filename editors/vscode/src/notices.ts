// What the extension tells the user outside the panel, shared by the panel
// and the language client so a problem is said once: a missing `maia`
// binary (one error notification per window, whoever finds it first), the
// packaged README behind "How to install", and the output channel, which
// drops lines written after it is disposed (maia's stderr while a window
// reloads).
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { findReadme } from './logic';

/** An output channel that ignores writes once disposed. */
export class Output implements vscode.Disposable {
  private closed = false;
  constructor(private readonly channel: vscode.OutputChannel) {}
  appendLine(line: string): void {
    if (!this.closed) {
      this.channel.appendLine(line);
    }
  }
  show(preserveFocus: boolean): void {
    if (!this.closed) {
      this.channel.show(preserveFocus);
    }
  }
  dispose(): void {
    this.closed = true;
    this.channel.dispose();
  }
}

/** The "maia cannot be found" notification, shown once until `maia.path` changes. */
export class MissingBinary {
  private shown = false;
  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly output: Output,
  ) {}

  /** Forget that it was shown (the settings changed: a new path may be missing too). */
  reset(): void {
    this.shown = false;
  }

  report(message: string): void {
    if (this.shown) {
      this.output.appendLine(`MAIA: ${message} (already reported)`);
      return;
    }
    this.shown = true;
    this.output.appendLine(`MAIA: ${message}`);
    void vscode.window.showErrorMessage(`MAIA: ${message}`, 'How to install', 'Open settings').then((a) => {
      if (a === 'How to install') {
        void this.openReadme();
      } else if (a === 'Open settings') {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'maia.path');
      }
    });
  }

  /** The extension's README says how to build and install maia. */
  async openReadme(): Promise<void> {
    const dir = this.extensionUri.fsPath;
    const name = findReadme(fs.existsSync(dir) ? fs.readdirSync(dir) : []);
    if (!name) {
      void vscode.window.showErrorMessage('MAIA: the extension has no README; see the MAIA repository (editors/vscode/README.md).');
      return;
    }
    await vscode.commands.executeCommand('markdown.showPreview', vscode.Uri.joinPath(this.extensionUri, name));
  }
}
