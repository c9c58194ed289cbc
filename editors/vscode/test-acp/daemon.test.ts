// The panel against a real `maia serve` daemon: `maia.daemon.url` makes the
// panel run `maia acp --connect URL` (the command built by `acpCommand`),
// the token passed in the environment; the daemon runs the turn against the
// scripted mock LLM.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { PanelController } from '../src/panel/controller';
import { acpCommand } from '../src/logic';
import { MAIA_BIN, MockLlm, ScriptItem, scratch, TestHost } from './harness';

interface Daemon {
  child: ChildProcess;
  url: string;
  token: string;
}

/** A token added with `maia serve token add`, then `maia serve` on a free loopback port. */
async function serve(home: string): Promise<Daemon> {
  const env = { PATH: process.env.PATH, HOME: home, LITELLM_API_KEY: 'sk-test' };
  const added = spawnSync(MAIA_BIN, ['serve', 'token', 'add', 'vscode'], { env, encoding: 'utf8' });
  assert.equal(added.status, 0, added.stderr);
  const token = added.stdout.trim();
  assert.match(token, /^maia_[0-9a-f]{64}$/);
  const child = spawn(MAIA_BIN, ['serve', '--listen', '127.0.0.1:0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const lines = createInterface({ input: child.stderr! });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('maia serve did not listen within 20 s')), 20_000);
    child.once('exit', (code) => reject(new Error(`maia serve exited (${code})`)));
    lines.on('line', (line) => {
      const m = /listening on http:\/\/([^/\s]+)\/acp/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(`ws://${m[1]}/acp`);
      }
    });
  });
  return { child, url, token };
}

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
  const daemon = await serve(home);
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
