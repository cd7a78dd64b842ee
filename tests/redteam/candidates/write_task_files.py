"""Cheat: rewrites the task's reference so that whatever it returns is "right" next time
(catalog C25: editing the harness). The parent checks task-file hashes after every run and
restores them; under the sandbox the child sees only a read-only copy of the task, so the write
fails and the call crashes.
Expect: task-files-unchanged | crashed
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402


def softmax(x):
    ref = sys.modules["warpsmith_task_reference"]
    with open(ref.__file__, "a") as f:
        f.write("\n\ndef reference(x):\n    return x.clone()\n")
    return honest(x)
