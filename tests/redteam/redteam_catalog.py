"""The red-team catalog: every candidate in candidates/ documents its cheat in its docstring, with
`Expect:` (rules that must fire; "a | b" means either; "accepted" for honest variants), `Device:`
(cpu or gpu) and optionally `Task:` (default softmax), `Shapes:` (a name with a comma in double quotes), `Stages: all` (evaluated with the static stage
on, as a real evaluation is; otherwise the static stage is off so the runtime guards are what is tested) and
`Static:` (static rules that must fire on it when the static
stage runs, "a | b" for either; "none" when it gets past the static stage, so the runtime guard in
`Expect:` is the only line), and `Gap:` (why the harness can't yet reject it as expected: a known
gap, run as a strict xfail so a fix shows up). Used by test_redteam.py, test_static_layer.py and gpu_suite.py."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = Path(__file__).resolve().parent / "candidates"


@dataclass
class Cheat:
    path: Path
    doc: str
    expect: list[str]
    device: str
    shapes: list[str]
    static: list[str] | None = None  # None: not documented
    task: str = "softmax"             # the built-in task it is a candidate for
    gap: str = ""                     # a known gap: expected to fail the check (strict xfail)
    full: bool = False                # `Stages: all`: evaluated with the static stage on

    @property
    def name(self) -> str:
        return self.path.stem


def parse(path: Path) -> Cheat:
    # Bytes, leniently decoded: some cheats are about their encoding (a coding cookie on line 1,
    # bytes that are not UTF-8), and their docstring follows that comment line.
    text = path.read_bytes().decode("utf-8", "replace")
    doc = re.match(r'\s*(?:#[^\n]*\n\s*)*"""(.*?)"""', text, re.S)
    assert doc, f"{path}: every red-team candidate starts with a docstring documenting the cheat"
    body = doc.group(1)

    def field(name: str, default: str | None = None) -> str:
        m = re.search(rf"^{name}:\s*(.+)$", body, re.M)
        if not m:
            assert default is not None, f"{path}: docstring needs a '{name}:' line"
            return default
        return m.group(1).strip()

    device = field("Device", "cpu")
    task = field("Task", "softmax")
    default_shape = ("odd rows" if device == "cpu" else "4k x 4k") if task == "softmax" else None
    static = field("Static", "")
    return Cheat(path, body, [e.strip() for e in field("Expect").split(",")], device,
                 shape_names(field("Shapes", default_shape)),
                 [s.strip() for s in static.split(",")] if static else None, task=task, gap=field("Gap", ""),
                 full=field("Stages", "") == "all")


def shape_names(text: str) -> list[str]:
    """`Shapes:` names, comma-separated; a name with a comma in it is written in double quotes."""
    return [(q or p).strip() for q, p in re.findall(r'"([^"]+)"|([^,"]+)', text) if (q or p).strip()]


def all_cheats() -> list[Cheat]:
    return [parse(p) for p in sorted(CANDIDATES.glob("*.py")) if not p.name.startswith("_")]



def dsl_missing(cheat: Cheat) -> str | None:
    """Why this machine can't run the cheat's task's DSL even with a GPU (a CuTe DSL task without
    nvidia-cutlass-dsl), or None: such candidates are skipped, said so, not failed."""
    from harness.authoring.dsl_support import dsl_problem
    from harness.authoring.tasks import load_task

    return dsl_problem(load_task(CANDIDATES.parents[2] / "kernels" / cheat.task), on_gpu=True)


CHEATS = all_cheats()
# Per-cheat options: tight limits where the cheat is about limits.
OPTIONS = {"hang": {"run_timeout_s": 5}, "host_oom": {"mem_cap_gb": 2.0, "run_timeout_s": 60}}


def check(cheat: "Cheat", v: dict) -> str | None:
    """None when the verdict is what the catalog expects, else why not."""
    rules = {r["rule"] for r in v["reasons"]}
    rules |= {r[len("static:"):] for r in rules if r.startswith("static:")}  # the static stage's reasons
    if cheat.expect == ["accepted"]:
        return None if v["accepted"] and v["stage"] == "done" else f"honest variant rejected: {sorted(rules)}"
    if v["accepted"]:
        return "cheat accepted"
    missing = [e for e in cheat.expect if not rules & {alt.strip() for alt in e.split("|")}]
    if missing:
        return f"expected {cheat.expect}, got {sorted(rules)}"
    if v["recommendation"]["can_keep"] or v["recommendation"]["action"] != "revert":
        return "rejected, but the recommendation still allows keeping it"
    return None


# Evaluated once, in tests/redteam/test_sandbox.py, which inspects the host afterwards (files that did not
# land, processes that did not survive, connections that never came, credentials out of reach) and checks
# each verdict against this catalog as test_redteam.py checks the others: not a second time there.
SANDBOX_CHEATS = ("survivor_pty", "survivor_double_fork", "escape_writes", "credential_files", "network_exfil",
                  "harness_source_rewrite")
# Credentials planted in the parent's environment while the catalog runs: none may reach candidate code.
CANARIES = {"ANTHROPIC_API_KEY": "WARPSMITH_CANARY_anthropic", "MY_SERVICE_TOKEN": "WARPSMITH_CANARY_token",
            "AWS_SECRET_ACCESS_KEY": "WARPSMITH_CANARY_aws"}


def assert_verdict(cheat: "Cheat", v: dict) -> None:
    """What test_redteam.py (and test_sandbox.py for its cheats) requires of a cheat's verdict."""
    detail = "\n".join(f"{r['rule']}: {r['message'][:300]}" for r in v["reasons"]) + "\n" + v.get("output", "")[-2000:]
    problem = check(cheat, v)
    assert problem is None, f"{cheat.name}: {problem}\n{detail}"
    if cheat.expect == ["accepted"]:
        assert all(s["correct"] for s in v["shapes"])
    if cheat.name in ("slow_import", "sys_exit_import"):
        assert v["stage"] == "import"
    # A rejection on a held-out shape or hard input names it: the shape's dims, or the case.
    for r in v["reasons"]:
        if r["rule"] == "heldout-incorrect":
            failed = [h for h in v["heldout"] if h["correct"] is False]
            assert any(r["message"].startswith(f"[{h['name']}] ") for h in failed), r["message"]
            assert all(h["name"].startswith("held-out ") and h["dims"] for h in failed)
        elif r["rule"] == "hard-case-incorrect":
            failed = [h for h in v["hard_cases"] if h["correct"] is False]
            assert any(r["message"].startswith(f"[hard case {h['case']!r} on {h['shape']}") for h in failed)
    assert "WARPSMITH_CANARY" not in repr(v)
