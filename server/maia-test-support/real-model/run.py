"""The real-model task suite: runs each task of tasks/ with each agent
against one OpenAI-compatible server (serve.sh), checks the result, and
prints a Markdown table: task, success, wall time, model requests,
prompt/completion tokens and the first request's size.

Every model request goes through a recording proxy here, so the numbers are
counted the same way for every agent.

usage: run.py --server URL --model ALIAS [--maia LABEL=BIN[@SYSTEM.md][%SETTINGS_JSON]]...
              [--aider PATH] [--tasks a,b] [--timeout S] [--json OUT]
"""

import argparse
import http.client
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent


class Recorder:
    """What the model was asked while one task ran."""

    def __init__(self, record=None):
        self.lock = threading.Lock()
        self.record = open(record, "a") if record else None
        self.label = ""
        self.reset()

    def reset(self):
        with self.lock:
            self.requests = []  # [bytes, prompt_tokens, completion_tokens]

    def add(self, size):
        with self.lock:
            self.requests.append([size, 0, 0])
            return len(self.requests) - 1

    def usage(self, index, prompt, completion):
        with self.lock:
            self.requests[index][1] = prompt
            self.requests[index][2] = completion

    def reply(self, content, tool_calls, finish):
        """Keeps a reply as the model wrote it (--record), for fixtures."""
        if self.record:
            with self.lock:
                self.record.write(json.dumps({"task": self.label, "content": content,
                                              "tool_calls": tool_calls, "finish_reason": finish}) + "\n")
                self.record.flush()


def make_proxy(upstream, recorder):
    target = urllib.parse.urlsplit(upstream)

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self, body):
            index = None
            if body and self.path.endswith("/chat/completions"):
                try:
                    request = json.loads(body)
                    if request.get("stream"):
                        # Usage in the stream, for every client alike.
                        request["stream_options"] = {"include_usage": True}
                        body = json.dumps(request).encode()
                except ValueError:
                    pass
                index = recorder.add(len(body))
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=3600)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection", "accept-encoding")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            response = conn.getresponse()
            self.send_response(response.status)
            for k, v in response.getheaders():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            pending = b""
            self.reply = {"content": "", "tool_calls": [], "finish": None}
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                if index is not None:
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        self.note_usage(index, line)
            if index is not None:
                self.note_usage(index, pending)
                recorder.reply(self.reply["content"], self.reply["tool_calls"], self.reply["finish"])
            self.wfile.write(b"0\r\n\r\n")
            conn.close()

        def note_usage(self, index, line):
            line = line.strip()
            if line.startswith(b"data:"):
                line = line[5:].strip()
            if not line.startswith(b"{"):
                return
            try:
                chunk = json.loads(line)
                usage = chunk.get("usage")
            except ValueError:
                return
            for choice in chunk.get("choices") or []:
                part = choice.get("delta") or choice.get("message") or {}
                self.reply["content"] += part.get("content") or ""
                for call in part.get("tool_calls") or []:
                    self.reply["tool_calls"].append(call)
                if choice.get("finish_reason"):
                    self.reply["finish"] = choice["finish_reason"]
            if usage:
                recorder.usage(index, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))

        def do_GET(self):
            self.forward(b"")

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            self.forward(self.rfile.read(length))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def prepare(task, root):
    work = root / task.name
    shutil.copytree(task / "repo", work)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(git[:1] + ["init", "-q"], cwd=work, check=True)
    subprocess.run(git + ["add", "-A"], cwd=work, check=True)
    subprocess.run(git + ["commit", "-qm", "start"], cwd=work, check=True)
    return work


def run_maia(binary, system_md, extra, work, prompt, proxy_url, model, timeout, home):
    settings = home / ".maia"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "settings.json").write_text(json.dumps({
        "LiteLLM_URL": proxy_url,
        "LiteLLM_API_Key": "sk-local",
        "model": model,
        # The same bound for every MAIA variant, so a run that loops ends.
        "max_turn_requests": 8,
        **extra,
    }))
    if system_md:
        (work / ".maia").mkdir(exist_ok=True)
        shutil.copy(system_md, work / ".maia" / "SYSTEM.md")
    env = dict(os.environ, HOME=str(home), MAIA_LOG="warn")
    command = [binary, "exec", "--json", "--mode", "accept-edits", "--allow", "Bash", prompt]
    r = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    answer, reason = [], None
    for line in r.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "text":
            answer.append(event.get("text", ""))
        elif event.get("type") == "turn_ended":
            reason = event.get("stop_reason")
    return r.returncode, "".join(answer), reason, r.stderr


