// One `maia acp` process and its ACP connection, through the official SDK
// (`@agentclientprotocol/sdk`, the client app API that replaced
// `ClientSideConnection` in SDK 2). No `vscode` import: the node tests drive
// this file against the real binary.
import { spawn, ChildProcess } from 'node:child_process';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { daemonFailureHint } from '../logic';
import { EXT_NOTIFICATIONS } from '../client/session';

/** What the editor does for the agent: permission answers, files, updates. */
export interface ClientHandlers {
  sessionUpdate(notification: acp.SessionNotification): void;
  requestPermission(
    request: acp.RequestPermissionRequest,
    signal: AbortSignal,
  ): Promise<acp.RequestPermissionResponse>;
  /** MAIA's own notifications (`_session/turn_ended`, …): a daemon sends them through `maia acp --connect`. */
  extNotification?(method: string, params: Record<string, unknown>): void;
  /** Present only when the editor serves `fs/read_text_file`. */
  readTextFile?(request: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse>;
  /** Present only when the editor serves `fs/write_text_file`. */
  writeTextFile?(request: acp.WriteTextFileRequest): Promise<void>;
}

export interface Launch {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines maia wrote on stderr. */
  stderr: string;
  /** Set when the process could not be started at all (ENOENT: not installed). */
  spawnError?: NodeJS.ErrnoException;
}

/** Thrown by [`MaiaConnection.start`] when the binary is missing or dies at once. */
export class StartError extends Error {
  constructor(
    message: string,
    readonly exit: Exit,
  ) {
    super(message);
  }
  get notInstalled(): boolean {
    return this.exit.spawnError?.code === 'ENOENT';
  }
}

const STDERR_KEEP = 8192;

const object = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

export class MaiaConnection {
  private disposed = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly connection: acp.ClientConnection,
    readonly init: acp.InitializeResponse,
    /** Resolves when the process is gone (crash, kill or dispose). */
    readonly exited: Promise<Exit>,
  ) {}

