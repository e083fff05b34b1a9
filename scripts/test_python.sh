#!/usr/bin/env bash
# Builds the Python package (pip install . through scikit-build-core and nanobind) into a virtual
# environment and runs its tests (python/tests) with pytest. CPU tests run everywhere; the GPU
# tests (test_torch_parity.py) skip themselves without PyTorch + CUDA.
#
#   bash scripts/test_python.sh
#
# Environment:
#   SG_PY_CUDA   1: build the CUDA backend into the extension (needs nvcc), 0: CPU only.
#                Unset: 1 when a GPU is present (nvidia-smi works), else 0, which keeps CI builds
#                short (the CUDA sources are not compiled).
#   SG_PY_VENV   the virtual environment to create/use (default build/pyenv); "none" installs into
#                the running python3 instead (e.g. a GPU machine whose python3 already has
#                nanobind, scikit-build-core, numpy, pytest and torch, and no internet).
#   PYTHON       the interpreter that creates the environment (default python3).
# Needs python3 with venv/ensurepip (Debian: apt-get install python3-venv) and, unless the
# packages are already there, PyPI access for nanobind, scikit-build-core, numpy, pytest and
# (optional, for the plot test) matplotlib.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "test_python: $*"; }

if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [ -z "${SG_PY_CUDA:-}" ]; then
  if nvidia-smi -L >/dev/null 2>&1; then SG_PY_CUDA=1; else SG_PY_CUDA=0; fi
fi
export SG_PY_CUDA
say "CUDA backend in the extension: $([ "$SG_PY_CUDA" = 0 ] && echo off || echo 'on when nvcc is found')"

VENV=${SG_PY_VENV:-build/pyenv}
if [ "$VENV" = "none" ]; then
  PY=${PYTHON:-python3}
else
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    if ! "${PYTHON:-python3}" -m venv "$VENV"; then
      rm -rf "$VENV"
      echo "test_python: error: cannot create a virtual environment; on Debian/Ubuntu install python3-venv" >&2
      exit 1
    fi
  fi
  PY="$VENV/bin/python"
fi

if ! "$PY" -c "import nanobind, scikit_build_core, numpy, pytest" >/dev/null 2>&1; then
  say "installing the build and test dependencies"
  "$PY" -m pip install -q "nanobind>=2" "scikit-build-core>=0.10" "numpy>=1.22" "pytest>=7"
fi
if ! "$PY" -c "import matplotlib" >/dev/null 2>&1; then
  "$PY" -m pip install -q matplotlib >/dev/null 2>&1 || say "matplotlib not installed: the plot test will skip"
fi
if ! "$PY" -c "import tensorboard" >/dev/null 2>&1; then  # reads the --tensorboard event files back
  "$PY" -m pip install -q tensorboard >/dev/null 2>&1 || say "tensorboard not installed: its read-back test will skip"
fi
if ! "$PY" -c "import onnx, onnxruntime" >/dev/null 2>&1; then  # export(format="onnx") and its check
  "$PY" -m pip install -q onnx onnxruntime >/dev/null 2>&1 || say "onnx/onnxruntime not installed: the ONNX tests will skip"
fi

mkdir -p build
say "pip install . (build log: build/pip-install.log)"
if ! "$PY" -m pip install --no-build-isolation --no-deps -v . > build/pip-install.log 2>&1; then
  tail -n 60 build/pip-install.log >&2
  echo "test_python: error: building the package failed (whole log in build/pip-install.log)" >&2
  exit 1
fi

say "pytest python/tests"
"$PY" -m pytest -q -rs python/tests "$@"
