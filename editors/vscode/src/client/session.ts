// One ACP session as a MAIA client shows it: the one client library the
// VS Code panel (`PanelController`, over a spawned `maia acp`) and the daemon's
// web page (`WebHost`, over the daemon's WebSocket) share. No `vscode`, no DOM,
// no node: it owns which session is open, its update numbers
// (`_meta.maia.seq`), the replay and a reconnect's `since`, whether a turn runs
// (ours, or another client's on a daemon), the permission questions and their
// one answer, and the panel messages (`ToWebview`) all of it becomes. The
// transport (starting it, restarting it, reconnecting) is the adapter's.
import * as acp from '@agentclientprotocol/sdk';
import { type Attachment, permissionOutcome, promptBlocks, type ToWebview } from '../panel/protocol';

type Json = Record<string, unknown>;
export const obj = (v: unknown): Json | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined;

/** `_meta.maia.seq` of a session message (a daemon numbers them; stdio does not). */
export const seqOf = (params: unknown): number | undefined => {
  const seq = obj(obj(obj(params)?._meta)?.maia)?.seq;
  return typeof seq === 'number' ? seq : undefined;
};

/**
 * Updates that show a turn running that this client did not prompt (another
 * client's, a queued one). Not `tool_call_update`: a background command's end
 * comes after its turn.
 */
const ACTIVITY = new Set(['agent_message_chunk', 'agent_thought_chunk', 'tool_call']);

/** MAIA's notifications beyond ACP that a session client follows (docs/remote.md). */
export const EXT_NOTIFICATIONS = [
  '_session/turn_ended',
  '_session/closed',
  '_session/queue/turn',
  '_session/reset',
  '_session/echoed',
] as const;

/** The live connection, as the adapter has it. */
export interface Link {
  agent: acp.ClientContext;
  /** Aborted once the connection is gone. */
  signal: AbortSignal;
  init: acp.InitializeResponse;
}

/** What the adapter does for the session client. */
export interface SessionHost {
  post(message: ToWebview): void;
  /** A replayed user message's text as typed text and attachment chips (default: the text alone). */
  userMessage?(text: string): { text: string; attachments: Attachment[] };
  /** Before a question's answer goes (the panel takes an editor proposal back first). */
  beforeAnswer?(requestId: number): Promise<void> | undefined;
  /** The question is shown: extra fields of its `permission` message. */
  permissionExtras?(request: acp.RequestPermissionRequest): { reviewInEditor?: boolean };
  /** Every update of the open session, before it is shown (the panel keeps the usage across reloads). */
  seen?(sessionId: string, update: acp.SessionUpdate): void;
}

export interface PendingQuestion {
  options: acp.PermissionOption[];
  toolCall: acp.ToolCallUpdate;
  /** `answered`: what the card says of the answer (default: the option's name). */
  resolve(response: acp.RequestPermissionResponse, answered?: string): void;
}

export interface TurnEnd {
  stopReason?: acp.StopReason;
  error?: string;
}

export class SessionClient {
  private current: string | undefined;
  /** The last update number seen of the open session. */
  private lastSeq = 0;
  private replaying = false;
  /** A turn is shown as running (ours, or another client's). */
  private turnOpen = false;
  /** Our own `session/prompt` is in flight. */
  private prompting = false;
  private nextQuestion = 1;
  private readonly questions = new Map<number, PendingQuestion>();
  /** Queued prompts' text, by `queuedSubmissionId`. */
  private readonly queued = new Map<string, string>();
  configOptions: acp.SessionConfigOption[] = [];
  /** The last command list and usage: shown again after a replay, which need not repeat them. */
  commands: acp.SessionUpdate | undefined;
  usage: acp.SessionUpdate | undefined;
  /** The sessions last listed. */
  sessions: acp.SessionInfo[] = [];

  constructor(
    private readonly host: SessionHost,
    private readonly link: () => Link | undefined,
  ) {}

  get sessionId(): string | undefined {
    return this.current;
  }

  get busy(): boolean {
    return this.turnOpen;
  }

  get seq(): number {
    return this.lastSeq;
  }

  /** On a daemon other clients run turns in the session too (`_meta.maia.remote` in the answer to initialize). */
  private get shared(): boolean {
    return !!obj(obj(obj(this.link()?.init._meta)?.maia)?.remote);
  }

  private live(): Link {
    const l = this.link();
    if (!l || l.signal.aborted) {
      throw new Error('not connected to maia');
    }
    return l;
  }

  // ---- what comes from the agent ----

