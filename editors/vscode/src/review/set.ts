// The files of a thread under review and what the user undid (no `vscode`
// import). A turn's changed files come from MAIA's checkpoints: the dry
// run of `_session/files/revert` for the turn's user message lists every
// file the turn changed (through a permission card, in accept-edits or
// bypass mode, or by a shell command) with its text now and before the
// turn. A file already under review keeps its older base. Undone hunks
// wait here until a prompt or steer carries them (`_meta.maia.undoneHunks`).
import { FileReview, Located, reviewCount, UndoneReport, UndoResult } from './hunks';

/** A file a turn changed: its text before the turn (`null`: created) and now. */
export interface TurnFile {
  path: string;
  before: string | null;
  now: string;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);

/**
 * The files of a revert dry run's `_meta.maia.files` (text files only;
 * a file the turn deleted is not reviewed here). MAIA's `diff` holds the
 * text now (`oldText`) and after the revert (`newText`, the text before
 * the turn).
 */
export function turnFiles(dryRun: unknown): TurnFile[] {
  const files = obj(obj(obj(dryRun)?._meta)?.maia)?.files;
  if (!Array.isArray(files)) {
    return [];
  }
  return files.flatMap((f): TurnFile[] => {
    const o = obj(f);
    const diff = obj(o?.diff);
    if (!o || typeof o.path !== 'string' || !diff || o.conflict === true) {
      return [];
    }
    const now = diff.oldText;
    const before = diff.newText;
    if (o.kind === 'created' && typeof now === 'string') {
      return [{ path: o.path, before: null, now }];
    }
    if (o.kind === 'modified' && typeof now === 'string' && typeof before === 'string') {
      return [{ path: o.path, before, now }];
    }
    return [];
  });
}

export class ReviewSet {
  private readonly files = new Map<string, FileReview>();
  private undone: UndoneReport[] = [];
  /** Texts settled on a permission card ("Review in editor"): the turn's write of exactly that is reviewed already. */
  private readonly settled = new Map<string, string>();

  /** Adds a turn's files: new ones from their text before the turn, known ones keep their base. */
  addTurn(files: TurnFile[]): void {
    for (const f of files) {
      const settled = this.settled.get(f.path);
      this.settled.delete(f.path);
      if (settled === f.now && !this.files.has(f.path)) {
        continue;
      }
      const known = this.files.get(f.path);
      if (known) {
        known.agent = f.now;
      } else {
        this.files.set(f.path, new FileReview(f.path, f.before, f.now));
      }
      this.prune(f.path);
    }
  }

  /** A permission card's proposal under review (`before` is the file now, `proposed` the buffer). */
  addProposal(path: string, before: string, proposed: string): FileReview {
    const f = new FileReview(path, before, proposed, true);
    this.files.set(path, f);
    return f;
  }

  /** The proposal of `path` was answered with `text` (or dropped: `undefined`). */
  settle(path: string, text: string | undefined): void {
    if (this.files.get(path)?.proposal) {
      this.files.delete(path);
    }
    if (text !== undefined) {
      this.settled.set(path, text);
    }
  }

  /** Forgets every file (a new or another thread). */
  clear(): void {
    this.files.clear();
    this.undone = [];
  }

  get(path: string): FileReview | undefined {
    return this.files.get(path);
  }

  paths(): string[] {
    return [...this.files.keys()].sort();
  }

  private prune(path: string): void {
    // A proposal is answered (and forgotten) by whoever shows it.
    if (this.files.get(path)?.done && !this.files.get(path)?.proposal) {
      this.files.delete(path);
    }
  }

  /** The hunks of `path` in its text `now`. */
  hunks(path: string, now: string): Located[] {
    return this.files.get(path)?.locate(now) ?? [];
  }

  keep(path: string, id: string, now: string): boolean {
    const ok = this.files.get(path)?.keep(id, now) ?? false;
    this.prune(path);
    return ok;
  }

  /** The undo of one hunk; its report is queued only once the caller applied it ([`undoApplied`]). */
  undo(path: string, id: string, now: string): UndoResult {
    return this.files.get(path)?.undo(id, now) ?? { kind: 'refused', reason: 'not under review' };
  }

  undoApplied(result: UndoResult): void {
    if (result.kind !== 'refused') {
      if (!this.files.get(result.report.path)?.proposal) {
        this.undone.push(result.report);
      }
      this.prune(result.report.path);
    }
  }

  keepFile(path: string): void {
    this.files.get(path)?.keepAll();
    this.prune(path);
  }

  /** "3 files, 7 changes to review" over the texts now (`text(path)`). */
  count(text: (path: string) => string | undefined): { files: number; changes: number; label: string } {
    let files = 0;
    let changes = 0;
    for (const [path, f] of this.files) {
      const now = text(path);
      const n = now === undefined ? f.hunks().length : f.locate(now).length;
      if (n) {
        files++;
        changes += n;
      }
    }
    return { files, changes, label: reviewCount(files, changes) };
  }

  /** The undone hunks not yet sent; they are gone from here until [`giveBack`]. */
  takeUndone(): UndoneReport[] {
    const out = this.undone;
    this.undone = [];
    return out;
  }

  /** Reports a refused prompt did not deliver, first again. */
  giveBack(reports: UndoneReport[]): void {
    this.undone = [...reports, ...this.undone];
  }

  get pendingUndone(): number {
    return this.undone.length;
  }
}
