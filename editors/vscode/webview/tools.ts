// A tool call's card: compact (one line: status, kind, title, with Open diff
// in reach) and expandable to its locations and output.
import type * as acp from '@agentclientprotocol/sdk';
import { changedLines } from '../src/review/hunks';
import { h, post } from './dom';

export interface ToolCard {
  el: HTMLElement;
  state: acp.ToolCallUpdate & { title?: string | null };
  ask?: HTMLElement;
  /** How the permission question was answered. */
  answered?: string;
  /** Set once the user opens or closes the details. */
  expanded?: boolean;
}

export function renderTool(card: ToolCard): void {
  const s = card.state;
  const status = s.status ?? 'pending';
  const name = s.title ?? 'Tool call';
  card.el.setAttribute('aria-label', `Tool call: ${name}, ${status.replace('_', ' ')}`);
  card.el.dataset.status = status;
  const details: Node[] = [];
  if (s.locations?.length) {
    const locs = h('div', { class: 'locations' });
    for (const loc of s.locations) {
      const label = loc.line ? `${loc.path}:${loc.line}` : loc.path;
      const a = h('a', { href: '#', class: 'location', text: label, title: `Open ${label}` });
      a.addEventListener('click', (e) => {
        e.preventDefault();
        post({ type: 'openLocation', path: loc.path, line: loc.line ?? undefined });
      });
      locs.append(a);
    }
    details.push(locs);
  }
  const actions: Node[] = [];
  for (const c of s.content ?? []) {
    if (c.type === 'diff') {
      // The lines the change touches, not the file's.
      const { removed, added } = changedLines(c.oldText ?? '', c.newText);
      const btn = h('button', {
        class: 'diff-button',
        'data-path': c.path,
        text: `Open diff: ${c.path.split(/[\\/]/).pop()} (${c.oldText == null ? 'new file' : `−${removed} +${added} lines`})`,
        'aria-label': `Open the diff of ${c.path}`,
      });
      btn.addEventListener('click', () =>
        post({ type: 'openDiff', path: c.path, oldText: c.oldText ?? null, newText: c.newText }),
      );
      // The diff stays in reach on the compact card.
      actions.push(h('div', { class: 'diff' }, btn));
    } else if (c.type === 'content') {
      const block = c.content;
      if (block.type === 'text') {
        const out = h('pre', { class: 'output' });
        out.textContent = block.text;
        details.push(out);
      }
    } else if (c.type === 'terminal') {
      details.push(h('div', { class: 'output', text: `terminal ${c.terminalId}` }));
    }
  }
  // Compact: one line; the details open on demand (and by themselves when
  // the call failed or asks permission).
  const expanded = card.expanded ?? (status === 'failed' || !!card.ask);
  const bodyId = `tool-body-${card.el.dataset.toolCallId}`;
  const toggle = h(
    'button',
    {
      class: 'tool-head',
      'aria-expanded': String(expanded && details.length > 0),
      'aria-controls': bodyId,
      title: details.length ? (expanded ? 'Hide details' : 'Show details') : name,
    },
    h('span', { class: 'chevron', 'aria-hidden': 'true', text: details.length ? (expanded ? '▾' : '▸') : '·' }),
    h('span', { class: `badge ${status}`, text: status.replace('_', ' ') }),
    h('span', { class: 'kind', text: s.kind ?? 'other' }),
    h('span', { class: 'tool-title', text: name }),
  );
  if (!details.length) {
    toggle.setAttribute('aria-disabled', 'true');
  }
  toggle.addEventListener('click', () => {
    if (details.length) {
      card.expanded = !expanded;
      renderTool(card);
      card.el.querySelector<HTMLElement>('.tool-head')?.focus();
    }
  });
  const parts: Node[] = [toggle, ...actions];
  if (details.length) {
    parts.push(h('div', { class: 'tool-body', id: bodyId, ...(expanded ? {} : { hidden: '' }) }, ...details));
  }
  if (card.answered) {
    parts.push(h('div', { class: 'answered', text: card.answered }));
  }
  // Re-rendering moves the permission question: keep the focus in it.
  const focused = document.activeElement;
  card.el.replaceChildren(...parts);
  if (card.ask) {
    card.el.append(card.ask);
    if (focused instanceof HTMLElement && card.ask.contains(focused) && document.activeElement !== focused) {
      focused.focus();
    }
  }
}
