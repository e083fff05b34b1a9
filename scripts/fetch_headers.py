"""Unpacks the C++ headers the CUDA backend builds with from their PyPI wheels into .deps/, where
scripts/setup.sh puts them and CMake looks: the cuDNN frontend (nvidia-cudnn-frontend, into
.deps/cudnn-frontend/include) and CUTLASS (nvidia-cutlass, into .deps/cutlass/include), at the
versions scripts/setup.sh pins. Only the headers: the wheels' Python parts and their dependency
chains (nvidia-cutlass-dsl, scipy, ...) are not installed, which is why these are not listed as
build requirements in pyproject.toml.

Standard library only (PyPI's JSON API over HTTPS, each wheel's sha256 checked), so it runs in
pip's isolated build environment: a `pip install .` with the CUDA backend calls it from CMake
when the headers are missing.

    python3 scripts/fetch_headers.py [--dest DIR]    (default: .deps beside this script's folder)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
import urllib.parse
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

# (PyPI project, setup.sh's version variable, member-path marker, folder under --dest, a header that must exist)
HEADERS = [
    ("nvidia-cudnn-frontend", "CUDNN_FRONTEND_VERSION", "include/", "cudnn-frontend/include", "cudnn_frontend.h"),
    ("nvidia-cutlass", "CUTLASS_VERSION", "cutlass_library/source/include/", "cutlass/include", "cutlass/cutlass.h"),
]


def pinned(variable: str) -> str:
    text = open(os.path.join(HERE, "setup.sh")).read()
    m = re.search(rf"^{variable}=([0-9.]+)$", text, re.M)
    if not m:
        raise SystemExit(f"fetch_headers: scripts/setup.sh pins no {variable}")
    return m.group(1)


def wheel_of(project: str, version: str) -> dict:
    index = f"https://pypi.org/pypi/{project}/json"
    with urllib.request.urlopen(index, timeout=60) as r:
        files = json.load(r)["releases"].get(version, [])
    for f in files:  # a mirror may give them relative to the index
        f["url"] = urllib.parse.urljoin(index, f["url"])
    wheels = [f for f in files if f["packagetype"] == "bdist_wheel"]
    # The headers are the same in every wheel of a release: prefer a pure one, then Linux x86-64.
    wheels.sort(key=lambda f: (not f["filename"].endswith("-none-any.whl"), "x86_64" not in f["filename"]))
    if not wheels:
        raise SystemExit(f"fetch_headers: {project} {version} has no wheel on PyPI")
    return wheels[0]


def fetch(project: str, version: str, marker: str, dest: str, must: str) -> None:
    version_file = os.path.join(os.path.dirname(dest), "VERSION")
    if os.path.exists(os.path.join(dest, must)) and os.path.exists(version_file):
        if open(version_file).read().strip() == version:
            print(f"fetch_headers: {project} {version} headers are in {dest}")
            return
    w = wheel_of(project, version)
    print(f"fetch_headers: {w['filename']} ({w['size'] // 1_000_000} MB) -> {dest}")
    with urllib.request.urlopen(w["url"], timeout=300) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != w["digests"]["sha256"]:
        raise SystemExit(f"fetch_headers: {w['filename']}: sha256 does not match PyPI's")
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for name in z.namelist():
            path = "/" + name  # the marker starts the member's path or follows a "/"
            if "/" + marker in path and not name.endswith("/"):
                rel = path.split("/" + marker, 1)[1]
                if rel.startswith("/") or ".." in rel.split("/"):
                    continue  # never outside dest
                out = os.path.join(dest, rel)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(z.read(name))
    if not os.path.exists(os.path.join(dest, must)):
        raise SystemExit(f"fetch_headers: {w['filename']} has no {must}")
    with open(version_file, "w") as f:
        f.write(version + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", default=os.path.join(os.path.dirname(HERE), ".deps"))
    args = p.parse_args()
    for project, variable, marker, folder, must in HEADERS:
        fetch(project, pinned(variable), marker, os.path.join(args.dest, folder), must)
    return 0


if __name__ == "__main__":
    sys.exit(main())
