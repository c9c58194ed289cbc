/// <reference lib="dom" />
// The panel's webview in a real browser (Debian's chromium via
// puppeteer-core): the built HTML and script, with a fake
// `acquireVsCodeApi` relaying to the same host-side code (`PanelController`)
// and the real `maia acp` + scripted mock LLM.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import puppeteer, { Browser, Page } from 'puppeteer-core';
import { panelHtml } from '../src/panel/html';
import { ToHost, ToWebview } from '../src/panel/protocol';
import { Fixture, ScriptItem, start } from './harness';

const root = path.resolve(__dirname, '..', '..');
const artifacts = process.env.MAIA_TEST_ARTIFACTS ?? path.join(root, 'test-artifacts');
const CHROMIUM = process.env.CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));

// A dark theme's variables, as VS Code sets them on the webview's <html>.
const THEME = `
html {
  --vscode-font-family: system-ui, "Segoe UI", Ubuntu, sans-serif; --vscode-font-size: 13px;
  --vscode-editor-font-family: "DejaVu Sans Mono", monospace; --vscode-editor-font-size: 12px;
  --vscode-foreground: #cccccc; --vscode-descriptionForeground: #9d9d9d; --vscode-errorForeground: #f85149;
  --vscode-sideBar-background: #181818; --vscode-editor-background: #1f1f1f;
  --vscode-button-background: #0078d4; --vscode-button-foreground: #ffffff; --vscode-button-hoverBackground: #026ec1;
  --vscode-button-secondaryBackground: #313131; --vscode-button-secondaryForeground: #cccccc; --vscode-button-secondaryHoverBackground: #3c3c3c;
  --vscode-input-background: #313131; --vscode-input-foreground: #cccccc; --vscode-input-border: #3c3c3c;
  --vscode-focusBorder: #0078d4; --vscode-panel-border: #2b2b2b; --vscode-widget-border: #313131;
  --vscode-editorWidget-background: #202020; --vscode-textCodeBlock-background: #2b2b2b;
  --vscode-textLink-foreground: #4daafc; --vscode-badge-background: #616161; --vscode-badge-foreground: #f8f8f8;
  --vscode-progressBar-background: #0078d4; --vscode-editorWarning-foreground: #cca700;
  --vscode-inputValidation-warningBackground: #352a05; --vscode-testing-iconPassed: #73c991; --vscode-testing-iconFailed: #f14c4c;
}`;

let browser: Browser | undefined;

before(async () => {
  if (!CHROMIUM) {
    throw new Error('chromium not found (apt-get install chromium, or set CHROMIUM)');
  }
  fs.mkdirSync(artifacts, { recursive: true });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: fs.mkdtempSync(path.join(fs.realpathSync(require('node:os').tmpdir()), 'maia-chromium-')),
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--allow-file-access-from-files',
    ],
  });
});

after(async () => {
  await browser?.close();
});

interface PanelPage {
  page: Page;
  f: Fixture;
  /** Everything the webview posted, in order. */
  fromWebview: ToHost[];
  close(): Promise<void>;
}

/** Opens the built panel page bridged to a live controller. */
async function openPanel(
  script: ScriptItem[],
  opts: { noFrames?: boolean; command?: string; beforeLoad?: (f: Fixture) => void } = {},
): Promise<PanelPage> {
  const page = await browser!.newPage();
  if (opts.noFrames) {
    // As in a hidden or throttled webview: animation frames never come.
    await page.evaluateOnNewDocument(() => {
      window.requestAnimationFrame = () => 0;
    });
  }
  await page.setViewport({ width: 420, height: 760, deviceScaleFactor: 1 });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') {
      errors.push(m.text());
    }
  });
  const fromWebview: ToHost[] = [];
  // The fixture starts the controller itself; the page's `ready` replays into it.
  const f = await start(script, { ready: false, command: opts.command });
  opts.beforeLoad?.(f);
  // Relay host → webview in order.
  let chain = Promise.resolve();
  f.host.forward = (m: ToWebview) => {
    chain = chain.then(() => page.evaluate((msg) => window.postMessage(msg, '*'), m as never)).catch(() => {});
  };
  await page.exposeFunction('__maiaToHost', (m: ToHost) => {
    fromWebview.push(m);
    void f.panel.onMessage(m);
  });
  const nonce = 'testnonce123';
  const dir = fs.mkdtempSync(path.join(f.root, 'page-'));
  const html = panelHtml({
    scriptUri: pathToFileURL(path.join(root, 'out', 'webview', 'panel.js')).href,
    styleUri: pathToFileURL(path.join(root, 'media', 'panel.css')).href,
    cspSource: 'file:',
    nonce,
    head:
      `<style>${THEME}</style>`.replace('<style>', `<style nonce="${nonce}">`) +
      `<script nonce="${nonce}">window.acquireVsCodeApi = () => ({ postMessage: (m) => window.__maiaToHost(m) });</script>`,
  });
  // The inline theme needs the nonce in style-src too.
  const file = path.join(dir, 'panel.html');
  fs.writeFileSync(file, html.replace("style-src file:", `style-src file: 'nonce-${nonce}'`));
  await page.goto(pathToFileURL(file).href);
  // The panel renders Markdown on animation frames, which a background tab does not get.
  await page.bringToFront();
  await page.waitForFunction(() => document.querySelector('#input') !== null);
  return {
    page,
    f,
    fromWebview,
    close: async () => {
      assert.deepEqual(errors, [], 'no errors in the page');
      await page.close();
      await f.close();
    },
  };
}

