// The panel's host side, without `vscode`: it owns the `maia acp` process
// (one per window), turns webview messages into ACP calls and ACP traffic
// into webview messages, restarts maia after a crash and reloads the thread.
// The extension gives it an `EditorHost` backed by VS Code; the tests give
// it one backed by node and a browser page.
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as acp from '@agentclientprotocol/sdk';
import { ClientHandlers, Launch, MaiaConnection, StartError } from '../acp/connection';
import { SessionClient } from '../client/session';
import { Attachment, RevertKind, ToHost, ToWebview } from './protocol';
import { replayedUserMessage } from './text';
import * as timeline from './timeline';
import { keptLabel, type UndoneReport } from '../review/hunks';
import { turnFiles, type TurnFile } from '../review/set';

export interface EditorHost {
  /** The folder sessions are opened in (absolute). */
  readonly cwd: string;
  /** The agent process; throws (a message for the user) when the settings cannot make one. */
  launch(): Launch | Promise<Launch>;
  post(message: ToWebview): void;
  /** Whether the panel can be seen now (else permission asks also notify). */
  panelVisible(): boolean;
  openDiff(filePath: string, oldText: string | null, newText: string): Promise<void>;
  /** The file as it is now ↔ `restored` (what an undo puts back; `null`: the undo deletes it). */
  openRevertDiff?(filePath: string, restored: string | null, kind: RevertKind): Promise<void>;
  openLocation(filePath: string, line?: number): Promise<void>;
  insertText(text: string): Promise<void>;
  copyText(text: string): Promise<void>;
  searchFiles(query: string): Promise<{ uri: string; path: string }[]>;
  readTextFile?(request: acp.ReadTextFileRequest): Promise<acp.ReadTextFileResponse>;
  writeTextFile?(request: acp.WriteTextFileRequest): Promise<void>;
  /** A permission question outside the panel; resolves with an option id, or undefined. */
  notifyPermission?(title: string, options: acp.PermissionOption[]): Promise<string | undefined>;
  startFailed(message: string, notInstalled: boolean): void;
  /** The thread to reopen after a window reload, and where to remember it. */
  savedSession?(): string | undefined;
  saveSession?(sessionId: string | undefined): void;
  /** The last `usage_update` of a thread, kept across window reloads (maia sends none on `session/load`). */
  savedUsage?(sessionId: string): acp.SessionUpdate | undefined;
  saveUsage?(sessionId: string, update: acp.SessionUpdate): void;
  log(line: string): void;
  /** The edit review in the editor: a turn's changed files, and the undone hunks to report. */
  review?: ReviewHost;
}

export interface ReviewHost {
  addTurn(files: TurnFile[]): void;
  /** A new or another thread: nothing of the old one stays under review. */
  clear(): void;
  takeUndone(): UndoneReport[];
  giveBack(reports: UndoneReport[]): void;
  /** The panel's review bar: next change, keep all, undo all. */
  run(action: 'next' | 'keepAll' | 'undoAll'): Promise<void>;
  /**
   * A permission card's proposal shown as pending hunks: resolves with the
   * text the user kept once every hunk is kept or undone, why it could not
   * be shown (the card says so), or `undefined` when it was dropped.
   */
  propose(path: string, before: string, proposed: string): Promise<Proposal>;
  /** The question was answered elsewhere or cancelled: the proposal goes, the file as it was. */
  dropProposal(path: string): Promise<void>;
}

/** What became of a proposal shown in the editor ([`ReviewHost.propose`]). */
export type Proposal = { kept: string } | { declined: string } | undefined;

/** The one diff of a permission's tool call, when it changes an existing file. */
export function proposedDiff(toolCall: acp.ToolCallUpdate): { path: string; oldText: string; newText: string } | undefined {
  const diffs = (toolCall.content ?? []).filter((c) => c.type === 'diff');
  const d = diffs.length === 1 ? diffs[0] : undefined;
  return d && d.type === 'diff' && typeof d.oldText === 'string' ? { path: d.path, oldText: d.oldText, newText: d.newText } : undefined;
}

/** How many crashes within `CRASH_WINDOW_MS` are restarted before giving up. */
const MAX_RESTARTS = 3;
const CRASH_WINDOW_MS = 60_000;

