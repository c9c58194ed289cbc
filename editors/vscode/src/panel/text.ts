// Text helpers for the panel's host side (no `vscode` import).

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
