#!/usr/bin/env python3
"""Two builds of stepgraph side by side on the same GPU: `stepgraph bench` for each config with
the old and the new binary, interleaved (old, new, old, new, ...) so that clock and thermal drift
fall on both, and the median of the rounds per binary. Prints a table (graph us per step, new /
old) and, with --json, writes every run.

    python3 bench/ab_builds.py --old OLD/stepgraph --new NEW/stepgraph \
        bench/configs/seed_mlp.json bench/pinn_configs/poisson_4x64.json [--rounds 3] [--steps N]

Used to check that a change costs no performance (issue 29: within 3 %); the figures go to
bench/RESULTS.md with the date, GPU and this command.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_torch import library_path_env, parse_bench_output  # noqa: E402


def bench(binary, config, steps):
    cmd = [binary, "bench", config, "--json"]
    if steps:
        cmd += ["--steps", str(steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=library_path_env())
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()[-400:]}")
    return parse_bench_output(out.stdout)[0]


def compare(old, new, configs, rounds, steps, run=bench):
    rows = []
    for config in configs:
        runs = {"old": [], "new": []}
        for _ in range(rounds):
            for which, binary in (("old", old), ("new", new)):
                runs[which].append(run(binary, config, steps))
        o = statistics.median(r["graph_us_per_step"] for r in runs["old"])
        n = statistics.median(r["graph_us_per_step"] for r in runs["new"])
        rows.append({"config": config, "old_graph_us": o, "new_graph_us": n, "new_over_old": n / o,
                     "old_runs": runs["old"], "new_runs": runs["new"]})
    return rows


def table(rows):
    lines = ["| config | old graph us/step | new graph us/step | new / old |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {os.path.basename(r['config'])} | {r['old_graph_us']:.2f} | {r['new_graph_us']:.2f} | "
                     f"{r['new_over_old']:.3f} |")
    return "\n".join(lines)


def self_test():
    calls = []

    def fake(binary, config, steps):
        calls.append(binary)
        base = 100.0 if "a" in config else 20.0
        return {"graph_us_per_step": base * (1.02 if binary == "new" else 1.0), "eager_us_per_step": base * 2}

    rows = compare("old", "new", ["a.json", "b.json"], 3, 0, run=fake)
    assert calls == ["old", "new"] * 6, calls
    assert abs(rows[0]["new_over_old"] - 1.02) < 1e-9 and abs(rows[1]["old_graph_us"] - 20.0) < 1e-9, rows
    t = table(rows)
    assert "| a.json | 100.00 | 102.00 | 1.020 |" in t, t
    print("ab_builds.py self-test: OK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--old", help="the previous build's stepgraph binary")
    ap.add_argument("--new", help="this build's stepgraph binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="launches per repeat (default: stepgraph bench's)")
    ap.add_argument("--json", help="write every run here")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not (a.old and a.new and a.configs) or a.rounds < 1:
        ap.error("give --old, --new, at least one config, and --rounds >= 1")
    rows = compare(a.old, a.new, a.configs, a.rounds, a.steps)
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
