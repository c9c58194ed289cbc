// The edit review's hunk model (src/review/hunks.ts): split, rebase over
// the user's edits, keep/undo bookkeeping.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { applyReplace, changedLines, diffHunks, FileReview, keptLabel, keptOf, reviewCount, splitLines } from '../src/review/hunks';

const BASE = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n';
const AGENT = 'one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n';

test('lines keep their breaks; a last line without one is a line', () => {
  assert.deepEqual(splitLines('a\nb'), ['a\n', 'b']);
  assert.deepEqual(splitLines('a\n\n'), ['a\n', '\n']);
  assert.deepEqual(splitLines(''), []);
});

test('a change splits into hunks without context lines', () => {
  const hunks = diffHunks(BASE, AGENT);
  assert.deepEqual(hunks, [
    { baseStart: 1, baseLines: ['two\n'], agentStart: 1, agentLines: ['TWO\n'] },
    { baseStart: 7, baseLines: [], agentStart: 7, agentLines: ['eight\n'] },
  ]);
  assert.deepEqual(diffHunks('a\nb\nc\n', 'a\nc\n'), [{ baseStart: 1, baseLines: ['b\n'], agentStart: 1, agentLines: [] }]);
  assert.deepEqual(diffHunks('x\n', 'x\n'), []);
  assert.deepEqual(diffHunks('', 'new\nfile'), [{ baseStart: 0, baseLines: [], agentStart: 0, agentLines: ['new\n', 'file'] }]);
});

