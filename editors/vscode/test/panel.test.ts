// Pure parts of the panel's host side: prompt blocks, the agent command, line slicing, the HTML shell.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { promptBlocks } from '../src/panel/protocol';
import { replayedUserMessage, sliceLines } from '../src/panel/text';
import { panelHtml } from '../src/panel/html';
import { acpCommand, daemonFailureHint, DaemonSettingError } from '../src/logic';
import { describeStartFailure } from '../src/acp/connection';

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

test('with a daemon URL the agent is `maia acp --connect URL`, the token in the environment only', () => {
  const c = acpCommand(
    { path: '/opt/maia', args: ['acp', '--model', 'm'], env: { K: 'v' } },
    { PATH: '/bin' },
    { url: ' ws://127.0.0.1:7417/acp ', token: 'maia_abc' },
  );
  assert.equal(c.command, '/opt/maia');
  assert.deepEqual(c.args, ['acp', '--connect', 'ws://127.0.0.1:7417/acp']);
  assert.deepEqual(c.env, { PATH: '/bin', K: 'v', MAIA_TOKEN: 'maia_abc' });
  assert.ok(!c.args.some((a) => a.includes('maia_abc')), 'the token is not on the command line');
  // A token set in maia.env is replaced by the one in secret storage.
  assert.equal(acpCommand({ env: { MAIA_TOKEN: 'old' } }, {}, { url: 'wss://devbox/acp', token: 't' }).env.MAIA_TOKEN, 't');
  // Empty URL: local, as before, and no token leaks into the environment.
  const local = acpCommand({}, { PATH: '/bin' }, { url: '  ', token: 'maia_abc' });
  assert.deepEqual([local.args, local.env], [['acp'], { PATH: '/bin' }]);
});

test('a daemon URL without a token, or not a WebSocket URL, is a clear error', () => {
  assert.throws(() => acpCommand({}, {}, { url: 'ws://127.0.0.1:7417/acp' }), (e: unknown) => {
    assert.ok(e instanceof DaemonSettingError);
    assert.match(e.message, /no token for the daemon at ws:\/\/127\.0\.0\.1:7417\/acp: run "MAIA: Set Daemon Token"/);
    return true;
  });
  assert.throws(() => acpCommand({}, {}, { url: 'ws://h/acp', token: '  ' }), /no token/);
  assert.throws(() => acpCommand({}, {}, { url: 'http://h:7417/acp', token: 't' }), /must be a ws:\/\/ or wss:\/\/ URL/);
  assert.throws(() => acpCommand({}, {}, { url: 'ws:/h', token: 't' }), DaemonSettingError);
});

test('a refused or unreachable daemon says what to do', () => {
  const launch = { command: 'maia', args: ['acp', '--connect', 'ws://h/acp'], env: {}, cwd: '/' };
  const refused = describeStartFailure(launch, {
    code: 1,
    signal: null,
    stderr: 'maia: cannot connect to ws://h/acp: HTTP error: 401 Unauthorized\n',
  });
  assert.match(refused, /exited with code 1:\nmaia: cannot connect .*401 Unauthorized\n\(the daemon refused the token: set the right one with "MAIA: Set Daemon Token"/);
  assert.match(daemonFailureHint('maia: cannot connect to ws://h/acp: IO error: Connection refused (os error 111)') ?? '', /is `maia serve` running/);
  assert.equal(daemonFailureHint('maia: something else'), undefined);
  // A local agent's failure gets no daemon hint.
  assert.doesNotMatch(describeStartFailure({ ...launch, args: ['acp'] }, { code: 1, signal: null, stderr: '401' }), /daemon/);
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