  /** Spawns maia, initializes ACP and advertises what `handlers` serve. */
  static async start(launch: Launch, handlers: ClientHandlers, log: (line: string) => void = () => {}): Promise<MaiaConnection> {
    const child = spawn(launch.command, launch.args, {
      cwd: launch.cwd,
      env: launch.env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (text: string) => {
      stderr = (stderr + text).slice(-STDERR_KEEP);
      for (const line of text.split('\n')) {
        if (line.trim()) {
          log(line);
        }
      }
    });
    let spawnError: NodeJS.ErrnoException | undefined;
    const exited = new Promise<Exit>((resolve) => {
      child.once('error', (e: NodeJS.ErrnoException) => {
        spawnError = e;
        // A failed spawn emits no 'exit' on some platforms.
        if (child.pid === undefined) {
          resolve({ code: null, signal: null, stderr, spawnError });
        }
      });
      child.once('exit', (code, signal) => {
        // Let stderr drain before reporting.
        setImmediate(() => resolve({ code, signal, stderr, spawnError }));
      });
    });
    if (!child.stdin || !child.stdout) {
      throw new StartError('maia: no stdio', await exited);
    }
    child.stdin.on('error', () => {}); // EPIPE after a crash is reported through `exited`.
    const stream = acp.ndJsonStream(
      Writable.toWeb(child.stdin) as WritableStream<Uint8Array>,
      Readable.toWeb(child.stdout) as unknown as ReadableStream<Uint8Array>,
    );
    const app = acp
      .client()
      .onNotification(acp.methods.client.session.update, ({ params }) => handlers.sessionUpdate(params))
      .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) =>
        handlers.requestPermission(params, signal),
      );
    const ext = handlers.extNotification?.bind(handlers);
    if (ext) {
      for (const method of EXT_NOTIFICATIONS) {
        app.onNotification(method, object, ({ params }) => ext(method, params ?? {}));
      }
    }
    const read = handlers.readTextFile?.bind(handlers);
    if (read) {
      app.onRequest(acp.methods.client.fs.readTextFile, ({ params }) => read(params));
    }
    const write = handlers.writeTextFile?.bind(handlers);
    if (write) {
      app.onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
        await write(params);
        return {};
      });
    }
    const connection = app.connect(stream);
    const capabilities: acp.ClientCapabilities = {
      fs: { readTextFile: !!read, writeTextFile: !!write },
      session: { compaction: {} },
    };
    const init = await Promise.race([
      connection.agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: capabilities,
        clientInfo: { name: 'maia-vscode', title: 'MAIA for VS Code', version: '0.2.0' },
      }),
      exited.then((exit) => {
        throw new StartError(describeStartFailure(launch, exit), exit);
      }),
    ]).catch(async (e: unknown) => {
      if (e instanceof StartError) {
        throw e;
      }
      // The stream closed first (stdout ends before the exit is seen): say why maia ended.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<undefined>((r) => {
        timer = setTimeout(() => r(undefined), 3000);
      });
      const exit = await Promise.race([exited, late]);
      clearTimeout(timer);
      throw exit ? new StartError(describeStartFailure(launch, exit), exit) : e;
    });
    const self = new MaiaConnection(child, connection, init, exited);
    void exited.then(() => connection.close());
    return self;
  }

  get agent(): acp.ClientContext {
    return this.connection.agent;
  }

  /** Aborted once the connection is gone. */
  get signal(): AbortSignal {
    return this.connection.signal;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  newSession(cwd: string): Promise<acp.NewSessionResponse> {
    return this.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  }

  /** Replays the thread as `session/update`s, then resolves. */
  loadSession(sessionId: string, cwd: string): Promise<acp.LoadSessionResponse> {
    return this.agent.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
  }

  async listSessions(cwd: string): Promise<acp.SessionInfo[]> {
    const all: acp.SessionInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const r = await this.agent.request(acp.methods.agent.session.list, { cwd, ...(cursor ? { cursor } : {}) });
      all.push(...r.sessions);
      if (!r.nextCursor) {
        break;
      }
      cursor = r.nextCursor;
    }
    return all;
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.agent.request(acp.methods.agent.session.delete, { sessionId });
  }

  prompt(sessionId: string, prompt: acp.ContentBlock[], meta?: Record<string, unknown>): Promise<acp.PromptResponse> {
    return this.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt, ...(meta ? { _meta: meta } : {}) });
  }

  cancel(sessionId: string): Promise<void> {
    return this.agent.notify(acp.methods.agent.session.cancel, { sessionId });
  }

  setConfigOption(sessionId: string, configId: string, value: string): Promise<acp.SetSessionConfigOptionResponse> {
    return this.agent.request(acp.methods.agent.session.setConfigOption, { sessionId, configId, value });
  }

  /** Closes stdin (maia exits on EOF), then kills it if it lingers. */
  async dispose(): Promise<void> {
    if (this.disposed) {
      return;
    }
    this.disposed = true;
    this.connection.close();
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 3000);
    await this.exited;
    clearTimeout(timer);
  }

  /** For tests: simulates a crash. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    this.child.kill(signal);
  }
}

/** What the user is told when the binary is missing (the panel and the language client alike). */
export function notFoundMessage(command: string): string {
  return `cannot find \`${command}\` (set "maia.path" to the maia binary, or put it on PATH)`;
}

export function describeStartFailure(launch: Launch, exit: Exit): string {
  if (exit.spawnError?.code === 'ENOENT') {
    return notFoundMessage(launch.command);
  }
  if (exit.spawnError) {
    return `cannot start \`${launch.command}\`: ${exit.spawnError.message}`;
  }
  const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
  const tail = exit.stderr.trim().split('\n').slice(-5).join('\n');
  const hint = launch.args.includes('--connect') ? daemonFailureHint(exit.stderr) : undefined;
  return `\`${launch.command} ${launch.args.join(' ')}\` ${how}${tail ? `:\n${tail}` : ''}${hint ? `\n(${hint})` : ''}`;
}
