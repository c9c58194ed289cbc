/// <reference lib="dom" />
// The edit review in a real VS Code (code-server), with the packaged
// extension and the real debug `maia acp` against the scripted mock LLM: an
// accept-edits turn edits two hunks of one file and creates a second file;
// the changed lines are decorated with Keep / Undo lenses and the panel
// counts them; one hunk is undone from the keyboard (Alt+F5, Ctrl+Alt+U),
// the other kept, the new file undone whole; the files on disk are exactly
// as expected and the next model request carries the undone hunks once.
// Then "Review in editor" on a permission card: one proposed hunk undone, one
// kept; MAIA writes only the kept one and tells the model which was not.
// Screenshots (dark and light) in test-artifacts/code-server/review-*.png.
import { test, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Browser, Frame, KeyInput, Page } from 'puppeteer-core';
import { MAIA_BIN, MockLlm, ScriptItem, scratch } from '../test-acp/harness';
import { baseSettings, CodeServer, launchBrowser, newestVsix, ROOT, until, Workbench } from './workbench';

const artifacts = path.join(process.env.MAIA_TEST_ARTIFACTS ?? path.join(ROOT, 'test-artifacts'), 'code-server');

const BEFORE = ['# Shopping', 'apples', 'bread', 'cheese', 'dates', 'eggs', 'flour', 'grapes', 'honey', 'ice', ''].join('\n');
const AGENT = ['# Shopping', 'apples', 'brown bread', 'cheese', 'dates', 'eggs', 'flour', 'grapes', 'honey', 'ice', 'jam', 'kale', ''].join('\n');
/** The first hunk undone, the second kept. */
const EXPECTED = ['# Shopping', 'apples', 'bread', 'cheese', 'dates', 'eggs', 'flour', 'grapes', 'honey', 'ice', 'jam', 'kale', ''].join('\n');

/** The card's proposal over EXPECTED: a title change and a last line; the title is undone. */
const CARD_PROPOSED = EXPECTED.replace('# Shopping', '# Groceries') + 'lemons\n';
const CARD_KEPT = EXPECTED + 'lemons\n';

