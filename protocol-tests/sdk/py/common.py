"""Shared by the Python SDK client scripts: the daemon's address and token
from the environment, one JSON line per check on stdout ({client, transport,
check, ok, detail}), and an ACP client that logs what it is sent and allows
every permission it is asked."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Awaitable, Callable

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set")
    return value


def arg(name: str, fallback: str) -> str:
    argv = sys.argv
    flag = f"--{name}"
    if flag in argv and argv.index(flag) + 1 < len(argv):
        return argv[argv.index(flag) + 1]
    return fallback


def daemon_url(transport: str) -> str:
    url = env("MAIA_URL")  # http://HOST:PORT/acp
    return "ws" + url[len("http") :] if transport == "ws" else url


def describe(error: BaseException) -> str:
    data = getattr(error, "data", None)
    text = f"{type(error).__name__}: {error}"
    if data is not None:
        text += f" {json.dumps(data, default=str)}"
    return text[:2000]


class Reporter:
    def __init__(self, client: str, transport: str) -> None:
        self.client = client
        self.transport = transport
        self.results: list[dict[str, Any]] = []

    def _line(self, name: str, ok: bool, detail: str) -> None:
        line = {"client": self.client, "transport": self.transport, "check": name, "ok": ok, "detail": detail}
        self.results.append(line)
        print(json.dumps(line), flush=True)

    async def check(self, name: str, run: Callable[[], Awaitable[str | None]], seconds: float = 30) -> bool:
        try:
            detail = await asyncio.wait_for(run(), seconds)
            self._line(name, True, detail or "")
            return True
        except asyncio.TimeoutError:
            self._line(name, False, f"timed out after {seconds} s")
        except BaseException as error:  # noqa: BLE001 - every failure is a check's detail
            self._line(name, False, describe(error))
        return False

    def all_ok(self) -> bool:
        return all(r["ok"] for r in self.results)


class Log:
    """Every message the client was sent, with waiting on a predicate."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        # Every message as it crossed the wire, in order (`observe`): the
        # SDK hands each notification to its own task and resolves a
        # response at once, so `entries` may lag behind an answer.
        self.wire: list[tuple[str, dict[str, Any]]] = []
        self._changed = asyncio.Event()

    def observe(self, event: Any) -> None:
        """A stream observer (`Connection.add_observer`)."""
        self.wire.append((str(event.direction.value), event.message))

    def text_before_answer(self, method: str, session_id: str) -> str:
        """The agent text of `session_id` that arrived before the answer to
        the last `method` request sent, read from the wire in order."""
        sent = [m for d, m in self.wire if d == "outgoing" and m.get("method") == method]
        if not sent:
            raise RuntimeError(f"no {method} was sent")
        answer_id = sent[-1].get("id")
        words = []
        for direction, message in self.wire:
            if direction != "incoming":
                continue
            if "method" not in message and message.get("id") == answer_id:
                return "".join(words)
            params = message.get("params") or {}
            update = params.get("update") or {}
            if (
                message.get("method") == "session/update"
                and params.get("sessionId") == session_id
                and update.get("sessionUpdate") == "agent_message_chunk"
            ):
                words.append((update.get("content") or {}).get("text", ""))
        raise RuntimeError(f"the answer to {method} is not on the wire")

    def push(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        self._changed.set()

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], what: str, seconds: float = 20) -> dict[str, Any]:
        async def scan() -> dict[str, Any]:
            seen = 0
            while True:
                for entry in self.entries[seen:]:
                    if predicate(entry):
                        return entry
                seen = len(self.entries)
                self._changed.clear()
                await self._changed.wait()

        try:
            return await asyncio.wait_for(scan(), seconds)
        except asyncio.TimeoutError:
            raise TimeoutError(f"timed out after {seconds} s waiting for {what}") from None


def agent_text(entries: list[dict[str, Any]], session_id: str) -> str:
    words = []
    for e in entries:
        if e["method"] != "session/update" or e["sessionId"] != session_id:
            continue
        update = e["update"]
        if getattr(update, "session_update", None) == "agent_message_chunk":
            content = update.content
            if getattr(content, "type", None) == "text":
                words.append(content.text)
    return "".join(words)


class Client:
    """An ACP client (the SDK's `Client` protocol): logs, allows."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.permissions: list[Any] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.permissions.append(tool_call)
        self.log.push({"method": "session/request_permission", "sessionId": session_id})
        allow = next((o for o in options if o.kind == "allow_once"), None) or next(
            o for o in options if o.kind.startswith("allow")
        )
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.log.push({"method": "session/update", "sessionId": session_id, "update": update})

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        name = method if method.startswith("_") else f"_{method}"
        self.log.push({"method": name, "params": params})

    def on_connect(self, conn: Any) -> None:
        pass


def text(words: str) -> list[Any]:
    return [acp.text_block(words)]
