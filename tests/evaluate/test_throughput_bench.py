"""bench/throughput.py (harness/profiling/throughput.py; issue 18's figure: candidates a minute, p50 time to
verdict and its phases), run for real in Triton's interpreter on a tiny batch: two backends judge the same
candidates through real sessions, the deliberately wrong one is rejected by both, their verdicts agree, and
the short table and the JSON carry the figures the README quotes."""
from __future__ import annotations

import json

import pytest

from harness.profiling import throughput

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def test_two_backends_judge_the_same_batch_alike_and_the_table_says_how_fast(tmp_path, capsys):
    out = tmp_path / "t.json"
    # bench/throughput.py softmax --backends local,pool:2 --n 2 --broken --shapes "short rows" --json ... --keep-dir ...
    rc = throughput.run(throughput.ThroughputOptions("softmax", backends="local,pool:2", n=2, broken=True,
                                                     shapes="short rows", json=out, keep_dir=tmp_path / "s"))
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "pool:2 vs local: same verdicts on every candidate" in text
    head = next(line for line in text.splitlines() if line.startswith("backend "))
    assert "cand/min" in head and "p50 ttv" in head
    results = json.loads(out.read_text())["results"]
    assert [r["backend"] for r in results] == ["local", "pool:2"]
    for r in results:
        assert r["candidates"] == 2 and r["per_min"] > 0 and r["p50_time_to_verdict_s"]["all"] > 0
        broken = [v for f, v in r["verdicts"].items() if "broken" in f]
        assert len(broken) == 1 and not broken[0]["accepted"] and broken[0]["stage"] == "correctness"
        honest = [v for f, v in r["verdicts"].items() if "broken" not in f]
        assert honest and all(v["accepted"] for v in honest)