const SCRIPT: ScriptItem[] = [
  {
    tool_calls: [
      { id: 'call_a', name: 'Write', arguments: { file_path: 'list.md', content: AGENT } },
      { id: 'call_n', name: 'Write', arguments: { file_path: 'notes.md', content: 'Buy on Friday.\nAsk about jam.\n' } },
    ],
  },
  { text: 'Updated **list.md** and wrote **notes.md**.' },
  { text: 'Understood: plain bread, and no notes file.' },
  // "Review in editor" on a permission card: one hunk undone, one kept.
  { tool_calls: [{ id: 'call_c', name: 'Write', arguments: { file_path: 'list.md', content: CARD_PROPOSED } }] },
  { text: 'Wrote what you kept.' },
  // With auto save on, "Review in editor" declines by name; the card is answered in the panel.
  { tool_calls: [{ id: 'call_s', name: 'Write', arguments: { file_path: 'list.md', content: 'saved too early\n' } }] },
  { text: 'Left list.md as it was.' },
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

/** The CodeLens links of the visible editor, in order. */
const lenses = (page: Page) =>
  page.$$eval('.editor-instance .codelens-decoration a', (els) => els.map((e) => (e.textContent ?? '').trim()));

/** Clicks a lens with the mouse (the editor reacts to real mouse events,
 * not DOM clicks); again when the lenses were redrawn under the pointer. */
async function clickLens(page: Page, label: string): Promise<void> {
  await until(`a "${label}" lens clicked`, async () => {
    for (const link of await page.$$('.editor-instance .codelens-decoration a')) {
      try {
        if ((await link.evaluate((e) => (e.textContent ?? '').trim())) === label) {
          await link.click();
          return true;
        }
      } catch {
        return false; // detached: redrawn
      }
    }
    return false;
  });
}

/** Presses `key` with the modifiers held. */
async function chord(page: Page, modifiers: KeyInput[], key: KeyInput): Promise<void> {
  for (const m of modifiers) {
    await page.keyboard.down(m);
  }
  await page.keyboard.press(key);
  for (const m of [...modifiers].reverse()) {
    await page.keyboard.up(m);
  }
}

/** The hunk Undo lenses ("Undo", or "Undo line 1" on the file's row), not "Undo all". */
const hunkUndos = (labels: string[]) => labels.filter((l) => /^Undo($| line)/.test(l)).length;

const reviewLabel = (panel: Frame) =>
  panel.$eval('#review', (e) => ((e as HTMLElement).hidden ? '' : (e.querySelector('#review-next')?.textContent ?? ''))).catch(() => '');

function lastUser(request: unknown): string {
  const messages = (request as { messages: { role: string; content: unknown }[] }).messages;
  const users = messages.filter((m) => m.role === 'user');
  const c = users[users.length - 1]?.content;
  return typeof c === 'string' ? c : JSON.stringify(c);
}

test('the edit review in VS Code (code-server): decorations, Keep / Undo per change and per file, the model hears it', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-cs-review-'));
  cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  mock = await MockLlm.start(SCRIPT, tmp);
  const { home, cwd, root } = scratch(mock.url);
  cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
  const list = path.join(cwd, 'list.md');
  const notes = path.join(cwd, 'notes.md');
  fs.writeFileSync(list, BEFORE);
  const settings = {
    ...baseSettings('dark'),
    'maia.path': MAIA_BIN,
    'maia.env': { LITELLM_API_KEY: 'sk-test' },
    'maia.lsp.enabled': false,
    // A proposal in the editor needs auto save off (VS Code for the web turns it on by default).
    'files.autoSave': 'off',
  };
  server = await CodeServer.start({ root: path.join(root, 'cs'), home, vsix: newestVsix(), settings });
  browser = await launchBrowser(path.join(root, 'chromium'));
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 820, deviceScaleFactor: 1 });
  const consoleLines: string[] = [];
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  const wb = new Workbench(page, artifacts);
  try {
    await wb.open(`${server.url}/?folder=${encodeURIComponent(cwd)}`);
    await wb.command('MAIA: Focus the panel input');
    let panel = await wb.panel();
    await panel.waitForFunction(() => !document.querySelector('#status')?.textContent, { timeout: 30_000 });

    // Accept-edits mode (the panel's mode picker), then the turn: no permission card.
    await panel.waitForSelector('select[data-config-id] option[value="accept-edits"]', { timeout: 30_000 });
    await panel.evaluate(() => {
      const sel = Array.from(document.querySelectorAll('select')).find((s) => s.querySelector('option[value="accept-edits"]'))!;
      sel.value = 'accept-edits';
      sel.dispatchEvent(new Event('change', { bubbles: true }));
    });
    await panel.click('#input');
    await page.keyboard.type('Update the shopping list and write notes');
    await page.keyboard.press('Enter');
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('Updated list.md'), { timeout: 30_000 });
    assert.equal(await panel.$$eval('.permission', (e) => e.length), 0, 'accept-edits asks nothing');
    await until('the panel count', async () => (await reviewLabel(panel)) === '2 files, 3 changes to review');
    assert.equal(fs.readFileSync(list, 'utf8'), AGENT);

    // The changed file: its hunks decorated, a Keep / Undo lens on each, Keep all / Undo all on top.
    await wb.openFile('list.md');
    await until('the lenses', async () => (await lenses(page)).filter((l) => l === 'Undo').length === 2);
    assert.deepEqual(await lenses(page), [
      'MAIA: 2 changes to review — Keep all',
      'Undo all',
      'Keep',
      'Undo',
      'Keep',
      'Undo',
    ]);
    const decorated = await page.$$eval('.editor-instance .view-overlays > div > div', (els) =>
      els.filter((e) => /ced-/.test(e.className)).length,
    );
    assert.ok(decorated >= 3, `the agent's lines are decorated (${decorated})`);
    await wb.screenshot('review-01-decorations-dark');
    await wb.command('Preferences: Toggle between Light/Dark Themes');
    await until('light theme', () => page.evaluate(() => document.querySelector('.monaco-workbench')?.classList.contains('vs') ?? false));
    await wb.screenshot('review-02-decorations-light');
    await wb.command('Preferences: Toggle between Light/Dark Themes');
    await until('dark theme', () => page.evaluate(() => document.querySelector('.monaco-workbench')?.classList.contains('vs-dark') ?? false));

    // Keyboard only: Alt+F5 goes to the first change, Ctrl+Alt+U undoes it.
    await page.click('.editor-instance .monaco-editor .view-lines');
    await page.keyboard.down('Control');
    await page.keyboard.press('Home');
    await page.keyboard.up('Control');
    await page.keyboard.down('Alt');
    await page.keyboard.press('F5');
    await page.keyboard.up('Alt');
    await until('the cursor on the first change', () =>
      page.evaluate(() => /Ln 3,/.test(document.querySelector('.statusbar [id="status.editor.selection"]')?.textContent ?? '')),
    );
    await page.keyboard.down('Control');
    await page.keyboard.down('Alt');
    await page.keyboard.press('KeyU');
    await page.keyboard.up('Alt');
    await page.keyboard.up('Control');
    const afterUndo = AGENT.replace('brown bread', 'bread');
    await until('the hunk undone on disk', () => fs.readFileSync(list, 'utf8') === afterUndo);
    await until('one change left', async () => (await reviewLabel(panel)) === '2 files, 2 changes to review');
    await until('the lenses of the one change left', async () =>
      JSON.stringify(await lenses(page)) === JSON.stringify(['MAIA: 1 change to review — Keep all', 'Undo all', 'Keep', 'Undo']),
    );

    // Keep the other: the file is reviewed, nothing on it changes.
    await clickLens(page, 'Keep');
    await until('no lenses left in list.md', async () => (await lenses(page)).length === 0);
    assert.equal(fs.readFileSync(list, 'utf8'), EXPECTED);

    // The new file: Undo all removes it.
    await wb.openFile('notes.md');
    await until('the new file lenses', async () => (await lenses(page)).includes('Undo all'));
    await wb.screenshot('review-03-new-file-dark');
    await clickLens(page, 'Undo all');
    await until('notes.md removed', () => !fs.existsSync(notes));
    await until('nothing to review', async () => (await reviewLabel(panel)) === '');
    assert.equal(fs.readFileSync(list, 'utf8'), EXPECTED, 'exactly the expected text');

    // The next prompt carries what was undone; the model request has it once.
    panel = await wb.panel();
    await panel.click('#input');
    await page.keyboard.type('Thanks');
    await page.keyboard.press('Enter');
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('plain bread'), { timeout: 30_000 });
    const third = lastUser(await mock.request(3));
    assert.equal(third.match(/undid 2 of them/g)?.length, 1, third);
    assert.ok(third.includes(`${list}, line 3: your lines were removed:\n    - brown bread\n  and the earlier lines restored:\n    + bread\n`), third);
    assert.ok(third.includes(`${notes}: the file you created was removed.`), third);
    assert.match(third, /Thanks$/);
    await wb.screenshot('review-04-reported-dark');

    // "Review in editor" on a permission card (the default mode asks).
    await panel.evaluate(() => {
      const sel = Array.from(document.querySelectorAll('select')).find((s) => s.querySelector('option[value="default"]'))!;
      sel.value = 'default';
      sel.dispatchEvent(new Event('change', { bubbles: true }));
    });
    await panel.click('#input');
    await page.keyboard.type('Rename the list and add lemons');
    await page.keyboard.press('Enter');
    await panel.waitForSelector('.permission .review-in-editor', { timeout: 30_000 });
    await panel.click('.permission .review-in-editor');
    await until('the proposal in the editor', async () => hunkUndos(await lenses(page)) === 2, 30_000);
    assert.equal(fs.readFileSync(list, 'utf8'), EXPECTED, 'nothing written while the card waits');
    // The title's hunk shares the first row with the file's lenses: its own name its line.
    assert.deepEqual(await lenses(page), ['MAIA: 2 changes to review — Keep all', 'Undo all', 'Keep line 1', 'Undo line 1', 'Keep', 'Undo']);
    await wb.screenshot('review-05-card-proposal-dark');
    // Keyboard only: Ctrl+Home, Ctrl+Alt+U undoes the title; Alt+F5, Ctrl+Alt+Y keeps the last line.
    await page.click('.editor-instance .monaco-editor .view-lines');
    await chord(page, ['Control'], 'Home');
    await until('the cursor on the first proposed change', () =>
      page.evaluate(() => /Ln 1,/.test(document.querySelector('.statusbar [id="status.editor.selection"]')?.textContent ?? '')),
    );
    await chord(page, ['Control', 'Alt'], 'KeyU');
    await until('one proposed change left', async () => hunkUndos(await lenses(page)) === 1);
    assert.equal(fs.readFileSync(list, 'utf8'), EXPECTED, 'still nothing written');
    await chord(page, ['Alt'], 'F5');
    await until('the cursor on the last change', () =>
      page.evaluate(() => /Ln 13,/.test(document.querySelector('.statusbar [id="status.editor.selection"]')?.textContent ?? '')),
    );
    await chord(page, ['Control', 'Alt'], 'KeyY');
    panel = await wb.panel();
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('Wrote what you kept.'), { timeout: 30_000 });
    assert.equal(fs.readFileSync(list, 'utf8'), CARD_KEPT, 'MAIA wrote only the kept hunk');
    const fifth = JSON.stringify(await mock.request(5));
    assert.match(fifth, /the user applied 1 of 2 hunks and rejected the others/);
    assert.match(fifth, /Rejected: #1 \(replace line 1 with 1 line\)/);
    // The card says what was kept, and its diff is what was written.
    await panel.waitForFunction(() => Array.from(document.querySelectorAll('.tool .answered')).some((e) => e.textContent === 'Kept 1 of 2 changes'), { timeout: 30_000 });
    await panel.waitForFunction(
      () => Array.from(document.querySelectorAll('.tool .diff-button')).some((e) => e.textContent === 'Open diff: list.md (−0 +1 lines)'),
      { timeout: 30_000 },
    );
    await until('nothing left to review after the card', async () => (await reviewLabel(panel)) === '');
    await wb.screenshot('review-06-card-answered-dark');

    // Auto save on: "Review in editor" says why it cannot show the proposal; nothing is written.
    await wb.command('File: Toggle Auto Save');
    // (On the web its default is "afterDelay": the toggle removes the "off".)
    await until('auto save on', () => !/"files\.autoSave":\s*"off"/.test(fs.readFileSync(server!.settingsFile(), 'utf8')));
    await wb.clearNotifications();
    await panel.click('#input');
    await page.keyboard.type('Overwrite the list');
    await page.keyboard.press('Enter');
    await panel.waitForSelector('.permission .review-in-editor', { timeout: 30_000 });
    await panel.click('.permission .review-in-editor');
    await until('the auto save refusal', async () => (await wb.toasts()).some((t) => /auto save is on \("files\.autoSave": "afterDelay"\)/.test(t.text)));
    // The card no longer offers the review, and says why.
    await panel.waitForSelector('.permission .review-declined', { timeout: 30_000 });
    assert.equal(await panel.$$eval('.permission .review-in-editor', (e) => e.length), 0);
    assert.match(await panel.$eval('.permission .review-declined', (e) => e.textContent ?? ''), /"files\.autoSave"/);
    await wb.screenshot('review-07-auto-save-declined-dark');
    await panel.click('.permission button[data-kind=reject_once]');
    await panel.waitForFunction(() => document.querySelector('.log')?.textContent?.includes('Left list.md as it was.'), { timeout: 30_000 });
    assert.equal(fs.readFileSync(list, 'utf8'), CARD_KEPT, 'nothing written');
  } catch (e) {
    await wb.screenshot('review-failed').catch(() => {});
    fs.mkdirSync(artifacts, { recursive: true });
    fs.writeFileSync(path.join(artifacts, 'review-logs.txt'), `${server?.logs() ?? ''}\n==> browser console\n${consoleLines.join('\n')}`);
    throw e;
  }
});
