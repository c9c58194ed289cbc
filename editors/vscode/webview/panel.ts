// The MAIA panel (runs inside the webview). It renders what the extension
// forwards from `maia acp` and posts the user's actions back; it never talks
// to maia itself.
import type * as acp from '@agentclientprotocol/sdk';
import type { Attachment, ToWebview } from '../src/panel/protocol';
import { h, post, renderMarkdown } from './dom';
import { ContextMap, readContextMap, renderContextMap } from './contextmap';
import * as timeline from './timeline';
import { renderTool, ToolCard } from './tools';

// ---------- layout ----------
const app = document.getElementById('app')!;
const title = h('span', { class: 'title', id: 'title', text: 'MAIA' });
const statusEl = h('span', { class: 'status', id: 'status', role: 'status', 'aria-live': 'polite' });
const usage = h('div', {
  class: 'usage',
  id: 'usage',
  role: 'meter',
  'aria-label': 'Context used (click for the map of the context)',
  tabindex: '0',
  'aria-haspopup': 'dialog',
  'aria-controls': 'context-map',
  'aria-expanded': 'false',
  hidden: '',
});
// The map of the context, opened from the meter.
const contextMapEl = h('div', { class: 'context-map', id: 'context-map', role: 'dialog', 'aria-label': 'Context map', hidden: '' });
let contextMap: ContextMap | undefined;
const usageBar = h('div', { class: 'usage-bar' });
const usageText = h('span', { class: 'usage-text' });
usage.append(h('div', { class: 'usage-track' }, usageBar), usageText);
const threadsBtn = h('button', { class: 'icon', id: 'threads-button', title: 'Threads', 'aria-label': 'Threads', text: '☰' });
const newBtn = h('button', { class: 'icon', id: 'new-button', title: 'New thread', 'aria-label': 'New thread', text: '+' });
const header = h('header', { role: 'toolbar', 'aria-label': 'MAIA' }, title, statusEl, usage, threadsBtn, newBtn);
const threads = h('div', { class: 'threads', id: 'threads', role: 'dialog', 'aria-label': 'Threads', hidden: '' });
const log = h('main', { class: 'log', id: 'log', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation' });
const planEl = h('section', { class: 'plan', id: 'plan', 'aria-label': 'Plan', hidden: '' });
const chips = h('div', { class: 'chips', id: 'attachments', 'aria-label': 'Attached context' });
const input = h('textarea', {
  id: 'input',
  rows: '3',
  placeholder: 'Ask MAIA — Enter sends, Shift+Enter new line, @ adds a file, / a command',
  'aria-label': 'Message to MAIA',
  'aria-autocomplete': 'list',
  'aria-controls': 'completion',
});
const completion = h('ul', { class: 'completion', id: 'completion', role: 'listbox', hidden: '' });
const pickers = h('div', { class: 'pickers', id: 'pickers' });
const sendBtn = h('button', { id: 'send', class: 'primary', text: 'Send', 'aria-label': 'Send' });
const stopBtn = h('button', { id: 'stop', text: 'Stop', 'aria-label': 'Stop (Esc)', hidden: '' });
// The edit review: "3 files, 7 changes to review"; the buttons go to the next change, keep or undo everything.
const reviewText = h('button', { class: 'link', id: 'review-next', title: 'Go to the next change (Alt+F5)' });
const reviewKeep = h('button', { id: 'review-keep-all', text: 'Keep all', 'aria-label': 'Keep all changes' });
const reviewUndo = h('button', { id: 'review-undo-all', text: 'Undo all', 'aria-label': 'Undo all changes' });
const reviewBar = h('div', { class: 'review', id: 'review', role: 'status', 'aria-live': 'polite', hidden: '' }, reviewText, reviewKeep, reviewUndo);
reviewText.addEventListener('click', () => post({ type: 'review', action: 'next' }));
reviewKeep.addEventListener('click', () => post({ type: 'review', action: 'keepAll' }));
reviewUndo.addEventListener('click', () => post({ type: 'review', action: 'undoAll' }));
const footer = h(
  'footer',
  {},
  reviewBar,
  planEl,
  chips,
  h('div', { class: 'input-wrap' }, completion, input),
  h('div', { class: 'actions' }, pickers, h('span', { class: 'spacer' }), stopBtn, sendBtn),
);
app.append(header, contextMapEl, threads, log, footer);

// ---------- state ----------
let busy = false;
let attachments: Attachment[] = [];
let commands: acp.AvailableCommand[] = [];
let configOptions: acp.SessionConfigOption[] = [];
/** The message being streamed into, by kind. */
let current: { kind: 'agent' | 'thought' | 'user'; id?: string | null; el: HTMLElement; body: HTMLElement; text: string } | undefined;
const toolCards = new Map<string, ToolCard>();
const permissionCards = new Map<number, HTMLElement>();
/** A thread is being replayed (`session/load`). */
let replaying = false;
/** The id of the latest user message (its turn gets the "Undo changes" bar). */
let lastUserId: string | undefined;

function setStatus(text: string, kind = ''): void {
  statusEl.textContent = text;
  statusEl.dataset.kind = kind;
}

function setBusy(b: boolean): void {
  busy = b;
  stopBtn.hidden = !b;
  sendBtn.disabled = b;
  app.classList.toggle('busy', b);
  timeline.setBusy(b, log);
  if (b) {
    setStatus('working…', 'busy');
  } else if (statusEl.dataset.kind === 'busy') {
    setStatus('');
  }
}

function scrollDown(): void {
  const nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 120;
  if (nearBottom) {
    log.scrollTop = log.scrollHeight;
  }
}

let pendingRender: HTMLElement[] = [];
function scheduleRender(): void {
  if (pendingRender.length === 1) {
    // On the next frame; a timer too, since frames stop while the page is
    // hidden or throttled (a render must not wait for the panel to show).
    let done = false;
    const render = (): void => {
      if (done) {
        return;
      }
      done = true;
      const items = pendingRender;
      pendingRender = [];
      for (const el of items) {
        const msg = el as HTMLElement & { _text?: string };
        renderMarkdown(el, msg._text ?? '');
      }
      scrollDown();
    };
    requestAnimationFrame(render);
    setTimeout(render, 100);
  }
}

function markDirty(body: HTMLElement, text: string): void {
  (body as HTMLElement & { _text?: string })._text = text;
  if (!pendingRender.includes(body)) {
    pendingRender.push(body);
    scheduleRender();
  }
}

// ---------- messages ----------
function newMessage(kind: 'agent' | 'thought' | 'user', id?: string | null): NonNullable<typeof current> {
  let el: HTMLElement;
  let body: HTMLElement;
  if (kind === 'thought') {
    body = h('div', { class: 'body' });
    el = h(
      'details',
      { class: 'message thought', role: 'article', 'aria-label': 'MAIA thought' },
      h('summary', { text: 'Thinking' }),
      body,
    );
  } else {
    body = h('div', { class: 'body' });
    const who = kind === 'user' ? 'You' : 'MAIA';
    el = h('article', { class: `message ${kind}`, 'aria-label': `${who} said` }, h('div', { class: 'who', text: who }), body);
  }
  log.append(el);
  current = { kind, id, el, body, text: '' };
  return current;
}

function appendChunk(kind: 'agent' | 'thought' | 'user', content: acp.ContentBlock, messageId?: string | null): void {
  let text = '';
  if (content.type === 'text') {
    text = content.text;
  } else if (content.type === 'resource_link') {
    text = `\n\n📎 ${content.name ?? content.uri}\n\n`;
  } else if (content.type === 'resource') {
    text = `\n\n📎 ${'uri' in content.resource ? content.resource.uri : ''}\n\n`;
  }
  if (!current || current.kind !== kind || (messageId && current.id && messageId !== current.id)) {
    newMessage(kind, messageId);
  }
  current!.text += text;
  markDirty(current!.body, current!.text);
}

/** A chip's label: the name, with the line range of a selection. */
function chipLabel(a: Attachment): string {
  return a.kind === 'selection' ? `${a.name}:${a.startLine}-${a.endLine}` : a.name;
}

function addUserMessage(text: string, att: Attachment[], messageId?: string): void {
  if (replaying) {
    // The replayed turn before this message is over.
    timeline.endTurn(log, lastUserId);
  }
  lastUserId = messageId;
  const m = newMessage('user');
  m.text = text;
  m.body.classList.add('plain');
  m.body.textContent = text;
  if (att.length) {
    m.el.append(h('div', { class: 'chips' }, ...att.map((a) => h('span', { class: 'chip', title: a.uri, text: chipLabel(a) }))));
  }
  timeline.identify(m.el, messageId, text, !replaying);
  current = undefined;
  log.scrollTop = log.scrollHeight;
}

function addNote(text: string, level: string): void {
  log.append(h('div', { class: `note ${level}`, role: level === 'error' ? 'alert' : 'note', text }));
  current = undefined;
  scrollDown();
}

// ---------- tool calls ----------
function toolCard(id: string): ToolCard {
  let card = toolCards.get(id);
  if (!card) {
    const el = h('section', { class: 'tool', role: 'group', 'data-tool-call-id': id });
    log.append(el);
    card = { el, state: { toolCallId: id } };
    toolCards.set(id, card);
    current = undefined;
  }
  return card;
}

function onToolUpdate(u: acp.ToolCall | acp.ToolCallUpdate, fresh: boolean): void {
  const card = toolCard(u.toolCallId);
  const s = card.state as Record<string, unknown>;
  if (fresh) {
    card.state = { ...u } as ToolCard['state'];
  } else {
    for (const [k, v] of Object.entries(u)) {
      if (v !== undefined && k !== 'sessionUpdate') {
        s[k] = v;
      }
    }
  }
  renderTool(card);
  scrollDown();
}

// ---------- permission ----------
function showPermission(m: Extract<ToWebview, { type: 'permission' }>): void {
  const card = toolCard(m.toolCall.toolCallId);
  onToolUpdate(m.toolCall, false);
  const reasonId = `reason-${m.requestId}`;
  const reason = h('input', {
    id: reasonId,
    class: 'reason',
    type: 'text',
    placeholder: 'Reason (sent with a rejection, optional)',
    'aria-label': 'Reason for rejecting',
  });
  const answer = (o: acp.PermissionOption) =>
    post({
      type: 'permission',
      requestId: m.requestId,
      optionId: o.optionId,
      reason: o.kind.startsWith('reject') ? reason.value : undefined,
    });
  const buttons = m.options.map((o) => {
    const b = h('button', {
      class: `option ${o.kind.startsWith('allow') ? 'allow' : 'reject'}${o.kind === 'allow_once' ? ' primary' : ''}`,
      'data-option-id': o.optionId,
      'data-kind': o.kind,
      text: o.name,
    });
    b.addEventListener('click', () => answer(o));
    return b;
  });
  if (m.reviewInEditor) {
    const review = h('button', {
      class: 'option review-in-editor',
      text: 'Review in editor',
      'aria-label': 'Review in editor: keep or undo each change there; the answer follows',
    });
    review.addEventListener('click', () => {
      review.textContent = 'Keep or undo each change in the editor…';
      post({ type: 'reviewPermission', requestId: m.requestId });
    });
    buttons.push(review);
  }
  const reject = m.options.find((o) => o.kind === 'reject_once') ?? m.options.find((o) => o.kind.startsWith('reject'));
  const ask = h(
    'div',
    {
      class: 'permission',
      role: 'alertdialog',
      'aria-label': `MAIA asks permission: ${m.toolCall.title ?? card.state.title ?? 'tool call'}`,
      'aria-describedby': `question-${m.requestId}`,
      'data-request-id': String(m.requestId),
    },
    h(
      'div',
      { class: 'question', id: `question-${m.requestId}` },
      'Allow this?',
      h('span', { class: 'hint', text: reject ? 'Enter: the focused answer · Esc: reject' : 'Enter: the focused answer' }),
    ),
    h('div', { class: 'options' }, ...buttons),
    reason,
  );
  // Keyboard: Enter on a button is that answer; Enter in the reason field or
  // Escape anywhere in the card rejects (with the reason). Escape here does
  // not stop the turn.
  ask.addEventListener('keydown', (e) => {
    if (reject && (e.key === 'Escape' || (e.key === 'Enter' && e.target === reason))) {
      e.preventDefault();
      e.stopPropagation();
      answer(reject);
    }
  });
  card.ask = ask;
  renderTool(card);
  permissionCards.set(m.requestId, card.el);
  scrollDown();
  buttons[0]?.focus();
}

/** "Review in editor" declined: the button goes, the reason stays on the card. */
function reviewDeclined(requestId: number, reason: string): void {
  const ask = permissionCards.get(requestId)?.querySelector('.permission');
  const button = ask?.querySelector('.review-in-editor');
  if (!ask || !button) {
    return;
  }
  const refocus = document.activeElement === button;
  button.remove();
  ask.querySelector('.review-declined')?.remove();
  ask.querySelector('.options')?.after(h('div', { class: 'review-declined', role: 'note', text: `Not shown in the editor: ${reason}. Answer here.` }));
  if (refocus) {
    ask.querySelector<HTMLElement>('button.option')?.focus();
  }
}

function permissionDone(requestId: number, optionId?: string, answered?: string): void {
  const el = permissionCards.get(requestId);
  permissionCards.delete(requestId);
  if (!el) {
    return;
  }
  const card = toolCards.get(el.dataset.toolCallId ?? '');
  const ask = card?.ask;
  if (card && ask) {
    const chosen = ask.querySelector<HTMLElement>(`[data-option-id="${CSS.escape(optionId ?? '')}"]`);
    card.ask = undefined;
    card.answered = answered ?? (chosen ? `Answered: ${chosen.textContent}` : 'Dismissed');
    renderTool(card);
  }
  if (document.activeElement === document.body) {
    input.focus();
  }
}

// ---------- plan, usage, compaction ----------
function showPlan(entries: acp.PlanEntry[]): void {
  planEl.hidden = entries.length === 0;
  const done = entries.filter((e) => e.status === 'completed').length;
  planEl.replaceChildren(
    h('div', { class: 'plan-head', text: `Plan · ${done}/${entries.length}` }),
    h(
      'ul',
      { role: 'list' },
      ...entries.map((e) =>
        h(
          'li',
          { class: e.status, 'aria-label': `${e.content}: ${e.status.replace('_', ' ')}` },
          h('span', { class: 'check', 'aria-hidden': 'true', text: e.status === 'completed' ? '☑' : e.status === 'in_progress' ? '◐' : '☐' }),
          h('span', { text: e.content }),
        ),
      ),
    ),
  );
}

function showUsage(u: { used: number; size: number; cost?: { amount: number; currency: string } | null }): void {
  usage.hidden = false;
  contextMap = readContextMap(u);
  if (!contextMapEl.hidden) {
    drawContextMap();
  }
  const pct = u.size > 0 ? Math.min(100, Math.round((u.used / u.size) * 100)) : 0;
  usageBar.style.width = `${pct}%`;
  usage.dataset.level = pct > 85 ? 'high' : pct > 60 ? 'mid' : 'low';
  usage.setAttribute('aria-valuemin', '0');
  usage.setAttribute('aria-valuemax', String(u.size));
  usage.setAttribute('aria-valuenow', String(u.used));
  const k = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
  const cost = u.cost ? ` · ${u.cost.amount.toFixed(4)} ${u.cost.currency}` : '';
  usageText.textContent = `${k(u.used)} / ${k(u.size)}${cost}`;
  usage.title = `Context: ${u.used} of ${u.size} tokens (${pct}%)${cost}`;
}

/** The popover's contents: the map when maia sent one, else the meter's numbers. */
function drawContextMap(): void {
  contextMapEl.replaceChildren(
    ...(contextMap
      ? renderContextMap(contextMap)
      : [h('div', { class: 'ctx-head', text: `${usage.title} — this maia sends no map of the context.` })]),
  );
}

function toggleContextMap(open = contextMapEl.hidden): void {
  if (open) {
    drawContextMap();
  }
  contextMapEl.hidden = !open;
  usage.setAttribute('aria-expanded', String(open));
}

const compactions = new Map<string, HTMLElement>();
function showCompaction(u: { compactionId: string; status: string; summary?: acp.ContentBlock[] | null; error?: string | null }): void {
  let el = compactions.get(u.compactionId);
  if (!el) {
    el = h('div', { class: 'note compaction', role: 'note' });
    compactions.set(u.compactionId, el);
    log.append(el);
    current = undefined;
  }
  const label =
    u.status === 'in_progress'
      ? 'Compacting the context…'
      : u.status === 'completed'
        ? 'Context compacted'
        : `Compaction ${u.status}${u.error ? `: ${u.error}` : ''}`;
  const summary = (u.summary ?? []).map((b) => (b.type === 'text' ? b.text : '')).join('');
  if (summary) {
    const body = h('div', { class: 'body' });
    renderMarkdown(body, summary);
    el.replaceChildren(h('details', {}, h('summary', { text: label }), body));
  } else {
    el.textContent = label;
  }
  scrollDown();
}

// ---------- pickers ----------
function renderPickers(): void {
  pickers.replaceChildren();
  for (const o of configOptions) {
    if (o.type !== 'select') {
      continue;
    }
    const sel = h('select', { 'aria-label': o.name, title: o.description ?? o.name, 'data-config-id': o.id });
    const flat: { value: string; name: string }[] = [];
    for (const item of o.options) {
      if ('group' in item) {
        flat.push(...item.options);
      } else {
        flat.push(item);
      }
    }
    for (const v of flat) {
      const opt = h('option', { value: v.value, text: v.name });
      if (v.value === o.currentValue) {
        opt.selected = true;
      }
      sel.append(opt);
    }
    sel.addEventListener('change', () => post({ type: 'setConfig', configId: o.id, value: sel.value }));
    pickers.append(sel);
  }
}

// ---------- threads ----------
function showThreads(sessions: acp.SessionInfo[], currentId?: string): void {
  threads.hidden = false;
  const rename = h('input', { type: 'text', placeholder: 'New name for this thread', 'aria-label': 'New thread name' });
  const renameBtn = h('button', { text: 'Rename' });
  renameBtn.addEventListener('click', () => {
    if (rename.value.trim()) {
      post({ type: 'renameThread', name: rename.value.trim() });
      threads.hidden = true;
    }
  });
  const list = h('ul', { role: 'listbox', 'aria-label': 'Saved threads' });
  for (const s of sessions) {
    const open = h('button', { class: 'thread-open', text: s.title || s.sessionId, title: s.updatedAt ?? '' });
    open.addEventListener('click', () => {
      threads.hidden = true;
      post({ type: 'openThread', sessionId: s.sessionId });
    });
    const del = h('button', { class: 'icon', text: '🗑', 'aria-label': `Delete ${s.title || s.sessionId}` });
    del.addEventListener('click', () => post({ type: 'deleteThread', sessionId: s.sessionId }));
    const when = s.updatedAt ? new Date(s.updatedAt).toLocaleString() : '';
    list.append(
      h(
        'li',
        { role: 'option', 'aria-selected': String(s.sessionId === currentId), 'data-session-id': s.sessionId },
        open,
        h('span', { class: 'when', text: when }),
        del,
      ),
    );
  }
  const close = h('button', { class: 'icon', text: '×', 'aria-label': 'Close threads' });
  close.addEventListener('click', () => (threads.hidden = true));
  threads.replaceChildren(
    h('div', { class: 'threads-head' }, h('strong', { text: 'Threads' }), close),
    h('div', { class: 'rename' }, rename, renameBtn),
    sessions.length ? list : h('p', { text: 'No saved threads in this folder.' }),
  );
}

// ---------- attachments ----------
function renderChips(): void {
  chips.replaceChildren(
    ...attachments.map((a, i) => {
      const x = h('button', { class: 'chip-x', text: '×', 'aria-label': `Remove ${a.name}` });
      x.addEventListener('click', () => {
        attachments.splice(i, 1);
        renderChips();
      });
      return h('span', { class: 'chip', title: a.uri }, chipLabel(a), x);
    }),
  );
}

function addAttachment(a: Attachment): void {
  if (!attachments.some((b) => b.kind === a.kind && b.uri === a.uri && b.name === a.name)) {
    attachments.push(a);
    renderChips();
  }
}

// ---------- completion (/ commands, @ files) ----------
interface Item {
  label: string;
  detail?: string;
  apply(): void;
}
let items: Item[] = [];
let active = 0;
let fileRequest = 0;

function showCompletion(list: Item[]): void {
  items = list;
  active = 0;
  completion.hidden = list.length === 0;
  input.setAttribute('aria-expanded', String(list.length > 0));
  completion.replaceChildren(
    ...list.map((it, i) => {
      const li = h(
        'li',
        { role: 'option', id: `completion-${i}`, 'aria-selected': String(i === active) },
        h('span', { class: 'label', text: it.label }),
        h('span', { class: 'detail', text: it.detail ?? '' }),
      );
      li.addEventListener('mousedown', (e) => {
        e.preventDefault();
        it.apply();
        hideCompletion();
      });
      return li;
    }),
  );
  if (list.length) {
    input.setAttribute('aria-activedescendant', 'completion-0');
  }
}

function hideCompletion(): void {
  items = [];
  completion.hidden = true;
  input.setAttribute('aria-expanded', 'false');
  input.removeAttribute('aria-activedescendant');
}

function moveActive(delta: number): void {
  if (!items.length) {
    return;
  }
  active = (active + delta + items.length) % items.length;
  Array.from(completion.children).forEach((li, i) => li.setAttribute('aria-selected', String(i === active)));
  input.setAttribute('aria-activedescendant', `completion-${active}`);
  completion.children[active]?.scrollIntoView({ block: 'nearest' });
}

/** The `@word` or leading `/word` being typed at the caret. */
function tokenAtCaret(): { kind: '@' | '/'; start: number; query: string } | undefined {
  const before = input.value.slice(0, input.selectionStart ?? 0);
  const slash = /^\/(\S*)$/.exec(before);
  if (slash) {
    return { kind: '/', start: 0, query: slash[1] };
  }
  const at = /(^|\s)@(\S*)$/.exec(before);
  if (at) {
    return { kind: '@', start: before.length - at[2].length - 1, query: at[2] };
  }
  return undefined;
}

function replaceToken(start: number, text: string): void {
  const caret = input.selectionStart ?? input.value.length;
  input.value = input.value.slice(0, start) + text + input.value.slice(caret);
  const pos = start + text.length;
  input.setSelectionRange(pos, pos);
  input.focus();
}

function updateCompletion(): void {
  const tok = tokenAtCaret();
  if (!tok) {
    hideCompletion();
    return;
  }
  if (tok.kind === '/') {
    const q = tok.query.toLowerCase();
    showCompletion(
      commands
        .filter((c) => c.name.toLowerCase().startsWith(q))
        .map((c) => ({
          label: `/${c.name}`,
          detail: c.description,
          apply: () => replaceToken(0, `/${c.name} `),
        })),
    );
  } else {
    fileRequest++;
    post({ type: 'searchFiles', requestId: fileRequest, query: tok.query });
  }
}

function onFiles(requestId: number, found: { uri: string; path: string }[]): void {
  const tok = tokenAtCaret();
  if (requestId !== fileRequest || !tok || tok.kind !== '@') {
    return;
  }
  showCompletion(
    found.map((f) => ({
      label: f.path,
      apply: () => {
        replaceToken(tok.start, `@${f.path} `);
        addAttachment({ kind: 'file', uri: f.uri, name: f.path });
      },
    })),
  );
}

// ---------- input ----------
function send(): void {
  const text = input.value;
  if (busy || (!text.trim() && attachments.length === 0)) {
    return;
  }
  post({ type: 'send', text, attachments });
  input.value = '';
  attachments = [];
  renderChips();
  hideCompletion();
}

input.addEventListener('keydown', (e) => {
  if (!completion.hidden && items.length) {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      moveActive(e.key === 'ArrowDown' ? 1 : -1);
      return;
    }
    if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      items[active]?.apply();
      hideCompletion();
      return;
    }
    if (e.key === 'Escape') {
      e.preventDefault();
      hideCompletion();
      return;
    }
  }
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  } else if (e.key === 'Escape' && busy) {
    e.preventDefault();
    post({ type: 'cancel' });
  }
});
input.addEventListener('input', updateCompletion);
input.addEventListener('blur', () => setTimeout(hideCompletion, 150));
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && busy && e.target !== input) {
    post({ type: 'cancel' });
  }
});
sendBtn.addEventListener('click', send);
stopBtn.addEventListener('click', () => post({ type: 'cancel' }));
newBtn.addEventListener('click', () => post({ type: 'newThread' }));
usage.addEventListener('click', () => toggleContextMap());
usage.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' || e.key === ' ') {
    e.preventDefault();
    toggleContextMap();
  } else if (e.key === 'Escape' && !contextMapEl.hidden) {
    e.stopPropagation();
    toggleContextMap(false);
  }
});
contextMapEl.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') {
    e.stopPropagation();
    toggleContextMap(false);
    usage.focus();
  }
});
threadsBtn.addEventListener('click', () => {
  if (threads.hidden) {
    post({ type: 'listThreads' });
  } else {
    threads.hidden = true;
  }
});