async function typeAndEnter(page: Page, text: string): Promise<void> {
  await page.focus('#input');
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

/** Waits for the `n`th end of turn, and for the page to show it. */
async function turnEnded(p: PanelPage, n: number): Promise<void> {
  await waitUntil(() => p.f.host.posted.filter((m) => m.type === 'turnEnd').length >= n, 20_000);
  await p.page.waitForFunction(() => !document.querySelector('#app')?.classList.contains('busy'));
}

const agentText = (page: Page) =>
  page.$$eval('.message.agent .body', (els) => els.map((e) => (e as HTMLElement).innerText).join('\n'));

test('the panel streams, asks, opens diffs and stops, in a real browser', async () => {
  const answer =
    'Here is the plan for **greet.txt**:\n\n1. write the greeting\n2. check it\n\n```sh\necho hello > greet.txt\n```\n\nStreaming this answer slowly so that it can be seen arriving piece by piece.';
  const p = await openPanel([
    { thought: 'The user wants a greeting file.', text: 'Let me think about it first.' },
    { text: answer, piece: 6, gap_ms: 60 },
    {
      tool_calls: [
        {
          id: 'call_t',
          name: 'TodoWrite',
          arguments: {
            todos: [
              { content: 'Write greet.txt', status: 'in_progress', activeForm: 'Writing greet.txt' },
              { content: 'Check the greeting', status: 'pending' },
            ],
          },
        },
        { id: 'call_w', name: 'Write', arguments: { file_path: 'greet.txt', content: 'hello\n' } },
      ],
    },
    { text: 'Created **greet.txt**.' },
    { hang: true },
  ]);
  const { page, f } = p;
  try {
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    // 1. Enter sends; thoughts are collapsed.
    await typeAndEnter(page, 'Plan a greeting');
    await page.waitForFunction(() => document.querySelector('.message.user')?.textContent?.includes('Plan a greeting'));
    assert.equal(await page.$eval('#input', (e) => (e as HTMLTextAreaElement).value), '', 'the input is cleared');
    assert.ok(p.fromWebview.some((m) => m.type === 'send' && m.text === 'Plan a greeting'));
    await turnEnded(p, 1);
    assert.equal(await page.$eval('details.thought', (e) => (e as HTMLDetailsElement).open), false);
    assert.match(await page.$eval('details.thought .body', (e) => e.textContent ?? ''), /greeting file/);

    // 2. Shift+Enter is a new line; the answer renders while it streams.
    await page.focus('#input');
    await page.keyboard.type('Now');
    await page.keyboard.down('Shift');
    await page.keyboard.press('Enter');
    await page.keyboard.up('Shift');
    await page.keyboard.type('stream it');
    assert.equal(await page.$eval('#input', (e) => (e as HTMLTextAreaElement).value), 'Now\nstream it');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => (document.querySelectorAll('.message.agent .body')[1]?.textContent?.length ?? 0) > 20);
    const partial = await agentText(page);
    const stillBusy = await page.$eval('#app', (e) => e.classList.contains('busy'));
    assert.ok(stillBusy, 'seen before the turn ended');
    assert.ok(!partial.includes('piece by piece'), 'only part of the answer so far');
    await page.screenshot({ path: path.join(artifacts, 'panel-streaming.png') });
    await turnEnded(p, 2);
    // Rendered Markdown (sanitised), with code-block actions.
    assert.equal(await page.$eval('.message.agent strong', (e) => e.textContent), 'greet.txt');
    assert.equal(await page.$$eval('.message.agent ol li', (e) => e.length), 2);
    assert.match(await page.$eval('.code-block pre', (e) => e.textContent ?? ''), /echo hello > greet.txt/);
    await page.click('.code-block [data-action=insert]');
    await page.click('.code-block [data-action=copy]');
    await waitUntil(() => f.host.actions.filter((a) => a.kind === 'insert' || a.kind === 'copy').length === 2);
    assert.deepEqual(f.host.actions.find((a) => a.kind === 'insert')?.args, ['echo hello > greet.txt\n']);

    // 3. A tool call card with a diff and a permission card, mid-turn.
    await typeAndEnter(page, 'Create greet.txt');
    await page.waitForSelector('.permission button[data-kind=allow_once]');
    await page.waitForSelector('.plan li');
    assert.match(await page.$eval('#plan', (e) => e.textContent ?? ''), /Writing greet\.txt/);
    const card = await page.$eval('.permission', (e) => e.closest('.tool')?.querySelector('.tool-title')?.textContent);
    assert.equal(card, 'Write greet.txt');
    await page.screenshot({ path: path.join(artifacts, 'panel-mid-turn.png') });
    // The diff button posts the file's path and texts.
    await page.click('.tool .diff-button');
    await waitUntil(() => p.fromWebview.some((m) => m.type === 'openDiff'));
    const target = path.join(f.cwd, 'greet.txt');
    assert.deepEqual(p.fromWebview.find((m) => m.type === 'openDiff'), {
      type: 'openDiff',
      path: target,
      oldText: null,
      newText: 'hello\n',
    });
    assert.deepEqual(f.host.actions.find((a) => a.kind === 'openDiff')?.args, [target, null, 'hello\n']);
    // Locations open the file.
    await page.click('.tool .location');
    await waitUntil(() => f.host.actions.some((a) => a.kind === 'openLocation'));
    assert.equal(f.host.actions.find((a) => a.kind === 'openLocation')?.args[0], target);
    // The permission card's button answers the request.
    await page.click('.permission button[data-kind=allow_once]');
    await turnEnded(p, 3);
    assert.equal(fs.readFileSync(target, 'utf8'), 'hello\n');
    const answered = p.fromWebview.find((m) => m.type === 'permission');
    assert.ok(answered && answered.type === 'permission' && answered.optionId);
    assert.match(await page.$eval('.answered', (e) => e.textContent ?? ''), /Answered: Allow once/i);
    const statuses = await page.$$eval('.tool', (els) =>
      els.map((e) => `${e.querySelector('.tool-title')?.textContent}: ${(e as HTMLElement).dataset.status}`),
    );
    assert.deepEqual(statuses, ['Update the task list (2 tasks): completed', 'Write greet.txt: completed']);
    // Rendered on the frame after the last chunk.
    await page.waitForFunction(() =>
      Array.from(document.querySelectorAll('.message.agent .body')).some((e) => e.textContent?.includes('Created greet.txt.')),
    );
    assert.ok(await page.$eval('#usage', (e) => !e.hasAttribute('hidden')), 'the usage meter is shown');
    // The meter opens the map of the context (usage_update's _meta.maia.contextMap); Escape closes it.
    await page.click('#usage');
    await page.waitForSelector('#context-map:not([hidden])');
    assert.equal(await page.$eval('#usage', (e) => e.getAttribute('aria-expanded')), 'true');
    const kinds = await page.$$eval('#context-map .ctx-rows li', (els) => els.map((e) => e.getAttribute('data-kind')));
    for (const kind of ['systemPrompt', 'skills', 'tools', 'mcpTools', 'conversation', 'reserve', 'free']) {
      assert.ok(kinds.includes(kind), `${kind} in ${kinds.join(', ')}`);
    }
    assert.match(await page.$eval('#context-map .ctx-foot', (e) => e.textContent ?? ''), /Auto-compaction at [\d,]+ tokens · [\d,]+ tokens kept for the answer/);
    assert.ok((await page.$$('#context-map .ctx-bar .ctx-part')).length >= 3, 'a stacked bar of the segments');
    await page.screenshot({ path: path.join(artifacts, 'panel-context-map.png') });
    await page.keyboard.press('Escape');
    await page.waitForSelector('#context-map[hidden]');
    assert.equal(await page.$eval('#usage', (e) => e.getAttribute('aria-expanded')), 'false');

    // 4. Esc stops a turn (session/cancel).
    await typeAndEnter(page, 'Wait forever');
    await page.waitForFunction(() => document.querySelector('#app')?.classList.contains('busy'));
    await f.mock.waitForRequests(5);
    await page.focus('#input');
    await page.keyboard.press('Escape');
    await turnEnded(p, 4);
    assert.ok(p.fromWebview.some((m) => m.type === 'cancel'));
    assert.ok(f.host.posted.some((m) => m.type === 'turnEnd' && m.stopReason === 'cancelled'));
    assert.match(await page.$eval('.log', (e) => e.textContent ?? ''), /Stopped\./);
  } finally {
    await p.close();
  }
});

