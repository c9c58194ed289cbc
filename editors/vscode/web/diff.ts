// "Open diff" in the web page: the change as a unified diff in a dialog
// (there is no editor to open it in).
import { createTwoFilesPatch } from 'diff';
import { h } from '../webview/dom';

export function showDiff(path: string, oldText: string | null, newText: string): void {
  const name = path.split(/[\\/]/).pop() ?? path;
  const patch = createTwoFilesPatch(oldText === null ? '/dev/null' : path, path, oldText ?? '', newText, '', '', { context: 3 });
  const pre = h('pre', { class: 'diff-text' });
  for (const line of patch.split('\n').slice(2)) {
    const kind = line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk' : '';
    pre.append(h('span', { class: `diff-line ${kind}`, text: `${line}\n` }));
  }
  const close = h('button', { class: 'primary', text: 'Close', 'aria-label': 'Close the diff' });
  const dialog = h(
    'dialog',
    { class: 'diff-dialog', 'aria-label': `Diff of ${name}` },
    h('div', { class: 'diff-head' }, h('strong', { text: oldText === null ? `${name} (new file)` : name }), close),
    pre,
  );
  close.addEventListener('click', () => dialog.close());
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}
