"""bench/busy_neighbours.py needs several GPUs; elsewhere it says so and exits 2."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_busy_neighbours_refuses_a_machine_with_fewer_than_two_gpus():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "busy_neighbours.py"), "softmax"],
                       capture_output=True, text=True, env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"},
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "needs at least 2 GPUs, this machine has 0" in r.stderr
