"""The Python SDK (agent-client-protocol 0.12.1) holding the daemon's
narrower tokens, over `acp.ws` or `acp.http`: what an observer and a
session-limited controller may and may not do, as an SDK user would try it.

    python roles.py --transport ws|http --session SID --other SID2 --marker FILE

Environment: MAIA_URL, MAIA_CWD, MAIA_OBSERVER_TOKEN (an observer token) and
MAIA_LIMITED_TOKEN (a controller token limited to SID). SID and SID2 are
live sessions the editor opened. A refused request must come back as an
error and change nothing: no MCP server started (its start would create
FILE), no title, no queue entry, no session made.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acp  # noqa: E402
import acp.http  # noqa: E402
import acp.ws  # noqa: E402
from common import Client, Log, Reporter, arg, daemon_url, env  # noqa: E402

TRANSPORT = arg("transport", "ws")
SID = arg("session", "")
OTHER = arg("other", "")
MARKER = arg("marker", "")
CWD = env("MAIA_CWD")
report = Reporter("py-roles", TRANSPORT)


async def connect(token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if TRANSPORT == "ws":
        stream = await acp.ws.create_websocket_stream(daemon_url("ws"), headers=headers)
    else:
        stream = acp.http.create_http_stream(daemon_url("http"), headers=headers)
    return acp.connect_to_agent(Client(Log()), stream)


async def refused(what: str, call: Any) -> str:
    try:
        answer = await call
    except acp.RequestError as error:
        return f"{what}: refused {error.code}"
    raise RuntimeError(f"{what} was served: {answer!r}")


def marker_server() -> dict[str, Any]:
    return {"name": "marker", "command": "/bin/sh", "args": ["-c", f"touch '{MARKER}'"], "env": []}


async def observer() -> None:
    conn = await connect(env("MAIA_OBSERVER_TOKEN"))

    async def init() -> str:
        answer = await conn.initialize(protocol_version=1, client_info=acp.schema.Implementation(name="roles", version="1"))
        role = ((answer.field_meta or {}).get("maia") or {}).get("remote", {}).get("role")
        if role != "observer":
            raise RuntimeError(f"role {role!r}")
        return "role observer"

    if not await report.check("observer: initialize", init):
        return

    async def listing() -> str:
        listed = await conn.list_sessions()
        return f"{len(listed.sessions)} sessions"

    await report.check("observer: session/list", listing)

    async def load() -> str:
        await conn.load_session(cwd=CWD, session_id=SID, mcp_servers=[])
        return "attached"

    await report.check("observer: session/load", load)

    async def load_with_server() -> str:
        detail = await refused("load with mcpServers", conn._conn.send_request(
            "session/load", {"sessionId": SID, "cwd": CWD, "mcpServers": [marker_server()]}))
        await asyncio.sleep(0)
        if os.path.exists(MARKER):
            raise RuntimeError("the MCP server was started")
        return detail

    await report.check("observer: session/load with mcpServers refused", load_with_server)
    await report.check("observer: session/prompt refused", lambda: refused(
        "prompt", conn.prompt(session_id=SID, prompt=[acp.text_block("hi")])))
    await report.check("observer: session/set_title refused", lambda: refused(
        "set_title", conn._conn.send_request("session/set_title", {"sessionId": SID, "title": "taken"})))
    await report.check("observer: _session/queue add refused", lambda: refused(
        "queue", conn.ext_method("session/queue", {"sessionId": SID, "action": "add", "prompt": [{"type": "text", "text": "x"}]})))
    await report.check("observer: session/new refused", lambda: refused(
        "new", conn.new_session(cwd=CWD, mcp_servers=[])))
    await report.check("observer: session/fork refused", lambda: refused(
        "fork", conn._conn.send_request("session/fork", {"sessionId": SID, "cwd": CWD, "mcpServers": []})))


async def limited() -> None:
    conn = await connect(env("MAIA_LIMITED_TOKEN"))

    async def init() -> str:
        await conn.initialize(protocol_version=1, client_info=acp.schema.Implementation(name="roles", version="1"))
        return "initialized"

    if not await report.check("limited: initialize", init):
        return

    async def load() -> str:
        await conn.load_session(cwd=CWD, session_id=SID, mcp_servers=[])
        return "attached to its session"

    await report.check("limited: session/load of its session", load)
    await report.check("limited: session/load of another session refused", lambda: refused(
        "load other", conn.load_session(cwd=CWD, session_id=OTHER, mcp_servers=[])))
    await report.check("limited: session/new refused", lambda: refused(
        "new", conn.new_session(cwd=CWD, mcp_servers=[])))
    await report.check("limited: session/fork refused", lambda: refused(
        "fork", conn._conn.send_request("session/fork", {"sessionId": SID, "cwd": CWD, "mcpServers": []})))
    await report.check("limited: set_title of another session refused", lambda: refused(
        "set_title other", conn._conn.send_request("session/set_title", {"sessionId": OTHER, "title": "taken"})))


async def main() -> None:
    await observer()
    await limited()
    if not report.all_ok():
        sys.exit(1)


asyncio.run(main())
