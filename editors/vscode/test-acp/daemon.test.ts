// The panel against a real `maia serve` daemon: `maia.daemon.url` makes the
// panel run `maia acp --connect URL` (the command built by `acpCommand`),
// the token passed in the environment; the daemon runs the turn against the
// scripted mock LLM.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PanelController } from '../src/panel/controller';
import { acpCommand } from '../src/logic';
import { Daemon, MAIA_BIN, MockLlm, ScriptItem, scratch, serveDaemon, TestHost } from './harness';

async function withDaemon(
  script: ScriptItem[],
  body: (d: Daemon, host: (token: string | undefined) => TestHost, mock: MockLlm) => Promise<void>,
): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-daemon-'));
  const mock = await MockLlm.start(script, tmp);
  const { home, cwd, root } = scratch(mock.url);
  // The editor's side has a HOME of its own: the bridge needs no MAIA settings.
  const editorHome = path.join(root, 'editor-home');
  fs.mkdirSync(editorHome);
  const daemon = await serveDaemon(home);
  const makeHost = (token: string | undefined) =>
    new TestHost(cwd, () => ({
      ...acpCommand({ path: MAIA_BIN }, { PATH: process.env.PATH, HOME: editorHome }, { url: daemon.url, token }),
      cwd,
    }));
  try {
    await body(daemon, makeHost, mock);
  } finally {
    daemon.child.kill();
    mock.stop();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

test('daemon: with maia.daemon.url the panel runs a prompt through maia serve', async () => {
  const text = 'Hello from the daemon, streamed in pieces.';
  await withDaemon([{ text, piece: 5, gap_ms: 5 }], async (daemon, makeHost, mock) => {
    const host = makeHost(daemon.token);
    const panel = new PanelController(host);
    try {
      await panel.onMessage({ type: 'ready' });
      const session = await host.waitFor((m) => m.type === 'session');
      assert.ok(session.type === 'session' && session.sessionId);
      assert.deepEqual(host.startFailures, []);
      const from = host.posted.length;
      assert.equal(await panel.send('Say hello', []), 'end_turn');
      assert.equal(host.agentText(from), text);
      const last = (await mock.request(1)) as { messages: unknown[] };
      assert.match(JSON.stringify(last.messages.at(-1)), /Say hello/);
    } finally {
      await panel.dispose();
    }
  });
});

test('daemon: a wrong token is refused with a hint, a missing one is named before starting', async () => {
  await withDaemon([], async (daemon, makeHost) => {
    const wrong = makeHost(`maia_${'0'.repeat(64)}`);
    const refused = new PanelController(wrong);
    try {
      await refused.onMessage({ type: 'ready' });
      await wrong.waitFor((m) => m.type === 'status' && m.state === 'error');
      assert.equal(wrong.startFailures.length, 1);
      assert.match(wrong.startFailures[0].message, /401/);
      assert.match(wrong.startFailures[0].message, /the daemon refused the token: set the right one with "MAIA: Set Daemon Token"/);
    } finally {
      await refused.dispose();
    }
    const none = makeHost(undefined);
    const missing = new PanelController(none);
    try {
      await missing.onMessage({ type: 'ready' });
      await none.waitFor((m) => m.type === 'status' && m.state === 'error');
      assert.match(none.startFailures[0]?.message ?? '', /no token for the daemon at ws:\/\/127\.0\.0\.1:\d+\/acp: run "MAIA: Set Daemon Token"/);
    } finally {
      await missing.dispose();
    }
  });
});
