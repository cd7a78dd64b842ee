"""Bucket-limited keeps (git refs + journal), the exported dispatcher, and its checks."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from harness.model import dispatch as d
from harness.evaluate.records import Verdict
from harness.sessions.session import Session

from model_helpers import ONEPASS, partial_win, shape_row, verdict


@pytest.fixture
def session(task, tmp_path):
    return Session.create(task.name, "script", task.baseline_path.read_text(), base=tmp_path)


def test_bucket_results_name_wins_and_losses(task):
    res = {r.bucket: r for r in d.bucket_results(task, partial_win())}
    assert res["short rows"].wins and res["mid rows"].wins
    assert not res["long rows"].wins and "slower on long rows 128k (0.333x)" in res["long rows"].reason
    assert res["mid rows"].shapes == ["4k x 4k", "vocab 32k"]
    assert d.winning_buckets(task, partial_win()) == ["short rows", "mid rows"]


def test_bucket_results_never_win_when_incorrect_or_untimed(task):
    v = partial_win()
    v["shapes"][0]["correct"] = False
    assert "short rows" not in d.winning_buckets(task, v)
    untimed = verdict([shape_row("many short rows", {"rows": 8, "cols": 512}, None, None)], timing=False)
    r = d.bucket_results(task, untimed)[0]
    assert not r.wins and r.reason == "timing unavailable"
    # the evaluator's own per-shape winner flag, where present, beats the raw speedup
    v = partial_win()
    v["shapes"][0]["winner"] = "incumbent"
    assert "short rows" not in d.winning_buckets(task, v)


def test_keep_for_buckets_writes_journal_then_refs(task, session):
    ws = session.workspace
    commit = ws.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    best_before = ws.best
    rec = d.keep_for_buckets(session, 1, commit, ["short rows", "mid rows"], task, Verdict.from_json(partial_win()))
    assert ws.best == best_before  # best does not move: elsewhere the incumbent still runs
    refs = ws.refs("refs/buckets")
    assert refs == {"refs/buckets/short-rows": commit, "refs/buckets/mid-rows": commit}
    assert ws.refs("refs/kept-buckets") == {"refs/kept-buckets/0001": commit}
    journal = [r for r in session.journal.read() if r["kind"] == "BucketKeep"]
    assert journal == [json.loads(json.dumps({"t": journal[0]["t"], **rec}))]
    assert rec["measurements"]["short rows"]["speedup"] == pytest.approx(2.0)


def test_keep_for_buckets_refuses_unknown_bucket(task, session):
    with pytest.raises(d.DispatchError, match=r"task.toml: unknown bucket\(s\) \['tiny'\]; declared: \['short rows'"):
        d.keep_for_buckets(session, 1, session.workspace.best, ["tiny"], task)
    with pytest.raises(d.DispatchError, match="no bucket given"):
        d.keep_for_buckets(session, 1, session.workspace.best, [], task)


def test_restore_replays_a_keep_killed_before_git_moved(task, session):
    ws = session.workspace
    commit = ws.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    # what a kill right after the fsync'd journal line leaves behind
    session.record({"kind": "BucketKeep", "iteration": 1, "commit": commit, "buckets": ["short rows"],
                    "by": "auto", "reason": "", "measurements": {}})
    assert ws.refs("refs/buckets") == {}
    assert d.restore_bucket_refs(session) == 1
    assert ws.refs("refs/buckets") == {"refs/buckets/short-rows": commit}
    assert d.restore_bucket_refs(session) == 0


def test_table_resolution_bucket_keep_then_best_then_default(task, session):
    ws = session.workspace
    rows = d.dispatch_table(session, task)
    assert [r.kind for r in rows] == ["default", "default", "default"]
    onepass = ws.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    d.keep_for_buckets(session, 1, onepass, ["short rows"], task, partial_win())
    # a later plain keep: it becomes the kernel of the buckets without their own winner
    tuned = ws.commit_candidate(task.baseline_path.read_text().replace("BLOCK = 1024", "BLOCK = 2048"), 2, "tuned")
    session.record({"kind": "EvalResult", "iteration": 2, "verdict": partial_win()})
    session.record({"kind": "Decision", "iteration": 2, "action": "keep", "by": "auto", "commit": tuned, "best": tuned})
    ws.keep(tuned, 2)
    rows = {r.bucket.name: r for r in d.dispatch_table(session, task)}
    assert (rows["short rows"].kind, rows["short rows"].commit) == ("bucket-keep", onepass)
    assert (rows["mid rows"].kind, rows["mid rows"].commit) == ("best", tuned)
    assert rows["long rows"].label.startswith("best, iter 2")


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_export_embeds_kernels_routes_by_bucket_and_is_correct_everywhere(task, session, tmp_path, capsys):
    ws = session.workspace
    onepass = ws.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    d.keep_for_buckets(session, 1, onepass, ["short rows", "mid rows"], task, partial_win())
    out = tmp_path / "softmax_dispatch.py"
    assert d.export_session(session, out, task) == 0
    text = out.read_text()
    # one module per distinct kernel, the default embedded too, the measured table in the docstring
    assert text.count("warpsmith_dispatch_softmax_k0_") >= 2 and "warpsmith_dispatch_softmax_k1_" not in text
    assert "warpsmith_dispatch_softmax_default_" in text
    doc = _import(out, "exported_a").__doc__
    assert "| short rows | cols in [1, 1025) | iter 1" in doc and "| 20.0 | 40.0 | 2.000 | many short rows |" in doc
    assert "| long rows | cols in [32769, inf) | default |" in doc
    assert "cols: size of input 0, axis 1" in doc
    mod = _import(out, "exported_b")
    import torch

    assert mod.route(torch.zeros(2, 1000))[0] == "short rows"
    assert mod.route(torch.zeros(2, 40000)) == ("long rows", "default")
    assert mod.route(torch.zeros(2, 0)) == (None, "default")
    results = d.check_dispatcher(task, out)
    assert {r["bucket"] for r in results} >= {"short rows", "mid rows", "long rows"}
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]
    # edges of each bucket are probed
    assert any(r["dims"]["cols"] == 1024 for r in results) and any(r["dims"]["cols"] == 1025 for r in results)


def test_check_dispatcher_catches_a_wrong_kernel_in_a_bucket(task, session, tmp_path):
    ws = session.workspace
    wrong = ONEPASS.read_text().replace("y = e / tl.sum(e, axis=0)", "y = e / (tl.sum(e, axis=0) + 1.0)")
    c = ws.commit_candidate(wrong, 1, "wrong normalisation")
    d.keep_for_buckets(session, 1, c, ["mid rows"], task, partial_win())  # routed where its verdict checked it
    out = tmp_path / "bad.py"
    assert d.export_session(session, out, task) == 0
    results = d.check_dispatcher(task, out)
    bad = [r for r in results if not r["ok"]]
    assert bad and {r["bucket"] for r in bad} == {"mid rows"}
    assert "elements off" in bad[0]["error"]


def test_export_without_buckets_writes_best_kernel(tmp_path, capsys):
    from harness.authoring.tasks import load_task

    plain = load_task("softmax")
    plain.buckets = []  # whatever the built-in task.toml declares
    s = Session.create("softmax", "script", plain.baseline_path.read_text(), base=tmp_path)
    out = tmp_path / "best.py"
    assert d.export_session(s, out, plain) == 0
    assert out.read_text() == plain.baseline_path.read_text()
    assert "declares no [[buckets]]" in capsys.readouterr().out


def test_export_without_bucket_keeps_writes_best_kernel(task, session, tmp_path, capsys):
    out = tmp_path / "best.py"
    assert d.export_session(session, out, task) == 0
    assert out.read_text() == task.baseline_path.read_text()
    assert "this session has no per-bucket keeps, so there is no dispatcher" in capsys.readouterr().out


def test_two_dispatchers_with_different_defaults_in_one_process(task, session, tmp_path):
    ws = session.workspace
    d.keep_for_buckets(session, 1, ws.commit_candidate(ONEPASS.read_text(), 1, "one pass"), ["short rows"], task)
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    assert d.export_session(session, a, task) == 0
    task.default = "default:softmax"
    assert d.export_session(session, b, task) == 0
    ma, mb = _import(a, "two_a"), _import(b, "two_b")
    assert ma.DEFAULT[0] != mb.DEFAULT[0]
    assert ma.kernels()["default"].__name__ == "reference" and mb.kernels()["default"].__name__ == "softmax"


def test_bucket_axis_error_names_reference(task, tmp_path):
    from harness.authoring.tasks import Bucket

    task.buckets = [Bucket("few rows", "rows", 0, 10**9)]
    assert d.bucket_axis(task, "rows") == (0, 0)  # inferred from the interpreter shapes' inputs
    with pytest.raises(d.DispatchError, match="no interpreter shape has"):
        d.bucket_axis(task, "heads")


@pytest.mark.gpu
def test_dispatcher_graph_capturable_and_costs_nothing_over_what_it_routes_to(task, tmp_path):
    """On the GPU: keeps from real measurements (each kernel against the default), then the exported
    dispatcher, on every shape: correct, capturable, within 5% + 1 us of the implementation it routes
    to, and no slower than the default where it routes to a kept kernel."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from harness.model.dispatch_measure import build_session, measure_dispatcher

    session = build_session(task, [task.baseline_path, ONEPASS], task.shapes, tmp_path)
    if not d.bucket_keeps(session):
        pytest.skip("no kernel beat the default on a whole bucket on this GPU: nothing to dispatch")
    out = tmp_path / "disp.py"
    assert d.export_session(session, out, task) == 0
    for r in measure_dispatcher(task, out):
        assert r["correct"] and r["graph_ok"], r
        routed = r["kernels"][r["routed"]]["graph_us"]
        assert r["dispatch_us"] <= routed * 1.05 + 1.0, r
        if r["routed"] != "default":
            assert r["dispatch_us"] <= r["default_us"] * 1.05 + 1.0, r


