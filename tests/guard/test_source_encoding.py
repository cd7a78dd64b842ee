"""What the static stage reads is what runs (issue 37, class 1): the guard judges the file's bytes as
UTF-8, and anything another reader would decode or split differently is refused before a rule runs;
the child compiles exactly those bytes (load_module), after checking they are the ones judged."""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from harness.guard import ENCODING_RULE, TEXT_RULE, check_source
from harness.sourcefile import SourceEncodingError
from harness.authoring.tasks import load_module

REPO = Path(__file__).resolve().parents[2]
BASELINE = (REPO / "kernels" / "softmax" / "kernel.py").read_bytes()
HIDDEN = b"    # done in the kernel+AAo-    y = torch.softmax(x.float(), dim=-1).to(x.dtype)\n"


def rules(data: bytes, task) -> list[str]:
    return [v.rule for v in check_source(data, task) if v.severity == "error"]


@pytest.mark.parametrize("header", [
    b"# -*- coding: latin-1 -*-\n",
    b"# coding=cp1252\n",
    b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\n",   # line 2, Emacs/Vim spellings
    b"# -*- coding: utf-7 -*-\n",
    b"# coding: iso-8859-15\n",
    b"# coding: no-such-codec\n",
    b"# coding: utf-8-sig\n",
], ids=lambda h: h.decode().strip().replace("\n", " | "))
def test_a_cookie_naming_another_encoding_is_refused(softmax_task, header):
    found = check_source(header + BASELINE, softmax_task)
    assert [v.rule for v in found] == [ENCODING_RULE]
    assert "without a coding declaration other than utf-8" in found[0].message
    assert found[0].line == header.count(b"\n")


@pytest.mark.parametrize("header", [b"# -*- coding: utf-8 -*-\n", b"# coding=UTF8\n", b"#!/usr/bin/env python\n# coding: utf_8\n"])
def test_a_cookie_that_says_utf8_is_fine(softmax_task, header):
    assert rules(header + BASELINE, softmax_task) == []


@pytest.mark.parametrize("data,what", [
    (b"\xef\xbb\xbf" + BASELINE, "UTF-8 byte-order mark"),
    (BASELINE.decode().encode("utf-16"), "UTF-16 byte-order mark"),
    (BASELINE.decode().encode("utf-32"), "UTF-32 byte-order mark"),
    (BASELINE + "# caf\xe9\n".encode("latin-1"), "byte 0xe9"),
    (BASELINE + b"x = 1\0\n", "NUL byte"),
])
def test_boms_bytes_that_are_not_utf8_and_nul_are_refused(softmax_task, data, what):
    found = check_source(data, softmax_task)
    assert [v.rule for v in found] == [ENCODING_RULE] and what in found[0].message


def test_the_utf7_newline_trick_is_refused_where_it_used_to_read_as_a_comment(softmax_task):
    body = BASELINE.replace(b"    return y\n", HIDDEN + b"    return y\n")
    assert b"+AAo-" in body and rules(body, softmax_task) == []  # without the cookie: a comment, harmless
    assert rules(b"# coding: utf-7\n" + body, softmax_task) == [ENCODING_RULE]


def test_a_lone_carriage_return_is_refused_crlf_is_fine(softmax_task):
    hidden = BASELINE.replace(b"    return y\n", b"    # kernel done\r    y = torch.softmax(x, -1)\n    return y\n")
    found = check_source(hidden, softmax_task)
    assert [v.rule for v in found] == [TEXT_RULE] and "carriage return" in found[0].message
    assert rules(BASELINE.replace(b"\n", b"\r\n"), softmax_task) == []


def test_identifiers_python_normalizes_are_refused_plain_unicode_is_fine(softmax_task):
    found = check_source(BASELINE + "\nｅｖａｌ('1')\n".encode(), softmax_task)
    assert [v.rule for v in found] == [TEXT_RULE] and "`eval` to Python" in found[0].message
    # NFKC-stable names, and any character in comments and strings, read the same to both parsers
    assert rules(BASELINE + "\nα = 1  # µs, ｅｖａｌ\nβ = 'ｅｖａｌ'\n".encode(), softmax_task) == []


def test_a_str_is_judged_as_its_utf8_bytes(softmax_task):
    assert rules(("# coding: latin-1\n" + BASELINE.decode()), softmax_task) == [ENCODING_RULE]
    assert rules(BASELINE.decode(), softmax_task) == []


# -- the child's side: load_module compiles the bytes as UTF-8, and only the bytes it was told of ----
def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_load_module_refuses_a_cookie_before_any_of_the_file_runs(tmp_path):
    marker = tmp_path / "ran"
    src = f"# coding: utf-7\nopen({str(marker)!r}, 'w').close()  # +AAo-x = 1\n".encode()
    with pytest.raises(SourceEncodingError, match="utf-7"):
        load_module(write(tmp_path, "m.py", src), "warpsmith_test_utf7")
    assert not marker.exists() and "warpsmith_test_utf7" not in sys.modules


def test_load_module_refuses_bytes_other_than_those_judged(tmp_path):
    marker = tmp_path / "ran"
    judged = b"x = 1\n"
    p = write(tmp_path, "m.py", f"open({str(marker)!r}, 'w').close()\n".encode())
    with pytest.raises(ImportError, match="not the ones the static stage read"):
        load_module(p, "warpsmith_test_swap", hashlib.sha256(judged).hexdigest())
    assert not marker.exists()
    write(tmp_path, "m.py", judged)
    assert load_module(p, "warpsmith_test_swap", hashlib.sha256(judged).hexdigest()).x == 1


def test_load_module_compiles_utf8_text_without_the_harness_future_flags(tmp_path):
    src = "# -*- coding: utf-8 -*-\nNAME = 'µs'\nx: int = 1\n".encode()
    mod = load_module(write(tmp_path, "m.py", src), "warpsmith_test_plain")
    assert mod.NAME == "µs" and mod.__file__ == str(tmp_path / "m.py")
    assert mod.__annotations__ == {"x": int}  # not "int": harness/authoring/tasks.py's __future__ import stays there