// Drag and drop (in VS Code, hold Shift while dropping from the explorer).
for (const ev of ['dragenter', 'dragover']) {
  app.addEventListener(ev, (e) => {
    e.preventDefault();
    app.classList.add('dropping');
  });
}
app.addEventListener('dragleave', () => app.classList.remove('dropping'));
app.addEventListener('drop', (e) => {
  e.preventDefault();
  app.classList.remove('dropping');
  const dt = (e as DragEvent).dataTransfer;
  const raw = dt?.getData('application/vnd.code.uri-list') || dt?.getData('text/uri-list') || '';
  for (const line of raw.split(/\r?\n/)) {
    const uri = line.trim();
    if (uri && !uri.startsWith('#') && uri.startsWith('file:')) {
      const name = decodeURIComponent(uri.split('/').pop() ?? uri);
      addAttachment({ kind: 'file', uri, name });
    }
  }
  input.focus();
});

// ---------- messages from the extension ----------
function onUpdate(u: acp.SessionUpdate): void {
  switch (u.sessionUpdate) {
    case 'agent_message_chunk':
      appendChunk('agent', u.content, u.messageId);
      break;
    case 'agent_thought_chunk':
      appendChunk('thought', u.content, u.messageId);
      break;
    case 'user_message_chunk':
      appendChunk('user', u.content, u.messageId);
      break;
    case 'tool_call':
      onToolUpdate(u, true);
      break;
    case 'tool_call_update':
      onToolUpdate(u, false);
      break;
    case 'plan':
      showPlan(u.entries);
      break;
    case 'available_commands_update':
      commands = u.availableCommands;
      break;
    case 'config_option_update':
      configOptions = u.configOptions;
      renderPickers();
      break;
    case 'current_mode_update':
      for (const o of configOptions) {
        if (o.type === 'select' && o.category === 'mode') {
          o.currentValue = u.currentModeId;
        }
      }
      renderPickers();
      break;
    case 'session_info_update':
      if (u.title) {
        title.textContent = u.title;
      }
      break;
    case 'usage_update':
      showUsage(u);
      break;
    case 'compaction_update':
      showCompaction(u);
      break;
    case 'notice':
      addNote(`${u.title}${u.description ? ` — ${u.description}` : ''}`, u.severity);
      break;
    default:
      break;
  }
}