export class PanelController {
  private connection: MaiaConnection | undefined;
  private starting: Promise<MaiaConnection | undefined> | undefined;
  /** The open thread, its turn, questions and replay: the client the web page shares. */
  private readonly session: SessionClient;
  /** Questions whose proposal is shown in the editor, by request id: the file. */
  private readonly reviewing = new Map<number, string>();
  private crashes: number[] = [];
  private disposed = false;

  constructor(private readonly host: EditorHost) {
    this.session = new SessionClient(
      {
        post: (m) => host.post(m),
        // A replayed message: its attachment mentions become chips again.
        userMessage: (text) => replayedUserMessage(text, host.cwd),
        seen: (sessionId, update) => {
          if (update.sessionUpdate === 'usage_update') {
            host.saveUsage?.(sessionId, update);
          }
        },
        permissionExtras: (request) => {
          const c = this.connection;
          const reviewInEditor =
            !!host.review && !!c && timeline.readsReviewedText(c.init) && !!proposedDiff(request.toolCall) &&
            request.options.some((o) => o.kind === 'allow_once');
          return { reviewInEditor };
        },
        // Answered on the card while its proposal was in the editor: the
        // document goes back to the disk's text first (MAIA checks it).
        beforeAnswer: (requestId) => {
          const file = this.reviewing.get(requestId);
          this.reviewing.delete(requestId);
          return file && host.review ? host.review.dropProposal(file) : undefined;
        },
      },
      () => this.connection,
    );
  }

  get currentSession(): string | undefined {
    return this.session.sessionId;
  }

  get isBusy(): boolean {
    return this.session.busy;
  }

  /** For tests: the live connection. */
  get live(): MaiaConnection | undefined {
    return this.connection;
  }

