"""Cheat (class 6, staging that follows links): it imports a module `_secret_link` that sits beside
it as a symbolic link to a file the person can read and the sandbox hides (a credentials file in the
home folder). The parent staged every module a candidate imports from its folder by copying it with
its own privileges, following the link, so the secret landed where the child could read it, and the
candidate raised it into the verdict. Only regular files of the candidate's own folder are staged now
(opened with O_NOFOLLOW), and none when the static stage runs. Here in the catalog there is no such
module (an import error either way); tests/evaluate/test_child_limits.py builds the link at run time.
Expect: import-error
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
try:
    import _secret_link  # noqa: F401 (named, so the parent stages it)
except Exception:  # noqa: BLE001 - not Python: read it as text below
    pass
with open(os.path.join(os.path.dirname(__file__), "_secret_link.py")) as _f:
    raise RuntimeError("leaked: " + _f.read())


def softmax(x):
    return x