  /** `session/update`. */
  onUpdate(n: acp.SessionNotification): void {
    if (n.sessionId !== this.current) {
      return;
    }
    const seq = seqOf(n);
    if (seq !== undefined) {
      if (seq <= this.lastSeq) {
        return; // seen before a reconnect
      }
      this.lastSeq = seq;
    }
    const u = n.update;
    this.host.seen?.(n.sessionId, u);
    switch (u.sessionUpdate) {
      case 'config_option_update':
        this.configOptions = u.configOptions;
        break;
      case 'available_commands_update':
        this.commands = u;
        break;
      case 'usage_update':
        this.usage = u;
        break;
      case 'user_message_chunk': {
        if (u.content.type !== 'text') {
          break;
        }
        const { text, attachments } = this.host.userMessage?.(u.content.text) ?? { text: u.content.text, attachments: [] };
        const messageId = (u as { messageId?: string | null }).messageId ?? undefined;
        this.host.post({ type: 'userMessage', text, attachments, ...(messageId ? { messageId } : {}) });
        // Another client's prompt, live (`_meta.maia.echo`; a steer joins a running turn).
        const echo = obj(obj(n._meta)?.maia)?.echo === true;
        const steer = obj(u._meta)?.steering === true;
        if (echo && !steer && !this.replaying) {
          this.setTurn(true);
        }
        return;
      }
    }
    if (this.shared && !this.replaying && !this.turnOpen && ACTIVITY.has(u.sessionUpdate)) {
      // Another client's turn (or a queued one): shown as running.
      this.setTurn(true);
    }
    this.host.post({ type: 'update', update: u });
  }

  /** One of `EXT_NOTIFICATIONS`. */
  onNotification(method: string, params: Json): void {
    switch (method) {
      case '_session/turn_ended':
        return this.onTurnEnded(params);
      case '_session/closed':
        return this.onClosed(params);
      case '_session/queue/turn':
        return this.onQueueTurn(params);
      case '_session/reset':
        return this.onReset(params);
      case '_session/echoed':
        return this.onEchoed(params);
    }
  }