  /** Starts maia if needed; opens the saved thread or a new one. */
  async ensureStarted(): Promise<MaiaConnection | undefined> {
    if (this.connection && !this.connection.isDisposed) {
      return this.connection;
    }
    if (!this.starting) {
      this.starting = this.startProcess(false).finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  private handlers(): ClientHandlers {
    const host = this.host;
    return {
      sessionUpdate: (n) => this.session.onUpdate(n),
      requestPermission: (request, signal) => this.askPermission(request, signal),
      extNotification: (method, params) => this.session.onNotification(method, params),
      readTextFile: host.readTextFile ? (r) => host.readTextFile!(r) : undefined,
      writeTextFile: host.writeTextFile ? (r) => host.writeTextFile!(r) : undefined,
    };
  }

  private async startProcess(restart: boolean): Promise<MaiaConnection | undefined> {
    this.host.post({ type: 'status', state: restart ? 'restarting' : 'starting' });
    let connection: MaiaConnection;
    try {
      connection = await MaiaConnection.start(await this.host.launch(), this.handlers(), (l) => this.host.log(l));
    } catch (e) {
      const notInstalled = e instanceof StartError && e.notInstalled;
      const message = e instanceof Error ? e.message : String(e);
      this.host.post({ type: 'status', state: 'error', message, install: notInstalled });
      this.host.startFailed(message, notInstalled);
      return undefined;
    }
    this.connection = connection;
    void connection.exited.then((exit) => this.onExit(connection, exit.code, exit.signal));
    this.host.post({ type: 'status', state: 'ready' });
    this.postTimeline();
    const wanted = this.session.sessionId ?? this.host.savedSession?.();
    try {
      if (wanted) {
        await this.openThread(wanted, true);
      } else {
        await this.newThread();
      }
    } catch (e) {
      this.host.log(`cannot reopen thread ${wanted}: ${e instanceof Error ? e.message : e}`);
      await this.newThread();
    }
    return connection;
  }

  private onExit(connection: MaiaConnection, code: number | null, signal: string | null): void {
    if (connection !== this.connection) {
      return;
    }
    this.connection = undefined;
    this.session.cancelPermissions();
    if (this.disposed || connection.isDisposed) {
      return;
    }
    const now = Date.now();
    this.crashes = [...this.crashes.filter((t) => now - t < CRASH_WINDOW_MS), now];
    const how = signal ? `was killed (${signal})` : `exited (code ${code})`;
    this.session.endTurn({ error: `maia ${how} during the turn` });
    if (this.crashes.length > MAX_RESTARTS) {
      const message = `maia ${how} ${this.crashes.length} times in a minute; not restarted (MAIA: Restart agent).`;
      this.host.post({ type: 'status', state: 'error', message });
      return;
    }
    this.host.post({ type: 'notice', level: 'warning', text: `maia ${how}; restarted, thread reloaded.` });
    void this.ensureStartedAfterCrash();
  }

  private ensureStartedAfterCrash(): Promise<MaiaConnection | undefined> {
    if (!this.starting) {
      this.starting = this.startProcess(true).finally(() => (this.starting = undefined));
    }
    return this.starting;
  }

  private askPermission(request: acp.RequestPermissionRequest, signal: AbortSignal): Promise<acp.RequestPermissionResponse> {
    const { requestId, response } = this.session.askPermission(request, signal);
    if (this.host.notifyPermission && !this.host.panelVisible()) {
      const title = request.toolCall.title ?? 'a tool';
      void this.host.notifyPermission(`MAIA asks to run ${title}`, request.options).then((optionId) => {
        if (optionId) {
          this.session.question(requestId)?.resolve({ outcome: { outcome: 'selected', optionId } });
        }
      });
    }
    return response;
  }

  /** Answers a pending permission request; `reason` goes with a rejection as `_meta.reason`. */
  answerPermission(requestId: number, optionId: string | undefined, reason?: string): void {
    this.session.answerPermission(requestId, optionId, reason);
  }

  /**
   * "Review in editor": the proposal is shown as pending hunks; once every
   * hunk is kept or undone the question is answered — allowed with the text
   * kept (`_meta.maia.reviewedText`), or rejected when nothing was kept.
   */
  async reviewPermission(requestId: number): Promise<void> {
    const pending = this.session.question(requestId);
    const diff = pending && proposedDiff(pending.toolCall);
    if (!pending || !diff || !this.host.review || this.reviewing.has(requestId)) {
      return;
    }
    this.reviewing.set(requestId, diff.path);
    const result = await this.host.review.propose(diff.path, diff.oldText, diff.newText);
    if (this.session.question(requestId) !== pending) {
      return;
    }
    this.reviewing.delete(requestId);
    if (result === undefined) {
      return;
    }
    if ('declined' in result) {
      // The card stops offering the review and says why; it is answered there.
      this.host.post({ type: 'reviewDeclined', requestId, reason: result.declined });
      return;
    }
    const text = result.kept;
    // The card says what was kept rather than which button the answer is.
    const answered = keptLabel(diff.oldText, diff.newText, text);
    const allow = pending.options.find((o) => o.kind === 'allow_once');
    const reject = pending.options.find((o) => o.kind === 'reject_once');
    if (text === diff.oldText && reject) {
      pending.resolve({ outcome: { outcome: 'selected', optionId: reject.optionId } }, answered);
    } else if (allow) {
      pending.resolve({ outcome: { outcome: 'selected', optionId: allow.optionId }, _meta: { maia: { reviewedText: text } } }, answered);
    }
  }

  async newThread(): Promise<void> {
    await this.ensureStartedOrThrow();
    const r = await this.session.create(this.host.cwd);
    this.host.review?.clear();
    this.host.saveSession?.(r.sessionId);
  }

  /** `session/load`: the webview is cleared and the thread replayed into it. */
  async openThread(sessionId: string, quiet = false): Promise<void> {
    await this.ensureStartedOrThrow();
    if (this.session.busy) {
      await this.cancel();
    }
    if (this.session.sessionId !== sessionId) {
      this.host.review?.clear();
    }
    const title = quiet ? undefined : (await this.safeList()).find((s) => s.sessionId === sessionId)?.title;
    await this.session.open(sessionId, this.host.cwd, { title, usage: this.host.savedUsage?.(sessionId) });
    this.host.saveSession?.(sessionId);
  }

  private async safeList(): Promise<acp.SessionInfo[]> {
    try {
      return (await this.connection?.listSessions(this.host.cwd)) ?? [];
    } catch {
      return [];
    }
  }

  private async ensureStartedOrThrow(): Promise<MaiaConnection> {
    const c = this.connection && !this.connection.isDisposed ? this.connection : await this.ensureStarted();
    if (!c) {
      throw new Error('maia is not running');
    }
    return c;
  }

  /** One prompt turn; resolves with the stop reason when it is over. */
  async send(text: string, attachments: Attachment[], echo = true): Promise<acp.StopReason | undefined> {
    const c = await this.ensureStartedOrThrow();
    if (!this.session.sessionId) {
      await this.newThread();
    }
    const busyNotice = 'MAIA is still answering; stop it first (Esc).';
    if (this.session.busy) {
      this.host.post({ type: 'notice', level: 'warning', text: busyNotice });
      return undefined;
    }
    const sessionId = this.session.sessionId!;
    // What the user undid in the editor since the last prompt goes with this one.
    const undone = this.host.review && timeline.hearsUndone(c.init) ? this.host.review.takeUndone() : [];
    try {
      let messageId: string | undefined;
      const r = await this.session.prompt(text, attachments, {
        meta: undone.length ? { maia: { undoneHunks: undone } } : undefined,
        echo,
        busyNotice,
        answered: (r) => {
          messageId = timeline.userMessageId(r);
          if (messageId) {
            this.host.post({ type: 'userMessageId', messageId });
          }
        },
      });
      if (!r) {
        this.host.review?.giveBack(undone);
        return undefined;
      }
      if (messageId) {
        await this.reviewTurn(c, sessionId, messageId);
      }
      return r.stopReason;
    } catch (e) {
      // A prompt refused before a turn started (one is running) did not
      // deliver the report: it goes with the next. Any other failure may
      // come after MAIA took the message, so it is not sent twice.
      if ((e as { code?: unknown } | undefined)?.code === -32600) {
        this.host.review?.giveBack(undone);
      } else if (undone.length) {
        this.host.log(`${undone.length} undone change(s) may not have reached MAIA: ${e instanceof Error ? e.message : e}`);
      }
      return undefined;
    }
  }

  /** The files the turn changed (MAIA's checkpoints, through a revert dry run) go under review. */
  private async reviewTurn(c: MaiaConnection, sessionId: string, messageId: string): Promise<void> {
    if (!this.host.review || !this.timelineCaps.revert) {
      return;
    }
    try {
      const files = turnFiles(await timeline.revertDryRun(c, sessionId, messageId));
      if (files.length) {
        this.host.review.addTurn(files);
      }
    } catch (e) {
      this.host.log(`cannot list the turn's changes for review: ${e instanceof Error ? e.message : e}`);
    }
  }

  /** `session/cancel`; pending permission requests are answered `cancelled` first. */
  async cancel(): Promise<void> {
    await this.session.cancel();
  }

  async listThreads(): Promise<acp.SessionInfo[]> {
    await this.ensureStartedOrThrow();
    return this.session.list(this.host.cwd);
  }

  async deleteThread(sessionId: string): Promise<void> {
    const c = await this.ensureStartedOrThrow();
    await c.deleteSession(sessionId);
    if (sessionId === this.session.sessionId) {
      await this.newThread();
    }
    await this.listThreads();
  }

  /** MAIA's `/rename NAME` command, as a turn (its answer is shown). */
  async renameThread(name: string): Promise<void> {
    const clean = name.trim();
    if (clean) {
      await this.send(`/rename ${clean}`, [], true);
      await this.listThreads();
    }
  }

  async setConfig(configId: string, value: string): Promise<void> {
    await this.ensureStartedOrThrow();
    await this.session.setConfig(configId, value);
  }

  /** The timeline actions the agent advertised. */
  get timelineCaps(): timeline.TimelineCaps {
    const init = this.connection?.init;
    return init ? timeline.timelineCaps(init) : { rewind: false, fork: false, revert: false };
  }

  private postTimeline(): void {
    this.host.post({ type: 'timeline', ...this.timelineCaps });
  }

  /** Refuses a timeline action during a turn (the agent would refuse it too). */
  private idleSession(action: string): { c: MaiaConnection; sessionId: string } | undefined {
    const c = this.connection;
    const sessionId = this.session.sessionId;
    if (!c || c.isDisposed || !sessionId) {
      throw new Error('maia is not running');
    }
    if (this.session.busy) {
      this.host.post({ type: 'notice', level: 'warning', text: `MAIA is answering; stop it (Esc) before ${action}.` });
      return undefined;
    }
    return { c, sessionId };
  }

  /** "Edit": the thread is rewound before the message, reloaded, and its text goes back to the input. */
  async editMessage(messageId: string, text: string): Promise<boolean> {
    const live = this.idleSession('editing a message');
    if (!live) {
      return false;
    }
    const r = await timeline.rewind(live.c, live.sessionId, messageId);
    if (!r.rewound) {
      this.host.post({ type: 'notice', level: 'warning', text: `Cannot edit that message${r.reason ? `: ${r.reason}` : ''}.` });
      return false;
    }
    await this.openThread(live.sessionId, true);
    this.host.post({ type: 'restoreInput', text });
    return true;
  }

  /** "Fork from here": a new thread with the history before the message, opened in the panel. */
  async forkFrom(messageId: string, text: string): Promise<string | undefined> {
    const live = this.idleSession('forking');
    if (!live) {
      return undefined;
    }
    const forked = await timeline.fork(live.c, live.sessionId, this.host.cwd, messageId);
    await this.openThread(forked);
    this.host.post({ type: 'restoreInput', text });
    return forked;
  }

  async revertPreview(messageId: string): Promise<void> {
    const live = this.idleSession('undoing changes');
    if (!live) {
      return;
    }
    const preview = await timeline.revertPreview(live.c, live.sessionId, messageId);
    this.host.post({ type: 'revertPreview', messageId, preview });
  }

  async revertApply(messageId: string, previewToken: string): Promise<void> {
    const live = this.idleSession('undoing changes');
    if (!live) {
      return;
    }
    const result = await timeline.revertApply(live.c, live.sessionId, messageId, previewToken);
    this.host.post({ type: 'revertDone', messageId, result });
  }

  /** Adds context from the editor ("Add selection / file to MAIA"). */
  attach(attachment: Attachment): void {
    this.host.post({ type: 'attach', attachment });
  }

  async restart(): Promise<void> {
    this.crashes = [];
    const old = this.connection;
    this.connection = undefined;
    this.session.cancelPermissions();
    await old?.dispose();
    this.session.setTurn(false);
    await this.startProcess(true);
  }

  /** Handles a webview message; errors are shown in the panel. */
  async onMessage(message: ToHost): Promise<void> {
    try {
      await this.dispatch(message);
    } catch (e) {
      this.host.post({ type: 'notice', level: 'error', text: e instanceof Error ? e.message : String(e) });
    }
  }

  private async dispatch(m: ToHost): Promise<void> {
    switch (m.type) {
      case 'ready':
        if (this.connection && this.session.sessionId) {
          // The webview was re-created (hidden and shown): replay into it.
          this.postTimeline();
          await this.openThread(this.session.sessionId, true);
        } else {
          await this.ensureStarted();
        }
        return;
      case 'send':
        await this.send(m.text, m.attachments);
        return;
      case 'cancel':
        await this.cancel();
        return;
      case 'permission':
        this.answerPermission(m.requestId, m.optionId, m.reason);
        return;
      case 'openDiff':
        await this.host.openDiff(m.path, m.oldText, m.newText);
        return;
      case 'openLocation':
        await this.host.openLocation(m.path, m.line);
        return;
      case 'insert':
        await this.host.insertText(m.text);
        return;
      case 'copy':
        await this.host.copyText(m.text);
        return;
      case 'newThread':
        if (this.session.busy) {
          await this.cancel();
        }
        await this.newThread();
        return;
      case 'listThreads':
        await this.listThreads();
        return;
      case 'openThread':
        await this.openThread(m.sessionId);
        return;
      case 'deleteThread':
        await this.deleteThread(m.sessionId);
        return;
      case 'renameThread':
        await this.renameThread(m.name);
        return;
      case 'setConfig':
        await this.setConfig(m.configId, m.value);
        return;
      case 'searchFiles':
        this.host.post({ type: 'files', requestId: m.requestId, items: await this.host.searchFiles(m.query) });
        return;
      case 'restart':
        await this.restart();
        return;
      case 'rewind':
        await this.editMessage(m.messageId, m.text);
        return;
      case 'fork':
        await this.forkFrom(m.messageId, m.text);
        return;
      case 'revertPreview':
        await this.revertPreview(m.messageId);
        return;
      case 'revertApply':
        await this.revertApply(m.messageId, m.previewToken);
        return;
      case 'openRevertDiff':
        await this.host.openRevertDiff?.(m.path, m.restored, m.kind);
        return;
      case 'review':
        await this.host.review?.run(m.action);
        return;
      case 'reviewPermission':
        await this.reviewPermission(m.requestId);
        return;
    }
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.session.cancelPermissions();
    await this.connection?.dispose();
    this.connection = undefined;
  }
}

/** A file attachment for an absolute path. */
export function fileAttachment(filePath: string, root?: string): Attachment {
  const name = root && filePath.startsWith(root + path.sep) ? path.relative(root, filePath) : path.basename(filePath);
  return { kind: 'file', uri: pathToFileURL(filePath).href, name };
}
