#!/usr/bin/env python3
"""Per-kernel durations from an Nsight Compute CSV, one line per launch, in launch order.

On the GPU machine:
    ncu --metrics gpu__time_duration.sum --csv -c 80 \
        build-cuda/stepgraph bench CONFIG --steps 1 --mode eager > ncu.csv
    python3 scripts/ncu_kernels.py ncu.csv
ncu flushes caches between kernels, so latency-bound kernels read slower than in a graph replay.
"""
import csv
import sys


def main(path: str) -> int:
    rows = list(csv.reader(open(path)))
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None:
        print(f"{path}: no 'Kernel Name' column (not an ncu --csv file?)", file=sys.stderr)
        return 1
    cols = rows[head]
    k, v, i = cols.index("Kernel Name"), cols.index("Metric Value"), cols.index("ID")
    for r in rows[head + 1:]:
        try:
            us = float(r[v].replace(",", "")) / 1000.0
        except (IndexError, ValueError):
            continue
        print(f"{int(r[i]):4d} {us:9.2f} us  {r[k][:100]}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
