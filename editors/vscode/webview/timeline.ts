// The timeline actions in the conversation: "Edit" and "Fork from here" on
// each user message, "Undo changes" at the end of each finished turn, with
// its preview (files, kinds, conflicts, diffs) and "Restore". Each is shown
// only when the agent advertised it.
import type { RevertPreview, RevertResult, ToWebview } from '../src/panel/protocol';
import { h, post } from './dom';

type Caps = Omit<Extract<ToWebview, { type: 'timeline' }>, 'type'>;

let caps: Caps = { rewind: false, fork: false, revert: false };
let busy = false;

/** A user message's element carries its id and raw text. */
type UserEl = HTMLElement & { _raw?: string };

export function setCaps(next: Caps, log: HTMLElement): void {
  caps = next;
  for (const el of Array.from(log.querySelectorAll<UserEl>('.message.user'))) {
    decorateUser(el);
  }
  for (const bar of Array.from(log.querySelectorAll<HTMLElement>('.turn-actions'))) {
    bar.hidden = !caps.revert;
  }
}

/** Buttons are disabled while a turn runs (the agent refuses these during one). */
export function setBusy(b: boolean, log: HTMLElement): void {
  busy = b;
  for (const btn of Array.from(log.querySelectorAll<HTMLButtonElement>('.message-actions button, .turn-actions button'))) {
    btn.disabled = b || btn.dataset.pending === 'true';
  }
}

function button(action: string, text: string, label: string, onClick: () => void): HTMLButtonElement {
  const b = h('button', { class: 'timeline-action', 'data-action': action, text, 'aria-label': label });
  b.disabled = busy;
  b.addEventListener('click', onClick);
  return b;
}

/** (Re)builds the Edit / Fork buttons of a user message that has an id. */
export function decorateUser(el: UserEl): void {
  el.querySelector(':scope > .message-actions')?.remove();
  const messageId = el.dataset.messageId;
  if (!messageId || (!caps.rewind && !caps.fork)) {
    return;
  }
  const text = el._raw ?? '';
  const bar = h('div', { class: 'message-actions', role: 'toolbar', 'aria-label': 'Message actions' });
  if (caps.rewind) {
    bar.append(
      button('edit', 'Edit', 'Edit this message and send it again (the conversation after it is dropped)', () =>
        post({ type: 'rewind', messageId, text }),
      ),
    );
  }
  if (caps.fork) {
    bar.append(
      button('fork', 'Fork from here', 'Fork the thread before this message', () => post({ type: 'fork', messageId, text })),
    );
  }
  el.append(bar);
}

/** Gives a user message its id (and raw text), and its buttons. */
export function identify(el: UserEl, messageId: string | undefined, text?: string, awaiting = false): void {
  if (text !== undefined) {
    el._raw = text;
  }
  if (messageId) {
    el.dataset.messageId = messageId;
    delete el.dataset.awaitingId;
  } else if (awaiting) {
    // Sent here: its id comes with the prompt's response.
    el.dataset.awaitingId = 'true';
  }
  decorateUser(el);
}

/** The latest user message still without an id: the prompt just sent (a
 * message steered in during its turn came with its own id). */
export function lastWithoutId(log: HTMLElement): UserEl | undefined {
  const all = Array.from(log.querySelectorAll<UserEl>('.message.user'));
  return all.reverse().find((el) => el.dataset.awaitingId === 'true');
}

/** Ends the turn of `messageId` with its "Undo changes" bar (once). */
export function endTurn(log: HTMLElement, messageId: string | undefined): void {
  if (!messageId || log.querySelector(`.turn-actions[data-message-id="${CSS.escape(messageId)}"]`)) {
    return;
  }
  const bar = h('div', { class: 'turn-actions', role: 'toolbar', 'aria-label': 'Turn actions', 'data-message-id': messageId });
  bar.hidden = !caps.revert;
  const undo = button('undo', 'Undo changes', "Undo this turn's file changes (a preview comes first)", () => {
    undo.dataset.pending = 'true';
    undo.disabled = true;
    post({ type: 'revertPreview', messageId });
  });
  bar.append(undo);
  log.append(bar);
}

function kindLabel(kind: string): string {
  return kind === 'created' ? 'created by MAIA: deleted' : kind === 'deleted' ? 'deleted by MAIA: recreated' : 'modified: restored';
}

