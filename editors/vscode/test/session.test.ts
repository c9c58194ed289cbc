// The session client the panel and the web page share, in process: a fake
// agent side answers its requests, and the test plays the agent's
// notifications in the orders a daemon and `maia acp` send them.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type * as acp from '@agentclientprotocol/sdk';
import { SessionClient, type Link } from '../src/client/session';
import type { ToWebview } from '../src/panel/protocol';

interface Fake {
  client: SessionClient;
  posted: ToWebview[];
  calls: { method: string; params: Record<string, unknown> }[];
  abort: AbortController;
  /** Answers of the agent's side, by method (a function: computed from the params). */
  answers: Record<string, unknown>;
}

function fake(remote: boolean): Fake {
  const posted: ToWebview[] = [];
  const calls: Fake['calls'] = [];
  const abort = new AbortController();
  const answers: Record<string, unknown> = {
    'session/new': { sessionId: 's1', configOptions: [] },
    'session/load': { configOptions: [] },
    'session/list': { sessions: [] },
  };
  const agent = {
    request: async (method: string, params: Record<string, unknown>) => {
      calls.push({ method, params });
      const a = answers[method];
      return typeof a === 'function' ? await (a as (p: unknown) => unknown)(params) : a;
    },
    notify: async (method: string, params: Record<string, unknown>) => {
      calls.push({ method, params });
    },
  } as unknown as acp.ClientContext;
  const init = { protocolVersion: 1, ...(remote ? { _meta: { maia: { remote: { role: 'controller' } } } } : {}) };
  const link: Link = { agent, signal: abort.signal, init: init as acp.InitializeResponse };
  const client = new SessionClient({ post: (m) => posted.push(m) }, () => link);
  return { client, posted, calls, abort, answers };
}

const chunk = (sessionId: string, text: string, seq?: number): acp.SessionNotification => ({
  sessionId,
  update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } },
  ...(seq !== undefined ? { _meta: { maia: { seq } } } : {}),
});
const kinds = (posted: ToWebview[]) => posted.map((m) => (m.type === 'busy' ? `busy:${m.busy}` : m.type));

test('an update seen before a reconnect is not shown twice, and other sessions are not shown', async () => {
  const f = fake(true);
  await f.client.create('/p');
  f.posted.length = 0;
  f.client.onUpdate(chunk('s1', 'a', 1));
  f.client.onUpdate(chunk('s1', 'b', 2));
  f.client.onUpdate(chunk('s1', 'a', 1));
  f.client.onUpdate(chunk('other', 'x', 3));
  const texts = f.posted.filter((m) => m.type === 'update').map((m) => (m.type === 'update' && m.update.sessionUpdate === 'agent_message_chunk' && m.update.content.type === 'text' ? m.update.content.text : ''));
  assert.deepEqual(texts, ['a', 'b']);
  assert.equal(f.client.seq, 2);
  // A reconnect attaches with the last number seen.
  await f.client.attach('s1', '/p', f.client.seq);
  const load = f.calls.find((c) => c.method === 'session/load');
  assert.deepEqual(load?.params._meta, { maia: { since: 2 } });
});

test("on a daemon another client's turn shows as running and its end closes it once", async () => {
  const f = fake(true);
  await f.client.create('/p');
  f.posted.length = 0;
  f.client.onUpdate(chunk('s1', 'hello', 5));
  assert.equal(f.client.busy, true);
  f.client.onNotification('_session/turn_ended', { sessionId: 's1', stopReason: 'end_turn', _meta: { maia: { seq: 6 } } });
  f.client.onNotification('_session/turn_ended', { sessionId: 's1', stopReason: 'end_turn', _meta: { maia: { seq: 6 } } });
  assert.equal(f.client.busy, false);
  assert.deepEqual(kinds(f.posted), ['busy:true', 'update', 'turnEnd', 'busy:false']);
});

test('over stdio (no other clients) an update never opens a turn the client did not start', async () => {
  const f = fake(false);
  await f.client.create('/p');
  f.client.onUpdate(chunk('s1', 'late'));
  assert.equal(f.client.busy, false);
});

test('a replay never shows a turn running, and the view hears when it is over', async () => {
  const f = fake(true);
  f.answers['session/load'] = async () => {
    f.client.onUpdate(chunk('s2', 'old answer', 1));
    f.client.onNotification('_session/turn_ended', { sessionId: 's2', stopReason: 'end_turn' });
    return { configOptions: [], _meta: { maia: { seq: 3 } } };
  };
  await f.client.open('s2', '/p');
  assert.equal(f.client.busy, false);
  assert.equal(f.client.seq, 3);
  assert.deepEqual(kinds(f.posted), ['session', 'update', 'config', 'replayed']);
});

