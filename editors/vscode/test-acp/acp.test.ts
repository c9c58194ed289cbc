// The panel's ACP glue against the real `maia acp` and the scripted mock LLM.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as acp from '@agentclientprotocol/sdk';
import { PanelController } from '../src/panel/controller';
import { ToWebview } from '../src/panel/protocol';
import { start, TestHost, launchFor } from './harness';

type Permission = Extract<ToWebview, { type: 'permission' }>;
const isPermission = (m: ToWebview): m is Permission => m.type === 'permission';

function toolCalls(updates: acp.SessionUpdate[]): acp.ToolCall[] {
  return updates.flatMap((u) => (u.sessionUpdate === 'tool_call' ? [u] : []));
}

function finalStatus(updates: acp.SessionUpdate[], id: string): string | undefined {
  let status: string | undefined;
  for (const u of updates) {
    if ((u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update') && u.toolCallId === id && u.status) {
      status = u.status;
    }
  }
  return status;
}

test('a streamed answer arrives in pieces, in order, before the turn ends', async () => {
  const text = 'Hello **world**: this answer is streamed in small pieces.';
  const f = await start([{ text, piece: 3, gap_ms: 15 }]);
  try {
    const session = await f.host.waitFor((m) => m.type === 'session');
    assert.ok(session.type === 'session' && session.sessionId);
    const from = f.host.posted.length;
    const stop = await f.panel.send('Say hello', []);
    assert.equal(stop, 'end_turn');
    const posted = f.host.posted.slice(from);
    const chunks = posted.filter((m) => m.type === 'update' && m.update.sessionUpdate === 'agent_message_chunk');
    assert.ok(chunks.length >= 5, `streamed in ${chunks.length} pieces`);
    assert.equal(f.host.agentText(from), text);
    const end = posted.findIndex((m) => m.type === 'turnEnd');
    const lastChunk = posted.lastIndexOf(chunks[chunks.length - 1]);
    assert.ok(lastChunk < end, 'every chunk before the end of the turn');
    assert.deepEqual(posted[0], { type: 'userMessage', text: 'Say hello', attachments: [] });
    assert.ok(posted.some((m) => m.type === 'busy' && m.busy));
    assert.ok(posted.some((m) => m.type === 'update' && m.update.sessionUpdate === 'usage_update'), 'usage meter');
    // The model got the prompt.
    const last = (await f.mock.request(1)) as { messages: { role: string; content: string }[] };
    assert.match(JSON.stringify(last.messages.at(-1)), /Say hello/);
  } finally {
    await f.close();
  }
});

test('a Write shows its diff, asks, and goes through the editor when allowed', async () => {
  const f = await start([
    { tool_calls: [{ id: 'call_w', name: 'Write', arguments: { file_path: 'src/new.txt', content: 'hello\nworld\n' } }] },
    { text: 'Created it.' },
  ]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    const from = f.host.posted.length;
    const turn = f.panel.send('Create src/new.txt', []);
    const ask = await f.host.waitFor(isPermission, 20_000, from);
    const target = path.join(f.cwd, 'src', 'new.txt');
    assert.equal(ask.toolCall.title, 'Write src/new.txt');
    const diff = ask.toolCall.content?.find((c) => c.type === 'diff');
    assert.deepEqual(diff && { path: diff.path, newText: diff.newText }, { path: target, newText: 'hello\nworld\n' });
    assert.deepEqual(
      ask.options.map((o) => o.kind),
      ['allow_once', 'allow_always', 'reject_once', 'reject_always'],
    );
    assert.ok(!fs.existsSync(target), 'nothing written before the answer');
    const allow = ask.options.find((o) => o.kind === 'allow_once')!;
    f.panel.answerPermission(ask.requestId, allow.optionId);
    assert.equal(await turn, 'end_turn');
    assert.deepEqual(
      f.host.posted.find((m) => m.type === 'permissionDone'),
      { type: 'permissionDone', requestId: ask.requestId, optionId: allow.optionId },
    );
    // fs/write_text_file came to the editor, which wrote the file.
    assert.equal(f.host.writes.length, 1);
    assert.equal(f.host.writes[0].path, target);
    assert.equal(fs.readFileSync(target, 'utf8'), 'hello\nworld\n');
    const updates = f.host.updates(from);
    const call = toolCalls(updates)[0];
    assert.equal(call.kind, 'edit');
    assert.deepEqual(call.locations, [{ path: target }]);
    assert.equal(finalStatus(updates, call.toolCallId), 'completed');
    assert.equal(f.host.agentText(from), 'Created it.');
  } finally {
    await f.close();
  }
});

test('a rejection carries the reason to the model and nothing is written', async () => {
  const f = await start([
    { tool_calls: [{ id: 'call_w', name: 'Write', arguments: { file_path: 'no.txt', content: 'x' } }] },
    { text: 'OK, not writing.' },
  ]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    const from = f.host.posted.length;
    const turn = f.panel.send('Write no.txt', []);
    const ask = await f.host.waitFor(isPermission, 20_000, from);
    const reject = ask.options.find((o) => o.kind === 'reject_once')!;
    // The webview's answer, as it posts it.
    await f.panel.onMessage({ type: 'permission', requestId: ask.requestId, optionId: reject.optionId, reason: 'use docs/ instead' });
    assert.equal(await turn, 'end_turn');
    assert.ok(!fs.existsSync(path.join(f.cwd, 'no.txt')));
    assert.equal(f.host.writes.length, 0);
    const followUp = (await f.mock.request(2)) as { messages: { role: string; content: unknown }[] };
    const result = followUp.messages.at(-1)!;
    assert.equal(result.role, 'tool');
    assert.match(JSON.stringify(result.content), /use docs\/ instead/);
    const call = toolCalls(f.host.updates(from))[0];
    assert.equal(finalStatus(f.host.updates(from), call.toolCallId), 'failed');
  } finally {
    await f.close();
  }
});

test('Read sees the unsaved editor buffer', async () => {
  const f = await start([
    { tool_calls: [{ id: 'call_r', name: 'Read', arguments: { file_path: 'r.txt' } }] },
    { text: 'Read it.' },
  ]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    const file = path.join(f.cwd, 'r.txt');
    fs.writeFileSync(file, 'from disk\n');
    f.host.buffers.set(file, 'unsaved buffer text\n');
    const from = f.host.posted.length;
    const turn = f.panel.send('Read r.txt', []);
    const ask = await f.host.waitFor(isPermission, 20_000, from);
    f.panel.answerPermission(ask.requestId, ask.options.find((o) => o.kind === 'allow_once')!.optionId);
    assert.equal(await turn, 'end_turn');
    assert.equal(f.host.reads[0]?.path, file);
    const followUp = JSON.stringify(await f.mock.request(2));
    assert.match(followUp, /unsaved buffer text/);
    assert.doesNotMatch(followUp, /from disk/);
  } finally {
    await f.close();
  }
});

test('cancel stops a turn, and answers an open permission request cancelled', async () => {
  const f = await start([
    { hang: true },
    { tool_calls: [{ id: 'call_b', name: 'Bash', arguments: { command: 'touch ran.txt' } }] },
  ]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    let from = f.host.posted.length;
    let turn = f.panel.send('Think forever', []);
    await f.host.waitFor((m) => m.type === 'busy' && m.busy, 20_000, from);
    // Wait until the model request is out.
    await f.mock.waitForRequests(1);
    await f.panel.onMessage({ type: 'cancel' });
    assert.equal(await turn, 'cancelled');
    assert.ok(f.host.posted.slice(from).some((m) => m.type === 'turnEnd' && m.stopReason === 'cancelled'));

    from = f.host.posted.length;
    turn = f.panel.send('Run it', []);
    const ask = await f.host.waitFor(isPermission, 20_000, from);
    await f.panel.cancel();
    assert.equal(await turn, 'cancelled');
    assert.ok(f.host.posted.some((m) => m.type === 'permissionDone' && m.requestId === ask.requestId && !m.optionId));
    assert.ok(!fs.existsSync(path.join(f.cwd, 'ran.txt')), 'the rejected command did not run');
    assert.equal(f.panel.isBusy, false);
  } finally {
    await f.close();
  }
});

test('after a crash maia is restarted and the thread is reloaded', async () => {
  const f = await start([{ text: 'First answer, kept in the thread.' }, { text: 'Second answer after the restart.' }]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    assert.equal(await f.panel.send('Remember this', []), 'end_turn');
    const sessionId = f.panel.currentSession!;
    const pid = f.panel.live!.pid;
    const from = f.host.posted.length;
    f.panel.live!.kill('SIGKILL');
    const reopened = await f.host.waitFor((m) => m.type === 'session' && m.replaying, 20_000, from);
    assert.ok(reopened.type === 'session' && reopened.sessionId === sessionId);
    await f.host.waitFor((m) => m.type === 'replayed', 20_000, from);
    assert.ok(f.host.posted.slice(from).some((m) => m.type === 'status' && m.state === 'restarting'));
    assert.notEqual(f.panel.live!.pid, pid, 'a new process');
    // The replay re-creates both sides of the conversation.
    const user = f.host.posted.slice(from).flatMap((m) => (m.type === 'userMessage' ? [m.text] : []));
    assert.deepEqual(user, ['Remember this']);
    assert.equal(f.host.agentText(from), 'First answer, kept in the thread.');
    // And the thread goes on.
    const next = f.host.posted.length;
    assert.equal(await f.panel.send('And now?', []), 'end_turn');
    assert.equal(f.host.agentText(next), 'Second answer after the restart.');
    assert.equal(f.panel.currentSession, sessionId);
  } finally {
    await f.close();
  }
});

test('a new window reopens the saved thread (session/load replay) with its chips and usage', async () => {
  const f = await start([{ text: 'An answer worth keeping.' }]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    const file = path.join(f.cwd, 'hello.py');
    fs.writeFileSync(file, 'a\nb\nc\n');
    const selection = { kind: 'selection' as const, uri: pathToFileURL(file).href, name: 'hello.py', text: 'a\nb\nc\n', startLine: 1, endLine: 3 };
    const notes = { kind: 'file' as const, uri: pathToFileURL(path.join(f.cwd, 'notes.md')).href, name: 'notes.md' };
    fs.writeFileSync(path.join(f.cwd, 'notes.md'), 'n\n');
    assert.equal(await f.panel.send('Keep this', [selection, notes]), 'end_turn');
    const saved = f.host.saved;
    assert.equal(saved, f.panel.currentSession);
    const usage = f.host.usage.get(saved!);
    assert.ok(usage && usage.sessionUpdate === 'usage_update', 'the usage was saved');
    await f.panel.dispose();
    const host = new TestHost(f.cwd, () => launchFor(f.home, f.cwd));
    host.saved = saved;
    host.usage = f.host.usage;
    const panel = new PanelController(host);
    try {
      await panel.onMessage({ type: 'ready' });
      await host.waitFor((m) => m.type === 'replayed');
      assert.equal(panel.currentSession, saved);
      assert.equal(host.agentText(), 'An answer worth keeping.');
      // The user message comes back as typed, its attachments as chips.
      // (with its id, when maia names one: the panel's Edit / Fork use it)
      const replayedUser = host.posted.flatMap((m) => {
        if (m.type !== 'userMessage') {
          return [];
        }
        const { messageId, ...rest } = m;
        assert.ok(messageId === undefined || typeof messageId === 'string');
        return [rest];
      });
      assert.deepEqual(replayedUser, [
        { type: 'userMessage', text: 'Keep this', attachments: [{ ...selection, text: '' }, notes] },
      ]);
      // The meter shows the thread's usage at once (maia sends none on load).
      assert.deepEqual(host.updates().filter((u) => u.sessionUpdate === 'usage_update'), [usage]);
    } finally {
      await panel.dispose();
    }
  } finally {
    await f.close();
  }
});

test('threads: list, rename with /rename, open, delete; config pickers', async () => {
  const f = await start([{ text: 'One.' }]);
  try {
    const first = await f.host.waitFor((m) => m.type === 'session');
    assert.ok(first.type === 'session');
    const mode = first.configOptions.find((o) => o.category === 'mode');
    assert.ok(mode && mode.type === 'select', 'a mode picker');
    assert.equal(await f.panel.send('First thread', []), 'end_turn');
    const beforeRename = f.host.posted.length;
    await f.panel.renameThread('my work');
    // `/rename` renames the saved conversation; maia says so in the thread.
    assert.match(f.host.agentText(beforeRename), /Renamed `.+` to `my work`/);
    const sessions = await f.panel.listThreads();
    assert.ok(sessions.some((s) => s.sessionId === first.sessionId), `listed: ${JSON.stringify(sessions)}`);
    assert.ok(f.host.posted.some((m) => m.type === 'threads'));

    // Mode picker.
    const other = (mode.options as { value: string }[]).map((o) => o.value).find((v) => v !== mode.currentValue)!;
    await f.panel.setConfig(mode.id, other);
    const cfg = f.host.posted.filter((m) => m.type === 'config').at(-1);
    assert.ok(cfg && cfg.type === 'config');
    assert.equal(cfg.configOptions.find((o) => o.id === mode.id)?.currentValue, other);

    await f.panel.newThread();
    assert.notEqual(f.panel.currentSession, first.sessionId);
    await f.panel.openThread(first.sessionId);
    assert.equal(f.panel.currentSession, first.sessionId);
    await f.panel.deleteThread(first.sessionId);
    const after = await f.panel.listThreads();
    assert.ok(!after.some((s) => s.sessionId === first.sessionId), 'deleted');
    assert.notEqual(f.panel.currentSession, first.sessionId, 'a fresh thread replaces the deleted one');
  } finally {
    await f.close();
  }
});

test('slash commands come from available_commands_update; attachments become resource links', async () => {
  const f = await start([{ text: 'Seen.' }]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    const cmds = await f.host.waitFor((m) => m.type === 'update' && m.update.sessionUpdate === 'available_commands_update');
    assert.ok(cmds.type === 'update' && cmds.update.sessionUpdate === 'available_commands_update');
    assert.ok(cmds.update.availableCommands.some((c) => c.name === 'rename'));
    const file = path.join(f.cwd, 'notes.md');
    fs.writeFileSync(file, 'attached file body\n');
    const found = await f.host.searchFiles('notes');
    assert.equal(found[0].path, 'notes.md');
    assert.equal(
      await f.panel.send('Look', [
        { kind: 'file', uri: found[0].uri, name: 'notes.md' },
        { kind: 'selection', uri: found[0].uri, name: 'notes.md', text: 'selected lines', startLine: 1, endLine: 1 },
      ]),
      'end_turn',
    );
    const sent = JSON.stringify(await f.mock.request(1));
    assert.match(sent, /attached file body/);
    assert.match(sent, /selected lines/);
  } finally {
    await f.close();
  }
});

test('a missing binary is reported as not installed', async () => {
  const f = await start([], { command: '/nonexistent/maia' });
  try {
    assert.equal(f.host.startFailures.length, 1);
    assert.equal(f.host.startFailures[0].notInstalled, true);
    assert.match(f.host.startFailures[0].message, /cannot find/);
    assert.ok(f.host.posted.some((m) => m.type === 'status' && m.state === 'error' && m.install));
  } finally {
    await f.close();
  }
});

test('a compaction is reported as compaction_update with its summary', async () => {
  const f = await start([{ text: 'First answer.' }, { text: 'The user said one thing; MAIA answered.' }]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    assert.equal(await f.panel.send('one', []), 'end_turn');
    const from = f.host.posted.length;
    assert.equal(await f.panel.send('/compact', []), 'end_turn');
    const states = f.host
      .updates(from)
      .flatMap((u) => (u.sessionUpdate === 'compaction_update' ? [u] : []));
    assert.deepEqual(
      states.map((u) => u.status),
      ['in_progress', 'completed'],
    );
    assert.equal(new Set(states.map((u) => u.compactionId)).size, 1);
    const summary = states[1].summary?.map((b) => (b.type === 'text' ? b.text : '')).join('');
    assert.equal(summary, 'The user said one thing; MAIA answered.');
  } finally {
    await f.close();
  }
});

test('a permission question also notifies when the panel is hidden, and either answer works', async () => {
  const f = await start([
    { tool_calls: [{ id: 'call_w', name: 'Write', arguments: { file_path: 'n.txt', content: 'n' } }] },
    { text: 'Done.' },
  ]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    const asked: string[] = [];
    f.host.visible = false;
    f.host.notifyPermission = async (title, options) => {
      asked.push(title);
      return options.find((o) => o.kind === 'allow_once')?.optionId;
    };
    assert.equal(await f.panel.send('Write n.txt', []), 'end_turn');
    assert.deepEqual(asked, ['MAIA asks to run Write n.txt']);
    assert.equal(fs.readFileSync(path.join(f.cwd, 'n.txt'), 'utf8'), 'n');
    // The panel's card is closed too.
    assert.ok(f.host.posted.some((m) => m.type === 'permissionDone' && m.optionId));
  } finally {
    await f.close();
  }
});

// The timeline against the real maia: each test runs once maia advertises
// its action (the server side lands separately) and is skipped until then.

type Posted<T extends ToWebview['type']> = Extract<ToWebview, { type: T }>;
const is =
  <T extends ToWebview['type']>(type: T) =>
  (m: ToWebview): m is Posted<T> =>
    m.type === type;

/** Sends `text`, allowing every permission question; returns the message's id. */
async function sendAllowing(f: Awaited<ReturnType<typeof start>>, text: string): Promise<string> {
  const from = f.host.posted.length;
  const turn = f.panel.send(text, []);
  const answered = new Set<number>();
  const allow = setInterval(() => {
    for (const m of f.host.posted.slice(from)) {
      if (m.type === 'permission' && !answered.has(m.requestId)) {
        answered.add(m.requestId);
        f.panel.answerPermission(m.requestId, m.options.find((o) => o.kind === 'allow_once')!.optionId);
      }
    }
  }, 20);
  try {
    assert.equal(await turn, 'end_turn');
  } finally {
    clearInterval(allow);
  }
  return (await f.host.waitFor(is('userMessageId'), 5_000, from)).messageId;
}

test('timeline (maia): Undo changes previews a created file and Restore removes it', async (t) => {
  const f = await start([
    { tool_calls: [{ id: 'call_w', name: 'Write', arguments: { file_path: 'made.txt', content: 'made\n' } }] },
    { text: 'Made it.' },
  ]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    if (!f.panel.timelineCaps.revert) {
      t.skip('maia does not advertise _meta.fileRevert yet');
      return;
    }
    const id = await sendAllowing(f, 'Make made.txt');
    const made = path.join(f.cwd, 'made.txt');
    assert.ok(fs.existsSync(made));
    await f.panel.revertPreview(id);
    const { preview } = await f.host.waitFor(is('revertPreview'));
    assert.ok(preview.canRevert && preview.previewToken, JSON.stringify(preview));
    // What Restore puts back: nothing, the undo deletes the file MAIA created.
    assert.deepEqual(preview.files.map((x) => [x.path, x.kind, x.conflict, x.restored]), [[made, 'created', false, null]]);
    await f.panel.revertApply(id, preview.previewToken!);
    const { result } = await f.host.waitFor(is('revertDone'));
    assert.ok(result.reverted, JSON.stringify(result));
    assert.ok(!fs.existsSync(made), 'the created file is gone');
  } finally {
    await f.close();
  }
});

test('timeline (maia): Edit rewinds before the message, reloads the thread and refills the input', async (t) => {
  const f = await start([{ text: 'First answer.' }, { text: 'Second answer.' }]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    if (!f.panel.timelineCaps.rewind) {
      t.skip('maia does not advertise _meta.sessionRewind yet');
      return;
    }
    await sendAllowing(f, 'first');
    const second = await sendAllowing(f, 'second');
    const from = f.host.posted.length;
    assert.ok(await f.panel.editMessage(second, 'second'));
    await f.host.waitFor(is('replayed'), 20_000, from);
    const replayed = f.host.posted.slice(from).filter(is('userMessage'));
    assert.deepEqual(replayed.map((m) => m.text), ['first']);
    assert.deepEqual(await f.host.waitFor(is('restoreInput'), 5_000, from), { type: 'restoreInput', text: 'second' });
  } finally {
    await f.close();
  }
});

test('timeline (maia): Fork from here opens a fork holding the history before the message', async (t) => {
  const f = await start([{ text: 'First answer.' }, { text: 'Second answer.' }]);
  try {
    await f.host.waitFor((m) => m.type === 'session');
    if (!f.panel.timelineCaps.fork) {
      t.skip('maia does not advertise sessionCapabilities.fork yet');
      return;
    }
    await sendAllowing(f, 'first');
    const second = await sendAllowing(f, 'second');
    const source = f.panel.currentSession;
    const from = f.host.posted.length;
    const forked = await f.panel.forkFrom(second, 'second');
    assert.ok(forked && forked !== source);
    assert.equal(f.panel.currentSession, forked);
    const replayed = f.host.posted.slice(from).filter(is('userMessage'));
    assert.deepEqual(replayed.map((m) => m.text), ['first']);
  } finally {
    await f.close();
  }
});
