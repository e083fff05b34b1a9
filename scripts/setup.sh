#!/usr/bin/env bash
# Installs everything stepgraph needs to build and test on a fresh Debian or Ubuntu machine:
# a C++17 compiler, CMake (>= 3.24), Ninja, nlohmann-json, CLI11, GoogleTest, zlib, Python 3,
# Open MPI's runtime (mpirun launches of data-parallel training) and clang with its sanitizer and
# libFuzzer runtimes (the sanitizer and fuzz builds).
#
#   bash scripts/setup.sh
#
# Runs apt-get as root, or through sudo when not root. When every package is already installed
# it returns at once without touching apt. It does not install CUDA: the CUDA backend is built
# automatically when nvcc is found (on PATH or at /usr/local/cuda/bin/nvcc).
#
# With nvcc present it also puts the cuDNN headers the GPU convolutions need into .deps/ (pip,
# no dependencies, headers only in use; CMake looks there first): the cuDNN frontend's C++
# headers from PyPI nvidia-cudnn-frontend, and, when the CUDA toolkit has no cudnn.h, PyPI
# nvidia-cudnn-cu13 (headers and libcudnn.so.9). Without nvcc it skips cuDNN entirely.
# SG_SKIP_CUDNN=1 skips it too (the build then refuses convolutions on the GPU).
#
# Likewise CUTLASS's C++ headers for the 3xTF32 dense products (`precision: tf32x3`): unpacked
# from PyPI nvidia-cutlass (pip download, no dependencies, headers only) into .deps/cutlass.
# SG_SKIP_CUTLASS=1 skips it (the build then offers tf32x3 without its kernels: plain fp32).
#
# Likewise for data-parallel training: when neither the CUDA toolkit nor the system has nccl.h,
# it unpacks the headers (only) of PyPI nvidia-nccl-cu13 into .deps/nccl (pip download, no
# dependencies; libnccl.so.2 is loaded at run time, see scripts/nccl_lib_dir.sh). SG_SKIP_NCCL=1
# skips it (the build then has no data-parallel training).
set -euo pipefail

# openmpi-bin: mpirun launches of data-parallel training (NCCL's id by MPI_Bcast; libmpi.so.40 is
# loaded at run time) and the test that runs that bootstrap as two real ranks.
# clang, libclang-rt-dev (its ASan, UBSan and libFuzzer runtimes): the sanitizer test build and
# the libFuzzer targets (scripts/sanitize.sh, scripts/fuzz.sh); the real build stays gcc (+ nvcc).
# pkg-config: the installed package's test builds examples/cpp_consumer and the README's C++
# example with `pkg-config --cflags --libs stepgraph` too.
PACKAGES=(build-essential cmake ninja-build nlohmann-json3-dev libcli11-dev libgtest-dev zlib1g-dev python3 python3-venv python3-dev
          openmpi-bin clang libclang-rt-dev pkg-config)
MIN_CMAKE=3.24

say() { echo "setup: $*"; }
# pip for fetching WHAT; without it, a warning that the build goes on WITHOUT (and false).
have_pip() {
  python3 -m pip --version >/dev/null 2>&1 && return 0
  echo "setup: warning: python3 has no pip: cannot fetch the $1; building without $2" >&2
  return 1
}
die() { echo "setup: error: $*" >&2; exit 1; }

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }

CUDNN_FRONTEND_VERSION=1.32.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# pip into a folder of the repository (no venv, no system site): idempotent and quick to check.
pip_target() {
  local dir="$1" spec="$2"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir" "$spec" ||
    { echo "setup: warning: could not install $spec (pip); building without cuDNN" >&2; return 1; }
}
install_cudnn_headers() {
  [ "${SG_SKIP_CUDNN:-0}" = "1" ] && { say "SG_SKIP_CUDNN=1: skipping the cuDNN headers"; return 0; }
  local nvcc=""
  if command -v nvcc >/dev/null 2>&1; then nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
  if [ -z "$nvcc" ]; then
    say "no nvcc: the CUDA backend is not built, so no cuDNN either"
    return 0
  fi
  have_pip "cuDNN frontend headers" cuDNN || return 0
  local fe="$ROOT/.deps/cudnn-frontend"
  if grep -qs "CUDNN_FRONTEND_MINOR_VERSION $(echo $CUDNN_FRONTEND_VERSION | cut -d. -f2)\b" "$fe/include/cudnn_frontend_version.h"; then
    say "cuDNN frontend $CUDNN_FRONTEND_VERSION headers are in .deps/cudnn-frontend"
  else
    say "installing the cuDNN frontend $CUDNN_FRONTEND_VERSION headers into .deps/cudnn-frontend (pip)"
    rm -rf "$fe"
    pip_target "$fe" "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" || return 0
  fi
  local cuda_inc
  cuda_inc="$(dirname "$(dirname "$(readlink -f "$nvcc")")")/include"
  if [ -f "$cuda_inc/cudnn.h" ] || [ -f /usr/include/cudnn.h ] || [ -f "$ROOT/.deps/cudnn/nvidia/cudnn/include/cudnn.h" ]; then
    say "cudnn.h found"
  else
    say "no cudnn.h with the CUDA toolkit: installing nvidia-cudnn-cu13 into .deps/cudnn (pip, large)"
    pip_target "$ROOT/.deps/cudnn" "nvidia-cudnn-cu13>=9,<10" || return 0
  fi
}

