"""TUI latency: startup to first frame, and keystroke to screen while reasoning streams in.

    python bench/tui_latency.py [--tokens-per-s 400] [--presses 40] [--size 160x48]

Runs the real WarpsmithApp (scripted agent, canned verdicts, auto decisions) under Textual's
headless driver. "First frame": from interpreter start (before importing textual) to the first
painted screen. "Keystroke to screen": from posting a key (`v`, which re-renders the diff pane)
to the next painted frame after its action ran, while the agent streams Markdown reasoning at
the given rate (tokens counted as 4 characters).
"""
from __future__ import annotations

import time

T_PROCESS = time.perf_counter()  # before the heavy imports: startup counts them

import argparse  # noqa: E402
import asyncio  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PARAGRAPH = (
    "The incumbent loads each row in `BLOCK`-wide chunks and keeps a running max and sum in fp32. "
    "On the long rows the loop runs 128 times per pass, and each iteration waits on its load: "
    "**the loads are serial**. Pipelining them with `num_stages` would overlap the next chunk's "
    "load with this chunk's math.\n\n- short rows waste lanes\n- long rows are bandwidth bound\n\n"
    "```python\nx = tl.load(x_row + cols, mask=cols < n_cols, other=-float('inf'))\n```\n\n"
)


def write_script(folder: Path, chars: int) -> Path:
    from harness.authoring.tasks import load_task
    from tui.testing import make_script_dir

    make_script_dir(folder, load_task("softmax"))
    (folder / "01_block2048.md").write_text("## First\n\nA quick first try.\n")
    text = "".join(f"### Step {i}\n\n{PARAGRAPH}" for i in range(chars // len(PARAGRAPH) + 1))
    (folder / "02_warps2.md").write_text(text)
    return folder


class PacedAgent:
    """The script agent's candidates, with reasoning sent on a wall-clock schedule: a late
    thread catches up with a bigger chunk, as an HTTP stream's buffered tokens would."""

    name = "script"

    def __init__(self, folder: Path, tokens_per_s: float):
        from harness.agents.script import ScriptAgent

        self.inner = ScriptAgent(folder, chunk_chars=10**9)  # whole .md at once; paced below
        self.model = "paced"
        self.chars_per_s = tokens_per_s * 4

    def propose(self, ctx):
        from harness.agents.base import ReasoningChunk

        for item in self.inner.propose(ctx):
            if not isinstance(item, ReasoningChunk):
                yield item
                continue
            # The inner agent yields its .md in pieces; pace them by the clock.
            text, sent, t0 = item.text, 0, time.perf_counter()
            while sent < len(text) and not ctx.cancel.is_set():
                due = min(len(text), int((time.perf_counter() - t0) * self.chars_per_s))
                if due > sent:
                    yield ReasoningChunk(text[sent:due])
                    sent = due
                time.sleep(0.02)


async def measure(args: argparse.Namespace) -> dict:
    from textual import events

    from tui.app import LoopEvent
    from tui.testing import make_app

    from harness import events as ev

    w, h = (int(x) for x in args.size.split("x"))
    stream_s = args.presses * 0.5 + 20  # outlasts the presses even when frames are slow
    tmp = Path(tempfile.mkdtemp(prefix="tui-latency-"))
    script = write_script(tmp / "script", int(stream_s * args.tokens_per_s * 4))
    app = make_app(tmp, script_dir=script, auto=True, iterations=2, chunk_chars=10**9,
                   agent_factory=lambda folder: PacedAgent(folder, args.tokens_per_s))
    first_frame: list[float] = []
    streamed: list[tuple[float, int]] = []

    def hook(m) -> None:
        if isinstance(m, LoopEvent) and isinstance(m.event, ev.Reasoning):
            streamed.append((time.perf_counter(), len(m.event.text)))

    latencies: list[float] = []
    t_app = time.perf_counter()  # imports and the task (torch, via its reference) are loaded
    async with app.run_test(size=(w, h), message_hook=hook) as pilot:
        # run_test returns once the app is running; the next refresh paints the first frame.
        app.call_after_refresh(lambda: first_frame.append(time.perf_counter()))
        while not first_frame:
            await asyncio.sleep(0.005)
        # Wait for the long stream of iteration 2 to be under way (candidate 1 is on screen).
        while not (app.state.candidate and app.state.iteration == 2 and len(streamed) > 20):
            await asyncio.sleep(0.01)
        screen = app.run_screen
        orig_split = screen.action_split
        pending: dict[str, float] = {}

        async def split() -> None:
            await orig_split()
            t0 = pending.pop("t0")
            app.call_after_refresh(lambda: latencies.append(time.perf_counter() - t0))

        screen.action_split = split  # type: ignore[method-assign]
        rng = random.Random(0)
        t_start = time.perf_counter()
        for _ in range(args.presses):
            await asyncio.sleep(0.1 + rng.random() * 0.2)
            pending["t0"] = time.perf_counter()
            app.post_message(events.Key("v", "v"))
            n = len(latencies)
            while len(latencies) == n:
                await asyncio.sleep(0.001)
        t_end = time.perf_counter()
        still_streaming = app.state.iteration == 2 and app.state.phase == "proposing"
        app.exit()
    window = [c for t, c in streamed if t_start <= t <= t_end]
    return {
        "first_frame_ms": (first_frame[0] - T_PROCESS) * 1000,
        "app_first_frame_ms": (first_frame[0] - t_app) * 1000,
        "latencies_ms": [x * 1000 for x in latencies],
        "tokens_per_s": sum(window) / 4 / (t_end - t_start),
        "still_streaming": still_streaming,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens-per-s", type=float, default=400.0, help="agent streaming rate (4 chars a token)")
    p.add_argument("--presses", type=int, default=40)
    p.add_argument("--size", default="160x48", help="terminal size, COLSxROWS")
    args = p.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")
    r = asyncio.run(measure(args))
    lat = sorted(r["latencies_ms"])
    p95 = lat[max(0, int(round(0.95 * len(lat))) - 1)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"terminal {args.size}, textual headless driver, {os.cpu_count()} CPUs, load average {load:.1f}")
    print(f"startup to first frame: {r['first_frame_ms']:.0f} ms from interpreter start (imports and the "
          f"task's torch included), {r['app_first_frame_ms']:.0f} ms from starting the app")
    print(f"streaming while measuring: {r['tokens_per_s']:.0f} tokens/s received by the UI "
          f"(asked {args.tokens_per_s:.0f}){'' if r['still_streaming'] else ' (stream ended early)'}")
    print(f"keystroke to screen ({len(lat)} presses of `v`): median {statistics.median(lat):.1f} ms, "
          f"p95 {p95:.1f} ms, max {lat[-1]:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
