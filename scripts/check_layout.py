#!/usr/bin/env python3
"""The code's shape rules (ARCHITECTURE.md), checked: file sizes, and the includes that would run
against the direction of the rooms. Exits 1 listing every breach; run by scripts/test.sh.

    python3 scripts/check_layout.py [--self-test]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (folder, most lines a file there may have)
SIZE_LIMITS = [("src/backend/cuda/lower", 500), ("src", 700)]

# (files whose path starts with this, includes they may not have: a regex on the include path, why)
FORBIDDEN = [
    ("src/core/", r"^(?!core/|stepgraph/core\.h|stepgraph/rng\.h)(stepgraph|ir|ops|nn|loss|optim|autodiff|plan|backend|train|pinn|data|dist)/",
     "core is the lowest room"),
    ("src/ir/", r"^(backend|train|nn|loss|optim|plan|pinn/problem|dist)/|^stepgraph/(trainer|config|run|nn)\.h",
     "the IR knows only core (and the op table's rows through ir/op_table.h)"),
    ("src/ops/", r"^(backend/cuda|train|dist)/|^stepgraph/(trainer|config|run|bench)\.h",
     "op table rows reach only the IR, autodiff's GradBuilder and the CPU kernels"),
    ("src/autodiff/", r"^(backend|train|ops)/|^stepgraph/(optim|trainer|nn)\.h", "autodiff needs only the IR"),
    ("src/backend/", r"^train/|^stepgraph/(trainer|config|run|bench)\.h", "backends sit below training"),
    ("include/stepgraph/pinn.h", r"^stepgraph/trainer\.h", "pinn.h takes a Trainer by forward declaration"),
    ("include/stepgraph/autodiff.h", r"^stepgraph/optim\.h", "autodiff.h needs only the IR"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_files(root):
    for top in ("src", "include"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".h", ".cpp", ".cu", ".cuh")):
                    yield os.path.relpath(os.path.join(d, f), root)


def check(root):
    problems = []
    for rel in sorted(source_files(root)):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        lines = text.count("\n")
        for folder, most in SIZE_LIMITS:
            if rel.startswith(folder + "/"):
                if lines > most:
                    problems.append(f"{rel}: {lines} lines, more than the {most} a file under {folder}/ may have")
                break
        for prefix, pattern, why in FORBIDDEN:
            if not rel.startswith(prefix):
                continue
            for inc in INCLUDE.findall(text):
                if re.search(pattern, inc):
                    problems.append(f"{rel}: includes \"{inc}\" ({why})")
    return problems


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        write("src/ir/a.cpp", '#include "ir/op_table.h"\n#include "stepgraph/core.h"\n')
        write("src/backend/cuda/lower/big.cpp", "x\n" * 501)
        write("src/train/ok.cpp", "x\n" * 700)
        write("src/backend/cpu/up.cpp", '#include "train/run_folder.h"\n')
        write("include/stepgraph/pinn.h", '#include "stepgraph/trainer.h"\n')
        got = check(d)
        assert len(got) == 3, got
        assert any("big.cpp: 501 lines, more than the 500" in p for p in got), got
        assert any("up.cpp: includes \"train/run_folder.h\"" in p for p in got), got
        assert any("pinn.h: includes \"stepgraph/trainer.h\"" in p for p in got), got
    print("check_layout.py self-test: OK")


def main():
    if "--self-test" in sys.argv[1:]:
        return self_test()
    problems = check(ROOT)
    for p in problems:
        print("layout: " + p)
    if problems:
        return 1
    print("layout: file sizes and include directions as ARCHITECTURE.md says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
