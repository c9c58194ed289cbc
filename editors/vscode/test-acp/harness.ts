// Test harness: the real `maia` binary (built by cargo) against the scripted
// mock LLM (`maia-mock-llm`), in a throw-away HOME and project folder, driven
// through the panel's own host-side code (`PanelController`).
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import type * as acp from '@agentclientprotocol/sdk';
import { Launch } from '../src/acp/connection';
import { EditorHost, PanelController, ReviewHost } from '../src/panel/controller';
import { ToHost, ToWebview } from '../src/panel/protocol';
import { sliceLines } from '../src/panel/text';

const repo = path.resolve(__dirname, '..', '..', '..', '..');
const targetDir = process.env.CARGO_TARGET_DIR ?? path.join(repo, 'target');
export const MAIA_BIN = process.env.MAIA_BIN ?? path.join(targetDir, 'debug', 'maia');
export const MOCK_BIN = process.env.MAIA_MOCK_LLM ?? path.join(targetDir, 'debug', 'maia-mock-llm');

/** One scripted chat reply (see server/maia-test-support/src/bin/maia-mock-llm.rs). */
export type ScriptItem =
  | { text: string; piece?: number; gap_ms?: number; thought?: string }
  | { tool_calls: { id: string; name: string; arguments: unknown }[] }
  | { hang: true }
  | { error: number; message?: string };

