// Pure parts of the panel's host side: prompt blocks, the agent command, line slicing, the HTML shell.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { promptBlocks } from '../src/panel/protocol';
import { replayedUserMessage, sliceLines } from '../src/panel/text';
import { panelHtml } from '../src/panel/html';
import { acpCommand } from '../src/logic';

test('attachments become a resource link and an embedded resource with its range', () => {
  const blocks = promptBlocks('Look', [
    { kind: 'file', uri: 'file:///p/a.ts', name: 'a.ts' },
    { kind: 'selection', uri: 'file:///p/b.ts', name: 'b.ts', text: 'x()', startLine: 3, endLine: 4 },
  ]);
  assert.deepEqual(blocks, [
    { type: 'text', text: 'Look' },
    { type: 'resource_link', uri: 'file:///p/a.ts', name: 'a.ts' },
    { type: 'resource', resource: { uri: 'file:///p/b.ts#L3-4', text: 'x()', mimeType: 'text/plain' } },
  ]);
  assert.deepEqual(promptBlocks('  ', [{ kind: 'file', uri: 'file:///a', name: 'a' }]).map((b) => b.type), ['resource_link']);
});

test('the agent command runs `maia acp`', () => {
  assert.deepEqual(acpCommand({}, {}).args, ['acp']);
  assert.deepEqual(acpCommand({ args: ['--model', 'm'] }, {}).args, ['acp', '--model', 'm']);
  const c = acpCommand({ path: ' /opt/maia ', args: ['acp'], env: { K: 'v', N: 1 } }, { PATH: '/bin' });
  assert.equal(c.command, '/opt/maia');
  assert.deepEqual(c.env, { PATH: '/bin', K: 'v' });
});

test('fs/read_text_file line and limit', () => {
  assert.equal(sliceLines('a\nb\nc\nd', 2, 2), 'b\nc');
  assert.equal(sliceLines('a\nb\nc', 3), 'c');
  assert.equal(sliceLines('a\nb\nc', null, 1), 'a');
  assert.equal(sliceLines('a\nb', undefined, undefined), 'a\nb');
});

test('the HTML shell allows only its own nonce-d script', () => {
  const html = panelHtml({ scriptUri: 'vscode-resource:/p.js', styleUri: 'vscode-resource:/p.css', cspSource: 'vscode-resource:', nonce: 'n0' });
  assert.match(html, /script-src 'nonce-n0'/);
  assert.match(html, /default-src 'none'/);
  assert.match(html, /<script nonce="n0" src="vscode-resource:\/p.js">/);
  assert.doesNotMatch(html, /unsafe-inline|unsafe-eval/);
});

test('a replayed user message gets its attachments back as chips', () => {
  const replay = 'What do these lines do?\nand this\n@/p/proj/src/a b.ts\n@file:///p/proj/hello.py#L1-3\n@file:///elsewhere/x.rs';
  assert.deepEqual(replayedUserMessage(replay, '/p/proj'), {
    text: 'What do these lines do?\nand this',
    attachments: [
      { kind: 'file', uri: 'file:///p/proj/src/a%20b.ts', name: 'src/a b.ts' },
      { kind: 'selection', uri: 'file:///p/proj/hello.py', name: 'hello.py', text: '', startLine: 1, endLine: 3 },
      { kind: 'file', uri: 'file:///elsewhere/x.rs', name: 'x.rs' },
    ],
  });
  // Typed text alone, or a mention inside the text, stays as it is.
  assert.deepEqual(replayedUserMessage('Read @notes.md please', '/p'), { text: 'Read @notes.md please', attachments: [] });
  // The same file twice (typed as `@name` and attached) is one chip.
  assert.deepEqual(replayedUserMessage('Read @a.ts\n@/p/a.ts\n@/p/a.ts', '/p').attachments.length, 1);
  // Attachments sent without text.
  assert.deepEqual(replayedUserMessage('@/p/a.ts', '/p'), { text: '', attachments: [{ kind: 'file', uri: 'file:///p/a.ts', name: 'a.ts' }] });
});