test("our own prompt ends once, at its answer, whatever a daemon's turn_ended says", async () => {
  const f = fake(true);
  await f.client.create('/p');
  let answer!: (r: acp.PromptResponse) => void;
  f.answers['session/prompt'] = () => new Promise<acp.PromptResponse>((r) => (answer = r));
  f.posted.length = 0;
  const done = f.client.prompt('hi', [], { busyNotice: 'busy' });
  await new Promise((r) => setImmediate(r));
  assert.equal(f.client.busy, true);
  // A second prompt while the turn runs is refused with the notice, not sent.
  assert.equal(await f.client.prompt('again', [], { busyNotice: 'busy' }), undefined);
  f.client.onNotification('_session/turn_ended', { sessionId: 's1', stopReason: 'end_turn' });
  assert.equal(f.client.busy, true, 'our prompt is still unanswered');
  answer({ stopReason: 'end_turn' });
  assert.equal((await done)?.stopReason, 'end_turn');
  assert.deepEqual(kinds(f.posted), ['userMessage', 'busy:true', 'notice', 'turnEnd', 'busy:false']);
  assert.equal(f.calls.filter((c) => c.method === 'session/prompt').length, 1);
});

test('a prompt on a dropped connection leaves the turn open for the daemon to end', async () => {
  const f = fake(true);
  await f.client.create('/p');
  f.answers['session/prompt'] = async () => {
    f.abort.abort();
    throw new Error('connection closed');
  };
  await assert.rejects(f.client.prompt('hi', [], { busyNotice: 'busy' }));
  assert.equal(f.client.busy, true);
});

test('a question: the first answer wins, an abort after it changes nothing, a rejection carries its reason', async () => {
  const f = fake(true);
  await f.client.create('/p');
  const abort = new AbortController();
  const request = {
    sessionId: 's1',
    toolCall: { toolCallId: 't1', title: 'Edit a.ts' },
    options: [
      { optionId: 'allow', name: 'Allow', kind: 'allow_once' },
      { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
    ],
  } as acp.RequestPermissionRequest;
  const { requestId, response } = f.client.askPermission(request, abort.signal);
  f.client.answerPermission(requestId, 'reject', 'use b.ts');
  f.client.answerPermission(requestId, 'allow');
  abort.abort();
  assert.deepEqual(await response, { outcome: { outcome: 'selected', optionId: 'reject' }, _meta: { reason: 'use b.ts' } });
  assert.equal(f.posted.filter((m) => m.type === 'permissionDone').length, 1);
  // Another controller answered (the agent withdrew the question): cancelled.
  const second = f.client.askPermission(request, abort.signal);
  assert.deepEqual(await second.response, { outcome: { outcome: 'cancelled' } });
});

test('stop cancels open questions, and ends a turn this client did not prompt', async () => {
  const f = fake(true);
  await f.client.create('/p');
  f.client.onUpdate(chunk('s1', 'someone else', 1));
  const q = f.client.askPermission(
    { sessionId: 's1', toolCall: { toolCallId: 't' }, options: [] } as unknown as acp.RequestPermissionRequest,
    new AbortController().signal,
  );
  await f.client.cancel();
  assert.deepEqual(await q.response, { outcome: { outcome: 'cancelled' } });
  assert.equal(f.client.busy, false);
  assert.ok(f.calls.some((c) => c.method === 'session/cancel'));
});

test('a queued message is shown when its turn starts, and its end closes the turn', async () => {
  const f = fake(true);
  await f.client.create('/p');
  f.answers['_session/queue'] = { result: { queuedSubmission: { id: 'q1' } } };
  await f.client.queue('then this');
  f.posted.length = 0;
  f.client.onNotification('_session/queue/turn', { sessionId: 's1', turn: { queuedSubmissionId: 'q1', status: 'inProgress' } });
  f.client.onNotification('_session/queue/turn', { sessionId: 's1', turn: { queuedSubmissionId: 'q1', status: 'completed' } });
  assert.deepEqual(kinds(f.posted), ['userMessage', 'busy:true', 'turnEnd', 'busy:false']);
});

test("a reset (the daemon's numbers started again) clears the view and replays from 0", async () => {
  const f = fake(true);
  await f.client.create('/p');
  f.client.onUpdate(chunk('s1', 'a', 40));
  f.posted.length = 0;
  f.client.onNotification('_session/reset', { sessionId: 's1' });
  f.client.onUpdate(chunk('s1', 'a again', 1));
  assert.equal(f.client.seq, 1);
  assert.deepEqual(kinds(f.posted), ['session', 'update']);
});
