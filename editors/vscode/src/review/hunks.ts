// The hunk model of the edit review (no `vscode` import): a file the agent
// changed is a base text (before the agent; `null`: the agent created it)
// and the agent's text. Its hunks are the line diff between the two; the
// document as it is now is matched against the agent's text, so a hunk is
// located in it through the user's own edits, and a hunk the user edited
// is marked so and never undone. Keep moves the base forward over the
// hunk; Undo gives the edit that puts the base's lines back and moves the
// agent's text back over the hunk. A file whose hunks are all kept or
// undone is reviewed.
import { diffArrays } from 'diff';

/** Lines with their line breaks (the last may have none). */
export function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** One contiguous change between the base and the agent's text. */
export interface Hunk {
  /** 0-based first line in the base, and the base's lines replaced. */
  baseStart: number;
  baseLines: string[];
  /** 0-based first line in the agent's text, and the lines it put there. */
  agentStart: number;
  agentLines: string[];
}

/** The hunks (no context lines) turning `base` into `agent`. */
export function diffHunks(base: string, agent: string): Hunk[] {
  const hunks: Hunk[] = [];
  let b = 0;
  let a = 0;
  let open: Hunk | undefined;
  for (const part of diffArrays(splitLines(base), splitLines(agent))) {
    if (!part.added && !part.removed) {
      open = undefined;
      b += part.count ?? part.value.length;
      a += part.count ?? part.value.length;
      continue;
    }
    if (!open) {
      open = { baseStart: b, baseLines: [], agentStart: a, agentLines: [] };
      hunks.push(open);
    }
    if (part.removed) {
      open.baseLines.push(...part.value);
      b += part.value.length;
    } else {
      open.agentLines.push(...part.value);
      a += part.value.length;
    }
  }
  return hunks;
}

export type HunkState = 'pending' | 'userEdited';

/** A hunk as found in the document now. */
export interface Located extends Hunk {
  /** Stable within one state of the file: `${baseStart}:${agentStart}`. */
  id: string;
  state: HunkState;
  /** 0-based first line in the document of the agent's lines, and their count there. */
  line: number;
  lines: number;
}

/** A user change in the agent's text's lines: [start, end) replaced. */
interface UserChange {
  start: number;
  end: number;
  added: number;
}

function userChanges(agent: string, now: string): UserChange[] {
  return diffHunks(agent, now).map((h) => ({
    start: h.baseStart,
    end: h.baseStart + h.baseLines.length,
    added: h.agentLines.length,
  }));
}

/** Whether a user change touches the hunk's lines in the agent's text. */
function touches(c: UserChange, start: number, end: number): boolean {
  if (start === end) {
    // The agent only removed lines: the point between two lines.
    return (c.start < start && c.end > start) || (c.start === start && c.end === start);
  }
  if (c.start === c.end) {
    return c.start > start && c.start < end;
  }
  return c.start < end && c.end > start;
}

/** What an undo sends to the agent: the hunk as the user undid it. */
export interface UndoneReport {
  path: string;
  /** 1-based line in the document where the restored text starts. */
  line: number;
  agentText: string;
  restoredText: string;
  fileRemoved?: boolean;
}

/** The document edit of an undo, in offsets of the text it was computed on. */
export interface TextReplace {
  start: number;
  end: number;
  text: string;
}

export type UndoResult =
  | { kind: 'edit'; edit: TextReplace; report: UndoneReport }
  /** The agent created the file and nothing else is in it: the undo deletes it. */
  | { kind: 'delete'; report: UndoneReport }
  | { kind: 'refused'; reason: string };

function offsetOfLine(lines: string[], line: number): number {
  let n = 0;
  for (let i = 0; i < line && i < lines.length; i++) {
    n += lines[i].length;
  }
  return n;
}

export class FileReview {
  constructor(
    readonly path: string,
    /** The text before the agent (minus what was kept); `null`: it did not exist. */
    public base: string | null,
    /** The agent's text (minus what was undone). */
    public agent: string,
    /** A proposal of a permission card, not written yet: undos are not reported, the file is not saved. */
    readonly proposal = false,
  ) {}

  get created(): boolean {
    return this.base === null;
  }

  hunks(): Hunk[] {
    return diffHunks(this.base ?? '', this.agent);
  }

  get done(): boolean {
    return this.base !== null && this.base === this.agent;
  }

