// The TypeScript SDK (@agentclientprotocol/sdk 2.4.0) as an ACP v1 client of
// `maia serve`, over `experimental/ws-client` or `experimental/http-client`.
//
//   node v1.mjs --transport ws|http --phase live|saved --state FILE
//
// Environment: MAIA_URL (http://HOST:PORT/acp), MAIA_TOKEN, MAIA_CWD (the
// sessions' folder). The daemon answers through the scripted mock LLM of
// protocol-tests/remote_sdk.rs, which reads the prompts' words (`sdk:tool
// FILE`, `sdk:slow`; anything else is echoed). Phase `live` runs every check
// on a running daemon and writes the session to load into FILE; phase
// `saved` (after the test restarts the daemon) loads it. One JSON line per
// check on stdout.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Log, agentText, arg, daemonUrl, env, reporter, sdk, wsModule } from "./lib.mjs";

const transport = arg("transport", "ws");
const phase = arg("phase", "live");
const stateFile = arg("state", "");
const token = env("MAIA_TOKEN");
const cwd = env("MAIA_CWD");
const client = "ts";
const { check, results } = reporter(client, transport);
const acp = await sdk("@agentclientprotocol/sdk");
const headers = { Authorization: `Bearer ${token}` };

async function stream() {
  if (transport === "ws") {
    const { createWebSocketStream } = await sdk("@agentclientprotocol/sdk/experimental/ws-client");
    const { WebSocket } = await wsModule();
    return createWebSocketStream(daemonUrl("ws"), { WebSocket, headers });
  }
  const { createHttpStream } = await sdk("@agentclientprotocol/sdk/experimental/http-client");
  return createHttpStream(daemonUrl("http"), { headers });
}

/** A client app that logs every notification and answers permissions. */
function app(log, permissions) {
  return acp
    .client({ name: "maia-sdk-check" })
    .onNotification("session/update", ({ params }) => {
      log.push({ method: "session/update", params });
    })
    .onNotification("*", ({ method, params }) => {
      log.push({ method, params });
    })
    .onRequest("session/request_permission", ({ params }) => {
      permissions.push(params);
      log.push({ method: "session/request_permission", params });
      const allow =
        params.options.find((o) => o.kind === "allow_once") ??
        params.options.find((o) => o.kind.startsWith("allow"));
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    });
}

const initParams = {
  protocolVersion: 1,
  clientCapabilities: {},
  clientInfo: { name: "maia-sdk-check", version: "1" },
};

function text(words) {
  return [{ type: "text", text: words }];
}

async function connect(op) {
  const log = new Log();
  const permissions = [];
  const s = await stream();
  return app(log, permissions).connectWith(s, (ctx) => op(ctx, log, permissions));
}