test('/ completes slash commands and @ completes workspace files', async () => {
  const p = await openPanel([{ text: 'Got the file.' }]);
  const { page, f } = p;
  try {
    fs.writeFileSync(path.join(f.cwd, 'notes.md'), 'the notes\n');
    await f.host.waitFor((m) => m.type === 'update' && m.update.sessionUpdate === 'available_commands_update');
    await page.focus('#input');
    await page.keyboard.type('/ren');
    await page.waitForSelector('#completion li');
    assert.match(await page.$eval('#completion', (e) => e.textContent ?? ''), /\/rename/);
    await page.keyboard.press('Tab');
    assert.equal(await page.$eval('#input', (e) => (e as HTMLTextAreaElement).value), '/rename ');
    await page.$eval('#input', (e) => ((e as HTMLTextAreaElement).value = ''));
    await page.keyboard.type('Read @note');
    await page.waitForFunction(() => document.querySelector('#completion')?.textContent?.includes('notes.md'));
    await page.keyboard.press('Enter');
    assert.equal(await page.$eval('#input', (e) => (e as HTMLTextAreaElement).value), 'Read @notes.md ');
    assert.match(await page.$eval('#attachments', (e) => e.textContent ?? ''), /notes\.md/);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('.message.agent')?.textContent?.includes('Got the file.'));
    const sent = p.fromWebview.find((m) => m.type === 'send');
    assert.ok(sent && sent.type === 'send');
    assert.equal(sent.attachments[0]?.name, 'notes.md');
    assert.match(JSON.stringify(await f.mock.request(1)), /the notes/);

    // Files dropped on the panel become attachments.
    const dropped = pathToFileURL(path.join(f.cwd, 'dropped file.ts')).href;
    await page.evaluate((uri) => {
      const dt = new DataTransfer();
      dt.setData('text/uri-list', `# a comment line\r\n${uri}`);
      document.querySelector('#app')!.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, dropped);
    assert.match(await page.$eval('#attachments', (e) => e.textContent ?? ''), /dropped file\.ts/);

    // The threads list comes from session/list; opening one replays it.
    await page.click('#threads-button');
    await page.waitForSelector('#threads li[data-session-id]');
    const listed = await page.$$eval('#threads li[data-session-id]', (els) =>
      els.map((e) => [(e as HTMLElement).dataset.sessionId, e.getAttribute('aria-selected'), e.querySelector('.thread-open')?.textContent]),
    );
    assert.deepEqual(listed, [[f.panel.currentSession, 'true', 'Read @notes.md']]);
    await page.click('#threads li .thread-open');
    await waitUntil(() => f.host.posted.some((m) => m.type === 'replayed'));
    await page.waitForFunction(() => document.querySelector('.message.user')?.textContent?.includes('Read @notes.md'));
    // The replayed answer is rendered a frame (or the fallback timer) after its chunk.
    await page.waitForFunction(() => document.querySelector('.message.agent .body')?.textContent?.includes('Got the file.'));
    // The replayed message shows its attachment as a chip, not as a raw `@/path` line.
    assert.equal(await page.$eval('.message.user .body', (e) => e.textContent?.trim()), 'Read @notes.md');
    assert.deepEqual(await page.$$eval('.message.user .chip', (els) => els.map((e) => e.textContent)), ['notes.md']);
    assert.equal(await page.$eval('#threads', (e) => e.hasAttribute('hidden')), true);
  } finally {
    await p.close();
  }
});

