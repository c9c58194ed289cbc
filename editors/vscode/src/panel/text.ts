// Text helpers for the panel's host side (no `vscode` import).
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Attachment } from './protocol';

/** `fs/read_text_file`'s `line` (1-based) and `limit` (lines) applied to `text`. */
export function sliceLines(text: string, line?: number | null, limit?: number | null): string {
  if (!line && !limit) {
    return text;
  }
  const lines = text.split('\n');
  const start = Math.max(0, (line ?? 1) - 1);
  const end = limit ? start + limit : lines.length;
  return lines.slice(start, end).join('\n');
}

/**
 * A user message as maia replays it (`session/load`): what was typed, then one
 * line per attachment, `@/abs/path` for a file and `@file:///abs/path#L3-4`
 * for a selection. Returns the typed text and the attachments (named
 * relative to `root` when inside it), so the replay shows chips again.
 */
export function replayedUserMessage(text: string, root: string): { text: string; attachments: Attachment[] } {
  const lines = text.split('\n');
  const attachments: Attachment[] = [];
  while (lines.length > 0) {
    const a = mention(lines[lines.length - 1], root);
    if (!a) {
      break;
    }
    // An `@name` typed in the text and the same file attached are one chip.
    if (!attachments.some((b) => b.kind === a.kind && b.uri === a.uri)) {
      attachments.unshift(a);
    }
    lines.pop();
  }
  return { text: lines.join('\n'), attachments };
}

function mention(line: string, root: string): Attachment | undefined {
  let filePath: string;
  let range: RegExpExecArray | null = null;
  try {
    if (line.startsWith('@file://')) {
      const url = new URL(line.slice(1));
      range = /^#L(\d+)-(\d+)$/.exec(url.hash);
      url.hash = '';
      filePath = fileURLToPath(url);
    } else if (line.startsWith('@/')) {
      filePath = line.slice(1);
    } else {
      return undefined;
    }
  } catch {
    return undefined;
  }
  const uri = pathToFileURL(filePath).href;
  const name = filePath.startsWith(root + path.sep) ? path.relative(root, filePath) : path.basename(filePath);
  if (range) {
    return { kind: 'selection', uri, name, text: '', startLine: Number(range[1]), endLine: Number(range[2]) };
  }
  return { kind: 'file', uri, name };
}