async function live() {
  let sid;
  await connect(async (ctx, log, permissions) => {
    const initialized = await check("initialize", async () => {
      const init = await ctx.request("initialize", initParams);
      if (init.protocolVersion !== 1) throw new Error(`protocolVersion ${init.protocolVersion}`);
      if (!init.agentCapabilities?.loadSession) throw new Error("no loadSession capability");
      return `protocolVersion 1, agent ${init.agentInfo?.name ?? "?"}`;
    });
    if (!initialized) return;
    const created = await check("session/new", async () => {
      const made = await ctx.request("session/new", { cwd, mcpServers: [] });
      if (typeof made.sessionId !== "string") throw new Error(JSON.stringify(made));
      sid = made.sessionId;
      return sid;
    });
    if (!created) return;

    const file = `${client}-${transport}.txt`;
    await check("prompt: streamed, a tool call, a permission", async () => {
      const from = log.entries.length;
      const answer = await ctx.request("session/prompt", {
        sessionId: sid,
        prompt: text(`sdk:tool ${file}`),
      });
      if (answer.stopReason !== "end_turn") throw new Error(`stopReason ${answer.stopReason}`);
      if (permissions.length !== 1) throw new Error(`${permissions.length} permission requests`);
      const updates = log.since(from).filter((e) => e.method === "session/update");
      const calls = updates.filter((e) => e.params.update.sessionUpdate === "tool_call");
      if (calls.length === 0) throw new Error("no tool_call update");
      const words = agentText(updates, sid);
      if (!words.includes(`wrote ${file}`)) throw new Error(`agent text ${JSON.stringify(words)}`);
      if (!existsSync(join(cwd, file))) throw new Error(`${file} was not written`);
      return `${updates.length} updates, tool ${calls[0].params.update.title}, permission answered, ${file} written`;
    });

    await check("cancel", async () => {
      const from = log.entries.length;
      const answered = ctx.request("session/prompt", { sessionId: sid, prompt: text("sdk:slow") });
      await log.waitFor(
        (e, i) => e.method === "session/update" && e.params.update.sessionUpdate === "agent_message_chunk" && log.entries.indexOf(e) >= from,
        "the slow answer's first words",
      );
      await ctx.notify("session/cancel", { sessionId: sid });
      const answer = await answered;
      if (answer.stopReason !== "cancelled") throw new Error(`stopReason ${answer.stopReason}`);
      return "stopReason cancelled";
    });

    await check("session/list", async () => {
      const listed = await ctx.request("session/list", {});
      const found = listed.sessions.find((x) => x.sessionId === sid);
      if (!found) throw new Error(`${sid} not in ${JSON.stringify(listed.sessions.map((x) => x.sessionId))}`);
      return `${listed.sessions.length} sessions, this one in ${found.cwd}`;
    });

    await check("session/load of a live session (a second client)", async () => {
      return connect(async (other, otherLog) => {
        await other.request("initialize", initParams);
        const loaded = await other.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
        const replayed = agentText(otherLog.entries, sid);
        if (!replayed.includes(`wrote ${file}`)) throw new Error(`replay ${JSON.stringify(replayed.slice(0, 300))}`);
        return `replayed ${otherLog.entries.length} messages before the answer (seq ${loaded?._meta?.maia?.seq})`;
      });
    });

    await check("session/set_title", async () => {
      await ctx.request("session/set_title", { sessionId: sid, title: `sdk ${client} ${transport}` });
      const listed = await ctx.request("session/list", {});
      const found = listed.sessions.find((x) => x.sessionId === sid);
      if (found?.title !== `sdk ${client} ${transport}`) throw new Error(`title ${found?.title}`);
      return `listed as "${found.title}"`;
    });

    await check("_session/queue", async () => {
      const added = await ctx.request("_session/queue", {
        sessionId: sid,
        action: "add",
        input: [{ type: "text", text: "sdk queued" }],
        clientUserMessageId: "q1",
      });
      const id = added?.result?.queuedSubmission?.id;
      if (!id) throw new Error(`add answered ${JSON.stringify(added)}`);
      const listed = await ctx.request("_session/queue", { sessionId: sid, action: "list" });
      if (!listed.result.data.some((q) => q.id === id)) throw new Error(`list ${JSON.stringify(listed)}`);
      await ctx.request("_session/queue", { sessionId: sid, action: "start" });
      await log.waitFor(
        (e) => e.method === "_session/queue/turn" && e.params.turn?.queuedSubmissionId === id && e.params.turn?.status === "completed",
        "the queued turn's end",
      );
      if (!agentText(log.entries, sid).includes("sdk echo: sdk queued")) throw new Error("the queued turn's answer did not stream");
      return `added ${id}, listed, started, its turn completed`;
    });

    let other;
    await check("session/close", async () => {
      const made = await ctx.request("session/new", { cwd, mcpServers: [] });
      other = made.sessionId;
      await ctx.request("session/close", { sessionId: other });
      const closed = await log.waitFor(
        (e) => e.method === "_session/closed" && e.params.sessionId === other,
        "_session/closed",
        5000,
      ).catch(() => null);
      return `closed ${other}${closed ? ", _session/closed told" : ""}`;
    });

    await check("session/delete", async () => {
      if (!other) throw new Error("no session to delete");
      await ctx.request("session/delete", { sessionId: other });
      const listed = await ctx.request("session/list", {});
      if (listed.sessions.some((x) => x.sessionId === other)) throw new Error("still listed");
      return `deleted ${other}`;
    });
  });
  if (stateFile && sid) {
    writeFileSync(stateFile, JSON.stringify({ sessionId: sid }));
  }
}

async function saved() {
  const { sessionId: sid } = JSON.parse(readFileSync(stateFile, "utf8"));
  const file = `${client}-${transport}.txt`;
  await connect(async (ctx, log) => {
    await ctx.request("initialize", initParams);
    await check("session/load of a saved session (after a restart)", async () => {
      const answer = await ctx.request("session/load", { sessionId: sid, cwd, mcpServers: [] });
      const replayed = agentText(log.entries, sid);
      if (!replayed.includes(`wrote ${file}`)) throw new Error(`replay ${JSON.stringify(replayed.slice(0, 300))}`);
      return `replayed ${log.entries.length} messages before the answer (seq ${answer?._meta?.maia?.seq})`;
    });
    await check("prompt after loading a saved session", async () => {
      const from = log.entries.length;
      const answer = await ctx.request("session/prompt", { sessionId: sid, prompt: text("after the restart") });
      if (answer.stopReason !== "end_turn") throw new Error(`stopReason ${answer.stopReason}`);
      const words = agentText(log.since(from), sid);
      if (!words.includes("sdk echo: after the restart")) throw new Error(`agent text ${JSON.stringify(words)}`);
      return "answered, streamed";
    });
  });
}

try {
  await (phase === "saved" ? saved() : live());
} catch (error) {
  const { describe } = await import("./lib.mjs");
  process.stdout.write(`${JSON.stringify({ client, transport, check: "connection", ok: false, detail: describe(error) })}\n`);
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
