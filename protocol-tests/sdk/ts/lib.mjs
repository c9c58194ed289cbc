// Shared by the TypeScript SDK client scripts: the SDK loaded from the
// cache setup.sh filled (MAIA_SDK_CLIENTS, default ~/.cache/maia-sdk-clients),
// the daemon's address and token from the environment, and one JSON line
// per check on stdout: {client, transport, check, ok, detail}.
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const cache = process.env.MAIA_SDK_CLIENTS || join(homedir(), ".cache", "maia-sdk-clients");
const requireFromCache = createRequire(join(cache, "node", "package.json"));

/** Imports `specifier` (a package export) from the cache's node_modules. */
export async function sdk(specifier) {
  return import(pathToFileURL(requireFromCache.resolve(specifier)).href);
}

/** npm `ws` (CommonJS: its exports are the default import's). */
export async function wsModule() {
  const ws = await sdk("ws");
  return ws.default ?? ws;
}

/** `--name value` from the command line, else `fallback`. */
export function arg(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

export function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
}

/** The daemon's `/acp` URL for `transport` ("ws" or "http"). */
export function daemonUrl(transport) {
  const http = env("MAIA_URL"); // http://127.0.0.1:PORT/acp
  return transport === "ws" ? http.replace(/^http/, "ws") : http;
}

/** Resolves with `promise`, or rejects after `ms` naming `what`. */
export function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Prints one check's line; `run` returns the detail or throws. */
export function reporter(client, transport) {
  const results = [];
  async function check(name, run, ms = 30000) {
    let line;
    try {
      const detail = await within(ms, name, Promise.resolve().then(run));
      line = { client, transport, check: name, ok: true, detail: detail ?? "" };
    } catch (error) {
      line = { client, transport, check: name, ok: false, detail: describe(error) };
    }
    results.push(line);
    process.stdout.write(`${JSON.stringify(line)}\n`);
    return line.ok;
  }
  return { check, results };
}

export function describe(error) {
  if (error instanceof Error) {
    const data = error.data === undefined ? "" : ` ${JSON.stringify(error.data)}`;
    const code = error.code === undefined ? "" : ` (code ${error.code})`;
    return `${error.message}${code}${data}`.slice(0, 2000);
  }
  return JSON.stringify(error)?.slice(0, 2000) ?? String(error);
}

/** Every message a client saw, with waiting on a predicate. */
export class Log {
  constructor() {
    this.entries = [];
    this.waiters = [];
  }
  push(entry) {
    this.entries.push(entry);
    for (const waiter of [...this.waiters]) {
      if (waiter.predicate(entry)) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve(entry);
      }
    }
  }
  /** The first entry (already seen or to come) that `predicate` holds for. */
  waitFor(predicate, what, ms = 20000) {
    const seen = this.entries.find(predicate);
    if (seen) {
      return Promise.resolve(seen);
    }
    return within(ms, what, new Promise((resolve) => this.waiters.push({ predicate, resolve })));
  }
  since(index) {
    return this.entries.slice(index);
  }
}

/** The text of the agent's message chunks among `entries` (session/update). */
export function agentText(entries, sessionId) {
  return entries
    .filter((e) => e.method === "session/update" && e.params.sessionId === sessionId)
    .map((e) => e.params.update)
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
    .map((u) => u.content.text)
    .join("");
}
