"""`warpsmith serve`: the TUI in a real headless browser through textual-serve.

The browser test starts `warpsmith serve` on a free loopback port, opens the page in headless
Chromium driven over the DevTools protocol, and waits for textual-serve's page to get the app's
first bytes over its websocket (the page marks <body> `-first-byte`), then for the served app's
session to start on disk, and takes a screenshot. Chromium resolves no host but 127.0.0.1 here:
the page asks for a web font, and nothing may leave the machine.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from warpsmith.commands.serve import served_args, tunnel_hint

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"),
                             shutil.which("google-chrome")) if p), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_served_arguments_and_the_tunnel_hint():
    assert served_args([]) == (["run", "softmax"], None)
    assert served_args(["--", "run", "softmax", "--agent", "tuner"])[0] == ["run", "softmax", "--agent", "tuner"]
    assert served_args(["sessions", "resume", "X"])[0] == ["sessions", "resume", "X"]
    assert "TUI only" in served_args(["packs", "list"])[1]
    assert "--headless" in served_args(["run", "softmax", "--headless"])[1]
    assert "no-such-task" in served_args(["run", "no-such-task"])[1]
    hint = tunnel_hint("127.0.0.1", 8123)
    assert "http://127.0.0.1:8123" in hint and "ssh -N -L 8123:127.0.0.1:8123" in hint
    assert "no login" in tunnel_hint("0.0.0.0", 8123)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "warpsmith", "serve", "--", "run", "no-such-task"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no-such-task" in r.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "warpsmith", "serve", "--port", str(port)],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 2 and f"127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


async def _cdp(ws_url: str):
    import aiohttp

    session = aiohttp.ClientSession()
    ws = await session.ws_connect(ws_url, max_msg_size=0)
    counter = iter(range(1, 1 << 30))

    async def call(method: str, **params):
        mid = next(counter)
        await ws.send_json({"id": mid, "method": method, "params": params})
        async for msg in ws:
            data = json.loads(msg.data)
            if data.get("id") == mid:
                if "error" in data:
                    raise AssertionError(f"{method}: {data['error']}")
                return data.get("result", {})
        raise AssertionError("DevTools connection closed")

    return session, ws, call


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs it)")
def test_served_app_reaches_a_headless_browser(tmp_path: Path):
    port, repo = free_port(), Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "TRITON_INTERPRET": "1", "WARPSMITH_BELL": "0"}
    # One scripted candidate that the static check rejects: the app opens and asks about it, and
    # nothing heavy (no child process, no interpreter run) works behind the page.
    script = tmp_path / "script"
    script.mkdir()
    (script / "01_fallback.py").write_text('"""torch fallback"""\nimport torch\n\n\n'
                                           'def softmax(x):\n    return torch.softmax(x, -1)\n')
    server = subprocess.Popen([sys.executable, "-m", "warpsmith", "serve", "--port", str(port), "--",
                               "run", "softmax", "--iterations", "1", "--agent", f"script:{script}"],
                              cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    profile = tmp_path / "chromium-profile"
    browser = None
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("serve did not listen:\n" + (server.stdout.read() if server.stdout else ""))
                time.sleep(0.2)
        browser = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                                    "--disable-background-networking", "--disable-component-update",
                                    "--no-first-run", f"--user-data-dir={profile}",
                                    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                                    "--remote-debugging-port=0", "--window-size=1600,900", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (active.exists() and active.read_text().strip()):
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.2)
        devtools = int(active.read_text().split()[0])
        shot = asyncio.run(_drive(devtools, f"http://127.0.0.1:{port}/", tmp_path))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        for p in (browser, server):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


async def _drive(devtools: int, url: str, cwd: Path) -> Path:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{devtools}/json/list") as r:
            pages = [t for t in await r.json() if t.get("type") == "page"]
    session, ws, call = await _cdp(pages[0]["webSocketDebuggerUrl"])
    try:
        await call("Page.enable")
        await call("Page.navigate", url=url)
        deadline = time.monotonic() + 120  # the served app imports torch before its first frame
        first_byte = False
        while time.monotonic() < deadline and not first_byte:
            r = await call("Runtime.evaluate", expression="document.body && document.body.classList.contains('-first-byte')",
                           returnByValue=True)
            first_byte = bool(r.get("result", {}).get("value"))
            await asyncio.sleep(0.5)
        assert first_byte, "the page never got the app's first bytes over its websocket"
        journals = []
        while time.monotonic() < deadline and not journals:
            journals = list((cwd / ".warpsmith" / "sessions").glob("*/journal.jsonl"))
            await asyncio.sleep(0.5)
        assert journals, "the app behind the page started no session"
        kinds = [json.loads(line).get("kind") for line in journals[0].read_text().splitlines() if line.strip()]
        assert "SessionStarted" in kinds
        await asyncio.sleep(2.0)  # a frame after the session started
        data = await call("Page.captureScreenshot", format="png")
        shot = cwd / "served.png"
        shot.write_bytes(base64.b64decode(data["data"]))
        if os.environ.get("WARPSMITH_SERVE_SHOT"):  # to look at it: WARPSMITH_SERVE_SHOT=/tmp/x.png
            shutil.copy(shot, os.environ["WARPSMITH_SERVE_SHOT"])
        return shot
    finally:
        await ws.close()
        await session.close()
