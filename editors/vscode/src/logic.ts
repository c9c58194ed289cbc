// The extension's pure logic: no `vscode` import, so it is unit-tested with
// Node's test runner (test/logic.test.ts) without a VS Code binary.
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export type Intent = 'ask' | 'explain' | 'fix' | 'edit';

/** The argument of the server's `maia.ask` command. */
export interface AskArgument {
  uri: string;
  version?: number;
  range: Range;
  intent: Intent;
  prompt?: string;
}

/** The range to ask about: the selection, or its whole line when empty. */
export function selectionRange(selection: Range): Range {
  const { start, end } = selection;
  if (start.line === end.line && start.character === end.character) {
    return { start: { line: start.line, character: 0 }, end: { line: start.line + 1, character: 0 } };
  }
  const [a, b] = before(start, end) ? [start, end] : [end, start];
  return { start: { ...a }, end: { ...b } };
}

function before(a: Position, b: Position): boolean {
  return a.line < b.line || (a.line === b.line && a.character <= b.character);
}

/** `maia.ask`'s argument; a blank prompt is left out (the server explains). */
export function askArgument(
  uri: string,
  version: number | undefined,
  selection: Range,
  intent: Intent,
  prompt?: string,
): AskArgument {
  const arg: AskArgument = { uri, range: selectionRange(selection), intent };
  if (version !== undefined) {
    arg.version = version;
  }
  const question = prompt?.trim();
  if (question) {
    arg.prompt = question;
  }
  return arg;
}

/** Whether `uri` is one of the server's answer documents. */
export function isAnswerUri(uri: string): boolean {
  return /\/\.maia\/answers\/[^/]+\.md$/.test(uri);
}

export interface ServerSettings {
  path?: string;
  args?: unknown;
  env?: unknown;
}

export interface ServerCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** The server process from the `maia.*` settings: `maia lsp` by default;
 * `lsp` is added when the arguments lack it; `env` extends `baseEnv`. */
export function serverCommand(settings: ServerSettings, baseEnv: Record<string, string | undefined>): ServerCommand {
  const command = settings.path && settings.path.trim() ? settings.path.trim() : 'maia';
  let args = Array.isArray(settings.args) ? settings.args.filter((a): a is string => typeof a === 'string') : ['lsp'];
  if (!args.includes('lsp')) {
    args = ['lsp', ...args];
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) {
    if (v !== undefined) {
      env[k] = v;
    }
  }
  if (settings.env && typeof settings.env === 'object') {
    for (const [k, v] of Object.entries(settings.env as Record<string, unknown>)) {
      if (typeof v === 'string') {
        env[k] = v;
      }
    }
  }
  return { command, args, env };
}

/** The environment variable that carries the daemon's token to `maia acp --connect`. */
export const DAEMON_TOKEN_ENV = 'MAIA_TOKEN';
/** The SecretStorage key of the daemon's token. */
export const DAEMON_TOKEN_SECRET = 'maia.daemon.token';

/** A `maia serve` daemon to connect to: `maia.daemon.url` and the token kept in SecretStorage. */
export interface DaemonSettings {
  url?: string;
  token?: string;
}

/** `maia.daemon.url` is not a WebSocket URL, or no token was set for it. */
export class DaemonSettingError extends Error {}

/** The agent process for the panel: `maia acp` by default; `acp` is added
 * when the arguments lack it (`maia.acpArgs`); `env` extends `baseEnv`.
 * With a daemon URL: `maia acp --connect URL`, the token in
 * `$MAIA_TOKEN` (never on the command line), `maia.acpArgs` unused. */
export function acpCommand(
  settings: ServerSettings,
  baseEnv: Record<string, string | undefined>,
  daemon: DaemonSettings = {},
): ServerCommand {
  const base = serverCommand({ ...settings, args: ['lsp'] }, baseEnv);
  const url = daemon.url?.trim();
  if (url) {
    if (!/^wss?:\/\/[^\s/]+/i.test(url)) {
      throw new DaemonSettingError(`"maia.daemon.url" must be a ws:// or wss:// URL, e.g. ws://127.0.0.1:7417/acp (it is "${url}")`);
    }
    const token = daemon.token?.trim();
    if (!token) {
      throw new DaemonSettingError(
        `no token for the daemon at ${url}: run "MAIA: Set Daemon Token" with the token \`maia serve token add NAME\` printed`,
      );
    }
    return { ...base, args: ['acp', '--connect', url], env: { ...base.env, [DAEMON_TOKEN_ENV]: token } };
  }
  let args = Array.isArray(settings.args) ? settings.args.filter((a): a is string => typeof a === 'string') : ['acp'];
  if (!args.includes('acp')) {
    args = ['acp', ...args];
  }
  return { ...base, args };
}