# Headers only, from a wheel: `pip download` it (no dependencies), then unpack every member below
# the first `marker` in its path (e.g. "/include/") into `dest`; fails unless `dest/must` exists.
#   unpack_wheel_headers <pip spec> <marker> <dest> <must>
unpack_wheel_headers() {
  local spec="$1" marker="$2" dest="$3" must="$4" tmp rc=0
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp" "$spec" &&
    python3 - "$tmp" "$marker" "$dest" "$must" <<'PY' || rc=1
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
marker, out, must = sys.argv[2], sys.argv[3], sys.argv[4]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if marker in n and not n.endswith("/"):
            dest = os.path.join(out, n.split(marker, 1)[1])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(z.read(n))
if not os.path.exists(os.path.join(out, must)):
    sys.exit(f"no {must} in {wheel}")
PY
  [ -s "$dest/$must" ] || rc=1
  rm -rf "$tmp"
  return $rc
}

install_nccl_headers() {
  [ "${SG_SKIP_NCCL:-0}" = "1" ] && { say "SG_SKIP_NCCL=1: skipping the NCCL headers"; return 0; }
  local nvcc=""
  if command -v nvcc >/dev/null 2>&1; then nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc; fi
  [ -z "$nvcc" ] && return 0  # no CUDA backend, no NCCL
  local cuda_inc
  cuda_inc="$(dirname "$(dirname "$(readlink -f "$nvcc")")")/include"
  if [ -f "$cuda_inc/nccl.h" ] || [ -f /usr/include/nccl.h ] || [ -f "$ROOT/.deps/nccl/include/nccl.h" ]; then
    say "nccl.h found"
    return 0
  fi
  have_pip "NCCL headers" NCCL || return 0
  say "no nccl.h: unpacking the headers of nvidia-nccl-cu13 into .deps/nccl (pip download)"
  if unpack_wheel_headers "nvidia-nccl-cu13>=2.18" "/include/" "$ROOT/.deps/nccl/include" nccl.h; then
    say "NCCL headers are in .deps/nccl/include"
  else
    echo "setup: warning: could not fetch the NCCL headers (pip); building without NCCL" >&2
  fi
}

CUTLASS_VERSION=4.2.0.0
install_cutlass_headers() {
  [ "${SG_SKIP_CUTLASS:-0}" = "1" ] && { say "SG_SKIP_CUTLASS=1: skipping the CUTLASS headers"; return 0; }
  command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || return 0  # no CUDA backend
  local dest="$ROOT/.deps/cutlass"
  if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$CUTLASS_VERSION" ] && [ -f "$dest/include/cutlass/cutlass.h" ]; then
    say "CUTLASS $CUTLASS_VERSION headers are in .deps/cutlass"
    return 0
  fi
  have_pip "CUTLASS headers" "3xTF32 kernels" || return 0
  say "unpacking the CUTLASS $CUTLASS_VERSION headers of nvidia-cutlass into .deps/cutlass (pip download)"
  rm -rf "$dest"
  if unpack_wheel_headers "nvidia-cutlass==$CUTLASS_VERSION" "cutlass_library/source/include/" "$dest/include" \
       cutlass/cutlass.h; then
    echo "$CUTLASS_VERSION" > "$dest/VERSION"
    say "CUTLASS headers are in .deps/cutlass/include"
  else
    rm -rf "$dest"
    echo "setup: warning: could not fetch the CUTLASS headers (pip); building without 3xTF32 kernels" >&2
  fi
}

check_cmake() {
  command -v cmake >/dev/null 2>&1 || die "cmake is not on PATH"
  local v
  v=$(cmake --version | head -n 1 | sed -E 's/^cmake version ([0-9]+\.[0-9]+).*/\1/')
  if [ "$(printf '%s\n%s\n' "$MIN_CMAKE" "$v" | sort -V | head -n 1)" != "$MIN_CMAKE" ]; then
    die "cmake $v is too old: stepgraph needs cmake >= $MIN_CMAKE (Debian 12 and Ubuntu 24.04 ship" \
        "new enough ones; elsewhere use Kitware's APT repository or 'python3 -m pip install cmake')"
  fi
}

if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  say "this is not a Debian/Ubuntu system (no dpkg/apt-get); install these yourself:"
  say "  a C++17 compiler, cmake >= $MIN_CMAKE, ninja, nlohmann-json >= 3.10, CLI11, GoogleTest, zlib, python3"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  say "all dependencies are installed"
  check_cmake
  install_cudnn_headers
  install_nccl_headers
  install_cutlass_headers
  exit 0
fi

# As root directly; otherwise through sudo (which would drop DEBIAN_FRONTEND, hence env).
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    env DEBIAN_FRONTEND=noninteractive "$@"
  else
    sudo env DEBIAN_FRONTEND=noninteractive "$@"
  fi
}
if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
  die "not root and no sudo: run as root to install: ${missing[*]}"
fi

say "installing: ${missing[*]}"
as_root apt-get update
as_root apt-get install -y --no-install-recommends "${missing[@]}"
check_cmake
install_cudnn_headers
install_nccl_headers
install_cutlass_headers
say "done"
