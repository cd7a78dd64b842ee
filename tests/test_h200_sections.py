"""bench/h200.sh is what a session runs in its few GPU minutes: every section its header lists must
be a case of its loop, and every case listed (a typo there costs a device call). Also `bash -n`."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "h200.sh"


def test_every_listed_section_is_a_case_and_every_case_is_listed():
    text = SCRIPT.read_text()
    listed = set(re.findall(r"^#   ([a-z0-9]+)\s", text, re.M))
    cases = set(re.findall(r"^    ([a-z0-9]+)\)", text, re.M))
    assert listed and listed == cases, (sorted(listed - cases), sorted(cases - listed))


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