def test_a_measured_session_keeps_per_bucket_journals_typed_verdicts_and_its_dispatcher_routes(task, tmp_path):
    """harness/model/dispatch_measure.py on a CPU with canned times (bench/dispatch.py's steps, without a GPU):
    the one-pass kernel, faster only where rows are short, is kept for that bucket alone; the session's
    journal holds each measurement as a verdict the fold reads back; the exported dispatcher routes
    each shape and is correct on it."""
    from harness.model.dispatch_measure import build_session, measure_dispatcher
    from harness.sessions.history import SessionHistory

    def canned(fn, inputs, device):
        assert device == "cpu"
        short = inputs[0].shape[-1] <= 1024
        us = 10.0 if fn.__module__ == "warpsmith_bench_k1" and short else 20.0
        return us, us, None

    shapes = task.interpreter_shapes  # short rows (96), odd rows (1000): short; long row (20000): mid
    said: list[str] = []
    session = build_session(task, [ONEPASS], shapes, tmp_path, device="cpu", timer=canned, say=said.append)
    assert said[-1] == "  onepass.py: wins ['short rows']"
    assert [r["buckets"] for r in d.bucket_keeps(session)] == [["short rows"]]
    h = SessionHistory.of(session)
    v = h.steps[1].verdict
    assert isinstance(v, Verdict) and v.accepted and v.timing_available and v.geomean_speedup == pytest.approx(2 ** (2 / 3))
    assert [(s.name, s.speedup) for s in v.shapes] == [("short rows", 2.0), ("odd rows", 2.0), ("long row", 1.0)]
    assert [type(e).__name__ for e in h.events()] == ["CandidateProposed", "EvalResult", "Decision", "BucketKeep"]
    assert h.decided[0].action == "revert" and session.workspace.best == session.workspace.baseline

    out = tmp_path / "measured.py"
    assert d.export_session(session, out, task) == 0
    rows = measure_dispatcher(task, out, shapes, device="cpu", timer=canned)
    assert [(r["shape"], r["bucket"], r["routed"].split(" (")[0]) for r in rows] == [
        ("short rows", "short rows", "iter 1"), ("odd rows", "short rows", "iter 1"), ("long row", "mid rows", "default")]
    assert all(r["correct"] and r["graph_ok"] for r in rows), rows


