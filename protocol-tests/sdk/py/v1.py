"""The Python SDK (agent-client-protocol 0.12.1) as an ACP v1 client of
`maia serve`, over `acp.ws` or `acp.http`.

    python v1.py --transport ws|http --phase live|saved --state FILE

Environment: MAIA_URL (http://HOST:PORT/acp), MAIA_TOKEN, MAIA_CWD. The same
checks as ts/v1.mjs, against the same scripted model (protocol-tests/
remote_sdk.rs): phase `live` on a running daemon, writing the session to
load into FILE; phase `saved` after the test restarted the daemon. Methods
the SDK has no call for (`session/delete`, `session/set_title`) go through
its connection's `send_request`, `_session/queue` through `ext_method`, as
the SDK's users send them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acp  # noqa: E402
import acp.http  # noqa: E402
import acp.ws  # noqa: E402
from common import Client, Log, Reporter, agent_text, arg, daemon_url, describe, env, text  # noqa: E402

TRANSPORT = arg("transport", "ws")
PHASE = arg("phase", "live")
STATE = arg("state", "")
CWD = env("MAIA_CWD")
HEADERS = {"Authorization": f"Bearer {env('MAIA_TOKEN')}"}
CLIENT = "py"
report = Reporter(CLIENT, TRANSPORT)


async def transport() -> Any:
    if TRANSPORT == "ws":
        return await acp.ws.create_websocket_stream(daemon_url("ws"), headers=HEADERS)
    return acp.http.create_http_stream(daemon_url("http"), headers=HEADERS)


async def connect() -> tuple[Any, Log, Client]:
    log = Log()
    client = Client(log)
    conn = acp.connect_to_agent(client, await transport())
    conn._conn.add_observer(log.observe)
    return conn, log, client


async def initialize(conn: Any) -> Any:
    return await conn.initialize(protocol_version=1, client_info=acp.schema.Implementation(name="maia-sdk-check", version="1"))


async def live() -> None:
    conn, log, client = await connect()
    sid: str | None = None
    other: str | None = None
    file = f"{CLIENT}-{TRANSPORT}.txt"
    try:

        async def init() -> str:
            answer = await initialize(conn)
            if answer.protocol_version != 1:
                raise RuntimeError(f"protocolVersion {answer.protocol_version}")
            if not answer.agent_capabilities.load_session:
                raise RuntimeError("no loadSession capability")
            return f"protocolVersion 1, agent {answer.agent_info.name if answer.agent_info else '?'}"

        if not await report.check("initialize", init):
            return

        async def new() -> str:
            nonlocal sid
            made = await conn.new_session(cwd=CWD, mcp_servers=[])
            sid = made.session_id
            return sid

        if not await report.check("session/new", new):
            return
        assert sid is not None

        async def prompt_tool() -> str:
            start = len(log.entries)
            answer = await conn.prompt(session_id=sid, prompt=text(f"sdk:tool {file}"))
            if answer.stop_reason != "end_turn":
                raise RuntimeError(f"stopReason {answer.stop_reason}")
            if len(client.permissions) != 1:
                raise RuntimeError(f"{len(client.permissions)} permission requests")
            updates = [e for e in log.entries[start:] if e["method"] == "session/update"]
            calls = [e for e in updates if e["update"].session_update == "tool_call"]
            if not calls:
                raise RuntimeError("no tool_call update")
            words = agent_text(updates, sid)
            if f"wrote {file}" not in words:
                raise RuntimeError(f"agent text {words!r}")
            if not os.path.exists(os.path.join(CWD, file)):
                raise RuntimeError(f"{file} was not written")
            return f"{len(updates)} updates, tool {calls[0]['update'].title}, permission answered, {file} written"

        await report.check("prompt: streamed, a tool call, a permission", prompt_tool)

        async def cancel() -> str:
            start = len(log.entries)
            answered = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("sdk:slow")))
            await log.wait_for(
                lambda e: e in log.entries[start:]
                and e["method"] == "session/update"
                and e["update"].session_update == "agent_message_chunk",
                "the slow answer's first words",
            )
            await conn.cancel(session_id=sid)
            answer = await answered
            if answer.stop_reason != "cancelled":
                raise RuntimeError(f"stopReason {answer.stop_reason}")
            return "stopReason cancelled"

        await report.check("cancel", cancel)

        async def listed() -> str:
            answer = await conn.list_sessions()
            found = [s for s in answer.sessions if s.session_id == sid]
            if not found:
                raise RuntimeError(f"{sid} not in {[s.session_id for s in answer.sessions]}")
            return f"{len(answer.sessions)} sessions, this one in {found[0].cwd}"

        await report.check("session/list", listed)

        async def load_live() -> str:
            second, second_log, _ = await connect()
            try:
                await initialize(second)
                answer = await second.load_session(cwd=CWD, session_id=sid, mcp_servers=[])
                replayed = second_log.text_before_answer("session/load", sid)
                if f"wrote {file}" not in replayed:
                    raise RuntimeError(f"replay {replayed[:300]!r}")
                seq = ((answer.field_meta or {}).get("maia") or {}).get("seq") if answer else None
                return f"replayed {len(second_log.entries)} messages before the answer (seq {seq})"
            finally:
                await second.close()

        await report.check("session/load of a live session (a second client)", load_live)

        title = f"sdk {CLIENT} {TRANSPORT}"

        async def set_title() -> str:
            await conn._conn.send_request("session/set_title", {"sessionId": sid, "title": title})
            answer = await conn.list_sessions()
            found = [s for s in answer.sessions if s.session_id == sid]
            if not found or found[0].title != title:
                raise RuntimeError(f"title {found[0].title if found else None}")
            return f'listed as "{title}"'

        await report.check("session/set_title", set_title)

        async def queue() -> str:
            added = await conn.ext_method(
                "session/queue",
                {"sessionId": sid, "action": "add", "input": [{"type": "text", "text": "sdk queued"}], "clientUserMessageId": "q1"},
            )
            qid = ((added or {}).get("result") or {}).get("queuedSubmission", {}).get("id")
            if not qid:
                raise RuntimeError(f"add answered {added}")
            listing = await conn.ext_method("session/queue", {"sessionId": sid, "action": "list"})
            if not any(q["id"] == qid for q in listing["result"]["data"]):
                raise RuntimeError(f"list {listing}")
            await conn.ext_method("session/queue", {"sessionId": sid, "action": "start"})
            await log.wait_for(
                lambda e: e["method"] == "_session/queue/turn"
                and (e["params"].get("turn") or {}).get("queuedSubmissionId") == qid
                and e["params"]["turn"].get("status") == "completed",
                "the queued turn's end",
            )
            if "sdk echo: sdk queued" not in agent_text(log.entries, sid):
                raise RuntimeError("the queued turn's answer did not stream")
            return f"added {qid}, listed, started, its turn completed"

        await report.check("_session/queue", queue)

        async def close() -> str:
            nonlocal other
            made = await conn.new_session(cwd=CWD, mcp_servers=[])
            other = made.session_id
            await conn.close_session(session_id=other)
            return f"closed {other}"

        await report.check("session/close", close)

        async def delete() -> str:
            if other is None:
                raise RuntimeError("no session to delete")
            await conn._conn.send_request("session/delete", {"sessionId": other})
            answer = await conn.list_sessions()
            if any(s.session_id == other for s in answer.sessions):
                raise RuntimeError("still listed")
            return f"deleted {other}"

        await report.check("session/delete", delete)
    finally:
        await conn.close()
        if STATE and sid:
            with open(STATE, "w", encoding="utf-8") as out:
                json.dump({"sessionId": sid}, out)


async def saved() -> None:
    with open(STATE, encoding="utf-8") as state:
        sid = json.load(state)["sessionId"]
    file = f"{CLIENT}-{TRANSPORT}.txt"
    conn, log, _ = await connect()
    try:
        await initialize(conn)

        async def load() -> str:
            answer = await conn.load_session(cwd=CWD, session_id=sid, mcp_servers=[])
            replayed = log.text_before_answer("session/load", sid)
            if f"wrote {file}" not in replayed:
                raise RuntimeError(f"replay {replayed[:300]!r}")
            seq = ((answer.field_meta or {}).get("maia") or {}).get("seq") if answer else None
            return f"replayed {len(log.entries)} messages before the answer (seq {seq})"

        await report.check("session/load of a saved session (after a restart)", load)

        async def prompt() -> str:
            start = len(log.entries)
            answer = await conn.prompt(session_id=sid, prompt=text("after the restart"))
            if answer.stop_reason != "end_turn":
                raise RuntimeError(f"stopReason {answer.stop_reason}")
            words = agent_text(log.entries[start:], sid)
            if "sdk echo: after the restart" not in words:
                raise RuntimeError(f"agent text {words!r}")
            return "answered, streamed"

        await report.check("prompt after loading a saved session", prompt)
    finally:
        await conn.close()


async def main() -> None:
    try:
        await (saved() if PHASE == "saved" else live())
    except BaseException as error:  # noqa: BLE001
        report._line("connection", False, describe(error))


asyncio.run(main())
sys.exit(0 if report.all_ok() else 1)