test('Markdown renders while animation frames never come (a hidden or throttled webview)', async () => {
  const p = await openPanel([{ text: 'Some **bold** words.' }], { noFrames: true });
  const { page } = p;
  try {
    // Polled on a timer: puppeteer's default polling uses animation frames too.
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent, { polling: 100 });
    await typeAndEnter(page, 'Say something bold');
    await waitUntil(() => p.f.host.posted.some((m) => m.type === 'turnEnd'), 20_000);
    await page.waitForFunction(() => document.querySelector('.message.agent strong')?.textContent === 'bold', {
      polling: 100,
      timeout: 5_000,
    });
  } finally {
    await p.close();
  }
});

test('native look and keyboard: bordered tables, VS Code buttons, compact tool cards, Enter/Escape in the permission card', async () => {
  const p = await openPanel([
    { text: '| Step | What |\n|---|---|\n| 1 | read |\n| 2 | write |' },
    { tool_calls: [{ id: 'call_a', name: 'Write', arguments: { file_path: 'a.txt', content: 'a\n' } }] },
    { text: 'OK, not writing a.txt.' },
    { tool_calls: [{ id: 'call_b', name: 'Write', arguments: { file_path: 'b.txt', content: 'b\n' } }] },
    { text: 'Wrote b.txt.' },
  ]);
  const { page, f } = p;
  try {
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    await typeAndEnter(page, 'A table');
    await turnEnded(p, 1);
    // Markdown renders on animation frames: wait for the whole table, then read
    // its style in the same step (a later render replaces the elements).
    const cell = await page.waitForFunction(() => {
      const cells = document.querySelectorAll('.message.agent td');
      if (cells.length !== 4) {
        return undefined;
      }
      const st = getComputedStyle(cells[0]);
      return `${st.borderTopWidth} ${st.borderTopStyle}`;
      // Polled on a timer: animation frames stop while the page is not in
      // front, and the panel renders on its timer then too.
    }, { polling: 100 });
    // Tables have borders; buttons take VS Code's button colours.
    assert.equal(await cell.jsonValue(), '1px solid');
    assert.equal(await page.$eval('#send', (e) => getComputedStyle(e).backgroundColor), 'rgb(0, 120, 212)');

    // Escape in the permission card rejects (with the typed reason) and does not stop the turn.
    await typeAndEnter(page, 'Write a.txt');
    await page.waitForSelector('.permission button[data-kind=allow_once]');
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement)?.dataset.kind), 'allow_once', 'the first answer has focus');
    // An update of the card re-renders it; the focus stays on the answer.
    await page.evaluate(() => {
      const id = (document.querySelector('.permission')!.closest('.tool') as HTMLElement).dataset.toolCallId;
      window.postMessage({ type: 'update', update: { sessionUpdate: 'tool_call_update', toolCallId: id, title: 'Write a.txt' } }, '*');
    });
    await page.waitForFunction(() => document.querySelector('.permission')?.isConnected);
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement)?.dataset.kind), 'allow_once', 'focus kept over a re-render');
    assert.equal(await page.$eval('.permission [data-kind=allow_once]', (e) => getComputedStyle(e).backgroundColor), 'rgb(0, 120, 212)');
    assert.equal(await page.$eval('.permission [data-kind=reject_once]', (e) => getComputedStyle(e).backgroundColor), 'rgb(49, 49, 49)');
    await page.focus('.permission .reason');
    await page.keyboard.type('not now');
    await page.keyboard.press('Escape');
    await turnEnded(p, 2);
    const rejected = p.fromWebview.find((m) => m.type === 'permission');
    assert.ok(rejected && rejected.type === 'permission');
    assert.equal(rejected.reason, 'not now');
    assert.match(await page.$eval('.answered', (e) => e.textContent ?? ''), /Reject/i);
    assert.ok(!p.fromWebview.some((m) => m.type === 'cancel'), 'Escape in the card does not cancel the turn');
    assert.ok(f.host.posted.some((m) => m.type === 'turnEnd' && m.stopReason === 'end_turn'));
    assert.equal(fs.existsSync(path.join(f.cwd, 'a.txt')), false);

    // Enter on the focused answer allows.
    await typeAndEnter(page, 'Write b.txt');
    await page.waitForFunction(() => document.querySelectorAll('.permission button[data-kind=allow_once]').length === 1);
    const cardId = await page.$eval('.permission', (e) => (e.closest('.tool') as HTMLElement).dataset.toolCallId);
    await page.keyboard.press('Enter');
    await turnEnded(p, 3);
    assert.equal(fs.readFileSync(path.join(f.cwd, 'b.txt'), 'utf8'), 'b\n');

    // The finished card is one line with its diff in reach; Enter on its head expands it; Tab goes on to the diff.
    const card = `.tool[data-tool-call-id="${cardId}"]`;
    assert.equal(await page.$eval(`${card} .tool-head`, (e) => e.getAttribute('aria-expanded')), 'false');
    assert.equal(await page.$eval(`${card} .tool-body`, (e) => e.hasAttribute('hidden')), true);
    assert.ok(await page.$eval(`${card} .diff-button`, (e) => (e as HTMLElement).offsetParent !== null), 'Open diff shows on the compact card');
    await page.focus(`${card} .tool-head`);
    await page.keyboard.press('Enter');
    assert.equal(await page.$eval(`${card} .tool-head`, (e) => e.getAttribute('aria-expanded')), 'true');
    assert.equal(await page.$eval(`${card} .tool-body`, (e) => e.hasAttribute('hidden')), false);
    assert.match(await page.$eval(`${card} .tool-body`, (e) => e.textContent ?? ''), /b\.txt/);
    assert.equal(await page.evaluate(() => document.activeElement?.className), 'tool-head', 'focus stays on the head');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.className), 'diff-button');
    await page.keyboard.down('Shift');
    await page.keyboard.press('Tab');
    await page.keyboard.up('Shift');
    await page.keyboard.press('Space');
    assert.equal(await page.$eval(`${card} .tool-head`, (e) => e.getAttribute('aria-expanded')), 'false');
    await page.screenshot({ path: path.join(artifacts, 'panel-native.png') });
  } finally {
    await p.close();
  }
});