function clearConversation(): void {
  log.replaceChildren();
  toolCards.clear();
  permissionCards.clear();
  compactions.clear();
  current = undefined;
  lastUserId = undefined;
  planEl.hidden = true;
  usage.hidden = true;
  contextMap = undefined;
  toggleContextMap(false);
}

window.addEventListener('message', (event: MessageEvent) => {
  const m = event.data as ToWebview;
  switch (m.type) {
    case 'status':
      if (m.state === 'ready') {
        setStatus('');
      } else if (m.state === 'error') {
        setStatus('stopped', 'error');
        const note = h('div', { class: 'note error', role: 'alert' }, h('span', { text: m.message ?? 'maia stopped' }));
        const retry = h('button', { text: 'Retry' });
        retry.addEventListener('click', () => post({ type: 'restart' }));
        note.append(retry);
        log.append(note);
      } else {
        setStatus(m.state === 'restarting' ? 'restarting…' : 'starting…', 'busy');
      }
      break;
    case 'session':
      clearConversation();
      title.textContent = m.title || 'MAIA';
      configOptions = m.configOptions;
      renderPickers();
      log.setAttribute('aria-busy', String(m.replaying));
      replaying = m.replaying;
      break;
    case 'replayed':
      log.setAttribute('aria-busy', 'false');
      replaying = false;
      timeline.endTurn(log, lastUserId);
      current = undefined;
      log.scrollTop = log.scrollHeight;
      break;
    case 'update':
      onUpdate(m.update);
      break;
    case 'userMessage':
      addUserMessage(m.text, m.attachments, m.messageId);
      break;
    case 'userMessageId': {
      const el = timeline.lastWithoutId(log);
      if (el) {
        timeline.identify(el, m.messageId);
        // The turn (steered messages included) is undone from its prompt on.
        lastUserId = m.messageId;
      }
      break;
    }
    case 'timeline':
      timeline.setCaps({ rewind: m.rewind, fork: m.fork, revert: m.revert }, log);
      break;
    case 'restoreInput':
      input.value = m.text;
      input.focus();
      input.setSelectionRange(m.text.length, m.text.length);
      break;
    case 'revertPreview':
      timeline.showPreview(log, m.messageId, m.preview);
      break;
    case 'revertDone':
      timeline.showResult(log, m.messageId, m.result);
      break;
    case 'busy':
      setBusy(m.busy);
      break;
    case 'turnEnd':
      current = undefined;
      if (!m.error) {
        timeline.endTurn(log, lastUserId);
      }
      if (m.error) {
        addNote(m.error, 'error');
      } else if (m.stopReason === 'cancelled') {
        addNote('Stopped.', 'info');
      } else if (m.stopReason && m.stopReason !== 'end_turn') {
        addNote(`Turn ended: ${m.stopReason.replace(/_/g, ' ')}`, 'warning');
      }
      break;
    case 'permission':
      showPermission(m);
      break;
    case 'permissionDone':
      permissionDone(m.requestId, m.optionId, m.answered);
      break;
    case 'reviewDeclined':
      reviewDeclined(m.requestId, m.reason);
      break;
    case 'threads':
      showThreads(m.sessions, m.currentId);
      break;
    case 'config':
      configOptions = m.configOptions;
      renderPickers();
      break;
    case 'files':
      onFiles(m.requestId, m.items);
      break;
    case 'attach':
      addAttachment(m.attachment);
      input.focus();
      break;
    case 'focusInput':
      input.focus();
      break;
    case 'notice':
      addNote(m.text, m.level);
      break;
    case 'reviewCount':
      reviewText.textContent = m.label;
      reviewText.setAttribute('aria-label', `${m.label}: go to the next change`);
      reviewBar.hidden = !m.label;
      break;
  }
});

post({ type: 'ready' });
input.focus();
