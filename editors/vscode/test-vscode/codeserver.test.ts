/// <reference lib="dom" />
// The packaged extension (.vsix) in a real VS Code (code-server), driven as a
// new user would: the real debug `maia` (acp for the panel, lsp for the
// selection commands) against the scripted mock LLM. One screenshot per step
// in test-artifacts/code-server/ (the main views in dark and light).
// Needs scripts/code-server-setup.sh first; run with `npm run test:code-server`.
import { test, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Browser, Frame } from 'puppeteer-core';
import { MAIA_BIN, MockLlm, ScriptItem, scratch } from '../test-acp/harness';
import { baseSettings, CodeServer, launchBrowser, newestVsix, ROOT, until, Workbench } from './workbench';

const artifacts = path.join(process.env.MAIA_TEST_ARTIFACTS ?? path.join(ROOT, 'test-artifacts'), 'code-server');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

/** The mock's replies, in the order the flow below asks (panel and `maia lsp` share it). */
const SCRIPT: ScriptItem[] = [
  // 1. streamed answer
  {
    text:
      'Hello! I am **MAIA**. This answer streams in small pieces, so the panel shows it arriving.\n\n' +
      '| Step | What |\n|---|---|\n| 1 | read |\n| 2 | write |\n\n```sh\necho hello > greet.txt\n```',
    piece: 5,
    gap_ms: 40,
  },
  // 2. a Write that asks permission, then the answer
  { tool_calls: [{ id: 'call_w', name: 'Write', arguments: { file_path: 'greet.txt', content: 'hello\n' } }] },
  { text: 'Created **greet.txt**.' },
  // 3. new thread, with an attached selection
  { text: 'These three lines define `greet`.' },
  // 4. Explain selection (maia lsp)
  { text: 'The function `greet` returns a greeting for `name`.' },
  // 5. light theme: a Write rejected with Escape in the permission card
  { tool_calls: [{ id: 'call_x', name: 'Write', arguments: { file_path: 'other.txt', content: 'no\n' } }] },
  { text: 'Understood, other.txt is not written.' },
];

let browser: Browser | undefined;
let server: CodeServer | undefined;
let mock: MockLlm | undefined;
const cleanups: (() => void)[] = [];

after(async () => {
  await browser?.close();
  await server?.stop();
  mock?.stop();
  for (const c of cleanups) {
    c();
  }
});

const text = (f: Frame, sel: string) => f.$eval(sel, (e) => (e as HTMLElement).innerText).catch(() => '');