  /** `_session/turn_ended`: a turn this client did not prompt ended. */
  onTurnEnded(params: Json): void {
    const seq = seqOf(params);
    if (params.sessionId !== this.current || this.replaying || (seq !== undefined && seq <= this.lastSeq)) {
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

  /** `_session/queue/turn`: a queued message started or ended. */
  onQueueTurn(params: Json): void {
    const turn = obj(params.turn);
    if (params.sessionId !== this.current || this.replaying || !turn) {
      return;
    }
    const id = typeof turn.queuedSubmissionId === 'string' ? turn.queuedSubmissionId : '';
    if (turn.status === 'inProgress') {
      const text = this.queued.get(id);
      this.queued.delete(id);
      if (text !== undefined) {
        this.host.post({ type: 'userMessage', text, attachments: [] });
      }
      this.setTurn(true);
    } else {
      this.endTurn({ stopReason: turn.status === 'interrupted' ? 'cancelled' : 'end_turn' });
    }
  }

  /** `_session/closed`: another controller closed the open session. */
  onClosed(params: Json): void {
    if (params.sessionId === this.current) {
      this.host.post({ type: 'notice', level: 'warning', text: 'A controller closed this session.' });
      this.endTurn({});
    }
  }

  /**
   * `_session/reset`: our `since` named numbers of an earlier run of the
   * daemon; what follows is the whole session again, shown from a cleared view.
   */
  onReset(params: Json): void {
    if (params.sessionId === this.current && this.current) {
      const title = this.sessions.find((s) => s.sessionId === this.current)?.title;
      this.lastSeq = 0;
      this.replaying = true;
      this.host.post({ type: 'session', sessionId: this.current, title, configOptions: [], replaying: true });
    }
  }

  /** `_session/echoed`: the number our own prompt's echo took (the other clients got the prompt). */
  onEchoed(params: Json): void {
    const seq = seqOf(params);
    if (params.sessionId === this.current && seq !== undefined && seq > this.lastSeq) {
      this.lastSeq = seq;
    }
  }

  // ---- permission questions ----

  /** `session/request_permission`: shown as a card; the first answer wins, an abort cancels it. */
  askPermission(
    request: acp.RequestPermissionRequest,
    signal: AbortSignal,
  ): { requestId: number; response: Promise<acp.RequestPermissionResponse> } {
    const requestId = this.nextQuestion++;
    const response = new Promise<acp.RequestPermissionResponse>((resolve) => {
      const done = (r: acp.RequestPermissionResponse, answered?: string) => {
        if (!this.questions.delete(requestId)) {
          return;
        }
        const finish = () => {
          const optionId = r.outcome.outcome === 'selected' ? r.outcome.optionId : undefined;
          this.host.post({ type: 'permissionDone', requestId, optionId, ...(answered ? { answered } : {}) });
          resolve(r);
        };
        const before = this.host.beforeAnswer?.(requestId);
        if (before) {
          void before.finally(finish);
        } else {
          finish();
        }
      };
      this.questions.set(requestId, { resolve: done, options: request.options, toolCall: request.toolCall });
      // Another controller answered first (`$/cancel_request`), or the connection went.
      signal.addEventListener('abort', () => done({ outcome: { outcome: 'cancelled' } }));
      const extras = this.host.permissionExtras?.(request) ?? {};
      this.host.post({ type: 'permission', requestId, toolCall: request.toolCall, options: request.options, ...extras });
      if (signal.aborted) {
        done({ outcome: { outcome: 'cancelled' } });
      }
    });
    return { requestId, response };
  }

  question(requestId: number): PendingQuestion | undefined {
    return this.questions.get(requestId);
  }

  /** The user's answer on a card; `reason` goes with a rejection as `_meta.reason`. */
  answerPermission(requestId: number, optionId: string | undefined, reason?: string): void {
    const q = this.questions.get(requestId);
    q?.resolve(permissionOutcome(q.options, optionId, reason));
  }

  /** Every open question answered `cancelled` (a stop, a crash). */
  cancelPermissions(): void {
    for (const q of [...this.questions.values()]) {
      q.resolve({ outcome: { outcome: 'cancelled' } });
    }
  }

  /** The cards close unanswered: the connection went (a daemon asks a question still open again on attach). */
  dropPermissions(): void {
    for (const requestId of [...this.questions.keys()]) {
      this.questions.delete(requestId);
      this.host.post({ type: 'permissionDone', requestId });
    }
  }

  // ---- turns ----

  setTurn(open: boolean): void {
    if (this.turnOpen !== open) {
      this.turnOpen = open;
      this.host.post({ type: 'busy', busy: open });
    }
  }

  /** The shown turn ends, once. */
  endTurn(end: TurnEnd): void {
    if (!this.turnOpen) {
      return;
    }
    this.host.post({ type: 'turnEnd', ...end });
    this.setTurn(false);
  }

  /**
   * One `session/prompt`: shown as a running turn until it is answered.
   * `answered` runs before the turn is shown ended. A prompt refused because a
   * turn runs resolves `undefined` after a notice (`busyNotice`). A failure
   * ends the turn with its error, except when the connection dropped: the
   * turn goes on in a daemon, and its end comes after the client attaches
   * again (a crashed `maia acp` is ended by the adapter).
   */
  async prompt(
    text: string,
    attachments: Attachment[],
    options: {
      meta?: Record<string, unknown>;
      echo?: boolean;
      busyNotice: string;
      answered?(r: acp.PromptResponse): void;
    },
  ): Promise<acp.PromptResponse | undefined> {
    const link = this.live();
    const sessionId = this.current;
    if (!sessionId) {
      throw new Error('no session is open');
    }
    if (this.turnOpen) {
      this.host.post({ type: 'notice', level: 'warning', text: options.busyNotice });
      return undefined;
    }
    if (options.echo ?? true) {
      this.host.post({ type: 'userMessage', text, attachments });
    }
    this.setTurn(true);
    this.prompting = true;
    try {
      const r = await link.agent.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: promptBlocks(text, attachments),
        ...(options.meta ? { _meta: options.meta } : {}),
      });
      this.prompting = false;
      options.answered?.(r);
      this.endTurn({ stopReason: r.stopReason });
      return r;
    } catch (e) {
      this.prompting = false;
      if (!link.signal.aborted && this.current === sessionId) {
        this.endTurn({ error: e instanceof Error ? e.message : String(e) });
      }
      throw e;
    }
  }

  /** `session/cancel`; open questions are answered `cancelled` first. */
  async cancel(): Promise<void> {
    const link = this.link();
    if (!this.current || !link || link.signal.aborted) {
      return;
    }
    this.cancelPermissions();
    await link.agent.notify(acp.methods.agent.session.cancel, { sessionId: this.current });
    if (!this.prompting) {
      // A turn this client did not prompt may end unseen (one a steer started
      // has no end notice): Stop always gives the input back.
      this.endTurn({ stopReason: 'cancelled' });
    }
  }

