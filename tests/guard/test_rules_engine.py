"""The rule engine: broken packs are refused at load with file, rule id and the parser's message;
custom predicates see through aliases; pack lookup and per-task rule selection."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.guard import Violation, check_source, rules_for_task
from harness.guard.rules import RuleError, compile_rules, find_rules_pack, load_rules_pack

P = Path("packs/rules/x/pack.toml")


def _one(**kw):
    base = {"id": "r1", "message": "Do not."}
    base.update(kw)
    return [base]


@pytest.mark.parametrize("raw, needle", [
    (_one(query="(call function: (nonsense_node) @f)"), "Invalid node type"),
    (_one(query="(call functionx: (identifier) @f)"), "Invalid field name"),
    (_one(query="(call function: (identifier) @f"), "bad tree-sitter query"),
    (_one(query='((identifier) @x (#match? @x "["))'), "regular expression"),
    (_one(query='((identifier) @x (#bogus? @x "a"))'), "unknown predicate #bogus?"),
    (_one(query='((identifier) @x (#qualname-match? @x "("))'), "bad regular expression"),
    (_one(query='((identifier) @x (#entry-path? @x "extra"))'), "#entry-path? takes 1 capture(s) and 0 string(s)"),
    (_one(query="(identifier)"), "no capture"),
    (_one(runtime="no-such-check"), "unknown runtime check 'no-such-check'"),
    (_one(check="no-such-static"), "unknown static check 'no-such-static'"),
    (_one(query="(identifier) @x", runtime="long-context"), "exactly one of query, runtime, check"),
    (_one(querry="(identifier) @x"), "unknown key(s) ['querry']"),
    (_one(message=""), "message missing"),
    (_one(severity="fatal", runtime="long-context"), "severity 'fatal'"),
    ([{"id": "a", "message": "m", "runtime": "long-context"}, {"id": "a", "message": "m", "runtime": "long-context"}],
     "duplicate rule id"),
])
def test_broken_rule_refused_with_file_rule_and_reason(raw, needle):
    with pytest.raises(RuleError) as ei:
        compile_rules(raw, "x", P)
    msg = str(ei.value)
    assert msg.startswith(f"{P}: rule "), msg
    assert needle in msg, msg
    assert ei.value.path == str(P) and ei.value.problem


def test_bad_id_is_named_by_position():
    with pytest.raises(RuleError) as ei:
        compile_rules([{"id": "Bad Id", "message": "m", "runtime": "long-context"}], "x", P)
    assert ei.value.rule_id == "#1"


def _write_pack(root: Path, pack_id: str, body: str) -> Path:
    d = root / pack_id
    d.mkdir(parents=True)
    (d / "pack.toml").write_text(f'id = "{pack_id}"\nkind = "rules"\ntitle = "t"\nversion = "1.0.0"\n' + body)
    return d


def test_load_rules_pack_refuses_bad_toml_and_wrong_kind(tmp_path):
    d = tmp_path / "broken"
    d.mkdir()
    (d / "pack.toml").write_text("id = \n")
    with pytest.raises(RuleError, match="bad TOML"):
        load_rules_pack(d)
    h = tmp_path / "hw"
    h.mkdir()
    (h / "pack.toml").write_text('id = "hw"\nkind = "hardware"\n')
    with pytest.raises(RuleError, match="not 'rules'"):
        load_rules_pack(h)


def test_broken_pack_named_by_task_fails_the_check_loudly(tmp_path, monkeypatch, softmax_task):
    import dataclasses

    _write_pack(tmp_path, "mine", '[[rule]]\nid = "oops"\nmessage = "m"\nquery = "(call"\n')
    monkeypatch.setenv("WARPSMITH_PACKS", str(tmp_path))
    task = dataclasses.replace(softmax_task, rules=["mine"])
    with pytest.raises(RuleError) as ei:
        check_source(softmax_task.baseline_path.read_text(), task)
    assert "mine/pack.toml: rule oops: bad tree-sitter query" in str(ei.value)


def test_env_pack_overrides_builtin_and_custom_rule_applies(tmp_path, monkeypatch, softmax_task):
    import dataclasses

    _write_pack(tmp_path, "reward-hacks", '''
[[rule]]
id = "no-cdiv"
message = "Do not use triton.cdiv."
query = '((attribute attribute: (identifier) @a) @violation (#eq? @a "cdiv") (#qualname-match? @violation "^triton[.]cdiv$"))'
''')
    monkeypatch.setenv("WARPSMITH_PACKS", str(tmp_path))
    assert find_rules_pack("reward-hacks") == tmp_path / "reward-hacks"
    src = "import triton as tr\n\ndef f(n):\n    return tr.cdiv(n, 2)\n"
    task = dataclasses.replace(softmax_task, rules=["reward-hacks"])
    found = check_source(src, task, [r for r in rules_for_task(task) if r.id == "no-cdiv"])
    assert [(v.rule, v.line, v.col, v.snippet) for v in found] == [("no-cdiv", 4, 12, "return tr.cdiv(n, 2)")]


def test_unknown_pack_is_an_error(softmax_task):
    import dataclasses

    with pytest.raises(RuleError, match="no rules pack 'nope'"):
        rules_for_task(dataclasses.replace(softmax_task, rules=["nope"]))


def test_rules_for_task_always_has_the_dsl_pack_and_honours_remove(softmax_task, task_for):
    ids = {(r.pack, r.id) for r in rules_for_task(task_for("cuda"))}
    assert ("dsl-cuda", "cuda-launch") in ids and ("reward-hacks", "no-io") in ids
    assert not any(p == "dsl-triton" for p, _ in ids)
    rules = rules_for_task(softmax_task, remove=["cuda-graphs", "no-io"])
    assert not any(r.pack == "cuda-graphs" or r.id == "no-io" for r in rules)
    assert any(r.id == "no-environ" for r in rules)
    with pytest.raises(RuleError, match="cannot remove"):
        rules_for_task(softmax_task, remove=["no-such-rule"])


def _custom(query: str):
    return compile_rules([{"id": "t", "message": "m", "query": query}], "test", P)


@pytest.mark.parametrize("query, src, lines", [
    # aliases: module alias, from-import alias, alias by assignment
    ('((call function: (_) @f) @violation (#qualname-eq? @f "torch.exp"))',
     "import torch as T\nfrom torch import exp as E\nG = T.exp\nT.exp(1)\nE(2)\nG(3)\n", [4, 5, 6]),
    # the entry path: helper reached from the entry, not the unused one
    ('((call function: (identifier) @f) @violation (#eq? @f "print") (#entry-path? @violation))',
     "def h():\n    print(1)\n\ndef unused():\n    print(2)\n\ndef softmax(x):\n    return h()\n", [2]),
    ('((return_statement) @violation (#inside? @violation "for_statement while_statement"))',
     "def f(xs):\n    for x in xs:\n        return x\n    return 0\n", [3]),
    ('((return_statement) @violation (#not-inside? @violation "for_statement"))',
     "def f(xs):\n    for x in xs:\n        return x\n    return 0\n", [4]),
    ('((assignment left: (attribute object: (_) @o) @violation) (#imported? @o))',
     "import math\nclass A: pass\na = A()\na.x = 1\nmath.pi = 3\n", [5]),
    ('((assignment left: (subscript value: (identifier) @g)) @violation (#module-global? @g))',
     "C = {}\ndef f(x):\n    d = {}\n    d[1] = x\n    C[1] = x\n", [5]),
])
def test_custom_predicates(query, src, lines, softmax_task):
    found = check_source(src, softmax_task, _custom(query))
    assert [v.line for v in found] == lines, found


def test_violation_dict_and_syntax_error(softmax_task):
    found = check_source("def softmax(x):\n    return (x\n", softmax_task)
    assert [v.rule for v in found] == ["python-syntax"]
    d = found[0].to_dict()
    assert set(d) >= {"rule", "message", "line", "col", "snippet"}
    assert isinstance(found[0], Violation)


def test_syntax_error_carries_pythons_own_message_and_line(softmax_task):
    src = "import torch\n\n\ndef softmax(x):\n    y = torch.exp(x\n    return y / y.sum(-1, keepdim=True)\n"
    [v] = check_source(src, softmax_task)
    assert v.rule == "python-syntax"
    assert "invalid syntax at line 5: '(' was never closed" in v.message
    assert (v.line, v.snippet) == (5, "y = torch.exp(x")
    [v] = check_source("def softmax(x):\n    y = = x\n    return y\n", softmax_task)
    assert v.message == "The candidate is not valid Python: invalid syntax at line 2." and v.line == 2


def test_entry_name_is_put_into_messages(softmax_task):
    found = check_source("import torch\n", softmax_task)
    msgs = [v.message for v in found if v.rule == "entry-defined"]
    assert msgs and "def softmax(...)" in msgs[0]


def test_warning_severity_is_reported_but_does_not_reject(tmp_path, monkeypatch, capsys):
    from warpsmith.cli import main

    _write_pack(tmp_path, "style", '''
[[rule]]
id = "prefer-cdiv"
message = "Prefer triton.cdiv over manual ceil division."
severity = "warning"
query = '((binary_operator operator: "//") @violation)'
''')
    monkeypatch.setenv("WARPSMITH_PACKS", str(tmp_path))
    src = tmp_path / "c.py"
    good = Path(__file__).parent / "corpus" / "good" / "triton" / "baseline.py"
    src.write_text(good.read_text() + "\nHALF = 7 // 2\n")
    assert main(["check", "softmax", str(src), "--rules=+style"]) == 0
    out = capsys.readouterr().out
    assert "prefer-cdiv [warning]" in out


def test_entry_path_includes_module_level_values(softmax_task):
    q = '((call function: (attribute attribute: (identifier) @m)) @violation (#eq? @m "item") (#entry-path? @violation))'
    src = "_n = lambda t: t.item()\n_unused = lambda t: t.item()\n\ndef softmax(x):\n    return _n(x)\n"
    assert [v.line for v in check_source(src, softmax_task, _custom(q))] == [1]


def test_unreadably_deep_code_fails_closed(softmax_task):
    src = "import torch\ndef softmax(x):\n    return torch" + ".a" * 3000 + "(x)\n"
    found = check_source(src, softmax_task)
    assert [v.rule for v in found] == ["guard-unreadable"]


ALLOW_CANDIDATE = ("import torch\nimport triton\nimport triton.language as tl\nimport numpy\n\n\n"
                   "@triton.jit\ndef _k(x_ptr, BLOCK: tl.constexpr):\n    tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)\n\n\n"
                   "_Z = numpy.zeros\n\n\ndef softmax(x):\n    y = torch.empty_like(x)\n    _k[(1,)](y, BLOCK=16)\n    return y\n")


def test_a_packs_allow_table_extends_the_allowlist(tmp_path, monkeypatch, softmax_task):
    import dataclasses

    allow_rules = {"allowed-imports", "allowed-names"}
    found = {v.rule for v in check_source(ALLOW_CANDIDATE, softmax_task)}
    assert allow_rules <= found  # numpy is not on the base list
    _write_pack(tmp_path, "numpy-ok", '''
[allow]
modules = ["numpy"]
names = ["numpy.zeros"]

[[rule]]
id = "no-numpy-save"
message = "Do not save."
query = '((attribute attribute: (identifier) @a) @violation (#eq? @a "save"))'
''')
    monkeypatch.setenv("WARPSMITH_PACKS", str(tmp_path))
    task = dataclasses.replace(softmax_task, rules=[*softmax_task.rules, "numpy-ok"])
    assert not {v.rule for v in check_source(ALLOW_CANDIDATE, task)} & allow_rules
    # only the names it lists
    found = check_source(ALLOW_CANDIDATE.replace("numpy.zeros", "numpy.ones"), task)
    assert [v.message.split("(")[-1] for v in found if v.rule == "allowed-names"] == ["`numpy.ones` is not on the allowlist)"]


@pytest.mark.parametrize("table, needle", [
    ('[allow]\nnames = ["numpy.*"]', "standard-library modules only"),
    ('[allow]\nnames = ["torch.__dict__"]', "double-underscore"),
    ('[allow]\nmodules = "numpy"', "must be a list"),
    ('[allow]\nmodule = ["numpy"]', "unknown key(s) ['module']"),
    ('[allow]\nnames = ["a b"]', "not a dotted name"),
])
def test_bad_allow_table_refused(tmp_path, table, needle):
    _write_pack(tmp_path, "bad-allow", table + '\n\n[[rule]]\nid = "r"\nmessage = "m"\nruntime = "long-context"\n')
    with pytest.raises(RuleError) as ei:
        load_rules_pack(tmp_path / "bad-allow")
    assert needle in str(ei.value) and "pack.toml" in str(ei.value)