/** What to add to a failed `maia acp --connect`'s message, from its stderr. */
export function daemonFailureHint(stderr: string): string | undefined {
  if (/\b401\b|Unauthorized/i.test(stderr)) {
    return 'the daemon refused the token: set the right one with "MAIA: Set Daemon Token" (`maia serve token list` on the daemon\'s machine names the valid ones)';
  }
  if (/\b403\b/.test(stderr)) {
    return 'the daemon refused the Host: start it with `--allow-host NAME` for the name in "maia.daemon.url"';
  }
  if (/cannot connect|Connection refused|connection failed|closed the connection/i.test(stderr)) {
    return 'is `maia serve` running and reachable at "maia.daemon.url"?';
  }
  return undefined;
}

/** A `maia/stream` notification. */
export interface StreamMessage {
  token: string;
  session?: string;
  answer?: string;
  kind: 'begin' | 'text' | 'thought' | 'tool' | 'toolUpdate' | 'end' | string;
  text?: string;
  title?: string;
  id?: string;
  status?: string;
  stopReason?: string;
}

export interface TurnState {
  token: string;
  title: string;
  answer?: string;
  chars: number;
  tools: Map<string, string>;
  done: boolean;
  stopReason?: string;
}

/** What a stream message means for the turn's progress display. */
export type TurnUpdate =
  | { kind: 'begin'; turn: TurnState }
  | { kind: 'progress'; turn: TurnState; message: string }
  | { kind: 'end'; turn: TurnState; message: string; ok: boolean };

/** Follows turns from their `maia/stream` messages. */
export class TurnTracker {
  readonly turns = new Map<string, TurnState>();

  update(msg: StreamMessage): TurnUpdate | undefined {
    if (!msg || typeof msg.token !== 'string') {
      return undefined;
    }
    let turn = this.turns.get(msg.token);
    if (!turn) {
      turn = { token: msg.token, title: 'MAIA', chars: 0, tools: new Map(), done: false };
      this.turns.set(msg.token, turn);
    }
    if (msg.answer) {
      turn.answer = msg.answer;
    }
    switch (msg.kind) {
      case 'begin':
        turn.title = msg.title || turn.title;
        return { kind: 'begin', turn };
      case 'text':
        turn.chars += [...(msg.text ?? '')].length;
        return { kind: 'progress', turn, message: progressMessage(turn) };
      case 'thought':
        return { kind: 'progress', turn, message: 'thinking…' };
      case 'tool':
        if (msg.id) {
          turn.tools.set(msg.id, msg.title || 'tool');
        }
        return { kind: 'progress', turn, message: progressMessage(turn) };
      case 'toolUpdate':
        if (msg.id && (msg.status === 'completed' || msg.status === 'failed')) {
          turn.tools.delete(msg.id);
        }
        return { kind: 'progress', turn, message: progressMessage(turn) };
      case 'end': {
        turn.done = true;
        turn.stopReason = msg.stopReason;
        this.turns.delete(msg.token);
        return { kind: 'end', turn, message: endMessage(msg.stopReason), ok: msg.stopReason === 'end_turn' };
      }
      default:
        return undefined;
    }
  }
}

/** The progress line: the running tool, else the answer's length. */
export function progressMessage(turn: TurnState): string {
  const tools = [...turn.tools.values()];
  if (tools.length > 0) {
    return tools[tools.length - 1];
  }
  return turn.chars > 0 ? `answering… (${turn.chars} characters)` : 'thinking…';
}

/** How a turn ended, for a notification. */
export function endMessage(stopReason: string | undefined): string {
  switch (stopReason) {
    case 'end_turn':
      return 'MAIA: done';
    case 'cancelled':
      return 'MAIA: cancelled';
    case 'max_tokens':
      return 'MAIA: the answer hit the token limit';
    case 'max_turn_requests':
      return 'MAIA: stopped after too many model requests in one turn';
    case 'refusal':
      return 'MAIA: the model refused';
    default:
      return `MAIA: the turn ended (${stopReason ?? 'unknown'})`;
  }
}

/** The README among a folder's files, whatever its case (`vsce` packages it as `readme.md`). */
export function findReadme(names: string[]): string | undefined {
  return names.find((n) => n === 'README.md') ?? names.find((n) => n.toLowerCase() === 'readme.md');
}

/** Whether `command` can be run: an executable path, or a name found on `searchPath`. */
export function commandExists(command: string, searchPath: string | undefined): boolean {
  const runnable = (p: string) => {
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return fs.statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (command.includes('/') || command.includes('\\')) {
    return runnable(command);
  }
  const dirs = (searchPath ?? '').split(path.delimiter).filter(Boolean);
  const exts = process.platform === 'win32' ? ['', '.exe', '.cmd', '.bat'] : [''];
  return dirs.some((d) => exts.some((e) => runnable(path.join(d, command + e))));
}
