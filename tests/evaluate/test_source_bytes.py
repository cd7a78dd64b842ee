"""The child compiles exactly the bytes the static stage judged (issue 37, class 1), proven through a
whole evaluation: with the static stage off, the UTF-7 cheat (a coding cookie that turns a comment
into `torch.softmax`) is still refused at import, before any of its code runs, by the child itself."""
from __future__ import annotations

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.authoring.tasks import load_task

CHEAT = Path(__file__).resolve().parents[1] / "redteam" / "candidates" / "encoding_utf7_comment.py"


def test_the_child_refuses_a_coding_cookie_even_without_the_static_stage():
    v = evaluate(load_task("softmax"), CHEAT, options=EvalOptions(on_gpu=False, static=False, shapes=["odd rows"]))
    assert v["accepted"] is False and v["stage"] == "import", v["reasons"]
    [reason] = v["reasons"]
    assert reason["rule"] == "import-error" and "declares the source encoding 'utf-7'" in reason["message"]
    assert v["shapes"] == []  # nothing of it ran: no shape was checked