async function waitUntil(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) {
      throw new Error('condition not met in time');
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The scripted ACP agent (test-acp/fake-agent.ts), executable. */
function fakeAgent(): string {
  const file = path.join(__dirname, 'fake-agent.js');
  fs.chmodSync(file, 0o755);
  return file;
}

/** The requests the fake agent got (method and params), in order. */
function agentRequests(f: Fixture): { method: string; params: Record<string, any> }[] {
  const file = path.join(f.home, 'requests.jsonl');
  return fs.existsSync(file)
    ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    : [];
}

async function waitUntilRequest(f: Fixture, method: string, n = 1): Promise<{ method: string; params: Record<string, any> }> {
  await waitUntil(() => agentRequests(f).filter((r) => r.method === method).length >= n, 10_000);
  return agentRequests(f).filter((r) => r.method === method)[n - 1];
}

test('timeline: Undo changes previews files, kinds and conflicts, shows diffs and restores with the token', async () => {
  const p = await openPanel([], { command: fakeAgent() });
  const { page, f } = p;
  try {
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    await typeAndEnter(page, 'first question');
    await turnEnded(p, 1);
    await typeAndEnter(page, 'second question');
    await turnEnded(p, 2);
    // Each user message has Edit and Fork, each finished turn Undo changes.
    await page.waitForFunction(() => document.querySelectorAll('.message.user[data-message-id]').length === 2);
    assert.deepEqual(
      await page.$$eval('.message.user', (els) => els.map((e) => (e as HTMLElement).dataset.messageId)),
      ['m1', 'm2'],
    );
    assert.equal(await page.$$eval('.message.user [data-action="edit"]', (e) => e.length), 2);
    assert.equal(await page.$$eval('.message.user [data-action="fork"]', (e) => e.length), 2);
    assert.deepEqual(
      await page.$$eval('.turn-actions', (els) => els.map((e) => (e as HTMLElement).dataset.messageId)),
      ['m1', 'm2'],
    );
    // Native buttons (theme colours), reachable with the keyboard.
    const undo = await page.$('.turn-actions[data-message-id="m2"] [data-action="undo"]');
    assert.equal(await undo!.evaluate((e) => e.tagName), 'BUTTON');
    await undo!.focus();
    await page.keyboard.press('Enter');
    const asked = await waitUntilRequest(f, '_session/files/revert');
    assert.deepEqual(asked.params, { sessionId: 's1', beforeMessage: { messageId: 'm2' }, dryRun: true });
    await page.waitForFunction(() => document.querySelectorAll('.revert-files li').length === 3);
    const rows = await page.$$eval('.revert-files li', (els) =>
      els.map((e) => ({
        kind: (e as HTMLElement).dataset.kind,
        name: e.querySelector('.revert-path')?.textContent,
        conflict: e.classList.contains('conflict'),
        flag: e.querySelector('.revert-conflict')?.textContent ?? '',
      })),
    );
    assert.deepEqual(rows, [
      { kind: 'modified', name: 'a.txt', conflict: false, flag: '' },
      { kind: 'created', name: 'b.txt', conflict: false, flag: '' },
      { kind: 'modified', name: 'c.txt', conflict: true, flag: 'changed by you since: kept' },
    ]);
    assert.match(await page.$eval('.revert-head', (e) => e.textContent ?? ''), /3 file\(s\), 1 changed by you since \(kept\)/);
    assert.match(await page.$eval('.revert', (e) => e.textContent ?? ''), /Not captured \(cannot be restored\): .*big\.bin/);
    // The Restore button has the focus; Show diff opens the old text beside the file.
    assert.equal(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.action), 'restore');
    await page.click('.revert-files li[data-kind="modified"] [data-action="diff"]');
    await waitUntil(() => f.host.actions.some((a) => a.kind === 'openRevertDiff'), 5_000);
    const diff = f.host.actions.find((a) => a.kind === 'openRevertDiff')!;
    assert.deepEqual(diff.args, [path.join(f.cwd, 'a.txt'), 'old a\n', 'modified']);
    await page.screenshot({ path: path.join(artifacts, 'panel-undo-preview.png') });
    // Restore sends the preview's token; the conflict is named as kept.
    await page.click('.revert [data-action="restore"]');
    const applied = await waitUntilRequest(f, '_session/files/revert', 2);
    assert.deepEqual(applied.params, {
      sessionId: 's1',
      beforeMessage: { messageId: 'm2' },
      dryRun: false,
      previewToken: `sha256:${'ab'.repeat(32)}`,
    });
    await page.waitForFunction(() => document.querySelector('.revert-result') !== null);
    assert.equal(
      await page.$eval('.revert-result', (e) => e.textContent),
      'Restored 2 file(s). Kept, changed by you since: c.txt.',
    );
  } finally {
    await p.close();
  }
});