test('undo of one hunk restores that hunk only; keep leaves the document; the file is then reviewed', () => {
  const f = new FileReview('/p/a.txt', BASE, AGENT);
  let now = AGENT;
  const [first, second] = f.locate(now);
  assert.equal(first.state, 'pending');
  assert.equal(first.line, 1);
  const r = f.undo(first.id, now);
  assert.equal(r.kind, 'edit');
  if (r.kind !== 'edit') return;
  now = applyReplace(now, r.edit);
  assert.equal(now, 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n');
  assert.deepEqual(r.report, { path: '/p/a.txt', line: 2, agentText: 'TWO\n', restoredText: 'two\n' });
  // The other hunk is still there, at the same place.
  const left = f.locate(now);
  assert.equal(left.length, 1);
  assert.equal(left[0].line, second.line);
  assert.ok(f.keep(left[0].id, now));
  assert.equal(f.locate(now).length, 0);
  assert.ok(f.done);
  assert.equal(now, 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n');
});

test('a hunk is found again after the user edited other lines, and undone there', () => {
  const f = new FileReview('/p/a.txt', BASE, AGENT);
  // The user added two lines at the top and changed "five".
  const now = 'zero\nzero.5\none\nTWO\nthree\nfour\nFIVE!\nsix\nseven\neight\n';
  const hunks = f.locate(now);
  assert.deepEqual(
    hunks.map((h) => [h.line, h.state]),
    [
      [3, 'pending'],
      [9, 'pending'],
    ],
  );
  const r = f.undo(hunks[1].id, now);
  assert.equal(r.kind, 'edit');
  if (r.kind !== 'edit') return;
  assert.equal(applyReplace(now, r.edit), 'zero\nzero.5\none\nTWO\nthree\nfour\nFIVE!\nsix\nseven\n');
  assert.equal(r.report.line, 10);
  assert.equal(r.report.restoredText, '');
  assert.equal(r.report.agentText, 'eight\n');
});

test('a hunk the user edited is left alone and marked so; keep still takes it', () => {
  const f = new FileReview('/p/a.txt', BASE, AGENT);
  const now = 'one\nTWO, my way\nthree\nfour\nfive\nsix\nseven\neight\n';
  const [first, second] = f.locate(now);
  assert.equal(first.state, 'userEdited');
  assert.equal(second.state, 'pending');
  const r = f.undo(first.id, now);
  assert.equal(r.kind, 'refused');
  assert.ok(f.keep(first.id, now));
  assert.equal(f.locate(now).length, 1);
  // A line typed inside a removal point counts too.
  const g = new FileReview('/p/b.txt', 'a\nb\nc\n', 'a\nc\n');
  assert.equal(g.locate('a\nmine\nc\n')[0].state, 'userEdited');
  assert.equal(g.locate('mine\na\nc\n')[0].state, 'pending');
  assert.equal(g.locate('mine\na\nc\n')[0].line, 2);
});

test('undo of a removal puts the lines back; the last line without a break stays so', () => {
  const g = new FileReview('/p/b.txt', 'a\nb\nc', 'a\nc');
  const [h] = g.locate('a\nc');
  const r = g.undo(h.id, 'a\nc');
  assert.equal(r.kind, 'edit');
  if (r.kind !== 'edit') return;
  assert.equal(applyReplace('a\nc', r.edit), 'a\nb\nc');
  const t = new FileReview('/p/c.txt', 'a\nb', 'a\nB');
  const [k] = t.locate('a\nB');
  const u = t.undo(k.id, 'a\nB');
  assert.ok(u.kind === 'edit' && applyReplace('a\nB', u.edit) === 'a\nb');
});

test('undo of a file the agent created deletes it; lines the user added are kept', () => {
  const f = new FileReview('/p/new.txt', null, 'fresh\nfile\n');
  assert.ok(f.created);
  const [h] = f.locate('fresh\nfile\n');
  const r = f.undo(h.id, 'fresh\nfile\n');
  assert.equal(r.kind, 'delete');
  assert.deepEqual(r.kind === 'delete' && r.report, {
    path: '/p/new.txt',
    line: 1,
    agentText: 'fresh\nfile\n',
    restoredText: '',
    fileRemoved: true,
  });
  // Lines the user added after it stay: the undo takes the agent's lines only.
  const g = new FileReview('/p/new.txt', null, 'fresh\n');
  const u = g.undo(g.locate('fresh\nmine\n')[0].id, 'fresh\nmine\n');
  assert.ok(u.kind === 'edit' && applyReplace('fresh\nmine\n', u.edit) === 'mine\n');
  // A line of the agent's the user changed: left.
  const e = new FileReview('/p/new.txt', null, 'fresh\n');
  assert.equal(e.locate('fresh, mine\n')[0].state, 'userEdited');
  assert.equal(e.undo(e.locate('fresh, mine\n')[0].id, 'fresh, mine\n').kind, 'refused');
});

test('keep all takes every hunk; ids change with the file, so an old id is refused', () => {
  const f = new FileReview('/p/a.txt', BASE, AGENT);
  const old = f.locate(AGENT)[1].id;
  f.keep(f.locate(AGENT)[0].id, AGENT);
  assert.equal(f.locate(AGENT).length, 1);
  f.keepAll();
  assert.ok(f.done);
  assert.equal(f.undo(old, AGENT).kind, 'refused');
});

test('the panel count', () => {
  assert.equal(reviewCount(3, 7), '3 files, 7 changes to review');
  assert.equal(reviewCount(1, 1), '1 file, 1 change to review');
  assert.equal(reviewCount(0, 0), '');
});

test('a turn’s files come from the revert dry run: now is oldText, before is newText; conflicts and deletions are left out', async () => {
  const { turnFiles } = await import('../src/review/set');
  const files = turnFiles({
    canRevert: true,
    _meta: {
      maia: {
        files: [
          { path: '/p/a.txt', kind: 'modified', conflict: false, diff: { oldText: 'now\n', newText: 'before\n' } },
          { path: '/p/new.txt', kind: 'created', conflict: false, diff: { oldText: 'made\n', newText: null } },
          { path: '/p/gone.txt', kind: 'deleted', conflict: false, diff: { oldText: null, newText: 'was\n' } },
          { path: '/p/mine.txt', kind: 'modified', conflict: true, diff: { oldText: 'x', newText: 'y' } },
          { path: '/p/bin', kind: 'modified', conflict: false },
        ],
      },
    },
  });
  assert.deepEqual(files, [
    { path: '/p/a.txt', before: 'before\n', now: 'now\n' },
    { path: '/p/new.txt', before: null, now: 'made\n' },
  ]);
  assert.deepEqual(turnFiles({ canRevert: false, paths: [] }), []);
});

test('a file changed again in a later turn keeps its base; undone reports wait until taken, and a refused prompt gives them back', async () => {
  const { ReviewSet } = await import('../src/review/set');
  const set = new ReviewSet();
  set.addTurn([{ path: '/p/a.txt', before: 'a\nb\n', now: 'a\nB\n' }]);
  set.addTurn([{ path: '/p/a.txt', before: 'a\nB\n', now: 'a\nB\nc\n' }]);
  assert.deepEqual(
    set.hunks('/p/a.txt', 'a\nB\nc\n').map((h) => [h.baseLines, h.agentLines]),
    [[['b\n'], ['B\n', 'c\n']]],
  );
  const r = set.undo('/p/a.txt', set.hunks('/p/a.txt', 'a\nB\nc\n')[0].id, 'a\nB\nc\n');
  assert.equal(r.kind, 'edit');
  assert.equal(set.pendingUndone, 0, 'queued only once applied');
  set.undoApplied(r);
  assert.deepEqual(set.paths(), [], 'reviewed');
  const taken = set.takeUndone();
  assert.equal(taken.length, 1);
  assert.equal(set.takeUndone().length, 0, 'taken once');
  set.giveBack(taken);
  assert.equal(set.pendingUndone, 1);
  assert.equal(set.count(() => undefined).label, '');
});

test('a card proposal: undos are not reported, it stays until answered, and its write is not reviewed again', async () => {
  const { ReviewSet } = await import('../src/review/set');
  const set = new ReviewSet();
  const f = set.addProposal('/p/a.txt', 'a\nb\nc\n', 'A\nb\nc\nd\n');
  assert.ok(f.proposal);
  let now = 'A\nb\nc\nd\n';
  const r = set.undo('/p/a.txt', set.hunks('/p/a.txt', now)[0].id, now);
  assert.ok(r.kind === 'edit');
  now = applyReplace(now, r.edit);
  set.undoApplied(r);
  assert.equal(set.pendingUndone, 0, 'MAIA tells the model itself');
  set.keep('/p/a.txt', set.hunks('/p/a.txt', now)[0].id, now);
  assert.equal(set.hunks('/p/a.txt', now).length, 0);
  assert.ok(set.get('/p/a.txt'), 'kept until the card is answered');
  set.settle('/p/a.txt', now);
  assert.equal(set.get('/p/a.txt'), undefined);
  // The turn's write of exactly that text is not offered again; a later change is.
  set.addTurn([{ path: '/p/a.txt', before: 'a\nb\nc\n', now: 'a\nb\nc\nd\n' }]);
  assert.deepEqual(set.paths(), []);
  set.addTurn([{ path: '/p/a.txt', before: 'a\nb\nc\nd\n', now: 'a\nb\nc\nd\ne\n' }]);
  assert.deepEqual(set.paths(), ['/p/a.txt']);
});

test('a change counts the lines it touches, not the whole file', () => {
  // A 1-line Edit of an 18-line file that becomes 2 lines.
  const file = Array.from({ length: 18 }, (_, i) => `line ${i + 1}\n`).join('');
  const edited = file.replace('line 5\n', 'line five\nand more\n');
  assert.deepEqual(changedLines(file, edited), { removed: 1, added: 2 });
  assert.deepEqual(changedLines(BASE, AGENT), { removed: 1, added: 2 });
  assert.deepEqual(changedLines('', 'new\nfile\n'), { removed: 0, added: 2 });
  assert.deepEqual(changedLines('same\n', 'same\n'), { removed: 0, added: 0 });
  // A last line without a break that gains one is that line, changed.
  assert.deepEqual(changedLines('a\nb', 'a\nb\n'), { removed: 1, added: 1 });
});

test('what a review kept of a proposal: counted per hunk and said on the card', () => {
  const kept = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n'; // the first hunk undone
  assert.deepEqual(keptOf(BASE, AGENT, kept), { kept: 1, total: 2 });
  assert.equal(keptLabel(BASE, AGENT, kept), 'Kept 1 of 2 changes');
  assert.equal(keptLabel(BASE, AGENT, AGENT), 'Kept 2 of 2 changes');
  assert.equal(keptLabel(BASE, AGENT, BASE), 'Undid all 2 changes: nothing written');
  assert.equal(keptLabel('a\n', 'b\n', 'b\n'), 'Kept 1 of 1 change');
  assert.equal(keptLabel('a\n', 'b\n', 'a\n'), 'Undid the change: nothing written');
});
