// The panel's DOM basics: the message bridge to the extension, an element
// builder, and Markdown rendering (sanitised, code blocks with Copy / Insert).
import { marked } from 'marked';
import DOMPurify from 'dompurify';
import type { ToHost } from '../src/panel/protocol';

declare function acquireVsCodeApi(): { postMessage(message: unknown): void };

const vscode = acquireVsCodeApi();
export const post = (m: ToHost) => vscode.postMessage(m);

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') {
      el.className = v;
    } else if (k === 'text') {
      el.textContent = v;
    } else {
      el.setAttribute(k, v);
    }
  }
  el.append(...children);
  return el;
}

// ---------- markdown ----------
export function renderMarkdown(target: HTMLElement, text: string): void {
  const html = marked.parse(text, { async: false, gfm: true, breaks: false }) as string;
  target.innerHTML = DOMPurify.sanitize(html, { USE_PROFILES: { html: true } });
  for (const a of Array.from(target.querySelectorAll('a'))) {
    a.setAttribute('rel', 'noopener');
  }
  for (const pre of Array.from(target.querySelectorAll('pre'))) {
    const code = pre.querySelector('code');
    const source = code?.textContent ?? pre.textContent ?? '';
    const copy = h('button', { class: 'code-action', 'data-action': 'copy', text: 'Copy', 'aria-label': 'Copy code' });
    copy.addEventListener('click', () => post({ type: 'copy', text: source }));
    const insert = h('button', {
      class: 'code-action',
      'data-action': 'insert',
      text: 'Insert',
      'aria-label': 'Insert code at the cursor',
    });
    insert.addEventListener('click', () => post({ type: 'insert', text: source }));
    const bar = h('div', { class: 'code-bar' }, copy, insert);
    pre.parentElement?.insertBefore(h('div', { class: 'code-block' }, bar, pre.cloneNode(true)), pre);
    pre.remove();
  }
}
