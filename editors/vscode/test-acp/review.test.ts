// The edit review's wire against the real `maia acp` and the scripted mock
// LLM: an accept-edits turn's changed files come from MAIA's checkpoints
// (the revert dry run), and the hunks undone afterwards ride on the next
// `session/prompt` as `_meta.maia.undoneHunks`: the next model request
// carries them once, the one after does not add them again.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { applyReplace } from '../src/review/hunks';
import { ReviewSet } from '../src/review/set';
import { start } from './harness';

const BEFORE = 'alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\n';
const AGENT = 'alpha\nBETA\ngamma\ndelta\nepsilon\nzeta\neta\n';

/** The last user message of a chat request. */
function lastUser(request: unknown): string {
  const messages = (request as { messages: { role: string; content: unknown }[] }).messages;
  const users = messages.filter((m) => m.role === 'user');
  const c = users[users.length - 1]?.content;
  return typeof c === 'string' ? c : JSON.stringify(c);
}

test('an accept-edits turn goes under review; undone hunks reach the next model request once', async () => {
  const f = await start([
    {
      tool_calls: [
        { id: 'call_a', name: 'Write', arguments: { file_path: 'a.txt', content: AGENT } },
        { id: 'call_n', name: 'Write', arguments: { file_path: 'notes/new.txt', content: 'brand\nnew\n' } },
      ],
    },
    { text: 'Edited a.txt and made notes/new.txt.' },
    { text: 'Understood.' },
    { text: 'Still fine.' },
  ]);
  const set = new ReviewSet();
  f.host.review = {
    addTurn: (files) => set.addTurn(files),
    clear: () => set.clear(),
    takeUndone: () => set.takeUndone(),
    giveBack: (r) => set.giveBack(r),
    run: async () => {},
    propose: async () => undefined,
    dropProposal: async () => {},
  };
  try {
    const session = await f.host.waitFor((m) => m.type === 'session');
    assert.ok(session.type === 'session');
    const mode = session.configOptions.find((o) => o.category === 'mode')!;
    await f.panel.setConfig(mode.id, 'accept-edits');
    const a = path.join(f.cwd, 'a.txt');
    const made = path.join(f.cwd, 'notes', 'new.txt');
    fs.writeFileSync(a, BEFORE);
    assert.equal(await f.panel.send('Edit a.txt and add notes/new.txt', []), 'end_turn');
    assert.ok(!f.host.posted.some((m) => m.type === 'permission'), 'accept-edits asks nothing');
    assert.equal(fs.readFileSync(a, 'utf8'), AGENT);
    assert.deepEqual(set.paths(), [a, made].sort());
    assert.equal(set.get(made)?.created, true);
    const hunks = set.hunks(a, AGENT);
    assert.equal(hunks.length, 2);
    assert.equal(set.count((p) => fs.readFileSync(p, 'utf8')).label, '2 files, 3 changes to review');

    // Undo the first hunk of a.txt, keep the second, undo all of the new file.
    const undo = set.undo(a, hunks[0].id, AGENT);
    assert.equal(undo.kind, 'edit');
    if (undo.kind !== 'edit') return;
    fs.writeFileSync(a, applyReplace(AGENT, undo.edit));
    set.undoApplied(undo);
    const now = fs.readFileSync(a, 'utf8');
    assert.ok(set.keep(a, set.hunks(a, now)[0].id, now));
    const removal = set.undo(made, set.hunks(made, 'brand\nnew\n')[0].id, 'brand\nnew\n');
    assert.equal(removal.kind, 'delete');
    fs.rmSync(made);
    set.undoApplied(removal);
    assert.equal(fs.readFileSync(a, 'utf8'), 'alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\n');
    assert.deepEqual(set.paths(), []);
    assert.equal(set.pendingUndone, 2);

    assert.equal(await f.panel.send('Go on', []), 'end_turn');
    const third = lastUser(await f.mock.request(3));
    assert.equal(third.match(/undid 2 of them/g)?.length, 1, third);
    assert.match(third, new RegExp(`1\\. ${a.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, line 2: your lines were removed:\n    - BETA\n  and the earlier lines restored:\n    \\+ beta\n`));
    assert.match(third, /2\. .*notes\/new\.txt: the file you created was removed\./);
    assert.match(third, /Go on$/);
    assert.equal(set.pendingUndone, 0, 'sent once');

    assert.equal(await f.panel.send('And now?', []), 'end_turn');
    const fourth = JSON.stringify(await f.mock.request(4));
    assert.equal(fourth.match(/undid 2 of them/g)?.length, 1, 'in the history once, not added again');
    assert.equal(lastUser(await f.mock.request(4)), 'And now?');
  } finally {
    await f.close();
  }
});
