// The CodeLenses of a file under review (no `vscode` import): "Keep all" /
// "Undo all" above the first line, "Keep" / "Undo" above each hunk. VS Code
// draws every lens of a line in one row, so a hunk that starts on the
// first line shares the row with the file's lenses: there its lenses name
// the lines they act on ("Keep line 1", "Undo lines 1–2") so the row reads
// "MAIA: 2 changes to review — Keep all | Undo all | Keep line 1 | Undo line 1".
import type { Located } from './hunks';

export interface Lens {
  /** 0-based line the lens sits above. */
  line: number;
  title: string;
  tooltip: string;
  command: 'maia.review.keep' | 'maia.review.undo' | 'maia.review.keepFile' | 'maia.review.undoFile';
  arguments: string[];
}

export function reviewLenses(path: string, hunks: Located[], lineCount: number): Lens[] {
  if (!hunks.length) {
    return [];
  }
  const last = Math.max(lineCount - 1, 0);
  const n = hunks.length;
  const out: Lens[] = [
    {
      line: 0,
      title: `MAIA: ${n} ${n === 1 ? 'change' : 'changes'} to review — Keep all`,
      tooltip: `Keep all ${n} of MAIA's changes in this file`,
      command: 'maia.review.keepFile',
      arguments: [path],
    },
    {
      line: 0,
      title: 'Undo all',
      tooltip: `Undo all of MAIA's changes in this file (your own edits stay)`,
      command: 'maia.review.undoFile',
      arguments: [path],
    },
  ];
  for (const h of hunks) {
    const line = Math.min(h.line, last);
    const where = h.lines > 1 ? `lines ${h.line + 1}–${h.line + h.lines}` : `line ${h.line + 1}`;
    // On the file's row, a bare "Keep" would read as part of "Keep all".
    const named = line === 0 ? ` ${where}` : '';
    if (h.state === 'userEdited') {
      out.push({
        line,
        title: `Changed by you — Keep${named}`,
        tooltip: `MAIA's change at ${where}, which you edited since: it is not undone; Keep ends its review`,
        command: 'maia.review.keep',
        arguments: [path, h.id],
      });
      continue;
    }
    out.push(
      { line, title: `Keep${named}`, tooltip: `Keep MAIA's change at ${where}`, command: 'maia.review.keep', arguments: [path, h.id] },
      { line, title: `Undo${named}`, tooltip: `Undo MAIA's change at ${where}`, command: 'maia.review.undo', arguments: [path, h.id] },
    );
  }
  return out;
}
