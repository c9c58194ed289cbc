// Unit tests of the extension's pure logic: `npm test` (node --test).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  askArgument,
  commandExists,
  endMessage,
  findReadme,
  isAnswerUri,
  selectionRange,
  serverCommand,
  TurnTracker,
} from '../src/logic';

const pos = (line: number, character: number) => ({ line, character });

test('an empty selection stands for its whole line', () => {
  assert.deepEqual(selectionRange({ start: pos(3, 5), end: pos(3, 5) }), {
    start: pos(3, 0),
    end: pos(4, 0),
  });
});

test('a selection is kept, and a backwards one is ordered', () => {
  assert.deepEqual(selectionRange({ start: pos(1, 2), end: pos(4, 0) }), { start: pos(1, 2), end: pos(4, 0) });
  assert.deepEqual(selectionRange({ start: pos(4, 1), end: pos(1, 2) }), { start: pos(1, 2), end: pos(4, 1) });
  assert.deepEqual(selectionRange({ start: pos(2, 7), end: pos(2, 3) }), { start: pos(2, 3), end: pos(2, 7) });
});

test('maia.ask argument: uri, version, range, intent, optional prompt', () => {
  const arg = askArgument('file:///p/a.rs', 7, { start: pos(0, 0), end: pos(2, 1) }, 'ask', '  why?  ');
  assert.deepEqual(arg, {
    uri: 'file:///p/a.rs',
    version: 7,
    range: { start: pos(0, 0), end: pos(2, 1) },
    intent: 'ask',
    prompt: 'why?',
  });
  // A blank question is left out: the server then explains the selection.
  const bare = askArgument('file:///p/a.rs', undefined, { start: pos(1, 0), end: pos(1, 0) }, 'ask', '   ');
  assert.deepEqual(bare, { uri: 'file:///p/a.rs', range: { start: pos(1, 0), end: pos(2, 0) }, intent: 'ask' });
  assert.equal(JSON.stringify(bare).includes('prompt'), false);
});

test('answer documents are recognised', () => {
  assert.equal(isAnswerUri('file:///home/u/p/.maia/answers/20260101-120000.md'), true);
  assert.equal(isAnswerUri('file:///home/u/p/.maia/answers/20260101-120000-2.md'), true);
  assert.equal(isAnswerUri('file:///home/u/p/src/answers/x.md'), false);
  assert.equal(isAnswerUri('file:///home/u/p/.maia/answers/sub/x.md'), false);
  assert.equal(isAnswerUri('file:///home/u/p/.maia/settings.json'), false);
});

test('server command: defaults, lsp added, env merged', () => {
  assert.deepEqual(serverCommand({}, { PATH: '/bin', GONE: undefined }), {
    command: 'maia',
    args: ['lsp'],
    env: { PATH: '/bin' },
  });
  const custom = serverCommand(
    { path: ' /opt/maia ', args: ['--model', 'm', 3], env: { LITELLM_API_KEY: 'k', BAD: 1 } },
    { PATH: '/bin', LITELLM_API_KEY: 'old' },
  );
  assert.deepEqual(custom, {
    command: '/opt/maia',
    args: ['lsp', '--model', 'm'],
    env: { PATH: '/bin', LITELLM_API_KEY: 'k' },
  });
  assert.deepEqual(serverCommand({ args: ['lsp', '--model', 'x'] }, {}).args, ['lsp', '--model', 'x']);
});

test('a turn followed through maia/stream', () => {
  const t = new TurnTracker();
  const token = 'maia/1';
  const base = { token, session: 's', answer: 'file:///p/.maia/answers/a.md' };
  const begin = t.update({ ...base, kind: 'begin', title: 'MAIA: Explain' });
  assert.equal(begin?.kind, 'begin');
  assert.equal(begin?.turn.title, 'MAIA: Explain');
  assert.equal(begin?.turn.answer, 'file:///p/.maia/answers/a.md');
  const text = t.update({ ...base, kind: 'text', text: 'héllo ' });
  assert.deepEqual(text && text.kind === 'progress' && text.message, 'answering… (6 characters)');
  const tool = t.update({ ...base, kind: 'tool', id: 't1', title: 'Read src/a.rs', status: 'pending' });
  assert.deepEqual(tool && tool.kind === 'progress' && tool.message, 'Read src/a.rs');
  const done = t.update({ ...base, kind: 'toolUpdate', id: 't1', status: 'completed' });
  assert.deepEqual(done && done.kind === 'progress' && done.message, 'answering… (6 characters)');
  const end = t.update({ ...base, kind: 'end', stopReason: 'end_turn' });
  assert.equal(end?.kind, 'end');
  assert.equal(end && end.kind === 'end' && end.ok, true);
  assert.equal(t.turns.size, 0);
  // A cancelled turn is not ok; unknown kinds and bad messages are ignored.
  const cancelled = t.update({ token: 'maia/2', kind: 'end', stopReason: 'cancelled' });
  assert.equal(cancelled && cancelled.kind === 'end' && cancelled.ok, false);
  assert.equal(t.update({ token: 'maia/3', kind: 'mystery' }), undefined);
  assert.equal(t.update({} as never), undefined);
});

test('end messages', () => {
  assert.equal(endMessage('end_turn'), 'MAIA: done');
  assert.equal(endMessage('cancelled'), 'MAIA: cancelled');
  assert.match(endMessage('max_tokens'), /token limit/);
  assert.match(endMessage(undefined), /unknown/);
});

test('the README is found in either case', () => {
  assert.equal(findReadme(['package.json', 'readme.md', 'LICENSE.txt']), 'readme.md');
  assert.equal(findReadme(['README.md', 'readme.md']), 'README.md');
  assert.equal(findReadme(['package.json']), undefined);
});

test('commandExists: paths and names on PATH', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-cmd-'));
  try {
    const exe = path.join(dir, 'maia');
    fs.writeFileSync(exe, '#!/bin/sh\n', { mode: 0o755 });
    fs.writeFileSync(path.join(dir, 'plain'), 'x', { mode: 0o644 });
    assert.equal(commandExists(exe, undefined), true);
    assert.equal(commandExists(path.join(dir, 'missing'), dir), false);
    assert.equal(commandExists('maia', `/nonexistent${path.delimiter}${dir}`), true);
    assert.equal(commandExists('maia', '/nonexistent'), false);
    assert.equal(commandExists('plain', dir), false, 'not executable');
    assert.equal(commandExists(dir, undefined), false, 'a folder');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
