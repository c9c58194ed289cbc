// The map of the context, drawn as a popover of the panel's meter: where the
// model's window goes (system prompt, instruction files, skills, tools, MCP
// tools, conversation, output reserve, free) and where auto-compaction fires.
// It reads `usage_update._meta.maia.contextMap` (docs/acp.md); the daemon's
// web page shares this file.
import { h } from './dom';

export interface Segment {
  kind: string;
  tokens: number;
  path?: string;
}

export interface ContextMap {
  window: number;
  used: number;
  reserve: number;
  autoCompactAt: number | null;
  source: string;
  segments: Segment[];
}

const LABELS: Record<string, string> = {
  systemPrompt: 'System prompt',
  instructions: 'Instructions',
  skills: 'Skills',
  tools: 'Tools',
  mcpTools: 'MCP tools',
  conversation: 'Conversation',
  reserve: 'Output reserve',
  free: 'Free',
};

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/** The map of a `usage_update`, when it carries a well-formed one. */
export function readContextMap(update: unknown): ContextMap | undefined {
  const obj = (v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
  const map = obj(obj(obj(obj(update)?._meta)?.maia)?.contextMap);
  const window = num(map?.window);
  const used = num(map?.used);
  if (!map || window === undefined || used === undefined || !Array.isArray(map.segments)) {
    return undefined;
  }
  const segments: Segment[] = [];
  for (const s of map.segments) {
    const seg = obj(s);
    const tokens = num(seg?.tokens);
    if (seg && typeof seg.kind === 'string' && tokens !== undefined) {
      segments.push({ kind: seg.kind, tokens, ...(typeof seg.path === 'string' ? { path: seg.path } : {}) });
    }
  }
  return {
    window,
    used,
    reserve: num(map.reserve) ?? 0,
    autoCompactAt: num(map.autoCompactAt) ?? null,
    source: typeof map.source === 'string' ? map.source : 'estimated',
    segments,
  };
}

const fmt = (n: number) => n.toLocaleString('en-US');
const baseName = (p: string) => p.split(/[\\/]/).filter(Boolean).slice(-2).join('/');

/** A segment's label: its kind's name, a file's last two path parts. */
function label(s: Segment): string {
  const name = LABELS[s.kind] ?? 'Other';
  return s.path ? `${name}: ${baseName(s.path)}` : name;
}

/** The popover's contents: a stacked bar, one row per segment, the reserve and the trigger. */
export function renderContextMap(map: ContextMap): HTMLElement[] {
  const total = Math.max(map.window, map.used, 1);
  const pct = (n: number) => `${((n / total) * 100).toFixed(1)}%`;
  const bar = h('div', { class: 'ctx-bar', 'aria-hidden': 'true' });
  for (const s of map.segments) {
    if (s.tokens > 0) {
      const part = h('span', { class: 'ctx-part', 'data-kind': s.kind, title: `${label(s)}: ${fmt(s.tokens)} tokens` });
      part.style.width = pct(s.tokens);
      bar.append(part);
    }
  }
  if (map.autoCompactAt !== null && map.window > 0) {
    const mark = h('span', { class: 'ctx-trigger', title: `Auto-compaction at ${fmt(map.autoCompactAt)} tokens` });
    mark.style.left = pct(Math.min(map.autoCompactAt, total));
    bar.append(mark);
  }
  const rows = h(
    'ul',
    { class: 'ctx-rows', role: 'list' },
    ...map.segments.map((s) =>
      h(
        'li',
        { 'data-kind': s.kind, ...(s.path ? { title: s.path } : {}) },
        h('span', { class: 'ctx-swatch', 'data-kind': s.kind, 'aria-hidden': 'true' }),
        h('span', { class: 'ctx-label', text: label(s) }),
        h('span', { class: 'ctx-tokens', text: `${fmt(s.tokens)} (${pct(s.tokens)})` }),
      ),
    ),
  );
  const head = h('div', {
    class: 'ctx-head',
    text: `${fmt(map.used)} of ${fmt(map.window)} tokens (${map.source})`,
  });
  const trigger =
    map.autoCompactAt === null
      ? 'Auto-compaction: off (/compact still works)'
      : `Auto-compaction at ${fmt(map.autoCompactAt)} tokens`;
  const foot = h('div', {
    class: 'ctx-foot',
    text: `${trigger} · ${fmt(map.reserve)} tokens kept for the answer`,
  });
  return [head, bar, rows, foot];
}
