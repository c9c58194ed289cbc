// The timeline's wire parsing (src/panel/timeline.ts), without a process:
// what counts as advertised, and previews from MAIA and from a peer.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type * as acp from '@agentclientprotocol/sdk';
import type { MaiaConnection } from '../src/acp/connection';
import * as timeline from '../src/panel/timeline';

const init = (extra: Record<string, unknown>) => ({ protocolVersion: 1, ...extra }) as unknown as acp.InitializeResponse;

/** A connection whose agent answers `reply` and records the requests. */
function fake(reply: unknown): { c: MaiaConnection; sent: [string, unknown][] } {
  const sent: [string, unknown][] = [];
  const agent = {
    request: async (method: string, params: unknown) => {
      sent.push([method, params]);
      return reply;
    },
  };
  return { c: { agent } as unknown as MaiaConnection, sent };
}

test('timeline actions count as advertised on the result or in agentCapabilities._meta', () => {
  assert.deepEqual(timeline.timelineCaps(init({})), { rewind: false, fork: false, revert: false });
  assert.deepEqual(
    timeline.timelineCaps(
      init({
        agentCapabilities: { sessionCapabilities: { fork: {} } },
        _meta: { sessionRewind: { version: 1, method: '_session/rewind' } },
      }),
    ),
    { rewind: true, fork: true, revert: false },
  );
  assert.deepEqual(
    timeline.timelineCaps(init({ agentCapabilities: { _meta: { fileRevert: { version: 1 } } } })),
    { rewind: false, fork: false, revert: true },
  );
});

test("the prompt response's user message id", () => {
  const r = { stopReason: 'end_turn', _meta: { maia: { userMessageId: 'u1' } } } as unknown as acp.PromptResponse;
  assert.equal(timeline.userMessageId(r), 'u1');
  assert.equal(timeline.userMessageId({ stopReason: 'end_turn' }), undefined);
});

test("a preview with MAIA's files, and a peer's bare paths", async () => {
  const { c, sent } = fake({
    canRevert: true,
    previewToken: 'sha256:00',
    paths: ['/p/a', '/p/b'],
    _meta: {
      maia: {
        files: [
          { path: '/p/a', kind: 'created', conflict: false, diff: { oldText: 'x' } },
          { path: '/p/b', kind: 'modified', conflict: true, diff: { oldText: 'new', newText: 'old' } },
        ],
        notCaptured: ['/p/big'],
      },
    },
  });
  const preview = await timeline.revertPreview(c, 's', 'u2');
  assert.deepEqual(sent, [['_session/files/revert', { sessionId: 's', beforeMessage: { messageId: 'u2' }, dryRun: true }]]);
  assert.deepEqual(preview, {
    canRevert: true,
    previewToken: 'sha256:00',
    reason: undefined,
    files: [
      { path: '/p/a', kind: 'created', conflict: false, restored: null },
      { path: '/p/b', kind: 'modified', conflict: true, restored: 'old' },
    ],
    notCaptured: ['/p/big'],
  });
  const peer = await timeline.revertPreview(fake({ canRevert: true, previewToken: 't', paths: ['/p/a'] }).c, 's', 'u2');
  assert.deepEqual(peer.files, [{ path: '/p/a', kind: 'modified', conflict: false, restored: null }]);
});

test('an applied revert names what was restored and what was kept', async () => {
  const { c, sent } = fake({ reverted: true, _meta: { maia: { reverted: ['/p/a'], conflicts: ['/p/b'] } } });
  const r = await timeline.revertApply(c, 's', 'u2', 'sha256:00');
  assert.deepEqual(sent[0], [
    '_session/files/revert',
    { sessionId: 's', beforeMessage: { messageId: 'u2' }, dryRun: false, previewToken: 'sha256:00' },
  ]);
  assert.deepEqual(r, { reverted: true, reason: undefined, paths: ['/p/a'], conflicts: ['/p/b'] });
  const stale = await timeline.revertApply(fake({ reverted: false, reason: 'stale_preview' }).c, 's', 'u2', 't');
  assert.equal(stale.reason, 'stale_preview');
});
