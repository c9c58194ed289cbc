// The web page's host side: what the extension's `PanelController` does for
// the VS Code panel, done in the browser over the daemon's WebSocket (`/acp`,
// authorized by the page's login cookie). It speaks ACP through the official
// SDK, turns the panel's messages into ACP calls and ACP traffic into the
// panel's messages (`ToWebview`), attaches to live sessions with
// `session/load` and `_meta.maia.since`, and reconnects after a drop
// without losing or doubling an update (docs/remote.md).
import * as acp from '@agentclientprotocol/sdk';
import { createWebSocketStream, type WebSocketConstructor } from '@agentclientprotocol/sdk/experimental/ws-client';
import type { ToHost, ToWebview } from '../src/panel/protocol';
import { permissionOutcome, promptBlocks } from '../src/panel/protocol';
import { showDiff } from './diff';

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined);
/** `_meta.maia.seq` of a session message. */
const seqOf = (params: unknown): number | undefined => {
  const seq = obj(obj(obj(params)?._meta)?.maia)?.seq;
  return typeof seq === 'number' ? seq : undefined;
};

/**
 * Updates that show a turn running (someone else's prompt, a queued turn).
 * Not `tool_call_update`: a background command's end comes after its turn.
 */
const ACTIVITY = new Set(['agent_message_chunk', 'agent_thought_chunk', 'tool_call']);

export interface PageInfo {
  token: string;
  role: string;
  /** The one session the token may use ('' when any). */
  session: string;
  /** The daemon's folder: where a new session opens. */
  cwd: string;
}

interface Pending {
  resolve(r: acp.RequestPermissionResponse): void;
  options: acp.PermissionOption[];
}

export class WebHost {
  private conn: acp.ClientConnection | undefined;
  role = 'controller';
  private sessionId: string | undefined;
  private sessions: acp.SessionInfo[] = [];
  /** The last update number seen of the open session. */
  private lastSeq = 0;
  private replaying = false;
  /** A turn is shown as running (ours, or another client's). */
  private turnOpen = false;
  /** Our own `session/prompt` is in flight. */
  private prompting = false;
  private nextPermission = 1;
  private readonly permissions = new Map<number, Pending>();
  /** Queued prompts' text, by `queuedSubmissionId`. */
  private readonly queued = new Map<string, string>();
  private retry = 0;
  private stopped = false;

  constructor(
    private readonly page: PageInfo,
    private readonly post: (m: ToWebview) => void,
    private readonly onRole: (role: string) => void,
  ) {}

  get readOnly(): boolean {
    return this.role !== 'controller';
  }

