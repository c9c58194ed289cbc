/// <reference lib="dom" />
// The web page `maia serve` serves at `/`, in a real browser (Debian's
// chromium via puppeteer-core) against a real daemon and the scripted mock
// LLM: log in on a phone-sized page, see the sessions, open one live, prompt,
// answer a permission (a rejection with its reason, then an allow), queue and
// steer while a turn runs, stop; an observer watches the same session on a
// desktop-sized page, read-only. Screenshots go to test-artifacts/web-*.png.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as net from 'node:net';
import puppeteer, { Browser, ElementHandle, Page } from 'puppeteer-core';
import { PanelController } from '../src/panel/controller';
import { acpCommand } from '../src/logic';
import { MAIA_BIN, MockLlm, ScriptItem, scratch, serveDaemon, TestHost } from './harness';

const root = path.resolve(__dirname, '..', '..');
const artifacts = process.env.MAIA_TEST_ARTIFACTS ?? path.join(root, 'test-artifacts');
const CHROMIUM = process.env.CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const PHONE = { width: 390, height: 844, deviceScaleFactor: 2, isMobile: true, hasTouch: true };
const DESKTOP = { width: 1280, height: 800, deviceScaleFactor: 1 };

let browser: Browser | undefined;

before(async () => {
  if (!CHROMIUM) {
    throw new Error('chromium not found (apt-get install chromium, or set CHROMIUM)');
  }
  fs.mkdirSync(artifacts, { recursive: true });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'maia-chromium-')),
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
});

after(async () => {
  await browser?.close();
});

/** A page in a browser context of its own (its own cookies: one login each). */
async function newPage(viewport: typeof PHONE | typeof DESKTOP, errors: string[]): Promise<Page> {
  const context = await browser!.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport(viewport);
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') {
      errors.push(m.text());
    }
  });
  return page;
}

/** Logs in through the form; resolves on the app page. */
async function logIn(page: Page, base: string, token: string): Promise<void> {
  await page.goto(`${base}/`);
  await page.waitForSelector('#token');
  await page.type('#token', token);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  await page.waitForSelector('#input');
}

const text = (page: Page, selector: string) =>
  page.$$eval(selector, (els) => els.map((e) => (e as HTMLElement).innerText).join('\n'));

/** The text of the tool card whose title names `file` (MAIA numbers tool calls itself). */
async function tool(page: Page, file: string): Promise<string> {
  const card = await page.waitForFunction(
    (f: string) =>
      Array.from(document.querySelectorAll<HTMLElement>('section.tool')).find((t) => t.querySelector('.tool-title')?.textContent?.includes(f)),
    { timeout: 20_000 },
    file,
  );
  return (card.asElement() as ElementHandle<HTMLElement>).evaluate((e) => e.innerText);
}

/** The permission button of `kind` on the card of `file`, once it is asked. */
async function permission(page: Page, file: string, kind: string): Promise<ElementHandle<Element>> {
  const handle = await page.waitForFunction(
    (f: string, k: string) =>
      Array.from(document.querySelectorAll<HTMLElement>('section.tool'))
        .find((t) => t.querySelector('.tool-title')?.textContent?.includes(f))
        ?.querySelector(`.permission button[data-kind=${k}]`) ?? undefined,
    { timeout: 20_000 },
    file,
    kind,
  );
  return handle.asElement() as ElementHandle<Element>;
}

async function option(page: Page, file: string, kind: string): Promise<void> {
  await (await permission(page, file, kind)).click();
}

async function idle(page: Page): Promise<void> {
  await page.waitForFunction(() => !document.querySelector('#app')?.classList.contains('busy'), { timeout: 20_000 });
}