def _request(v, action="revert", can_keep=True):
    from harness.loop import DecisionRequest

    return DecisionRequest(3, "c0ffee", "one pass", Verdict.from_json(v), action, "slower overall", can_keep)


def test_keep_buckets_auto_decider(task):
    from harness.loop import AutoDecider, DecisionReply

    dec = d.KeepBucketsDecider(AutoDecider(), task)
    reply = dec.decide(_request(partial_win()))
    assert reply.action == "revert" and reply.buckets == ["short rows", "mid rows"]
    assert reply.reason == "kept for buckets short rows, mid rows only"
    # never for a candidate that failed a guard, nor against a person's reasoned veto
    assert not getattr(dec.decide(_request(partial_win(), can_keep=False)), "buckets", None)

    class Veto:
        def decide(self, request):
            return DecisionReply("revert", "human", "too clever, unreadable")

    assert not getattr(d.KeepBucketsDecider(Veto(), task).decide(_request(partial_win())), "buckets", None)
    # an overall win is a plain keep, not a bucket keep
    assert not getattr(dec.decide(_request(partial_win(), action="keep")), "buckets", None)


def test_loop_with_keep_buckets_auto_moves_bucket_refs(task, session):
    """End to end through the real Loop: a reply naming buckets moves refs/buckets/*, not best."""
    from harness.agents.base import Proposal
    from harness.loop import AutoDecider, Loop

    class OneShot:
        name, model = "script", "one-shot"

        def propose(self, ctx):
            yield Proposal(ONEPASS.read_text(), "one pass")

    loop = Loop(session, task, OneShot(), d.KeepBucketsDecider(AutoDecider(), task), lambda t, c, i: partial_win(),
                max_iterations=1)
    loop.run()
    commit = session.workspace.candidate_ref(1)
    assert session.workspace.refs("refs/buckets") == {"refs/buckets/short-rows": commit, "refs/buckets/mid-rows": commit}
    assert [r["buckets"] for r in d.bucket_keeps(session)] == [["short rows", "mid rows"]]


