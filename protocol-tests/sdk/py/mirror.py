"""`acpremote mirror` (acpremote 1.10.0) in front of `maia serve`: the
daemon's WebSocket turned into a local stdio agent, driven by the Python
SDK's stdio client (agent-client-protocol 0.12.1), as an editor that only
spawns stdio agents would use it.

    python mirror.py

Environment: MAIA_URL (http://HOST:PORT/acp), MAIA_TOKEN (handed to the
mirror by `--token-env`, so it is not on a command line), MAIA_CWD. Checks:
initialize, session/new, a prompt with a tool call and a permission,
`_session/queue` (an extension method through the mirror). One
JSON line per check on stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acp  # noqa: E402
from common import Client, Log, Reporter, agent_text, daemon_url, describe, env, text  # noqa: E402

CWD = env("MAIA_CWD")
report = Reporter("acpremote", "ws")


async def main() -> None:
    mirror = os.path.join(os.path.dirname(sys.executable), "acpremote")
    proc = await asyncio.create_subprocess_exec(
        mirror,
        "mirror",
        daemon_url("ws"),
        "--token-env",
        "MAIA_TOKEN",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "MAIA_TOKEN": env("MAIA_TOKEN")},
    )
    log = Log()
    client = Client(log)
    conn = acp.connect_to_agent(client, proc.stdin, proc.stdout)
    try:

        async def init() -> str:
            answer = await conn.initialize(
                protocol_version=1, client_info=acp.schema.Implementation(name="maia-sdk-check", version="1")
            )
            if answer.protocol_version != 1:
                raise RuntimeError(f"protocolVersion {answer.protocol_version}")
            return f"protocolVersion 1, agent {answer.agent_info.name if answer.agent_info else '?'}"

        if not await report.check("initialize", init):
            return
        sid = ""

        async def new() -> str:
            nonlocal sid
            made = await conn.new_session(cwd=CWD, mcp_servers=[])
            sid = made.session_id
            return sid

        if not await report.check("session/new", new):
            return
        file = "acpremote-ws.txt"

        async def prompt() -> str:
            answer = await conn.prompt(session_id=sid, prompt=text(f"sdk:tool {file}"))
            if answer.stop_reason != "end_turn":
                raise RuntimeError(f"stopReason {answer.stop_reason}")
            if len(client.permissions) != 1:
                raise RuntimeError(f"{len(client.permissions)} permission requests")
            updates = [e for e in log.entries if e["method"] == "session/update"]
            if not any(e["update"].session_update == "tool_call" for e in updates):
                raise RuntimeError("no tool_call update")
            words = agent_text(updates, sid)
            if f"wrote {file}" not in words:
                raise RuntimeError(f"agent text {words!r}")
            if not os.path.exists(os.path.join(CWD, file)):
                raise RuntimeError(f"{file} was not written")
            return f"{len(updates)} updates, permission answered, {file} written"

        await report.check("prompt: streamed, a tool call, a permission", prompt)

        async def queue() -> str:
            listing = await conn.ext_method("session/queue", {"sessionId": sid, "action": "list"})
            if listing.get("status") != "ok" or listing["result"]["data"] != []:
                raise RuntimeError(f"list answered {listing}")
            return "an extension method passes the mirror: list answered an empty queue"

        await report.check("_session/queue", queue)
    finally:
        await conn.close()
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


try:
    asyncio.run(main())
except BaseException as error:  # noqa: BLE001
    report._line("connection", False, describe(error))
sys.exit(0 if report.all_ok() else 1)
