// The web page served by `maia serve` at `/`: the VS Code panel's own
// webview script and styles (`webview/`, `media/panel.css`), with `host.ts`
// in the extension's place, and the page's own parts: who is logged in,
// log out, steer and queue while a turn runs, read-only for observers.
import { onPanelMessage } from './shim';
import '../webview/panel';
import { h } from '../webview/dom';
import type { ToWebview } from '../src/panel/protocol';
import { WebHost } from './host';

const data = document.body.dataset;
const app = document.getElementById('app')!;
const toPanel = (m: ToWebview) => {
  if (m.type === 'session') {
    // A session opened (or started with +): the list gives way to it.
    document.getElementById('threads')?.setAttribute('hidden', '');
  }
  window.dispatchEvent(new MessageEvent('message', { data: m }));
};

// Who is logged in, and the logout form (a POST to this page only).
const who = h('span', { class: 'who-am-i', id: 'who', text: data.token ?? '' });
const logout = h('form', { method: 'post', action: '/logout', class: 'logout' }, h('button', { type: 'submit', id: 'logout', text: 'Log out' }));
document.querySelector('header')?.append(who, logout);

// Steer and Queue: shown while a turn runs, beside Stop.
const input = document.getElementById('input') as HTMLTextAreaElement;
input.placeholder = 'Message to MAIA — Enter sends, Shift+Enter a new line';
const steerBtn = h('button', { id: 'steer', class: 'while-busy', text: 'Steer', 'aria-label': 'Steer: add the message to the running turn' });
const queueBtn = h('button', { id: 'queue', class: 'while-busy', text: 'Queue', 'aria-label': 'Queue: send the message when the turn ends' });
document.getElementById('stop')?.before(steerBtn, queueBtn);

const host = new WebHost(
  { token: data.token ?? '', role: data.role ?? 'observer', session: data.session ?? '', cwd: data.cwd ?? '' },
  toPanel,
  (role) => {
    app.classList.toggle('observer', role !== 'controller');
    who.textContent = role === 'controller' ? (data.token ?? '') : `${data.token ?? ''} · read-only`;
    input.readOnly = role !== 'controller';
  },
);

for (const [button, run] of [
  [steerBtn, (t: string) => host.steer(t)],
  [queueBtn, (t: string) => host.queue(t)],
] as const) {
  button.addEventListener('click', () => {
    const text = input.value.trim();
    if (text && !host.readOnly) {
      input.value = '';
      run(text).catch((e: unknown) => toPanel({ type: 'notice', level: 'error', text: e instanceof Error ? e.message : String(e) }));
      input.focus();
    }
  });
}

// Links in answers open in a new tab, never in place of the page.
document.getElementById('log')?.addEventListener('click', (e) => {
  const a = (e.target as HTMLElement).closest('a');
  const href = a?.getAttribute('href') ?? '';
  if (a && /^https?:/i.test(href)) {
    e.preventDefault();
    window.open(href, '_blank', 'noopener,noreferrer');
  }
});

onPanelMessage((m) => void host.onMessage(m));