  /** `_session/steering`: the message joins the running turn at its next tool round. */
  async steer(text: string): Promise<void> {
    if (!this.current) {
      return;
    }
    this.host.post({ type: 'userMessage', text, attachments: [] });
    const r = obj(
      await this.live().agent.request('_session/steering', { sessionId: this.current, prompt: [{ type: 'text', text }] }),
    );
    const outcome = r?.outcome;
    if (outcome === 'injected') {
      this.host.post({ type: 'notice', level: 'info', text: 'Steered: the running turn took the message.' });
    } else if (outcome === 'startedNewTurn') {
      this.setTurn(true);
    } else {
      const why = r?.reason ? `: ${String(r.reason)}` : '';
      this.host.post({ type: 'notice', level: 'warning', text: `Not steered (${String(outcome)}${why}).` });
    }
  }

  /** `_session/queue` `add`: the message runs when the turn ends. */
  async queue(text: string): Promise<void> {
    if (!this.current) {
      return;
    }
    const r = obj(
      await this.live().agent.request('_session/queue', {
        sessionId: this.current,
        action: 'add',
        input: [{ type: 'text', text }],
        clientUserMessageId: crypto.randomUUID(),
      }),
    );
    const queued = obj(obj(r?.result)?.queuedSubmission);
    if (typeof queued?.id === 'string') {
      this.queued.set(queued.id, text);
    }
    this.host.post({ type: 'notice', level: 'info', text: `Queued: ${text}` });
  }

  // ---- sessions ----

  /** Forgets the open session's turn and questions (another session is about to be shown). */
  private leave(): void {
    this.dropPermissions();
    this.setTurn(false);
  }

  /** `session/new`, shown as an empty thread. */
  async create(cwd: string): Promise<acp.NewSessionResponse> {
    const r = await this.live().agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    this.leave();
    this.current = r.sessionId;
    this.lastSeq = seqOf(r) ?? 0;
    this.configOptions = r.configOptions ?? [];
    this.usage = undefined;
    if (!this.sessions.some((s) => s.sessionId === r.sessionId)) {
      this.sessions.push({ sessionId: r.sessionId, cwd });
    }
    this.host.post({ type: 'session', sessionId: r.sessionId, configOptions: this.configOptions, replaying: false });
    return r;
  }

  /**
   * Shows a session: cleared, replayed (`session/load`), then live. `title`
   * is shown above it; the usage a replay does not repeat can be given.
   */
  async open(sessionId: string, cwd: string, shown: { title?: string | null; usage?: acp.SessionUpdate } = {}): Promise<void> {
    const previous = this.current;
    if (previous !== sessionId) {
      this.usage = undefined;
    }
    this.leave();
    this.current = sessionId;
    this.lastSeq = 0;
    this.host.post({ type: 'session', sessionId, title: shown.title, configOptions: this.configOptions, replaying: true });
    try {
      await this.attach(sessionId, cwd, undefined, () => {
        this.usage ??= shown.usage;
        for (const update of [this.commands, this.usage]) {
          if (update) {
            this.host.post({ type: 'update', update });
          }
        }
      });
    } catch (e) {
      this.current = previous;
      throw e;
    }
  }

  /**
   * `session/load` of the open session; with `since` (a reconnect to a
   * daemon) only the updates after it are replayed. `loaded` runs once the
   * load is answered, before the view hears the replay is over.
   */
  async attach(sessionId: string, cwd: string, since?: number, loaded?: () => void): Promise<void> {
    const params: acp.LoadSessionRequest = { sessionId, cwd, mcpServers: [] };
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
      this.configOptions = r.configOptions ?? this.configOptions;
      this.host.post({ type: 'config', configOptions: this.configOptions });
      loaded?.();
    } finally {
      if (this.replaying) {
        this.replaying = false;
        this.host.post({ type: 'replayed' });
      }
    }
  }

  /** `session/list`, every page (`cwd`: only that folder's). */
  async list(cwd?: string): Promise<acp.SessionInfo[]> {
    const all: acp.SessionInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 50; page++) {
      const r = await this.live().agent.request(acp.methods.agent.session.list, {
        ...(cwd ? { cwd } : {}),
        ...(cursor ? { cursor } : {}),
      });
      all.push(...r.sessions);
      if (!r.nextCursor) {
        break;
      }
      cursor = r.nextCursor;
    }
    this.sessions = all;
    this.host.post({ type: 'threads', sessions: all, currentId: this.current });
    return all;
  }

  /** `session/set_config_option` of the open session. */
  async setConfig(configId: string, value: string): Promise<void> {
    if (!this.current) {
      return;
    }
    const r = await this.live().agent.request(acp.methods.agent.session.setConfigOption, {
      sessionId: this.current,
      configId,
      value,
    });
    this.configOptions = r.configOptions;
    this.host.post({ type: 'config', configOptions: r.configOptions });
  }

  /** No session is shown any more (its process or connection is gone for good). */
  forget(): void {
    this.current = undefined;
  }
}
