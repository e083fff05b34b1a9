#!/usr/bin/env bash
# Prints the folder holding libcudnn.so.9 (for LD_LIBRARY_PATH), or nothing: the system's
# loader cache, the CUDA toolkit, then python3's site-packages (the nvidia-cudnn-cu13 wheel,
# e.g. the one PyTorch installs: .../site-packages/nvidia/cudnn/lib).
#   export LD_LIBRARY_PATH="$(bash scripts/cudnn_lib_dir.sh):${LD_LIBRARY_PATH:-}"
set -uo pipefail
if ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 '; then
  dirname "$(ldconfig -p | grep 'libcudnn\.so\.9 ' | head -n 1 | sed 's/.*=> //')"
  exit 0
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -e "$d/libcudnn.so.9" ] && { echo "$d"; exit 0; }
done
python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
dirs = [p for p in sys.path if p] + site.getsitepackages() + [site.getusersitepackages()]
for d in dict.fromkeys(dirs):
    hits = sorted(glob.glob(os.path.join(d, "nvidia", "**", "libcudnn.so.9"), recursive=True))
    if hits:
        print(os.path.dirname(hits[0]))
        break
PY
