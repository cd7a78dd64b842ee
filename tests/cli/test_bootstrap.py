"""scripts/bootstrap says which torch build a machine gets, and why (`--which-torch` installs nothing).
nvidia-smi is played by a script on PATH: the real one, where present, would decide otherwise."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap", tmp_path / "repo" / "scripts" / "bootstrap")
    return tmp_path / "repo"


@pytest.fixture
def bare_python(tmp_path: Path) -> Path:
    """A Python that can't import torch: a venv without system site-packages (no pip: quick)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    return tmp_path / "bare" / "bin" / "python"


def which_torch(checkout: Path, tmp_path: Path, python: Path, gpus: str | None = None, **env: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    # `nvidia-smi -L` on a box with a GPU prints one "GPU 0: ..." line per GPU; without one it fails.
    smi.write_text(f"#!/bin/sh\nprintf '%s\\n' '{gpus}'\n" if gpus else "#!/bin/sh\nexit 9\n")
    smi.chmod(0o755)
    full_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": str(python), "HOME": str(tmp_path), **env}
    return subprocess.run(["bash", str(checkout / "scripts" / "bootstrap"), "--which-torch"], env=full_env,
                          capture_output=True, text=True, timeout=60)


def test_a_machine_without_a_gpu_gets_the_cpu_build(checkout, tmp_path, bare_python):
    r = which_torch(checkout, tmp_path, bare_python)
    assert (r.returncode, r.stdout.strip()) == (0, "cpu: no GPU found (nvidia-smi absent or lists none)")
    assert not (checkout / ".venv").exists()  # it only said so


def test_a_gpu_box_without_torch_gets_the_cuda_build(checkout, tmp_path, bare_python):
    r = which_torch(checkout, tmp_path, bare_python, gpus="GPU 0: NVIDIA H200 (UUID: GPU-0000)")
    assert r.stdout.strip() == "cuda: nvidia-smi lists a GPU"


def test_a_torch_already_there_is_kept_whatever_the_gpu(checkout, tmp_path):
    import torch

    r = which_torch(checkout, tmp_path, Path(sys.executable), gpus="GPU 0: NVIDIA H200 (UUID: GPU-0000)")
    assert r.stdout.startswith(f"keep: torch {torch.__version__} at ") and "is already importable" in r.stdout


def test_the_choice_can_be_forced_and_a_bad_one_is_refused(checkout, tmp_path, bare_python):
    r = which_torch(checkout, tmp_path, bare_python, WARPSMITH_TORCH="cuda")
    assert r.stdout.strip() == "cuda: WARPSMITH_TORCH=cuda"
    r = which_torch(checkout, tmp_path, bare_python, WARPSMITH_TORCH="rocm")
    assert r.returncode == 2 and r.stderr.strip() == "bootstrap: WARPSMITH_TORCH=rocm: use cpu or cuda"
