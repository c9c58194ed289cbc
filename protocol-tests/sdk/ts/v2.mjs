// The TypeScript SDK's ACP v2 client (`@agentclientprotocol/sdk` 2.4.0,
// `experimental/v2`) against `maia serve --protocol-v2`, over the SDK's
// WebSocket or Streamable HTTP client transport.
//
//   node v2.mjs --transport ws|http
//
// Environment as v1.mjs. Checks: initialize, session/new, a prompt (v2
// answers it with its messageId at once; the turn streams its updates up to
// `state_update: idle`), a prompt with a tool call and a permission, cancel,
// and a second client's `session/resume` replaying from the start. One JSON
// line per check on stdout.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Log, arg, daemonUrl, describe, env, reporter, sdk, wsModule } from "./lib.mjs";

const transport = arg("transport", "ws");
const token = env("MAIA_TOKEN");
const cwd = env("MAIA_CWD");
const client = "ts-v2";
const { check, results } = reporter(client, transport);
const v2 = await sdk("@agentclientprotocol/sdk/experimental/v2");
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

const permissions = [];

/** A v2 client app logging into `log`, allowing every permission. */
function app(log) {
  return v2
    .client({ name: "maia-sdk-check" })
    .onNotification("session/update", ({ params }) => {
      log.push({ method: "session/update", params });
    })
    .onNotification("*", ({ method, params }) => {
      log.push({ method, params });
    })
    .onRequest("session/request_permission", ({ params }) => {
      permissions.push(params);
      const allow =
        params.options.find((o) => o.kind === "allow_once") ??
        params.options.find((o) => String(o.kind).startsWith("allow"));
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    });
}

const log = new Log();

function updates(sid, from = log) {
  return from.entries
    .filter((e) => e.method === "session/update" && e.params.sessionId === sid)
    .map((e) => e.params.update);
}

function text(turn) {
  return turn
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
    .map((u) => u.content.text)
    .join("");
}

/** Waits for the `state_update: idle` after the `from`-th update of `sid`. */
async function idle(sid, from) {
  await log.waitFor(
    (e) =>
      e.method === "session/update" &&
      e.params.sessionId === sid &&
      e.params.update.sessionUpdate === "state_update" &&
      e.params.update.state === "idle" &&
      updates(sid).indexOf(e.params.update) >= from,
    "state_update idle",
  );
  return updates(sid).slice(from);
}

try {
  await app(log).connectWith(await stream(), async (ctx) => {
    const initialized = await check("initialize", async () => {
      const init = await ctx.request("initialize", {
        protocolVersion: 2,
        info: { name: "maia-sdk-check", version: "1" },
        capabilities: {},
      });
      if (init.protocolVersion !== 2) throw new Error(`protocolVersion ${init.protocolVersion}`);
      return `protocolVersion 2, agent ${init.info?.name ?? "?"}`;
    });
    if (!initialized) return;
    let sid;
    const created = await check("session/new", async () => {
      const made = await ctx.request("session/new", { cwd, mcpServers: [] });
      if (typeof made.sessionId !== "string") throw new Error(JSON.stringify(made));
      sid = made.sessionId;
      return sid;
    });
    if (!created) return;
    await check("prompt: streamed updates", async () => {
      const from = updates(sid).length;
      const answer = await ctx.request("session/prompt", {
        sessionId: sid,
        prompt: [{ type: "text", text: "hello from v2" }],
      });
      if (typeof answer.messageId !== "string") throw new Error(`answered ${JSON.stringify(answer)}`);
      const turn = await idle(sid, from);
      const kinds = [...new Set(turn.map((u) => u.sessionUpdate))];
      const words = text(turn);
      if (words !== "sdk echo: hello from v2") throw new Error(`updates ${kinds.join(", ")}; text ${JSON.stringify(words)}`);
      return `messageId ${answer.messageId}; ${turn.length} updates: ${kinds.join(", ")}`;
    });

    const file = `${client}-${transport}.txt`;
    await check("prompt: a tool call and a permission", async () => {
      const from = updates(sid).length;
      await ctx.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: `sdk:tool ${file}` }] });
      const turn = await idle(sid, from);
      if (permissions.length !== 1) throw new Error(`${permissions.length} permission requests`);
      // v2 tells a tool call by `tool_call_update` alone.
      const calls = turn.filter((u) => u.sessionUpdate === "tool_call_update");
      if (!calls.some((u) => u.status === "completed")) {
        throw new Error(`no completed tool call: ${JSON.stringify(calls).slice(0, 600)}`);
      }
      if (!text(turn).includes(`wrote ${file}`)) throw new Error(`text ${JSON.stringify(text(turn))}`);
      if (!existsSync(join(cwd, file))) throw new Error(`${file} was not written`);
      return `permission "${permissions[0].title}" answered, ${file} written`;
    });

    await check("cancel", async () => {
      const from = updates(sid).length;
      await ctx.request("session/prompt", { sessionId: sid, prompt: [{ type: "text", text: "sdk:slow" }] });
      await log.waitFor(
        (e) => e.method === "session/update" && e.params.update.sessionUpdate === "agent_message_chunk" && updates(sid).indexOf(e.params.update) >= from,
        "the slow answer's first words",
      );
      await ctx.notify("session/cancel", { sessionId: sid });
      const turn = await idle(sid, from);
      const end = turn[turn.length - 1];
      const reason = typeof end.stopReason === "string" ? end.stopReason : end.stopReason?.type;
      if (reason !== "cancelled") throw new Error(`idle with ${JSON.stringify(end)}`);
      return "idle, stopReason cancelled";
    });

    await check("session/resume with the replay (a second client)", async () => {
      const other = new Log();
      return app(other).connectWith(await stream(), async (second) => {
        await second.request("initialize", { protocolVersion: 2, info: { name: "maia-sdk-check", version: "1" }, capabilities: {} });
        await second.request("session/resume", { sessionId: sid, cwd, replayFrom: { type: "start" } });
        const replayed = text(updates(sid, other));
        if (!replayed.includes("sdk echo: hello from v2") || !replayed.includes(`wrote ${file}`)) {
          throw new Error(`replay ${JSON.stringify(replayed.slice(0, 300))}`);
        }
        return `replayed ${other.entries.length} messages before the answer`;
      });
    });
  });
} catch (error) {
  process.stdout.write(`${JSON.stringify({ client, transport, check: "connection", ok: false, detail: describe(error) })}\n`);
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
