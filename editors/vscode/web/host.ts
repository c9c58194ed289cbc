// The web page's host side: what the extension's `PanelController` does for
// the VS Code panel, done in the browser over the daemon's WebSocket (`/acp`,
// authorized by the page's login cookie). The session itself — replay,
// `_meta.maia.since` on a reconnect, turns, permission questions — is the
// client the panel shares (`src/client/session.ts`); this file owns the
// WebSocket, reconnects after a drop without losing or doubling an update
// (docs/remote.md), and turns the page's messages into calls.
import * as acp from '@agentclientprotocol/sdk';
import { createWebSocketStream, type WebSocketConstructor } from '@agentclientprotocol/sdk/experimental/ws-client';
import type { ToHost, ToWebview } from '../src/panel/protocol';
import { EXT_NOTIFICATIONS, obj, SessionClient } from '../src/client/session';
import { showDiff } from './diff';

export interface PageInfo {
  token: string;
  role: string;
  /** The one session the token may use ('' when any). */
  session: string;
  /** The daemon's folder: where a new session opens. */
  cwd: string;
}

export class WebHost {
  private conn: acp.ClientConnection | undefined;
  private init: acp.InitializeResponse | undefined;
  role = 'controller';
  private readonly session: SessionClient;
  private retry = 0;
  private stopped = false;

  constructor(
    private readonly page: PageInfo,
    private readonly post: (m: ToWebview) => void,
    private readonly onRole: (role: string) => void,
  ) {
    this.session = new SessionClient({ post }, () =>
      this.conn && this.init ? { agent: this.conn.agent, signal: this.conn.signal, init: this.init } : undefined,
    );
  }

  get readOnly(): boolean {
    return this.role !== 'controller';
  }

  /** Connects and initializes; resolves once the connection is up. */
  private async connect(): Promise<acp.ClientConnection> {
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/acp`;
    const app = acp
      .client()
      .onNotification(acp.methods.client.session.update, ({ params }) => this.session.onUpdate(params))
      .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) =>
        this.session.askPermission(params, signal).response,
      );
    for (const method of EXT_NOTIFICATIONS) {
      app.onNotification(method, obj, ({ params }) => this.session.onNotification(method, params ?? {}));
    }
    // The browser's own WebSocket, called with the URL alone: given the SDK's
    // extra arguments it offers a subprotocol the daemon does not speak.
    const PlainWebSocket = function (target: string) {
      return new WebSocket(target);
    } as unknown as WebSocketConstructor;
    const conn = app.connect(createWebSocketStream(url, { WebSocket: PlainWebSocket }));
    const init = await conn.agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: 'maia-web', title: 'MAIA web page', version: '0.2.0' },
    });
    const role = obj(obj(obj(init._meta)?.maia)?.remote)?.role;
    this.role = typeof role === 'string' ? role : this.page.role;
    this.onRole(this.role);
    this.conn = conn;
    this.init = init;
    void conn.closed.then(() => this.onClosed(conn));
    return conn;
  }

  /** Starts: the token's one session, or the list of sessions. */
  async start(): Promise<void> {
    this.post({ type: 'status', state: 'starting' });
    try {
      await this.connect();
    } catch (e) {
      this.failed(e);
      return;
    }
    this.post({ type: 'status', state: 'ready' });
    this.post({ type: 'timeline', rewind: false, fork: false, revert: false });
    if (this.page.session) {
      await this.open(this.page.session);
    } else {
      await this.session.list();
    }
  }

  private failed(e: unknown): void {
    const why = e instanceof Error ? e.message : 'the connection failed';
    this.post({
      type: 'status',
      state: 'error',
      message: `Cannot reach the daemon (${why}). If the login ended, reload the page to log in again.`,
    });
  }

  private onClosed(conn: acp.ClientConnection): void {
    if (conn !== this.conn || this.stopped) {
      return;
    }
    this.conn = undefined;
    this.session.dropPermissions();
    void this.reconnect();
  }

  /** Reconnects with a growing pause, then attaches again `since` the last update seen. */
  private async reconnect(): Promise<void> {
    this.post({ type: 'status', state: 'restarting' });
    for (;;) {
      await new Promise((r) => setTimeout(r, Math.min(10_000, 500 * 2 ** this.retry)));
      this.retry++;
      try {
        await this.connect();
        break;
      } catch (e) {
        if (this.retry >= 6) {
          this.failed(e);
          return;
        }
      }
    }
    this.retry = 0;
    this.post({ type: 'status', state: 'ready' });
    const sessionId = this.session.sessionId;
    if (sessionId) {
      try {
        await this.session.attach(sessionId, this.cwdOf(sessionId), this.session.seq);
      } catch (e) {
        this.post({ type: 'notice', level: 'error', text: `Cannot attach again: ${e instanceof Error ? e.message : e}` });
      }
    }
  }

  private cwdOf(sessionId: string): string {
    return this.session.sessions.find((s) => s.sessionId === sessionId)?.cwd ?? this.page.cwd;
  }

  /** Opens a session in the page: cleared, replayed, then live. */
  async open(sessionId: string): Promise<void> {
    const title = this.session.sessions.find((s) => s.sessionId === sessionId)?.title;
    await this.session.open(sessionId, this.cwdOf(sessionId), { title });
  }

  async listThreads(): Promise<void> {
    await this.session.list();
  }

  private async send(text: string): Promise<void> {
    if (!this.session.sessionId) {
      await this.session.create(this.page.cwd);
    }
    try {
      await this.session.prompt(text, [], { busyNotice: 'A turn is running: steer it, queue the message, or stop it.' });
    } catch {
      // Shown as the turn's end (or, after a dropped connection, the turn's
      // end comes after the page attaches again).
    }
  }

  async steer(text: string): Promise<void> {
    await this.session.steer(text);
  }

  async queue(text: string): Promise<void> {
    await this.session.queue(text);
  }

  /** A panel message; errors are shown in the page. */
  async onMessage(m: ToHost): Promise<void> {
    try {
      await this.dispatch(m);
    } catch (e) {
      this.post({ type: 'notice', level: 'error', text: e instanceof Error ? e.message : String(e) });
    }
  }

  private async dispatch(m: ToHost): Promise<void> {
    switch (m.type) {
      case 'ready':
        await this.start();
        return;
      case 'send':
        await this.send(m.text);
        return;
      case 'cancel':
        await this.session.cancel();
        return;
      case 'permission':
        this.session.answerPermission(m.requestId, m.optionId, m.reason);
        return;
      case 'listThreads':
        await this.session.list();
        return;
      case 'openThread':
        await this.open(m.sessionId);
        return;
      case 'newThread':
        await this.session.create(this.page.cwd);
        return;
      case 'renameThread':
        await this.send(`/rename ${m.name}`);
        return;
      case 'setConfig':
        await this.session.setConfig(m.configId, m.value);
        return;
      case 'copy':
        await navigator.clipboard?.writeText(m.text);
        return;
      case 'openDiff':
        showDiff(m.path, m.oldText, m.newText);
        return;
      case 'searchFiles':
        this.post({ type: 'files', requestId: m.requestId, items: [] });
        return;
      case 'restart':
        location.reload();
        return;
      default:
        // Editor actions (insert at the cursor, open a file, the edit review) have no page here.
        return;
    }
  }
}