test('timeline: Edit rewinds and puts the text back in the input; Fork from here opens the fork', async () => {
  const p = await openPanel([], { command: fakeAgent() });
  const { page, f } = p;
  try {
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    await typeAndEnter(page, 'first question');
    await turnEnded(p, 1);
    await typeAndEnter(page, 'second question');
    await turnEnded(p, 2);
    await page.waitForFunction(() => document.querySelectorAll('.message.user[data-message-id]').length === 2);

    // Edit on the second message: rewind before it, reload, text back in the input.
    await page.click('.message.user[data-message-id="m2"] [data-action="edit"]');
    const rewind = await waitUntilRequest(f, '_session/rewind');
    assert.deepEqual(rewind.params, { sessionId: 's1', beforeMessage: { messageId: 'm2' } });
    await page.waitForFunction(() => (document.querySelector('#input') as HTMLTextAreaElement).value === 'second question');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'input');
    // The reloaded thread holds the first message only, still with its actions.
    await page.waitForFunction(() => document.querySelectorAll('.message.user').length === 1);
    assert.equal(await page.$eval('.message.user', (e) => (e as HTMLElement).dataset.messageId), 'm1');
    assert.equal(await page.$$eval('.turn-actions', (e) => e.length), 1);
    // Edit and resend: the changed text is the next prompt.
    await page.focus('#input');
    await page.keyboard.type(', edited');
    await page.keyboard.press('Enter');
    await turnEnded(p, 3);
    const prompts = agentRequests(f).filter((r) => r.method === 'session/prompt');
    assert.equal(prompts[2].params.prompt[0].text, 'second question, edited');
    await page.waitForFunction(() => document.querySelectorAll('.message.user[data-message-id]').length === 2);

    // Fork from the first message: a fork before it, opened in the panel.
    const loads = agentRequests(f).filter((r) => r.method === 'session/load').length;
    await page.click('.message.user[data-message-id="m1"] [data-action="fork"]');
    const fork = await waitUntilRequest(f, 'session/fork');
    assert.deepEqual(fork.params, { sessionId: 's1', cwd: f.cwd, mcpServers: [], cursorId: 'm1' });
    const load = await waitUntilRequest(f, 'session/load', loads + 1);
    assert.equal(load.params.sessionId, 'f1');
    await waitUntil(() => f.panel.currentSession === 'f1', 5_000);
    await page.waitForFunction(() => (document.querySelector('#input') as HTMLTextAreaElement).value === 'first question');
    assert.equal(await page.$$eval('.message.user', (e) => e.length), 0, 'the fork starts before the message');
  } finally {
    await p.close();
  }
});

