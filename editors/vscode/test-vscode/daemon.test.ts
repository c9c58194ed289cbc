/// <reference lib="dom" />
// The panel pointed at a `maia serve` daemon in a real VS Code (code-server),
// set up as a user would: `maia.daemon.url` in the settings, then the token
// typed into "MAIA: Set Daemon Token". Before the token the panel names what
// is missing; a wrong token is named as refused; the right one connects and a
// prompt runs on the daemon against the scripted mock LLM. The token is kept in
// VS Code's secret storage, never in settings.json. Screenshots in
// test-artifacts/code-server/daemon-*.png.
import { test, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Browser } from 'puppeteer-core';
import { Daemon, MAIA_BIN, MockLlm, ScriptItem, scratch, serveDaemon } from '../test-acp/harness';
import { baseSettings, CodeServer, launchBrowser, newestVsix, ROOT, until, Workbench } from './workbench';

const artifacts = path.join(process.env.MAIA_TEST_ARTIFACTS ?? path.join(ROOT, 'test-artifacts'), 'code-server');

const ANSWER = 'Hello from the daemon, through the bridge.';
const SCRIPT: ScriptItem[] = [{ text: ANSWER, piece: 6, gap_ms: 10 }];

let browser: Browser | undefined;
let server: CodeServer | undefined;
let mock: MockLlm | undefined;
let daemon: Daemon | undefined;
const cleanups: (() => void)[] = [];

after(async () => {
  await browser?.close();
  await server?.stop();
  daemon?.child.kill();
  mock?.stop();
  for (const c of cleanups) {
    c();
  }
});

test('the panel on a daemon in VS Code (code-server): no token, a refused token, then a prompt through maia serve', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-cs-daemon-'));
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  mock = await MockLlm.start(SCRIPT, tmp);
  const { home, cwd, root } = scratch(mock.url);
  cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
  daemon = await serveDaemon(home);
  // The editor's side has a HOME of its own and no model key: the bridge needs neither.
  const editorHome = path.join(root, 'editor-home');
  fs.mkdirSync(editorHome);
  const settings = {
    ...baseSettings('dark'),
    'maia.path': MAIA_BIN,
    'maia.daemon.url': daemon.url,
    'maia.lsp.enabled': false,
  };
  server = await CodeServer.start({ root: path.join(root, 'cs'), home: editorHome, vsix: newestVsix(), settings });
  browser = await launchBrowser(path.join(root, 'chromium'));
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 820, deviceScaleFactor: 1 });
  const wb = new Workbench(page, artifacts);
  const errors = async () => (await wb.toasts()).filter((t) => t.severity === 'error').map((t) => t.text);
  const setToken = async (token: string) => {
    await wb.commandAsking('MAIA: Set Daemon Token');
    await page.waitForSelector('.quick-input-widget .quick-input-box input', { visible: true });
    await until('the token box', () => page.evaluate(() => /Set Daemon Token/.test(document.querySelector('.quick-input-widget .quick-input-title')?.textContent ?? '')));
    await page.keyboard.type(token);
    await page.keyboard.press('Enter');
  };
  try {
    await wb.open(`${server.url}/?folder=${encodeURIComponent(cwd)}`);

    // 1. No token yet: the panel says which command sets it, before anything starts.
    await wb.command('MAIA: Focus the panel input');
    await until('the missing token named', async () => (await errors()).some((t) => /no token for the daemon at ws:\/\/127\.0\.0\.1:\d+\/acp/.test(t)));
    assert.match((await errors()).join('\n'), /MAIA: Set Daemon Token/);
    await wb.screenshot('daemon-01-no-token');
    await wb.clearNotifications();

    // 2. A wrong token: the daemon refuses it and the panel says so.
    await setToken('maia_' + '0'.repeat(64));
    await until('the refused token named', async () => (await errors()).some((t) => /refused the token/.test(t)), 60_000);
    await wb.screenshot('daemon-02-refused-token');
    await wb.clearNotifications();

    // 3. The right token: the panel restarts on the daemon and a prompt runs there.
    await setToken(daemon.token);
    const panel = await wb.panel();
    await panel.waitForFunction(() => !document.querySelector('#status')?.textContent, { timeout: 60_000 });
    await panel.click('#input');
    await page.keyboard.type('Hello daemon');
    await page.keyboard.press('Enter');
    await panel.waitForFunction((a) => document.querySelector('.log')?.textContent?.includes(a), { timeout: 30_000 }, ANSWER);
    await wb.screenshot('daemon-03-answer');
    assert.deepEqual(await errors(), []);
    // The turn ran on the daemon's side (its HOME, its model key) …
    const asked = JSON.stringify(await mock.request(1));
    assert.match(asked, /Hello daemon/);
    // … and the token is nowhere in the editor's settings.
    const written = fs.readFileSync(server.settingsFile(), 'utf8');
    assert.ok(!written.includes(daemon.token), 'the token is not in settings.json');
    assert.ok(!written.includes('maia_'), 'no token is in settings.json');
  } catch (e) {
    await wb.screenshot('daemon-failed').catch(() => {});
    fs.mkdirSync(artifacts, { recursive: true });
    fs.writeFileSync(path.join(artifacts, 'daemon-logs.txt'), server?.logs() ?? '');
    throw e;
  }
});
