// The TypeScript SDK's ACP v2 client (`@agentclientprotocol/sdk` 2.4.0,
// `experimental/v2`) against `maia serve --protocol-v2`, over the SDK's
// WebSocket or Streamable HTTP client transport.
//
//   node v2.mjs --transport ws|http
//
// Environment as v1.mjs. Checks: initialize, session/new, a prompt (v2
// answers it with its messageId at once; the turn streams its updates up to
// `state_update: idle`). One JSON line per check on stdout.
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

const log = new Log();
const app = v2
  .client({ name: "maia-sdk-check" })
  .onNotification("session/update", ({ params }) => {
    log.push({ method: "session/update", params });
  })
  .onNotification("*", ({ method, params }) => {
    log.push({ method, params });
  });

function updates(sid) {
  return log.entries
    .filter((e) => e.method === "session/update" && e.params.sessionId === sid)
    .map((e) => e.params.update);
}

try {
  await app.connectWith(await stream(), async (ctx) => {
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
      await log.waitFor(
        (e) => e.method === "session/update" && e.params.sessionId === sid && e.params.update.sessionUpdate === "state_update" && e.params.update.state === "idle",
        "state_update idle",
      );
      const turn = updates(sid).slice(from);
      const kinds = [...new Set(turn.map((u) => u.sessionUpdate))];
      const words = turn
        .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
        .map((u) => u.content.text)
        .join("");
      if (words !== "sdk echo: hello from v2") throw new Error(`updates ${kinds.join(", ")}; text ${JSON.stringify(words)}`);
      return `messageId ${answer.messageId}; ${turn.length} updates: ${kinds.join(", ")}`;
    });
  });
} catch (error) {
  process.stdout.write(`${JSON.stringify({ client, transport, check: "connection", ok: false, detail: describe(error) })}\n`);
}
process.exit(results.every((r) => r.ok) ? 0 : 1);
