#!/usr/bin/env bash
# Prints the folder holding libcudnn.so.9 (for LD_LIBRARY_PATH), or nothing when the system's
# loader finds it anyway (ldconfig's cache) or it is nowhere. Looked for in the CUDA toolkit,
# then python3's site-packages (the nvidia-cudnn-cu13 wheel, e.g. the one PyTorch installs:
# .../site-packages/nvidia/cudnn/lib). A library the loader already finds is not printed: putting
# a system folder first on LD_LIBRARY_PATH makes PyTorch (in the bench scripts) load that cuDNN
# instead of its own and refuse it ("cuDNN version incompatibility").
#   export LD_LIBRARY_PATH="$(bash scripts/cudnn_lib_dir.sh):${LD_LIBRARY_PATH:-}"
set -uo pipefail
ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 ' && exit 0
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