  /** Connects and initializes; resolves once the connection is up. */
  private async connect(): Promise<acp.ClientConnection> {
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/acp`;
    const app = acp
      .client()
      .onNotification(acp.methods.client.session.update, ({ params }) => this.onUpdate(params))
      .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => this.askPermission(params, signal))
      .onNotification('_session/turn_ended', obj, ({ params }) => this.onTurnEnded(params ?? {}))
      .onNotification('_session/closed', obj, ({ params }) => {
        if (params?.sessionId === this.sessionId) {
          this.post({ type: 'notice', level: 'warning', text: 'A controller closed this session.' });
          this.endTurn({});
        }
      })
      .onNotification('_session/queue/turn', obj, ({ params }) => this.onQueueTurn(params ?? {}))
      // Our `since` named numbers of an earlier run of the daemon: what
      // follows is the whole session again, shown from a cleared page.
      .onNotification('_session/reset', obj, ({ params }) => {
        if (params?.sessionId === this.sessionId && this.sessionId) {
          const title = this.sessions.find((s) => s.sessionId === this.sessionId)?.title;
          this.lastSeq = 0;
          this.replaying = true;
          this.post({ type: 'session', sessionId: this.sessionId, title, configOptions: [], replaying: true });
        }
      })
      // The number our own prompt's echo took (the others got the prompt).
      .onNotification('_session/echoed', obj, ({ params }) => {
        const seq = seqOf(params);
        if (params?.sessionId === this.sessionId && seq !== undefined && seq > this.lastSeq) {
          this.lastSeq = seq;
        }
      });
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
      await this.listThreads();
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
    this.dropPermissions();
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
    if (this.sessionId) {
      try {
        await this.attach(this.sessionId, this.lastSeq);
      } catch (e) {
        this.post({ type: 'notice', level: 'error', text: `Cannot attach again: ${e instanceof Error ? e.message : e}` });
      }
    }
  }

  private live(): acp.ClientConnection {
    if (!this.conn) {
      throw new Error('not connected to the daemon');
    }
    return this.conn;
  }

  private cwdOf(sessionId: string): string {
    return this.sessions.find((s) => s.sessionId === sessionId)?.cwd ?? this.page.cwd;
  }

  /** `session/load` (with `since` on a reconnect): the replay, then live updates. */
  private async attach(sessionId: string, since?: number): Promise<void> {
    const params: acp.LoadSessionRequest = { sessionId, cwd: this.cwdOf(sessionId), mcpServers: [] };
    if (since !== undefined) {
      params._meta = { maia: { since } };
    }
    this.replaying = since === undefined;
    try {
      const r = await this.live().agent.request(acp.methods.agent.session.load, params);
      const seq = seqOf(r);
      if (seq !== undefined) {
        this.lastSeq = Math.max(this.lastSeq, seq);
      }
      if (r.configOptions) {
        this.post({ type: 'config', configOptions: r.configOptions });
      }
    } finally {
      if (this.replaying) {
        this.replaying = false;
        this.post({ type: 'replayed' });
      }
    }
  }

  /** Opens a session in the page: cleared, replayed, then live. */
  async open(sessionId: string): Promise<void> {
    this.dropPermissions();
    this.setTurn(false);
    this.sessionId = sessionId;
    this.lastSeq = 0;
    const title = this.sessions.find((s) => s.sessionId === sessionId)?.title;
    this.post({ type: 'session', sessionId, title, configOptions: [], replaying: true });
    await this.attach(sessionId);
  }

  async listThreads(): Promise<void> {
    const all: acp.SessionInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 20; page++) {
      const r = await this.live().agent.request(acp.methods.agent.session.list, cursor ? { cursor } : {});
      all.push(...r.sessions);
      if (!r.nextCursor) {
        break;
      }
      cursor = r.nextCursor;
    }
    this.sessions = all;
    this.post({ type: 'threads', sessions: all, currentId: this.sessionId });
  }

  private async newThread(): Promise<void> {
    const r = await this.live().agent.request(acp.methods.agent.session.new, { cwd: this.page.cwd, mcpServers: [] });
    this.dropPermissions();
    this.setTurn(false);
    this.sessionId = r.sessionId;
    this.lastSeq = seqOf(r) ?? 0;
    this.sessions.push({ sessionId: r.sessionId, cwd: this.page.cwd });
    this.post({ type: 'session', sessionId: r.sessionId, configOptions: r.configOptions ?? [], replaying: false });
  }

  private onUpdate(n: acp.SessionNotification): void {
    if (n.sessionId !== this.sessionId) {
      return;
    }
    const seq = seqOf(n);
    if (seq !== undefined) {
      if (seq <= this.lastSeq) {
        return; // seen before the reconnect
      }
      this.lastSeq = seq;
    }
    const u = n.update;
    if (u.sessionUpdate === 'user_message_chunk' && u.content.type === 'text') {
      const messageId = (u as { messageId?: string | null }).messageId ?? undefined;
      this.post({ type: 'userMessage', text: u.content.text, attachments: [], ...(messageId ? { messageId } : {}) });
      // Another client's prompt, live (`_meta.maia.echo`; a steer joins a running turn).
      const echo = obj(obj(n._meta)?.maia)?.echo === true;
      const steer = obj(u._meta)?.steering === true;
      if (echo && !steer && !this.replaying) {
        this.setTurn(true);
      }
      return;
    }
    if (!this.replaying && !this.turnOpen && ACTIVITY.has(u.sessionUpdate)) {
      // Another client's turn (or a queued one): shown as running.
      this.setTurn(true);
    }
    this.post({ type: 'update', update: u });
  }

  private onTurnEnded(params: Json): void {
    const seq = seqOf(params);
    if (params.sessionId !== this.sessionId || this.replaying || (seq !== undefined && seq <= this.lastSeq)) {
      return;
    }
    if (seq !== undefined) {
      this.lastSeq = seq;
    }
    if (!this.prompting) {
      this.endTurn({
        stopReason: typeof params.stopReason === 'string' ? (params.stopReason as acp.StopReason) : undefined,
        error: typeof params.error === 'string' ? params.error : undefined,
      });
    }
  }

  private onQueueTurn(params: Json): void {
    const turn = obj(params.turn);
    if (params.sessionId !== this.sessionId || this.replaying || !turn) {
      return;
    }
    const id = typeof turn.queuedSubmissionId === 'string' ? turn.queuedSubmissionId : '';
    if (turn.status === 'inProgress') {
      const text = this.queued.get(id);
      this.queued.delete(id);
      if (text !== undefined) {
        this.post({ type: 'userMessage', text, attachments: [] });
      }
      this.setTurn(true);
    } else {
      this.endTurn({ stopReason: turn.status === 'interrupted' ? 'cancelled' : 'end_turn' });
    }
  }

  private setTurn(open: boolean): void {
    if (this.turnOpen !== open) {
      this.turnOpen = open;
      this.post({ type: 'busy', busy: open });
    }
  }

  /** The shown turn ends, once. */
  private endTurn(end: { stopReason?: acp.StopReason; error?: string }): void {
    if (!this.turnOpen) {
      return;
    }
    this.post({ type: 'turnEnd', ...end });
    this.setTurn(false);
  }

  private askPermission(request: acp.RequestPermissionRequest, signal: AbortSignal): Promise<acp.RequestPermissionResponse> {
    const requestId = this.nextPermission++;
    return new Promise((resolve) => {
      const done = (r: acp.RequestPermissionResponse) => {
        if (!this.permissions.delete(requestId)) {
          return;
        }
        const optionId = r.outcome.outcome === 'selected' ? r.outcome.optionId : undefined;
        this.post({ type: 'permissionDone', requestId, optionId });
        resolve(r);
      };
      this.permissions.set(requestId, { resolve: done, options: request.options });
      // Another controller answered first (`$/cancel_request`), or the connection went.
      signal.addEventListener('abort', () => done({ outcome: { outcome: 'cancelled' } }));
      this.post({ type: 'permission', requestId, toolCall: request.toolCall, options: request.options });
    });
  }

  private answerPermission(requestId: number, optionId: string | undefined, reason?: string): void {
    const pending = this.permissions.get(requestId);
    pending?.resolve(permissionOutcome(pending.options, optionId, reason));
  }

  /** The cards of unanswered questions close (a question still open is asked again on attach). */
  private dropPermissions(): void {
    for (const requestId of [...this.permissions.keys()]) {
      this.permissions.delete(requestId);
      this.post({ type: 'permissionDone', requestId });
    }
  }

  private async send(text: string): Promise<void> {
    const c = this.live();
    if (!this.sessionId) {
      await this.newThread();
    }
    if (this.turnOpen) {
      this.post({ type: 'notice', level: 'warning', text: 'A turn is running: steer it, queue the message, or stop it.' });
      return;
    }
    const sessionId = this.sessionId!;
    this.post({ type: 'userMessage', text, attachments: [] });
    this.setTurn(true);
    this.prompting = true;
    try {
      const r = await c.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: promptBlocks(text, []) });
      this.prompting = false;
      this.endTurn({ stopReason: r.stopReason });
    } catch (e) {
      this.prompting = false;
      // A dropped connection does not end the turn: it goes on in the daemon,
      // and its end (`_session/turn_ended`) comes after the page attaches again.
      if (!c.signal.aborted) {
        this.endTurn({ error: e instanceof Error ? e.message : String(e) });
      }
    }
  }

  /** `_session/steering`: the message joins the running turn at its next tool round. */
  async steer(text: string): Promise<void> {
    if (!this.sessionId) {
      return;
    }
    this.post({ type: 'userMessage', text, attachments: [] });
    const r = obj(
      await this.live().agent.request('_session/steering', { sessionId: this.sessionId, prompt: [{ type: 'text', text }] }),
    );
    const outcome = r?.outcome;
    if (outcome === 'injected') {
      this.post({ type: 'notice', level: 'info', text: 'Steered: the running turn took the message.' });
    } else if (outcome === 'startedNewTurn') {
      this.setTurn(true);
    } else {
      this.post({ type: 'notice', level: 'warning', text: `Not steered (${String(outcome)}${r?.reason ? `: ${String(r.reason)}` : ''}).` });
    }
  }

  /** `_session/queue` `add`: the message runs when the turn ends. */
  async queue(text: string): Promise<void> {
    if (!this.sessionId) {
      return;
    }
    const r = obj(
      await this.live().agent.request('_session/queue', {
        sessionId: this.sessionId,
        action: 'add',
        input: [{ type: 'text', text }],
        clientUserMessageId: crypto.randomUUID(),
      }),
    );
    const queued = obj(obj(r?.result)?.queuedSubmission);
    if (typeof queued?.id === 'string') {
      this.queued.set(queued.id, text);
    }
    this.post({ type: 'notice', level: 'info', text: `Queued: ${text}` });
  }

  private async cancel(): Promise<void> {
    if (!this.sessionId || !this.conn) {
      return;
    }
    for (const pending of [...this.permissions.values()]) {
      pending.resolve({ outcome: { outcome: 'cancelled' } });
    }
    await this.conn.agent.notify(acp.methods.agent.session.cancel, { sessionId: this.sessionId });
    if (!this.prompting) {
      // A turn this page did not prompt may end unseen (one a steer started
      // has no end notice): Stop always gives the input back.
      this.endTurn({ stopReason: 'cancelled' });
    }
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
        await this.cancel();
        return;
      case 'permission':
        this.answerPermission(m.requestId, m.optionId, m.reason);
        return;
      case 'listThreads':
        await this.listThreads();
        return;
      case 'openThread':
        await this.open(m.sessionId);
        return;
      case 'newThread':
        await this.newThread();
        return;
      case 'renameThread':
        await this.send(`/rename ${m.name}`);
        return;
      case 'setConfig': {
        if (!this.sessionId) {
          return;
        }
        const r = await this.live().agent.request(acp.methods.agent.session.setConfigOption, {
          sessionId: this.sessionId,
          configId: m.configId,
          value: m.value,
        });
        this.post({ type: 'config', configOptions: r.configOptions });
        return;
      }
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
