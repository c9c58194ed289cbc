// The review's CodeLenses (src/review/lenses.ts): the file's "Keep all |
// Undo all" and each hunk's "Keep | Undo", readable when they share a row.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { FileReview } from '../src/review/hunks';
import { reviewLenses } from '../src/review/lenses';

const rows = (path: string, before: string, agent: string) => {
  const hunks = new FileReview(path, before, agent).locate(agent);
  const lines = agent.split('\n').length;
  const out = new Map<number, string[]>();
  for (const l of reviewLenses(path, hunks, lines)) {
    out.set(l.line, [...(out.get(l.line) ?? []), l.title]);
  }
  return out;
};

test('a hunk on line 1 names its lines on the file row; the others stay short', () => {
  const r = rows('/p/a.md', '# Shopping\napples\nbread\n', '# Groceries\napples\nbread\nlemons\n');
  assert.deepEqual([...r.entries()], [
    [0, ['MAIA: 2 changes to review — Keep all', 'Undo all', 'Keep line 1', 'Undo line 1']],
    [3, ['Keep', 'Undo']],
  ]);
  // Every title of the shared row is distinct: each click is the lens it reads.
  const first = r.get(0)!;
  assert.equal(new Set(first).size, first.length);
});

test('a hunk below the first line has its own row; a new file names its lines', () => {
  assert.deepEqual([...rows('/p/a.md', 'a\nb\nc\n', 'a\nB\nc\n').entries()], [
    [0, ['MAIA: 1 change to review — Keep all', 'Undo all']],
    [1, ['Keep', 'Undo']],
  ]);
  const made = new FileReview('/p/new.md', null, 'x\ny\n');
  assert.deepEqual(
    reviewLenses('/p/new.md', made.locate('x\ny\n'), 3).map((l) => [l.line, l.title, l.command]),
    [
      [0, 'MAIA: 1 change to review — Keep all', 'maia.review.keepFile'],
      [0, 'Undo all', 'maia.review.undoFile'],
      [0, 'Keep lines 1–2', 'maia.review.keep'],
      [0, 'Undo lines 1–2', 'maia.review.undo'],
    ],
  );
});

test('a line-1 hunk the user edited keeps its own words; no hunks, no lenses', () => {
  const f = new FileReview('/p/a.md', 'a\nb\n', 'A\nb\n');
  const hunks = f.locate('AA\nb\n');
  assert.equal(hunks[0].state, 'userEdited');
  assert.deepEqual(
    reviewLenses('/p/a.md', hunks, 2).map((l) => l.title),
    ['MAIA: 1 change to review — Keep all', 'Undo all', 'Changed by you — Keep line 1'],
  );
  assert.deepEqual(reviewLenses('/p/a.md', [], 2), []);
});