def test_default_falls_back_to_default_py_then_reference(task):
    task.default = None
    assert d._default_spec(task)[:2] == ("default", "softmax")  # kernels/softmax/default.py: torch.softmax
    (task.root / "default.py").unlink()
    assert d._default_spec(task)[:2] == ("reference", "reference")
    task.default = "nomodule_here:fn"
    with pytest.raises(d.DispatchError, match=r"task.toml: default: module 'nomodule_here' is neither"):
        d._default_spec(task)


def test_a_kernel_is_routed_only_the_lengths_it_was_checked_on(task, session, tmp_path):
    """Issue 25: the dispatcher sends a length to a kept kernel only inside the range its listed and
    held-out shapes covered in that bucket; the rest of the bucket (and beyond) runs the default."""
    import torch

    v = partial_win()
    v["heldout"] = [{"name": "held-out cols 1, rows 1", "dims": {"rows": 1, "cols": 1}, "correct": True},
                    {"name": "held-out cols 1000, rows 3", "dims": {"rows": 3, "cols": 1000}, "correct": True},
                    {"name": "held-out cols 20011, rows 2", "dims": {"rows": 2, "cols": 20011}, "correct": True},
                    {"name": "held-out cols 30000, rows 2", "dims": {"rows": 2, "cols": 30000}, "correct": False}]
    res = {r.bucket: r for r in d.bucket_results(task, v)}
    assert res["short rows"].checked == [1, 1000] and res["mid rows"].checked == [4096, 32768]
    ws = session.workspace
    onepass = ws.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    d.keep_for_buckets(session, 1, onepass, ["short rows", "mid rows"], task, Verdict.from_json(v))
    out = tmp_path / "checked.py"
    assert d.export_session(session, out, task) == 0
    mod = _import(out, "exported_checked")
    label = mod.route(torch.zeros(2, 500))[1]
    assert label.startswith("iter 1")
    assert mod.route(torch.zeros(2, 1000)) == ("short rows", label)
    assert mod.route(torch.zeros(2, 1010)) == ("short rows", "default")   # in the bucket, never checked
    assert mod.route(torch.zeros(2, 2000)) == ("mid rows", "default")
    assert mod.route(torch.zeros(2, 20011)) == ("mid rows", label)
    assert "| cols in [1, 1000] |" in mod.__doc__ and "| cols in [4096, 32768] |" in mod.__doc__
    results = d.check_dispatcher(task, out)
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


def test_a_record_from_before_heldout_checks_routes_only_its_listed_lengths(task, session, tmp_path):
    import torch

    ws = session.workspace
    onepass = ws.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    session.record({"kind": "BucketKeep", "iteration": 1, "commit": onepass, "buckets": ["mid rows"], "by": "auto",
                    "reason": "", "measurements": {"mid rows": {"shapes": ["4k x 4k", "vocab 32k"], "speedup": 1.2}}})
    out = tmp_path / "legacy.py"
    assert d.export_session(session, out, task) == 0
    mod = _import(out, "exported_legacy")
    assert mod.route(torch.zeros(2, 8000))[1].startswith("iter 1")
    assert mod.route(torch.zeros(2, 2000)) == ("mid rows", "default")