test('timeline: no Edit, Fork or Undo when the agent does not advertise them', async () => {
  // The fake agent advertises nothing with this marker.
  const p = await openPanel([], { command: fakeAgent(), beforeLoad: (f) => fs.writeFileSync(path.join(f.home, 'no-timeline'), '') });
  const { page } = p;
  try {
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    await typeAndEnter(page, 'a question');
    await turnEnded(p, 1);
    await page.waitForFunction(() => document.querySelector('.message.user') !== null);
    assert.equal(await page.$$eval('.message-actions button', (e) => e.length), 0);
    assert.equal(await page.$$eval('.turn-actions:not([hidden])', (e) => e.length), 0);
  } finally {
    await p.close();
  }
});

test('Review in editor: the card says what was kept and its diff is what was written; a declined review leaves the card with the reason', async () => {
  // An 18-line file; the proposal turns line 5 into two lines and adds one at the end.
  const before = Array.from({ length: 18 }, (_, i) => `item ${i + 1}\n`).join('');
  const proposed = before.replace('item 5\n', 'item five\nitem 5b\n') + 'item 19\n';
  /** The first hunk kept in the editor, the second undone. */
  const kept = before.replace('item 5\n', 'item five\nitem 5b\n');
  const proposals: { path: string; before: string; proposed: string }[] = [];
  let nextAnswer: () => { kept: string } | { declined: string } = () => ({ kept });
  const p = await openPanel(
    [
      { tool_calls: [{ id: 'call_r', name: 'Write', arguments: { file_path: 'list.txt', content: proposed } }] },
      { text: 'Wrote what you kept.' },
      { tool_calls: [{ id: 'call_s', name: 'Write', arguments: { file_path: 'list.txt', content: 'saved too early\n' } }] },
      { text: 'Left list.txt as it was.' },
    ],
    {
      beforeLoad: (f) => {
        f.host.review = {
          addTurn: () => {},
          clear: () => {},
          takeUndone: () => [],
          giveBack: () => {},
          run: async () => {},
          propose: async (path, b, prop) => {
            proposals.push({ path, before: b, proposed: prop });
            return nextAnswer();
          },
          dropProposal: async () => {},
        };
      },
    },
  );
  const { page, f } = p;
  const target = path.join(f.cwd, 'list.txt');
  fs.writeFileSync(target, before);
  const diffLabel = (id: string) => page.$eval(`[data-tool-call-id="${id}"] .diff-button`, (e) => e.textContent ?? '');
  try {
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    await typeAndEnter(page, 'Update the list');
    await page.waitForSelector('.permission .review-in-editor');
    const asked = () => page.$eval('.permission', (e) => (e.closest('.tool') as HTMLElement).dataset.toolCallId ?? '');
    const first = await asked();
    // The proposal's diff counts the lines it changes, not the file's 18.
    assert.equal(await diffLabel(first), 'Open diff: list.txt (−1 +3 lines)');
    await page.click('.permission .review-in-editor');
    await turnEnded(p, 1);
    assert.deepEqual(proposals, [{ path: target, before, proposed }]);
    assert.equal(fs.readFileSync(target, 'utf8'), kept, 'only the kept hunk is written');
    // The card says what was kept; its diff is what was written.
    await page.waitForFunction((id: string) => document.querySelector(`[data-tool-call-id="${id}"] .answered`)?.textContent === 'Kept 1 of 2 changes', {}, first);
    await page.waitForFunction((id: string) => (document.querySelector(`[data-tool-call-id="${id}"]`) as HTMLElement | null)?.dataset.status === 'completed', {}, first);
    assert.equal(await diffLabel(first), 'Open diff: list.txt (−1 +2 lines)');
    await page.click(`[data-tool-call-id="${first}"] .diff-button`);
    await waitUntil(() => p.fromWebview.some((m) => m.type === 'openDiff'));
    assert.deepEqual(p.fromWebview.find((m) => m.type === 'openDiff'), { type: 'openDiff', path: target, oldText: before, newText: kept });

    // Declined (auto save on): the card stops offering the review and says why; it is answered there.
    nextAnswer = () => ({ declined: 'auto save is on ("files.autoSave": "afterDelay"); set it to "off" to review in the editor' });
    await typeAndEnter(page, 'Overwrite the list');
    await page.waitForSelector('.permission .review-in-editor');
    const second = await asked();
    await page.click('.permission .review-in-editor');
    await page.waitForSelector(`[data-tool-call-id="${second}"] .review-declined`);
    assert.equal(await page.$$eval(`[data-tool-call-id="${second}"] .review-in-editor`, (e) => e.length), 0, 'no review button once declined');
    assert.equal(
      await page.$eval(`[data-tool-call-id="${second}"] .review-declined`, (e) => e.textContent),
      'Not shown in the editor: auto save is on ("files.autoSave": "afterDelay"); set it to "off" to review in the editor. Answer here.',
    );
    await page.screenshot({ path: path.join(artifacts, 'panel-review-declined.png') });
    await page.click(`[data-tool-call-id="${second}"] .permission button[data-kind=reject_once]`);
    await turnEnded(p, 2);
    assert.equal(fs.readFileSync(target, 'utf8'), kept, 'nothing written');
    assert.match(await page.$eval(`[data-tool-call-id="${second}"] .answered`, (e) => e.textContent ?? ''), /Answered: Reject/);
  } finally {
    await p.close();
  }
});