def run_aider(aider, work, prompt, proxy_url, model, timeout, home):
    env = dict(os.environ, HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True",
               OPENAI_API_KEY="sk-local", AIDER_ANALYTICS="false")
    command = [aider, "--model", f"openai/{model}", "--openai-api-base", f"{proxy_url}/v1",
               "--yes-always", "--no-auto-commits", "--no-check-update", "--no-show-model-warnings",
               "--no-analytics", "--no-pretty", "--no-stream", "--message", prompt]
    r = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, None, r.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--maia", action="append", default=[], help="LABEL=BIN[@SYSTEM.md]")
    parser.add_argument("--aider")
    parser.add_argument("--tasks", default="")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--json")
    parser.add_argument("--keep", help="keep the work folders here")
    parser.add_argument("--record", help="append every reply, as written, to this JSONL file")
    args = parser.parse_args()

    tasks = sorted(p for p in (HERE / "tasks").iterdir() if (p / "repo").is_dir())
    if args.tasks:
        wanted = args.tasks.split(",")
        tasks = [t for t in tasks if t.name in wanted]
    agents = []
    for spec in args.maia:
        label, _, rest = spec.partition("=")
        rest, _, extra = rest.partition("%")
        binary, _, system_md = rest.partition("@")
        agents.append((label, "maia", binary, (system_md or None, json.loads(extra or "{}"))))
    if args.aider:
        agents.append(("aider", "aider", args.aider, None))

    recorder = Recorder(args.record)
    proxy = make_proxy(args.server, recorder)
    proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
    rows = []
    root = pathlib.Path(args.keep) if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="maia-suite-"))
    for label, kind, binary, system_md in agents:
        for task in tasks:
            base = root / label
            base.mkdir(parents=True, exist_ok=True)
            home = base / f"{task.name}-home"
            work = prepare(task, base)
            prompt = (task / "prompt.txt").read_text().strip()
            recorder.reset()
            recorder.label = f"{label}/{task.name}"
            start = time.monotonic()
            try:
                if kind == "maia":
                    code, answer, reason, stderr = run_maia(binary, system_md[0], system_md[1], work, prompt, proxy_url, args.model, args.timeout, home)
                else:
                    code, answer, reason, stderr = run_aider(binary, work, prompt, proxy_url, args.model, args.timeout, home)
            except subprocess.TimeoutExpired:
                code, answer, reason, stderr = None, "", "timeout", ""
            wall = time.monotonic() - start
            (base / f"{task.name}.answer.txt").write_text(answer)
            (base / f"{task.name}.stderr.txt").write_text(stderr)
            check = subprocess.run([sys.executable, str(task / "check.py"), str(base / f"{task.name}.answer.txt")],
                                   cwd=work, capture_output=True, text=True)
            ok = check.returncode == 0
            why = "" if ok else (check.stderr.strip().splitlines() or ["?"])[-1][:160]
            reqs = list(recorder.requests)
            row = {
                "agent": label, "task": task.name, "success": ok, "why": why,
                "exit_code": code, "stop_reason": reason, "wall_s": round(wall, 1),
                "requests": len(reqs),
                "prompt_tokens": sum(r[1] for r in reqs),
                "completion_tokens": sum(r[2] for r in reqs),
                "first_request_bytes": reqs[0][0] if reqs else 0,
                "first_request_tokens": reqs[0][1] if reqs else 0,
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    proxy.shutdown()
    print("| agent | task | success | exit | wall s | requests | prompt tok | completion tok | 1st request (bytes / tok) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['agent']} | {r['task']} | {'yes' if r['success'] else 'no'} | {r['exit_code']} | {r['wall_s']} | "
              f"{r['requests']} | {r['prompt_tokens']} | {r['completion_tokens']} | {r['first_request_bytes']} / {r['first_request_tokens']} |")
    for label in dict.fromkeys(r["agent"] for r in rows):
        mine = [r for r in rows if r["agent"] == label]
        print(f"\n{label}: {sum(r['success'] for r in mine)}/{len(mine)} tasks, "
              f"{sum(r['wall_s'] for r in mine):.0f} s, {sum(r['requests'] for r in mine)} requests")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    failed = [r for r in rows if not r["success"]]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