function baseName(p: string): string {
  return p.split(/[\\/]/).pop() ?? p;
}

/** Shows the preview under the turn's bar: files, kinds, conflicts, Show diff, Restore. */
export function showPreview(log: HTMLElement, messageId: string, preview: RevertPreview): void {
  const bar = log.querySelector<HTMLElement>(`.turn-actions[data-message-id="${CSS.escape(messageId)}"]`);
  if (!bar) {
    return;
  }
  const undo = bar.querySelector<HTMLButtonElement>('[data-action="undo"]');
  if (undo) {
    undo.dataset.pending = 'false';
    undo.disabled = busy;
  }
  bar.querySelector('.revert')?.remove();
  const conflicts = preview.files.filter((f) => f.conflict).length;
  const card = h('section', {
    class: 'revert',
    role: 'group',
    'aria-label': 'Undo preview',
    'data-message-id': messageId,
  });
  const heading = preview.files.length
    ? `Undo changes: ${preview.files.length} file(s)${conflicts ? `, ${conflicts} changed by you since (kept)` : ''}`
    : 'No file changes to undo.';
  card.append(h('div', { class: 'revert-head', text: heading }));
  if (preview.reason && !preview.canRevert) {
    card.append(h('div', { class: 'revert-reason', text: preview.reason }));
  }
  const list = h('ul', { class: 'revert-files', role: 'list' });
  for (const f of preview.files) {
    const diff = h('button', {
      class: 'timeline-action',
      'data-action': 'diff',
      text: 'Show diff',
      'aria-label': `Show the diff of ${f.path}`,
    });
    diff.addEventListener('click', () => post({ type: 'openRevertDiff', path: f.path, restored: f.restored, kind: f.kind }));
    const li = h(
      'li',
      { class: f.conflict ? 'conflict' : '', 'data-path': f.path, 'data-kind': f.kind, title: f.path },
      h('span', { class: 'revert-path', text: baseName(f.path) }),
      h('span', { class: 'revert-kind', text: kindLabel(f.kind) }),
    );
    if (f.conflict) {
      li.append(h('span', { class: 'revert-conflict', text: 'changed by you since: kept' }));
    }
    li.append(diff);
    list.append(li);
  }
  if (preview.files.length) {
    card.append(list);
  }
  if (preview.notCaptured.length) {
    card.append(h('div', { class: 'revert-reason', text: `Not captured (cannot be restored): ${preview.notCaptured.join(', ')}` }));
  }
  const restorable = preview.files.some((f) => !f.conflict);
  const buttons = h('div', { class: 'revert-buttons' });
  if (preview.canRevert && preview.previewToken && restorable) {
    const token = preview.previewToken;
    const restore = h('button', { class: 'primary', 'data-action': 'restore', text: 'Restore' });
    restore.addEventListener('click', () => {
      restore.disabled = true;
      post({ type: 'revertApply', messageId, previewToken: token });
    });
    buttons.append(restore);
  }
  const close = h('button', { 'data-action': 'close', text: preview.files.length ? 'Cancel' : 'Close' });
  close.addEventListener('click', () => {
    card.remove();
    undo?.focus();
  });
  buttons.append(close);
  card.append(buttons);
  // Escape closes the preview.
  card.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      close.click();
    }
  });
  bar.append(card);
  (buttons.querySelector('button') as HTMLButtonElement | null)?.focus();
}

/** The outcome of Restore, in place of the preview's buttons. */
export function showResult(log: HTMLElement, messageId: string, result: RevertResult): void {
  const card = log.querySelector<HTMLElement>(`.revert[data-message-id="${CSS.escape(messageId)}"]`);
  if (!card) {
    return;
  }
  card.querySelector('.revert-buttons')?.remove();
  let text: string;
  if (result.reverted) {
    text = `Restored ${result.paths.length} file(s).`;
    if (result.conflicts.length) {
      text += ` Kept, changed by you since: ${result.conflicts.map(baseName).join(', ')}.`;
    }
  } else if (result.reason === 'stale_preview') {
    text = 'The files changed since the preview; nothing was restored. Run Undo changes again.';
  } else {
    text = `Nothing was restored${result.reason ? `: ${result.reason}` : ''}.`;
  }
  card.append(h('div', { class: 'revert-result', role: 'status', text }));
}
