#!/usr/bin/env bash
# Prints the folder holding libnccl.so.2 (for LD_LIBRARY_PATH), or nothing: python3's
# site-packages first (the nvidia-nccl-cu13 wheel, e.g. the one PyTorch installs:
# .../site-packages/nvidia/nccl/lib), then the system's loader cache and the CUDA toolkit.
#   export LD_LIBRARY_PATH="$(bash scripts/nccl_lib_dir.sh):${LD_LIBRARY_PATH:-}"
# PYTHON=/path/to/python3 picks the Python environment to look in (default: python3 on PATH).
set -uo pipefail
"${PYTHON:-python3}" - <<'PY' 2>/dev/null && exit 0
import glob, os, site, sys
dirs = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages()]
for d in dict.fromkeys(dirs):
    hits = sorted(glob.glob(os.path.join(d, "nvidia", "**", "libnccl.so.2"), recursive=True))
    if hits:
        print(os.path.dirname(hits[0]))
        sys.exit(0)
sys.exit(1)
PY
if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  dirname "$(ldconfig -p | grep 'libnccl\.so\.2 ' | head -n 1 | sed 's/.*=> //')"
  exit 0
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libnccl.so.2" ] && { echo "$d"; exit 0; }
done
exit 0
