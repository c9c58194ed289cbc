#!/usr/bin/env node
// A scripted ACP agent for the panel's timeline tests: it advertises
// `_session/rewind`, `_session/files/revert` and `session/fork` (the wire
// shapes of docs/acp.md) and answers them from a small in-memory thread,
// so the panel's buttons can be tested before the real server offers them.
// Every request it gets is appended to `$HOME/requests.jsonl`. With a file
// `$HOME/no-timeline` it advertises none of them.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';

type Json = Record<string, any>;

const home = process.env.HOME ?? '.';
const requestLog = path.join(home, 'requests.jsonl');
const plain = fs.existsSync(path.join(home, 'no-timeline'));
let cwd = process.cwd();

/** Threads: user messages with their ids. */
const threads = new Map<string, { id: string; text: string }[]>();
let nextMessage = 1;
let nextFork = 1;
const TOKEN = `sha256:${'ab'.repeat(32)}`;

function send(m: Json): void {
  process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
}

function update(sessionId: string, u: Json): void {
  send({ method: 'session/update', params: { sessionId, update: u } });
}

function replay(sessionId: string): void {
  for (const m of threads.get(sessionId) ?? []) {
    update(sessionId, { sessionUpdate: 'user_message_chunk', content: { type: 'text', text: m.text }, messageId: m.id });
    update(sessionId, {
      sessionUpdate: 'agent_message_chunk',
      content: { type: 'text', text: `answer to ${m.text}` },
      messageId: `a-${m.id}`,
    });
  }
}

// As MAIA sends them: `oldText` is the text now, `newText` the text after the undo.
function revertFiles(): Json[] {
  return [
    { path: path.join(cwd, 'a.txt'), kind: 'modified', conflict: false, diff: { oldText: 'new a\n', newText: 'old a\n' } },
    { path: path.join(cwd, 'b.txt'), kind: 'created', conflict: false, diff: { oldText: 'b\n' } },
    { path: path.join(cwd, 'c.txt'), kind: 'modified', conflict: true, diff: { oldText: 'new c\n', newText: 'old c\n' } },
  ];
}

function handle(method: string, p: Json): Json {
  switch (method) {
    case 'initialize':
      return {
        protocolVersion: p.protocolVersion,
        agentCapabilities: { loadSession: true, ...(plain ? {} : { sessionCapabilities: { fork: {} } }) },
        ...(plain
          ? {}
          : {
              _meta: {
                sessionRewind: { version: 1, method: '_session/rewind' },
                fileRevert: { version: 1, method: '_session/files/revert', dryRun: true, previewTokenRequired: true },
              },
            }),
      };
    case 'session/new': {
      cwd = p.cwd;
      const sessionId = `s${threads.size + 1}`;
      threads.set(sessionId, []);
      return { sessionId };
    }
    case 'session/load':
      replay(p.sessionId);
      return {};
    case 'session/list':
      return { sessions: [...threads.keys()].map((sessionId) => ({ sessionId, cwd })) };
    case 'session/prompt': {
      const text = (p.prompt as Json[]).map((b) => (b.type === 'text' ? b.text : '')).join('');
      const id = `m${nextMessage++}`;
      threads.get(p.sessionId)?.push({ id, text });
      update(p.sessionId, { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `answer to ${text}` }, messageId: `a-${id}` });
      return { stopReason: 'end_turn', _meta: { maia: { userMessageId: id } } };
    }
    case '_session/rewind': {
      const thread = threads.get(p.sessionId) ?? [];
      const at = thread.findIndex((m) => m.id === p.beforeMessage?.messageId);
      if (at < 0) {
        throw { code: -32602, message: 'unknown messageId' };
      }
      thread.splice(at);
      return { rewound: true };
    }
    case 'session/fork': {
      const thread = threads.get(p.sessionId) ?? [];
      const at = thread.findIndex((m) => m.id === p.cursorId);
      const sessionId = `f${nextFork++}`;
      threads.set(sessionId, thread.slice(0, at < 0 ? thread.length : at));
      return { sessionId };
    }
    case '_session/files/revert': {
      const files = revertFiles();
      if (p.dryRun) {
        return {
          canRevert: true,
          previewToken: TOKEN,
          paths: files.map((f) => f.path),
          _meta: { maia: { files, notCaptured: [path.join(cwd, 'big.bin')] } },
        };
      }
      if (p.previewToken !== TOKEN) {
        return { reverted: false, reason: 'stale_preview' };
      }
      return {
        reverted: true,
        _meta: { maia: { reverted: files.filter((f) => !f.conflict).map((f) => f.path), conflicts: [files[2].path] } },
      };
    }
    default:
      throw { code: -32601, message: `method not found: ${method}` };
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) {
    return;
  }
  const m = JSON.parse(line) as Json;
  if (m.method === undefined || m.id === undefined) {
    return; // notifications (session/cancel) and responses
  }
  fs.appendFileSync(requestLog, JSON.stringify({ method: m.method, params: m.params }) + '\n');
  try {
    send({ id: m.id, result: handle(m.method, m.params ?? {}) });
  } catch (e) {
    const err = e as { code?: number; message?: string };
    send({ id: m.id, error: { code: err.code ?? -32603, message: err.message ?? String(e) } });
  }
});
process.stdin.on('end', () => process.exit(0));