  /** The hunks located in the document's text `now`. */
  locate(now: string): Located[] {
    const changes = userChanges(this.agent, now);
    return this.hunks().map((h) => {
      const start = h.agentStart;
      const end = start + h.agentLines.length;
      const edited = changes.some((c) => touches(c, start, end));
      let shift = 0;
      for (const c of changes) {
        if (c.end <= start && !(c.start === start && c.end === start && start !== end)) {
          shift += c.added - (c.end - c.start);
        }
      }
      return {
        ...h,
        id: `${h.baseStart}:${h.agentStart}`,
        state: edited ? 'userEdited' : 'pending',
        line: start + shift,
        lines: h.agentLines.length,
      };
    });
  }

  private find(id: string, now: string): Located | undefined {
    return this.locate(now).find((h) => h.id === id);
  }

  /** Keeps the hunk: the base takes the agent's lines (the document is not touched). */
  keep(id: string, now: string): boolean {
    const h = this.find(id, now);
    if (!h) {
      return false;
    }
    const base = splitLines(this.base ?? '');
    base.splice(h.baseStart, h.baseLines.length, ...h.agentLines);
    this.base = base.join('');
    return true;
  }

  /**
   * Undoes the hunk in the document `now`: the edit putting the base's
   * lines back (or the file's deletion), and what to tell the agent. A
   * hunk the user edited is refused.
   */
  undo(id: string, now: string): UndoResult {
    const h = this.find(id, now);
    if (!h) {
      return { kind: 'refused', reason: 'no such change (the file changed since)' };
    }
    if (h.state === 'userEdited') {
      return { kind: 'refused', reason: 'you edited these lines since; they are left as they are' };
    }
    const agentText = h.agentLines.join('');
    const restoredText = h.baseLines.join('');
    const agent = splitLines(this.agent);
    agent.splice(h.agentStart, h.agentLines.length, ...h.baseLines);
    if (this.created && agent.length === 0 && now === this.agent) {
      this.agent = '';
      this.base = '';
      return { kind: 'delete', report: { path: this.path, line: 1, agentText, restoredText: '', fileRemoved: true } };
    }
    const lines = splitLines(now);
    // The hunk's lines in the document are the agent's, untouched: whole
    // lines are swapped, so line breaks (also a last line without one) stay consistent.
    const start = offsetOfLine(lines, h.line);
    const end = offsetOfLine(lines, h.line + h.lines);
    const text = restoredText;
    this.agent = agent.join('');
    return { kind: 'edit', edit: { start, end, text }, report: { path: this.path, line: h.line + 1, agentText, restoredText } };
  }

  /** Keeps every hunk (those the user edited too). */
  keepAll(): void {
    this.base = this.agent;
  }
}

/** "3 files, 7 changes to review" (empty when nothing is left). */
export function reviewCount(files: number, changes: number): string {
  if (!files) {
    return '';
  }
  return `${files} ${files === 1 ? 'file' : 'files'}, ${changes} ${changes === 1 ? 'change' : 'changes'} to review`;
}

/** Applies a replace to a text (what the editor does with the edit). */
export function applyReplace(text: string, edit: TextReplace): string {
  return text.slice(0, edit.start) + edit.text + text.slice(edit.end);
}

/**
 * The lines a change removes and adds, counted over its hunks (not the
 * whole file's lines): a 1-line Edit that becomes 2 lines is −1 +2.
 */
export function changedLines(oldText: string, newText: string): { removed: number; added: number } {
  let removed = 0;
  let added = 0;
  for (const h of diffHunks(oldText, newText)) {
    removed += h.baseLines.length;
    added += h.agentLines.length;
  }
  return { removed, added };
}

/**
 * How many of the hunks proposed (`before` → `proposed`) the text `kept`
 * holds: those the review did not undo. A hunk the user changed counts as
 * not kept as proposed.
 */
export function keptOf(before: string, proposed: string, kept: string): { kept: number; total: number } {
  const total = diffHunks(before, proposed).length;
  const missing = diffHunks(kept, proposed).length;
  return { kept: Math.max(0, total - missing), total };
}

/** "Kept 1 of 2 changes" (the card of a change reviewed in the editor); "Undid all 2 changes: nothing written". */
export function keptLabel(before: string, proposed: string, kept: string): string {
  const n = keptOf(before, proposed, kept);
  if (n.kept === 0) {
    return `Undid ${n.total === 1 ? 'the change' : `all ${n.total} changes`}: nothing written`;
  }
  return `Kept ${n.kept} of ${n.total} ${n.total === 1 ? 'change' : 'changes'}`;
}
