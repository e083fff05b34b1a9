#!/usr/bin/env bash
# Installs everything stepgraph needs to build and test on a fresh Debian or Ubuntu machine:
# a C++17 compiler, CMake (>= 3.24), Ninja, nlohmann-json, CLI11, GoogleTest, zlib and Python 3.
#
#   bash scripts/setup.sh
#
# Runs apt-get as root, or through sudo when not root. When every package is already installed
# it returns at once without touching apt. It does not install CUDA: the CUDA backend is built
# automatically when nvcc is found (on PATH or at /usr/local/cuda/bin/nvcc).
set -euo pipefail

PACKAGES=(build-essential cmake ninja-build nlohmann-json3-dev libcli11-dev libgtest-dev zlib1g-dev python3 python3-venv python3-dev)
MIN_CMAKE=3.24

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }

installed() { dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'; }

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
say "done"