test('web page: log in, open a live session, prompt, answer permissions, queue, steer, stop; an observer watches', async () => {
  const slow = 'Streaming this answer slowly, piece by piece, so that a message can be queued while it arrives.';
  const script: ScriptItem[] = [
    // 1. The editor's prompt, before the page opens the session.
    { text: 'Hello from the editor.' },
    // 2. The page's prompt: a write, rejected with a reason.
    { tool_calls: [{ id: 'call_a', name: 'Write', arguments: { file_path: 'greet.txt', content: 'hi\n' } }] },
    // 3. After the reason: another write, allowed.
    { tool_calls: [{ id: 'call_b', name: 'Write', arguments: { file_path: 'hello.txt', content: 'hello\n' } }] },
    { text: 'Wrote **hello.txt** as asked.' },
    // 5. A slow answer; a message is queued meanwhile, 6. its turn.
    { text: slow, piece: 4, gap_ms: 60 },
    { text: 'The queued answer.' },
    // 7. A write whose question is open while a steer is sent; 8. the steer heard.
    { tool_calls: [{ id: 'call_c', name: 'Write', arguments: { file_path: 'steer.txt', content: 's\n' } }] },
    { text: 'Steered answer.' },
    // 9. A turn that never answers: stopped.
    { hang: true },
  ];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-web-'));
  const mock = await MockLlm.start(script, tmp);
  const { home, cwd, root: scratchRoot } = scratch(mock.url);
  const daemon = await serveDaemon(home, [
    ['phone', []],
    ['desk', ['--observer']],
    ['editor', []],
  ], cwd);
  const errors: string[] = [];
  const timings: Record<string, number> = {};
  try {
    // An editor opens a session through the daemon and prompts; then it goes.
    const editorHome = path.join(scratchRoot, 'editor-home');
    fs.mkdirSync(editorHome);
    const host = new TestHost(cwd, () => ({
      ...acpCommand({ path: MAIA_BIN }, { PATH: process.env.PATH, HOME: editorHome }, { url: daemon.url, token: daemon.tokens.editor }),
      cwd,
    }));
    const editor = new PanelController(host);
    let sessionId: string;
    try {
      await editor.onMessage({ type: 'ready' });
      const opened = await host.waitFor((m) => m.type === 'session');
      sessionId = opened.type === 'session' ? opened.sessionId : '';
      assert.equal(await editor.send('Say hello', []), 'end_turn');
    } finally {
      await editor.dispose();
    }

    // The phone: a wrong token first, then the right one.
    const phone = await newPage(PHONE, errors);
    const started = Date.now();
    await phone.goto(`${daemon.base}/`);
    await phone.waitForSelector('#token');
    timings.loginFormMs = Date.now() - started;
    await phone.screenshot({ path: path.join(artifacts, 'web-phone-login.png') });
    await phone.type('#token', `maia_${'0'.repeat(64)}`);
    await Promise.all([phone.waitForNavigation(), phone.click('button[type=submit]')]);
    assert.match(await text(phone, '.login-error'), /Unknown or revoked token/, await phone.content());
    const loginStart = Date.now();
    await phone.type('#token', daemon.tokens.phone);
    await Promise.all([phone.waitForNavigation(), phone.click('button[type=submit]')]);
    // The sessions the token may see: the editor's, live.
    await phone
      .waitForSelector(`.threads li[data-session-id="${sessionId}"]`, { timeout: 10_000 })
      .catch(async (e: unknown) => {
        throw new Error(`${e}: the page shows ${await phone.evaluate(() => document.body.innerText)}`);
      });
    timings.loginToSessionListMs = Date.now() - loginStart;
    timings.pageLoadMs = await phone.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
      return Math.round(nav.loadEventEnd - nav.startTime);
    });
    assert.equal(await phone.$eval('#who', (e) => e.textContent), 'phone');
    await phone.screenshot({ path: path.join(artifacts, 'web-phone-sessions.png') });
    const cookies = await phone.cookies();
    assert.equal(cookies.length, 1);
    assert.ok(cookies[0].httpOnly && cookies[0].sameSite === 'Strict', JSON.stringify(cookies[0]));
    assert.ok(!cookies[0].value.includes(daemon.tokens.phone));
    assert.equal(await phone.evaluate(() => document.cookie), '', 'HttpOnly: no script reads it');

    // Open it: the editor's turn is replayed.
    const openStart = Date.now();
    await phone.click(`.threads li[data-session-id="${sessionId}"] .thread-open`);
    await phone.waitForFunction(() => document.querySelector('.message.agent')?.textContent?.includes('Hello from the editor.'));
    timings.openSessionMs = Date.now() - openStart;
    // The editor's prompt too (the daemon tells attached clients what was asked).
    assert.match(await text(phone, '.message.user'), /Say hello/);

    // The desk: an observer on the same session, read-only.
    const desk = await newPage(DESKTOP, errors);
    await logIn(desk, daemon.base, daemon.tokens.desk);
    await desk.waitForSelector(`.threads li[data-session-id="${sessionId}"]`);
    await desk.click(`.threads li[data-session-id="${sessionId}"] .thread-open`);
    await desk.waitForFunction(() => document.querySelector('.message.agent')?.textContent?.includes('Hello from the editor.'));
    assert.match(await desk.$eval('#who', (e) => e.textContent ?? ''), /read-only/);
    assert.equal(await desk.$eval('#input', (e) => (e as HTMLElement).offsetParent === null), true, 'no input for an observer');
    assert.equal(await desk.$eval('#send', (e) => (e as HTMLElement).offsetParent === null), true);

    // The phone prompts; the write asks permission: rejected, with a reason.
    await phone.focus('#input');
    await phone.keyboard.type('Write a greeting file');
    await phone.click('#send');
    await permission(phone, 'greet.txt', 'reject_once');
    // The observer sees the tool call, never the question.
    await tool(desk, 'greet.txt');
    assert.match(await text(desk, '.message.user'), /Write a greeting file/);
    assert.equal(await desk.$('.permission'), null);
    await phone.screenshot({ path: path.join(artifacts, 'web-phone-permission.png') });
    await phone.type('.permission .reason', 'name it hello.txt');
    await option(phone, 'greet.txt', 'reject_once');
    // The reason reached the model with the rejection.
    const third = JSON.stringify(await mock.request(3));
    assert.match(third, /name it hello\.txt/);
    // The next write: allowed.
    await option(phone, 'hello.txt', 'allow_once');
    await phone.waitForFunction(() => document.querySelector('.message.agent:last-of-type')?.textContent?.includes('Wrote hello.txt'));
    // The meter's map of the context, as in the editor's panel.
    await phone.waitForSelector('#usage:not([hidden])');
    await phone.click('#usage');
    await phone.waitForSelector('#context-map:not([hidden]) .ctx-rows li[data-kind=conversation]');
    assert.match(await text(phone, '#context-map .ctx-head'), /of [\d,]+ tokens/);
    await phone.click('#usage');
    await phone.waitForSelector('#context-map[hidden]');
    await idle(phone);
    assert.equal(fs.readFileSync(path.join(cwd, 'hello.txt'), 'utf8'), 'hello\n');
    assert.equal(fs.existsSync(path.join(cwd, 'greet.txt')), false);
    await desk.waitForFunction(() => document.body.innerText.includes('Wrote hello.txt'));
    assert.match(await tool(desk, 'greet.txt'), /rejected|failed/i);

    // A slow answer; a message queued meanwhile runs when it ends.
    await phone.focus('#input');
    await phone.keyboard.type('Answer slowly');
    await phone.click('#send');
    await phone.waitForSelector('#queue', { visible: true });
    await phone.screenshot({ path: path.join(artifacts, 'web-phone-streaming.png') });
    await phone.focus('#input');
    await phone.keyboard.type('And then this');
    await phone.click('#queue');
    await phone.waitForFunction(() => document.body.innerText.includes('Queued: And then this'));
    await phone.waitForFunction(() => document.body.innerText.includes('The queued answer.'), { timeout: 20_000 });
    await idle(phone);
    assert.match(await text(phone, '.message.user'), /And then this/);
    assert.match(JSON.stringify(await mock.request(6)), /And then this/);

    // A steer sent while a question is open joins the turn once it is answered.
    await phone.focus('#input');
    await phone.keyboard.type('Write another');
    await phone.click('#send');
    await permission(phone, 'steer.txt', 'allow_once');
    await phone.focus('#input');
    await phone.keyboard.type('Use capitals');
    await phone.click('#steer');
    await option(phone, 'steer.txt', 'allow_once');
    await phone.waitForFunction(() => document.body.innerText.includes('Steered: the running turn took the message.'));
    await phone.waitForFunction(() => document.body.innerText.includes('Steered answer.'));
    await idle(phone);
    assert.match(JSON.stringify(await mock.request(8)), /Use capitals/);

    // A turn that hangs: Stop.
    await phone.focus('#input');
    await phone.keyboard.type('Hang');
    await phone.click('#send');
    await mock.waitForRequests(9);
    await phone.waitForSelector('#stop', { visible: true });
    await desk.waitForFunction(() => document.querySelector('#app')?.classList.contains('busy'));
    await desk.screenshot({ path: path.join(artifacts, 'web-desktop-observer.png') });
    await phone.click('#stop');
    await phone.waitForFunction(() => document.body.innerText.includes('Stopped.'));
    await idle(phone);
    await idle(desk);

    // Usable at 390 px: one column, nothing wider than the screen, the input
    // and Send in view, touch-sized buttons.
    const layout = await phone.evaluate(() => {
      const box = (s: string) => {
        const r = document.querySelector(s)!.getBoundingClientRect();
        return { top: r.top, bottom: r.bottom, left: r.left, right: r.right };
      };
      const buttons = Array.from(document.querySelectorAll<HTMLElement>('footer button, header button')).filter((b) => b.offsetParent !== null);
      return {
        scrollWidth: document.documentElement.scrollWidth,
        wide: Array.from(document.querySelectorAll<HTMLElement>('body *'))
          .filter((e) => e.getBoundingClientRect().right > 391)
          .map((e) => `${e.tagName}.${e.className}#${e.id}`)
          .slice(0, 5),
        input: box('#input'),
        send: box('#send'),
        smallest: Math.min(...buttons.map((b) => b.getBoundingClientRect().height)),
      };
    });
    assert.ok(layout.scrollWidth <= PHONE.width, `no horizontal scroll: ${layout.scrollWidth} (${layout.wide})`);
    for (const b of [layout.input, layout.send]) {
      assert.ok(b.bottom <= PHONE.height && b.top >= 0 && b.right <= PHONE.width, JSON.stringify(b));
    }
    assert.ok(layout.smallest >= 44, `buttons at least 44 px high: ${layout.smallest}`);
    await phone.screenshot({ path: path.join(artifacts, 'web-phone-session.png') });
    await desk.screenshot({ path: path.join(artifacts, 'web-desktop-session.png') });

    // Log out: the login form again.
    await Promise.all([phone.waitForNavigation(), phone.click('#logout')]);
    await phone.waitForSelector('#token');
    assert.equal((await phone.cookies()).length, 0);

    // No token in the daemon's log.
    for (const token of Object.values(daemon.tokens)) {
      assert.ok(!daemon.stderr.some((l) => l.includes(token)), 'a token in the log');
    }
    assert.deepEqual(
      errors.filter((e) => !/Failed to load resource: the server responded with a status of 401/.test(e)),
      [],
      'no errors in the pages',
    );
    fs.writeFileSync(path.join(artifacts, 'web-timings.json'), JSON.stringify(timings, null, 2));
    console.log(`web page timings: ${JSON.stringify(timings)}`);
    await phone.close();
    await desk.close();
  } finally {
    daemon.child.kill();
    mock.stop();
    fs.rmSync(scratchRoot, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('web page: a dropped connection mid-turn reconnects and attaches since the last update, nothing lost or doubled', async () => {
  const whole = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ') + '.';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-web-'));
  const mock = await MockLlm.start([{ text: whole, piece: 6, gap_ms: 50 }], tmp);
  const { home, cwd, root: scratchRoot } = scratch(mock.url);
  const daemon = await serveDaemon(home, [['phone', []]], cwd);
  // The browser reaches the daemon through a TCP relay the test can cut.
  const upstream = Number(new URL(daemon.base).port);
  const open = new Set<net.Socket>();
  const relay = net.createServer((client) => {
    const server = net.connect(upstream, '127.0.0.1');
    for (const s of [client, server]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => s.destroy());
    }
    client.pipe(server);
    server.pipe(client);
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
  const errors: string[] = [];
  try {
    const phone = await newPage(PHONE, errors);
    await logIn(phone, base, daemon.tokens.phone);
    await phone.waitForSelector('.threads:not([hidden])');
    await phone.click('#new-button');
    await phone.waitForFunction(() => document.querySelector('.threads')?.hasAttribute('hidden'));
    await phone.focus('#input');
    await phone.keyboard.type('Count slowly');
    await phone.click('#send');
    await phone.waitForFunction(() => (document.querySelector('.message.agent .body')?.textContent?.length ?? 0) > 40);
    // The network goes: every connection through the relay is cut.
    for (const s of open) {
      s.destroy();
    }
    await phone.waitForFunction(() => document.querySelector('#status')?.textContent === 'restarting…');
    await phone.waitForFunction(() => document.querySelector('.message.agent .body')?.textContent?.trim().endsWith('w59.'), { timeout: 20_000 });
    await idle(phone);
    assert.equal((await text(phone, '.message.agent .body')).trim(), whole, 'every piece once, in order');
    assert.equal(await phone.$$eval('.message.agent', (els) => els.length), 1);
    assert.equal(await phone.$eval('#status', (e) => e.textContent), '');
    assert.equal(await phone.$('.note.error'), null, 'the drop is no error');
    assert.equal(mock.requests.length, 1, 'the turn ran once');
    assert.deepEqual(errors.filter((e) => !/WebSocket|ERR_CONNECTION|net::/.test(e)), []);
    await phone.close();
  } finally {
    relay.close();
    for (const s of open) {
      s.destroy();
    }
    daemon.child.kill();
    mock.stop();
    fs.rmSync(scratchRoot, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
