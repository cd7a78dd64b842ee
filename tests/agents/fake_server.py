"""A small OpenAI-compatible server for tests: streams `reasoning_content` and a real Triton softmax
candidate, like vLLM or SGLang with a reasoning parser would.

    with FakeServer(modes=["tool"]) as srv:          # in-process, 127.0.0.1, a free port
        agent = make_agent(f"openai-compat:{srv.url}")

    python tests/agents/fake_server.py --modes fenced --lifetime 60   # prints the URL, then serves

Each chat request takes the next mode from `modes` (the last one repeats):
    tool      reasoning_content deltas, then a submit_kernel tool call holding the candidate
    fenced    reasoning_content deltas, then the candidate in one ```python block in the content
    notools   400 if the request offers tools (vLLM without --enable-auto-tool-choice), else fenced
    429       HTTP 429 with retry-after: 0
    garbage   prose with no code
    stall     one reasoning delta, then silence for `stall_s` (to test cancellation)
The server stops by itself after `lifetime_s`, so a test that forgets it can't leave it running.
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CANDIDATE = (Path(__file__).parent / "data" / "softmax_candidate.py").read_text()
REASONING = ["The baseline reads every row twice from HBM. ",
             "Rows of up to 4096 columns fit in registers, ",
             "so one load, max, exp2 and sum suffice; longer rows keep the online pass."]
MODEL = "fake-coder"


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class FakeServer:
    def __init__(self, modes: list[str] | None = None, lifetime_s: float = 120.0, stall_s: float = 30.0,
                 chunk_pause_s: float = 0.0, port: int = 0):
        self.modes = list(modes or ["tool"])
        self.lifetime_s, self.stall_s, self.chunk_pause_s = lifetime_s, stall_s, chunk_pause_s
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: pytest output stays readable
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [
                        {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                with server._lock:
                    server.requests.append(body)
                    mode = server.modes.pop(0) if len(server.modes) > 1 else server.modes[0]
                if mode == "429":
                    self._json(429, {"error": {"message": "server busy", "type": "rate_limit_exceeded"}},
                               {"retry-after": "0"})
                    return
                if mode == "notools":
                    if body.get("tools"):
                        self._json(400, {"error": {"message": '"auto" tool choice requires '
                                                              "--enable-auto-tool-choice", "type": "BadRequestError"}})
                        return
                    mode = "fenced"
                self._stream(mode, body)

            def _json(self, status: int, obj: dict, headers: dict | None = None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _send(self, obj) -> None:
                data = obj if isinstance(obj, str) else json.dumps(obj)
                payload = f"data: {data}\n\n".encode()
                self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                self.wfile.flush()
                if server.chunk_pause_s:
                    time.sleep(server.chunk_pause_s)

            def _stream(self, mode: str, body: dict):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    self._send(_chunk({"role": "assistant", "content": ""}))
                    for r in REASONING:
                        self._send(_chunk({"reasoning_content": r}))
                        if mode == "stall":
                            time.sleep(server.stall_s)
                            return
                    finish = "stop"
                    if mode == "tool" and body.get("tools"):
                        args = json.dumps({"source": CANDIDATE,
                                           "rationale": "Read short rows once; exp2 with a log2(e) pre-scale."})
                        self._send(_chunk({"tool_calls": [{"index": 0, "id": "call_0", "type": "function",
                                                           "function": {"name": "submit_kernel", "arguments": ""}}]}))
                        for i in range(0, len(args), 400):
                            self._send(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 400]}}]}))
                        finish = "tool_calls"
                    elif mode == "garbage":
                        self._send(_chunk({"content": "I think a bigger block would help."}))
                    else:
                        text = ("Read short rows once; exp2 with a log2(e) pre-scale.\n\n```python\n"
                                + CANDIDATE + "```\n")
                        for i in range(0, len(text), 300):
                            self._send(_chunk({"content": text[i:i + 300]}))
                    self._send(_chunk({}, finish))
                    self._send({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                                "model": MODEL, "choices": [],
                                "usage": {"prompt_tokens": 2100, "completion_tokens": 1500, "total_tokens": 3600}})
                    self._send("[DONE]")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (cancelled): nothing to finish

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-openai", daemon=True)
        self._timer = threading.Timer(lifetime_s, self.stop)
        self._timer.daemon = True

    def start(self) -> "FakeServer":
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        self._timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="tool", help="comma-separated modes, the last repeats")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--lifetime", type=float, default=300.0, help="seconds before the server stops itself")
    args = ap.parse_args()
    srv = FakeServer(args.modes.split(","), lifetime_s=args.lifetime, port=args.port).start()
    print(srv.url, flush=True)
    srv._thread.join()


if __name__ == "__main__":
    main()