export class MockLlm {
  readonly requests: unknown[] = [];
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(script: ScriptItem[], dir: string): Promise<MockLlm> {
    const file = path.join(dir, `script-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
    fs.writeFileSync(file, JSON.stringify(script));
    const child = spawn(MOCK_BIN, [file], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout! });
    let mock: MockLlm | undefined;
    const pending: unknown[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`maia-mock-llm exited (${code})`)));
      lines.on('line', (line) => {
        if (line.startsWith('http://')) {
          resolve(line.trim());
        } else if (line.startsWith('request ')) {
          const body = JSON.parse(line.slice('request '.length));
          (mock ? mock.requests : pending).push(body);
        }
      });
    });
    mock = new MockLlm(child, url);
    mock.requests.push(...pending);
    return mock;
  }

  /** The chat requests once at least `n` were reported (the mock reports them every 20 ms). */
  async waitForRequests(n: number, timeoutMs = 10_000): Promise<unknown[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.requests.length < n) {
      if (Date.now() > deadline) {
        throw new Error(`mock LLM: expected ${n} chat request(s), got ${this.requests.length}`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.requests;
  }

  /** The last chat request, once `n` arrived. */
  async request(n: number): Promise<unknown> {
    return (await this.waitForRequests(n))[n - 1];
  }

  stop(): void {
    this.child.stdin?.end();
    this.child.kill();
  }
}

/** A fresh HOME (settings pointing at the mock) and project folder. */
export function scratch(mockUrl: string): { home: string; cwd: string; root: string } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-vscode-'));
  const home = path.join(root, 'home');
  fs.mkdirSync(path.join(root, 'project'));
  const cwd = fs.realpathSync(path.join(root, 'project'));
  fs.mkdirSync(path.join(home, '.maia'), { recursive: true });
  fs.writeFileSync(
    path.join(home, '.maia', 'settings.json'),
    JSON.stringify({ LiteLLM_URL: mockUrl, model: 'mock-model', llm_retry_base_ms: 10 }),
  );
  return { home, cwd, root };
}

export function launchFor(home: string, cwd: string, command = MAIA_BIN): Launch {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, LITELLM_API_KEY: 'sk-test' };
  return { command, args: ['acp'], env, cwd };
}

/** An `EditorHost` backed by node: records what the panel would show and do. */
export class TestHost implements EditorHost {
  readonly posted: ToWebview[] = [];
  readonly actions: { kind: string; args: unknown[] }[] = [];
  readonly writes: acp.WriteTextFileRequest[] = [];
  readonly reads: acp.ReadTextFileRequest[] = [];
  /** Unsaved editor buffers by path: served to `fs/read_text_file` instead of the disk. */
  readonly buffers = new Map<string, string>();
  visible = true;
  startFailures: { message: string; notInstalled: boolean }[] = [];
  saved: string | undefined;
  notifyPermission?: (title: string, options: acp.PermissionOption[]) => Promise<string | undefined>;
  /** The edit review, when a test gives one. */
  review?: ReviewHost;
  /** Extra sink, e.g. a browser page. */
  forward?: (m: ToWebview) => void;
  private waiters: (() => void)[] = [];

  constructor(
    readonly cwd: string,
    private readonly launchSpec: () => Launch,
  ) {}

  launch(): Launch {
    return this.launchSpec();
  }
  post(m: ToWebview): void {
    this.posted.push(m);
    this.forward?.(m);
    for (const w of this.waiters.splice(0)) {
      w();
    }
  }
  panelVisible(): boolean {
    return this.visible;
  }
  async openDiff(...args: unknown[]): Promise<void> {
    this.actions.push({ kind: 'openDiff', args });
  }
  async openRevertDiff(...args: unknown[]): Promise<void> {
    this.actions.push({ kind: 'openRevertDiff', args });
  }
  async openLocation(...args: unknown[]): Promise<void> {
    this.actions.push({ kind: 'openLocation', args });
  }
  async insertText(...args: unknown[]): Promise<void> {
    this.actions.push({ kind: 'insert', args });
  }
  async copyText(...args: unknown[]): Promise<void> {
    this.actions.push({ kind: 'copy', args });
  }
  async searchFiles(query: string): Promise<{ uri: string; path: string }[]> {
    const out: { uri: string; path: string }[] = [];
    const walk = (dir: string) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory() && e.name !== '.maia') {
          walk(p);
        } else if (e.isFile() && path.relative(this.cwd, p).includes(query)) {
          out.push({ uri: `file://${p}`, path: path.relative(this.cwd, p) });
        }
      }
    };
    walk(this.cwd);
    return out;
  }
  async readTextFile(r: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse> {
    this.reads.push(r);
    const text = this.buffers.get(r.path) ?? fs.readFileSync(r.path, 'utf8');
    return { content: sliceLines(text, r.line, r.limit) };
  }
  async writeTextFile(r: acp.WriteTextFileRequest): Promise<void> {
    this.writes.push(r);
    fs.mkdirSync(path.dirname(r.path), { recursive: true });
    fs.writeFileSync(r.path, r.content);
  }
  startFailed(message: string, notInstalled: boolean): void {
    this.startFailures.push({ message, notInstalled });
  }
  savedSession(): string | undefined {
    return this.saved;
  }
  saveSession(id: string | undefined): void {
    this.saved = id;
  }
  /** The workspace state's last usage per thread. */
  usage = new Map<string, acp.SessionUpdate>();
  savedUsage(sessionId: string): acp.SessionUpdate | undefined {
    return this.usage.get(sessionId);
  }
  saveUsage(sessionId: string, update: acp.SessionUpdate): void {
    this.usage.set(sessionId, update);
  }
  log(): void {}

  /** Waits until a posted message matches (looking at all so far). */
  async waitFor<T extends ToWebview>(pred: (m: ToWebview) => m is T, timeoutMs?: number, from?: number): Promise<T>;
  async waitFor(pred: (m: ToWebview) => boolean, timeoutMs?: number, from?: number): Promise<ToWebview>;
  async waitFor(pred: (m: ToWebview) => boolean, timeoutMs = 20_000, from = 0): Promise<ToWebview> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.posted.slice(from).find(pred);
      if (found) {
        return found;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`timed out; posted: ${JSON.stringify(this.posted.map((m) => (m.type === "turnEnd" || m.type === "notice" ? m : m.type)))}`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  updates(from = 0): acp.SessionUpdate[] {
    return this.posted.slice(from).flatMap((m) => (m.type === 'update' ? [m.update] : []));
  }

  agentText(from = 0): string {
    return this.updates(from)
      .flatMap((u) => (u.sessionUpdate === 'agent_message_chunk' && u.content.type === 'text' ? [u.content.text] : []))
      .join('');
  }
}

export interface Fixture {
  mock: MockLlm;
  host: TestHost;
  panel: PanelController;
  home: string;
  cwd: string;
  root: string;
  close(): Promise<void>;
}

/** maia + mock LLM + panel controller, started and with a thread open. */
export async function start(script: ScriptItem[], opts: { command?: string; ready?: boolean } = {}): Promise<Fixture> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'maia-mock-'));
  const mock = await MockLlm.start(script, tmp);
  const { home, cwd, root } = scratch(mock.url);
  const host = new TestHost(cwd, () => launchFor(home, cwd, opts.command));
  const panel = new PanelController(host);
  if (opts.ready !== false) {
    await panel.onMessage({ type: 'ready' } satisfies ToHost);
  }
  return {
    mock,
    host,
    panel,
    home,
    cwd,
    root,
    close: async () => {
      await panel.dispose();
      mock.stop();
      fs.rmSync(root, { recursive: true, force: true });
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}

export interface Daemon {
  child: ChildProcess;
  /** `ws://127.0.0.1:PORT/acp`. */
  url: string;
  /** `http://127.0.0.1:PORT`. */
  base: string;
  /** The first token's value. */
  token: string;
  /** Every token by name. */
  tokens: Record<string, string>;
  /** What the daemon wrote on stderr so far. */
  stderr: string[];
}

/**
 * Tokens added with `maia serve token add` (`tokens`: names and their extra
 * arguments; one controller `vscode` by default), then `maia serve` on a
 * free loopback port, started in `cwd` (where a session opened without a
 * folder works).
 */
export async function serveDaemon(home: string, tokens: [string, string[]][] = [['vscode', []]], cwd?: string): Promise<Daemon> {
  const env = { PATH: process.env.PATH, HOME: home, LITELLM_API_KEY: 'sk-test', MAIA_LOG: 'info' };
  const made: Record<string, string> = {};
  for (const [name, extra] of tokens) {
    const added = spawnSync(MAIA_BIN, ['serve', 'token', 'add', ...extra, name], { env, encoding: 'utf8' });
    assert.equal(added.status, 0, added.stderr);
    made[name] = added.stdout.trim();
    assert.match(made[name], /^maia_[0-9a-f]{64}$/);
  }
  const child = spawn(MAIA_BIN, ['serve', '--listen', '127.0.0.1:0'], { env, cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  const stderr: string[] = [];
  const lines = createInterface({ input: child.stderr! });
  lines.on('line', (line) => stderr.push(line));
  const host = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('maia serve did not listen within 20 s')), 20_000);
    child.once('exit', (code) => reject(new Error(`maia serve exited (${code})`)));
    lines.on('line', (line) => {
      const m = /listening on http:\/\/([^/\s]+)\/acp/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  return { child, url: `ws://${host}/acp`, base: `http://${host}`, token: made[tokens[0][0]], tokens: made, stderr };
}