test('the packaged extension in VS Code (code-server): panel, writes, diff, reload, Explain selection, palette, missing binary', async () => {
  const started = Date.now();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-cs-'));
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  mock = await MockLlm.start(SCRIPT, tmp);
  const { home, cwd, root } = scratch(mock.url);
  cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
  fs.writeFileSync(path.join(cwd, 'hello.py'), 'def greet(name):\n    """Say hello."""\n    return f"hello {name}"\n');
  const settings = {
    ...baseSettings('dark'),
    'maia.path': MAIA_BIN,
    'maia.env': { LITELLM_API_KEY: 'sk-test' },
  };
  server = await CodeServer.start({ root: path.join(root, 'cs'), home, vsix: newestVsix(), settings });
  const setup = Date.now() - started;
  browser = await launchBrowser(path.join(root, 'chromium'));
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 820, deviceScaleFactor: 1 });
  // The workbench's console: extension-host errors reported to the window land here too.
  const consoleLines: string[] = [];
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  const wb = new Workbench(page, artifacts);
  try {
    await wb.open(`${server.url}/?folder=${encodeURIComponent(cwd)}`);

    // 1. Open the panel (Ctrl+Alt+M focuses its input) and send a prompt: the answer streams.
    await wb.command('MAIA: Focus the panel input');
    let panel = await wb.panel();
    await panel.waitForFunction(() => !document.querySelector('#status')?.textContent, { timeout: 30_000 });
    await panel.click('#input');
    await page.keyboard.type('Say hello');
    await page.keyboard.press('Enter');
    await panel.waitForFunction(() => (document.querySelector('.message.agent .body')?.textContent?.length ?? 0) > 30);
    assert.ok(await panel.$eval('#app', (e) => e.classList.contains('busy')), 'seen while the answer streams');
    await wb.screenshot('01-streaming-dark');
    await panel.waitForFunction(() => !document.querySelector('#app')?.classList.contains('busy'), { timeout: 30_000 });
    assert.equal(await panel.$$eval('.message.agent table td', (e) => e.length), 4, 'the table is rendered');
    await wb.screenshot('02-answer-dark');

    // 2. A Write asks permission in the panel; Open diff shows VS Code's diff editor; Enter allows.
    await panel.click('#input');
    await page.keyboard.type('Create greet.txt');
    await page.keyboard.press('Enter');
    await panel.waitForSelector('.permission button[data-kind=allow_once]', { timeout: 30_000 });
    await wb.screenshot('03-permission-dark');
    await panel.click('.tool .diff-button');
    await until('the diff editor', async () => (await wb.tabLabels()).some((t) => t.includes('greet.txt') && t.includes('MAIA')));
    await page.waitForSelector('.monaco-diff-editor');
    await wb.screenshot('04-open-diff-dark');
    panel = await wb.panel();
    await panel.focus('.permission button[data-kind=allow_once]');
    await page.keyboard.press('Enter');
    // VS Code's file service creates the file, then writes it: wait for the whole text.
    const greet = path.join(cwd, 'greet.txt');
    await until('greet.txt written', () => fs.existsSync(greet) && fs.readFileSync(greet, 'utf8') === 'hello\n');
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('Created greet.txt.'), { timeout: 30_000 });
    assert.match(await text(panel, '.answered'), /Allow once/);
    await wb.screenshot('05-write-applied-dark');

    // 3. New thread (view title button), then a selection attached from the editor.
    await wb.command('MAIA: New thread');
    await panel.waitForFunction(() => document.querySelectorAll('.log .message').length === 0);
    await wb.openFile('hello.py');
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyA');
    await page.keyboard.up('Control');
    await wb.command('MAIA: Add selection to MAIA');
    panel = await wb.panel();
    await panel.waitForFunction(() => document.querySelector('#attachments')?.textContent?.includes('hello.py:1-3'));
    await panel.click('#input');
    await page.keyboard.type('What do these lines do?');
    await page.keyboard.press('Enter');
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('define greet'), { timeout: 30_000 });
    await panel.waitForFunction(() => !document.querySelector('#usage')?.hasAttribute('hidden'));
    const usageBefore = await text(panel, '#usage');
    await wb.screenshot('06-attachment-dark');

    // 4. Window reload: the thread comes back with its attachment chip and the usage meter.
    await wb.command('Developer: Reload Window');
    await wb.ready();
    panel = await wb.panel();
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('define greet'), { timeout: 30_000 });
    const userMessage = await text(panel, '.message.user');
    assert.match(userMessage, /What do these lines do\?/);
    assert.doesNotMatch(userMessage, /@file:/, 'no raw mention');
    assert.match(await text(panel, '.message.user .chips'), /hello\.py:1-3/);
    await panel.waitForFunction(() => !document.querySelector('#usage')?.hasAttribute('hidden'), { timeout: 10_000 });
    assert.equal(await text(panel, '#usage'), usageBefore);
    await wb.screenshot('07-reloaded-dark');

    // 5. Explain selection through `maia lsp`: the answer opens beside the editor.
    await wb.openFile('hello.py');
    await page.keyboard.down('Control');
    await page.keyboard.press('KeyA');
    await page.keyboard.up('Control');
    await wb.command('MAIA: Explain selection');
    await until('the answer document', async () => (await wb.tabLabels()).some((t) => /\.md\b/.test(t)), 60_000);
    await until('the answer text', () => page.evaluate(() => /returns\s+a\s+greeting/.test(document.body.innerText)), 30_000);
    await wb.screenshot('08-explain-selection-dark');

    // 6. Every MAIA command is in the palette; a few run.
    const labels = await wb.paletteLabels('MAIA: ');
    await wb.screenshot('09-palette-dark');
    await wb.closePalette();
    for (const c of manifest.contributes.commands as { title: string; category: string }[]) {
      const label = `${c.category}: ${c.title}`;
      if (!labels.includes(label)) {
        // The palette draws only the rows in view: the others are looked up by name.
        labels.push(...(await wb.paletteLabels(label)));
        await wb.closePalette();
      }
      assert.ok(labels.includes(label), `${c.title} in the palette (${labels.join(', ')})`);
    }
    await wb.clearNotifications();
    await wb.command('MAIA: New conversation');
    await until('New conversation answered', async () => (await wb.toasts()).some((t) => /next question starts a new conversation/.test(t.text)));
    await wb.command('MAIA: Restart agent');
    panel = await wb.panel();
    await panel.waitForFunction(() => !document.querySelector('#status')?.textContent, { timeout: 30_000 });
    await wb.command('MAIA: Restart server');
    await wb.command('MAIA: Cancel');
    await until('Cancel answered', async () => (await wb.toasts()).some((t) => /cancelled 0 turn/.test(t.text)));
    await wb.clearNotifications();

    // 7. The same views in the light theme.
    await wb.command('Preferences: Toggle between Light/Dark Themes');
    await until('light theme', () => page.evaluate(() => document.querySelector('.monaco-workbench')?.classList.contains('vs') ?? false));
    await wb.command('MAIA: Focus the panel input');
    panel = await wb.panel();
    await wb.screenshot('10-reloaded-light');
    await panel.click('#input');
    await page.keyboard.type('Create other.txt');
    await page.keyboard.press('Enter');
    await panel.waitForSelector('.permission button[data-kind=allow_once]', { timeout: 30_000 });
    await wb.screenshot('11-permission-light');
    // Keyboard only: the first answer has focus; Escape rejects (the turn goes on).
    await page.keyboard.press('Escape');
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('other.txt is not written'), { timeout: 30_000 });
    assert.match(await text(panel, '.tool:last-of-type .answered'), /Reject/);
    assert.equal(fs.existsSync(path.join(cwd, 'other.txt')), false);
    await wb.screenshot('12-rejected-light');

    // 8. A missing binary: exactly one error notification; "How to install" opens the README.
    server.updateSettings({ 'maia.path': path.join(root, 'no-such-maia') });
    await wb.command('Developer: Reload Window');
    await wb.ready();
    panel = await wb.panel();
    await panel.waitForFunction(() => document.querySelector('#status')?.textContent === 'stopped', { timeout: 30_000 });
    await until('the error notification', async () => (await wb.toasts()).some((t) => t.severity === 'error'));
    // Both starters (panel and `maia lsp`) have run by now; a late duplicate gets 2 s to show.
    await new Promise((r) => setTimeout(r, 2000));
    const errors = (await wb.allNotifications()).filter((n) => n.severity === 'error');
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.match(errors[0].text, /cannot find/);
    await wb.screenshot('13-missing-binary-light');
    await wb.clickNotificationButton('How to install');
    await until('the README preview', async () => (await wb.tabLabels()).some((t) => /preview/i.test(t) && /readme/i.test(t)), 30_000);
    const after = await wb.allNotifications();
    assert.ok(!after.some((t) => /cannot be found|Unable to open/.test(t.text)), JSON.stringify(after));
    await wb.screenshot('14-how-to-install-light');

    // The logs: no defect left a trace.
    const logs = `${server.logs()}\n==> browser console\n${consoleLines.join('\n')}`;
    fs.mkdirSync(artifacts, { recursive: true });
    fs.writeFileSync(path.join(artifacts, 'logs.txt'), logs);
    // (Other extensions' lines are not MAIA's: json-language-features also writes to a closed channel on reload.)
    const ours = logs.split('\n').filter((l, i, all) => /maia/i.test(l) || /maia/i.test(all[i + 1] ?? '') || /maia/i.test(all[i + 2] ?? ''));
    for (const bad of ['PendingMigrationError', 'Channel has been closed', 'Starting server failed']) {
      assert.ok(!ours.some((l) => l.includes(bad)), `the logs mention "${bad}"`);
    }
    const total = Date.now() - started;
    fs.writeFileSync(path.join(artifacts, 'timing.txt'), `code-server install+start: ${setup} ms\nwhole run: ${total} ms\n`);
  } catch (e) {
    await wb.screenshot('failed').catch(() => {});
    fs.mkdirSync(artifacts, { recursive: true });
    fs.writeFileSync(path.join(artifacts, 'logs.txt'), `${server?.logs() ?? ''}\n==> browser console\n${consoleLines.join('\n')}`);
    throw e;
  }
});
