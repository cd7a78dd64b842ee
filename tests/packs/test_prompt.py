from __future__ import annotations

import pytest

from harness.agents.base import Attempt
from harness.authoring.packs import load_pack
from harness.prompt import CHARS_PER_TOKEN, build_prompt, estimate_tokens, render_packs
from harness.authoring.tasks import load_task

TASK = load_task("softmax", check_null=False)
INCUMBENT = TASK.baseline_path.read_text()


@pytest.fixture
def packs(tmp_path, write_pack):
    hw = write_pack(tmp_path, "hw", files={"a.md": "HW-A " * 200, "b.md": "HW-B " * 200},
                    extra='applies_to = { arch = ["sm_90"] }\n[specs]\nhbm_tb_s = 4.0\nbf16_dense_tflops = 800\n')
    model = write_pack(tmp_path, "mdl", kind="model", files={"m.md": "MODEL-M " * 200})
    rules = write_pack(tmp_path, "rls", kind="rules", sources="[]", files={"r.md": "RULES-R " * 200})
    # never-do lists come from [[rule]] tables; written raw here so this test does not depend on the
    # rule engine being importable, loaded through it when it is.
    return {"hw": load_pack(hw), "mdl": load_pack(model), "rls": load_pack(rules)}


def _rules_pack(tmp_path, write_pack):
    pytest.importorskip("harness.guard.rules")
    d = write_pack(tmp_path / "r", "guardish", kind="rules", sources="[]", files={}, extra=(
        '\n[[rule]]\nid = "no-eval"\nmessage = "Never call eval on strings."\n'
        'query = "(call function: (identifier) @f (#eq? @f \\"eval\\"))"\n'
        '\n[[rule]]\nid = "long-shapes"\nmessage = "Handle the long shapes."\nruntime = "long-context"\n'))
    return load_pack(d)


def history(n: int) -> list[Attempt]:
    return [Attempt(i, f"try {i}: BLOCK={2 ** i}", "reverted" if i % 2 else "kept",
                    summary=f"shape 4k x 4k {10 + i} us vs 11 us", veto_reason="too risky" if i == 3 else "")
            for i in range(1, n + 1)]


def test_sections_in_stable_order(packs):
    p = build_prompt(TASK, INCUMBENT, [packs["rls"], packs["mdl"], packs["hw"]], history(3),
                     ["try a persistent kernel"], "Attempt #3 was reverted.")
    u = p.user
    order = ['<pack id="hw"', '<file path="hw/a.md">', '<file path="hw/b.md">', "</pack>",
             '<file path="mdl/m.md">', '<file path="rls/r.md">', "# Task: softmax",
             "def softmax(x)", "Tolerances: bfloat16: atol 0.002", "long rows 128k", "def reference(x)",
             "# Standing directions", "try a persistent kernel", "# Incumbent", INCUMBENT.strip()[:40],
             "# History", "#3 reverted", "the person said: too risky", "# Feedback on the last attempt"]
    pos = [u.index(s) for s in order]
    assert pos == sorted(pos)
    assert "Long-context shapes (long rows 128k) are never optional" in u
    # roofline: softmax moves 2*rows*cols*2 bytes; 4096x4096 -> 67.1 MB, floor at 4 TB/s = 16.8 us
    assert "67.1MB moved" in u and "floor 16.8 us" in u
    assert "Required DSL: Triton" in p.system and "`softmax(*inputs)`" in p.system
    assert [d["id"] for d in p.packs] == ["hw", "mdl", "rls"] and p.cut == []
    assert all(d["sha256"] == packs[d["id"]].sha256() and d["cut_files"] == [] for d in p.packs)


def test_system_carries_never_do_list_and_is_stable(tmp_path, write_pack, packs):
    r = _rules_pack(tmp_path, write_pack)
    a = build_prompt(TASK, INCUMBENT, [packs["hw"], r], history(1), [], None)
    b = build_prompt(TASK, INCUMBENT + "\n# changed\n", [r, packs["hw"]], history(5), ["new idea"], "fb")
    assert a.system == b.system  # only the task, DSL and rules packs shape it: cache-friendly
    assert "- [no-eval] Never call eval on strings. (guardish; static check)" in a.system
    assert "- [long-shapes] Handle the long shapes. (guardish; runtime check long-context)" in a.system
    # the stable prefix of the user part does not move when history and incumbent change
    head = a.user[: a.user.index("# Incumbent")]
    assert b.user.startswith(head[: head.index("# Standing")] if "# Standing" in head else head)


def test_budget_cuts_history_first_then_pack_files_from_the_end(packs):
    pk = [packs["hw"], packs["mdl"], packs["rls"]]
    full = build_prompt(TASK, INCUMBENT, pk, history(40), [], None, budget_tokens=10 ** 6)
    assert full.cut == []
    hist_tokens = estimate_tokens(full.user[full.user.index("# History"):])
    # room for everything but ~half the history
    p = build_prompt(TASK, INCUMBENT, pk, history(40), [], None,
                     budget_tokens=full.est_tokens - hist_tokens // 2)
    assert len(p.cut) == 1 and p.cut[0].startswith("history: ") and "oldest of 40 attempts" in p.cut[0]
    assert "earlier attempt(s) cut to fit the token budget" in p.user and "#40 " in p.user and "#1 try" not in p.user
    assert "MODEL-M" in p.user and p.est_tokens <= full.est_tokens - hist_tokens // 2
    # tighter: no history left, and the last pack files go, the last first
    rls_tokens = estimate_tokens(packs["rls"].file_text("r.md"))
    p2 = build_prompt(TASK, INCUMBENT, pk, history(40), [], None,
                      budget_tokens=full.est_tokens - hist_tokens - rls_tokens // 2)
    assert p2.cut[0] == "history: 40 oldest of 40 attempts"
    assert [c.split(" (")[0] for c in p2.cut[1:]] == ["pack file rls/r.md"]
    assert "RULES-R" not in p2.user and "[cut to fit the token budget" in p2.user and "MODEL-M" in p2.user
    assert "[Cut to fit the token budget: history: 40 oldest" in p2.user
    assert {d["id"]: d["cut_files"] for d in p2.packs} == {"hw": [], "mdl": [], "rls": ["r.md"]}
    # the task and incumbent are never cut; an impossible budget says so
    p3 = build_prompt(TASK, INCUMBENT, pk, history(2), [], None, budget_tokens=10)
    assert INCUMBENT.strip() in p3.user and "still ~" in p3.cut[-1]
    assert [c.split(" (")[0] for c in p3.cut[1:-1]] == ["pack file rls/r.md", "pack file mdl/m.md",
                                                        "pack file hw/b.md", "pack file hw/a.md"]


def test_render_packs_alone(packs):
    text, cut = render_packs([packs["mdl"], packs["hw"]], 10 ** 6)
    assert text.index("HW-A") < text.index("HW-B") < text.index("MODEL-M") and cut == []
    assert "sources: https://example.org/source" in text
    text, cut = render_packs([packs["mdl"], packs["hw"]], (len(text) - 200) // CHARS_PER_TOKEN)
    assert cut and cut[0].startswith("pack file mdl/m.md") and "MODEL-M" not in text
