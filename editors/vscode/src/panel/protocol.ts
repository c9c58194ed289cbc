// Messages between the panel's webview and the extension host. Shared by
// both sides (the webview bundle imports only types from here).
import type * as acp from '@agentclientprotocol/sdk';

/** Context attached to the next prompt. */
export type Attachment =
  | { kind: 'file'; uri: string; name: string }
  | { kind: 'selection'; uri: string; name: string; text: string; startLine: number; endLine: number };

export type ToHost =
  | { type: 'ready' }
  | { type: 'send'; text: string; attachments: Attachment[] }
  | { type: 'cancel' }
  /** `optionId` absent: the request is dismissed (cancelled). */
  | { type: 'permission'; requestId: number; optionId?: string; reason?: string }
  | { type: 'openDiff'; path: string; oldText: string | null; newText: string }
  | { type: 'openLocation'; path: string; line?: number }
  | { type: 'insert'; text: string }
  | { type: 'copy'; text: string }
  | { type: 'newThread' }
  | { type: 'listThreads' }
  | { type: 'openThread'; sessionId: string }
  | { type: 'deleteThread'; sessionId: string }
  | { type: 'renameThread'; name: string }
  | { type: 'setConfig'; configId: string; value: string }
  | { type: 'searchFiles'; requestId: number; query: string }
  | { type: 'restart' }
  /** "Edit" on a user message: rewind before it, then its text back in the input. */
  | { type: 'rewind'; messageId: string; text: string }
  /** "Fork from here": a new thread with the history before that message. */
  | { type: 'fork'; messageId: string; text: string }
  /** "Undo changes" of the turn of that user message: the preview (dry run). */
  | { type: 'revertPreview'; messageId: string }
  | { type: 'revertApply'; messageId: string; previewToken: string }
  /** The file now ↔ what "Restore" puts back (`null`: no such file). */
  | { type: 'openRevertDiff'; path: string; restored: string | null; kind: RevertKind }
  /** "Review in editor" on a permission card. */
  | { type: 'reviewPermission'; requestId: number }
  /** The edit review's bar in the panel. */
  | { type: 'review'; action: 'next' | 'keepAll' | 'undoAll' };

export type Status = 'starting' | 'ready' | 'restarting' | 'error';

export type ToWebview =
  | { type: 'status'; state: Status; message?: string; install?: boolean }
  /** A thread is shown: everything before is cleared. */
  | {
      type: 'session';
      sessionId: string;
      title?: string | null;
      configOptions: acp.SessionConfigOption[];
      replaying: boolean;
    }
  | { type: 'replayed' }
  | { type: 'update'; update: acp.SessionUpdate }
  | { type: 'userMessage'; text: string; attachments: Attachment[]; messageId?: string }
  /** The id of the user message just sent (the prompt response's `_meta.maia.userMessageId`). */
  | { type: 'userMessageId'; messageId: string }
  /** Which timeline actions the agent advertised. */
  | { type: 'timeline'; rewind: boolean; fork: boolean; revert: boolean }
  /** Text put back in the input (after "Edit" or "Fork from here"). */
  | { type: 'restoreInput'; text: string }
  | { type: 'revertPreview'; messageId: string; preview: RevertPreview }
  | { type: 'revertDone'; messageId: string; result: RevertResult }
  | { type: 'busy'; busy: boolean }
  | { type: 'turnEnd'; stopReason?: acp.StopReason; error?: string }
  | {
      type: 'permission';
      requestId: number;
      toolCall: acp.ToolCallUpdate;
      options: acp.PermissionOption[];
      /** The card may offer "Review in editor" (one diff of an existing file, and the agent reads the answer's text). */
      reviewInEditor?: boolean;
    }
  /** `answered`: what the card says instead of the option's name ("Kept 1 of 2 changes"). */
  | { type: 'permissionDone'; requestId: number; optionId?: string; answered?: string }
  /** "Review in editor" could not show the proposal: the card stops offering it and says why. */
  | { type: 'reviewDeclined'; requestId: number; reason: string }
  | { type: 'threads'; sessions: acp.SessionInfo[]; currentId?: string }
  | { type: 'config'; configOptions: acp.SessionConfigOption[] }
  | { type: 'files'; requestId: number; items: { uri: string; path: string }[] }
  | { type: 'attach'; attachment: Attachment }
  | { type: 'focusInput' }
  | { type: 'notice'; level: 'info' | 'warning' | 'error'; text: string }
  /** "3 files, 7 changes to review" (empty: nothing to review). */
  | { type: 'reviewCount'; label: string };

export type RevertKind = 'created' | 'modified' | 'deleted';

/** One file of an undo preview. */
export interface RevertFile {
  path: string;
  kind: RevertKind;
  /** The user changed it after MAIA: kept as it is. */
  conflict: boolean;
  /** The text MAIA's change replaced (what "Restore" puts back). */
  restored: string | null;
}

/** `_session/files/revert` with `dryRun: true`. */
export interface RevertPreview {
  canRevert: boolean;
  previewToken?: string;
  reason?: string;
  files: RevertFile[];
  notCaptured: string[];
}

/** `_session/files/revert` applied. */
export interface RevertResult {
  reverted: boolean;
  reason?: string;
  paths: string[];
  conflicts: string[];
}

/** The ACP prompt for a message and its attachments. */
export function promptBlocks(text: string, attachments: Attachment[]): acp.ContentBlock[] {
  const blocks: acp.ContentBlock[] = [];
  if (text.trim()) {
    blocks.push({ type: 'text', text });
  }
  for (const a of attachments) {
    if (a.kind === 'file') {
      blocks.push({ type: 'resource_link', uri: a.uri, name: a.name });
    } else {
      blocks.push({
        type: 'resource',
        resource: { uri: `${a.uri}#L${a.startLine}-${a.endLine}`, text: a.text, mimeType: 'text/plain' },
      });
    }
  }
  return blocks;
}

/**
 * The answer to a permission question: the option chosen (none: cancelled);
 * a rejection carries the typed reason as `_meta.reason`, which MAIA gives
 * the model.
 */
export function permissionOutcome(
  options: acp.PermissionOption[],
  optionId: string | undefined,
  reason?: string,
): acp.RequestPermissionResponse {
  if (!optionId) {
    return { outcome: { outcome: 'cancelled' } };
  }
  const kind = options.find((o) => o.optionId === optionId)?.kind;
  const rejecting = kind === 'reject_once' || kind === 'reject_always';
  const text = reason?.trim();
  return { outcome: { outcome: 'selected', optionId }, ...(rejecting && text ? { _meta: { reason: text } } : {}) };
}
