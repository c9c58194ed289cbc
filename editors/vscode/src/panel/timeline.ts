// The session timeline over ACP (no `vscode` import): which actions the
// agent advertised, and the requests behind "Edit" (`_session/rewind`),
// "Fork from here" (`session/fork` with a cursor) and "Undo changes"
// (`_session/files/revert`, preview then apply). Wire shapes: docs/acp.md.
import type * as acp from '@agentclientprotocol/sdk';
import type { MaiaConnection } from '../acp/connection';
import type { RevertFile, RevertKind, RevertPreview, RevertResult } from './protocol';

export interface TimelineCaps {
  rewind: boolean;
  fork: boolean;
  revert: boolean;
}

type Json = Record<string, unknown>;

function obj(v: unknown): Json | undefined {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : undefined;
}

/** An advertised `_meta` entry, on the initialize result or in `agentCapabilities._meta`. */
function advertised(init: acp.InitializeResponse, key: string): boolean {
  const top = obj(obj(init as unknown)?._meta)?.[key];
  const caps = obj(obj(obj(init as unknown)?.agentCapabilities)?._meta)?.[key];
  return !!(top ?? caps);
}

/** What the agent offers (each action is shown only when advertised). */
export function timelineCaps(init: acp.InitializeResponse): TimelineCaps {
  const session = obj(obj(obj(init as unknown)?.agentCapabilities)?.sessionCapabilities);
  return {
    rewind: advertised(init, 'sessionRewind'),
    fork: !!session?.fork,
    revert: advertised(init, 'fileRevert'),
  };
}

/** The id of the user message a prompt response names (`_meta.maia.userMessageId`). */
export function userMessageId(response: acp.PromptResponse): string | undefined {
  const id = obj(obj(obj(response as unknown)?._meta)?.maia)?.userMessageId;
  return typeof id === 'string' ? id : undefined;
}

function request(c: MaiaConnection, method: string, params: Json): Promise<unknown> {
  const send = c.agent.request.bind(c.agent) as (m: string, p: unknown) => Promise<unknown>;
  return send(method, params);
}

/** `_session/rewind` before `messageId`. */
export async function rewind(
  c: MaiaConnection,
  sessionId: string,
  messageId: string,
): Promise<{ rewound: boolean; reason?: string }> {
  const r = obj(await request(c, '_session/rewind', { sessionId, beforeMessage: { messageId } }));
  return { rewound: r?.rewound === true, reason: typeof r?.reason === 'string' ? r.reason : undefined };
}

/** `session/fork` before `messageId`; returns the new session's id. */
export async function fork(c: MaiaConnection, sessionId: string, cwd: string, messageId: string): Promise<string> {
  const r = obj(await request(c, 'session/fork', { sessionId, cwd, mcpServers: [], cursorId: messageId }));
  if (typeof r?.sessionId !== 'string') {
    throw new Error('session/fork answered without a sessionId');
  }
  return r.sessionId;
}

const KINDS: RevertKind[] = ['created', 'modified', 'deleted'];

/** The undo preview of the turn of `messageId` (`dryRun: true`). */
export async function revertPreview(c: MaiaConnection, sessionId: string, messageId: string): Promise<RevertPreview> {
  const r = obj(await request(c, '_session/files/revert', { sessionId, beforeMessage: { messageId }, dryRun: true })) ?? {};
  const maia = obj(obj(r._meta)?.maia);
  const listed = Array.isArray(maia?.files) ? (maia.files as unknown[]) : undefined;
  const files: RevertFile[] = listed
    ? listed.flatMap((f) => {
        const o = obj(f);
        if (!o || typeof o.path !== 'string') {
          return [];
        }
        const kind = KINDS.includes(o.kind as RevertKind) ? (o.kind as RevertKind) : 'modified';
        // `diff` is the text now (`oldText`) and after the undo (`newText`).
        const after = obj(o.diff)?.newText;
        return [{ path: o.path, kind, conflict: o.conflict === true, restored: typeof after === 'string' ? after : null }];
      })
    : // A peer's bare preview: paths only.
      (Array.isArray(r.paths) ? r.paths : [])
        .filter((p): p is string => typeof p === 'string')
        .map((p) => ({ path: p, kind: 'modified' as const, conflict: false, restored: null }));
  const notCaptured = Array.isArray(maia?.notCaptured) ? maia.notCaptured.filter((p): p is string => typeof p === 'string') : [];
  return {
    canRevert: r.canRevert === true,
    previewToken: typeof r.previewToken === 'string' ? r.previewToken : undefined,
    reason: typeof r.reason === 'string' ? r.reason : undefined,
    files,
    notCaptured,
  };
}

/** The raw dry run of the turn of `messageId` (what the edit review reads its files from). */
export function revertDryRun(c: MaiaConnection, sessionId: string, messageId: string): Promise<unknown> {
  return request(c, '_session/files/revert', { sessionId, beforeMessage: { messageId }, dryRun: true });
}

/** Whether the agent writes the text a permission answer kept (`_meta.permissionReview`). */
export function readsReviewedText(init: acp.InitializeResponse): boolean {
  return advertised(init, 'permissionReview');
}

/** Whether the agent hears undone hunks on `session/prompt` (`_meta.undoneHunks`). */
export function hearsUndone(init: acp.InitializeResponse): boolean {
  return advertised(init, 'undoneHunks');
}

/** Applies the previewed undo (`dryRun: false` with the preview's token). */
export async function revertApply(
  c: MaiaConnection,
  sessionId: string,
  messageId: string,
  previewToken: string,
): Promise<RevertResult> {
  const r =
    obj(
      await request(c, '_session/files/revert', { sessionId, beforeMessage: { messageId }, dryRun: false, previewToken }),
    ) ?? {};
  const maia = obj(obj(r._meta)?.maia);
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((p): p is string => typeof p === 'string') : []);
  return {
    reverted: r.reverted === true,
    reason: typeof r.reason === 'string' ? r.reason : undefined,
    paths: strings(maia?.reverted),
    conflicts: strings(maia?.conflicts),
  };
}
