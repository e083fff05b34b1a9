#!/usr/bin/env python3
"""Single cuDNN ops, stepgraph against PyTorch in one run on the same GPU.

sdpa: scaled dot-product attention, batch 4, 16 heads, sequence 1024, head size 64, causal, bf16,
with q, k, v as [B, S, H, D] rows (heads interleaved, as a projection writes them):
  1. `stepgraph bench-op sdpa --json`: cuDNN's fused SDPA graphs (forward with the logsumexp
     statistics; backward deterministic, the engine a training step uses, and once with
     --nondeterministic), each timed alone (median of 5 repeats), and the two as one CUDA graph;
  2. PyTorch in this process: F.scaled_dot_product_attention on the same layout (a [B, S, H, D]
     tensor viewed as [B, H, S, D]) with PyTorch's own backend choice (which kernels ran is
     recorded): forward alone, backward alone (torch.autograd.grad with retain_graph), both
     timed like bench_vs_torch.py's steps (median of 5 repeats after warm-up).
Parity is the issue's aim: torch time / stepgraph time >= 1.

    python3 bench/bench_ops_vs_torch.py --stepgraph build-cuda/stepgraph --results-md bench/RESULTS.md
    python3 bench/bench_ops_vs_torch.py --self-test     # CPU only, never imports torch
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_vs_torch as bvt  # noqa: E402  (imports neither torch nor jax)

SDPA = {"batch": 4, "heads": 16, "seq": 1024, "dim": 64, "causal": True}
ITERS = 50


def stepgraph_sdpa(binary: str, deterministic: bool, iters: int, timeout_s: float = 300) -> Dict[str, Any]:
    cmd = [binary, "bench-op", "sdpa", "--json", "--iters", str(iters)]
    cmd += [] if deterministic else ["--nondeterministic"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=bvt.library_path_env())
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    obj = json.loads(p.stdout.strip().splitlines()[-1])
    if obj.get("event") != "bench_op" or obj.get("op") != "sdpa":
        raise RuntimeError(f"unexpected output of {' '.join(cmd)}: {p.stdout[-200:]}")
    obj["command"] = " ".join(cmd)
    return obj


def torch_sdpa(iters: int) -> Dict[str, Any]:
    import torch
    import torch.nn.functional as F
    B, H, S, D = SDPA["batch"], SDPA["heads"], SDPA["seq"], SDPA["dim"]
    g = torch.Generator(device="cuda").manual_seed(0)

    def rows() -> Any:
        return (torch.rand(B, S, H, D, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16).requires_grad_()

    q, k, v = rows(), rows(), rows()
    d_out = (torch.rand(B, H, S, D, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)

    def forward() -> Any:
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=SDPA["causal"])

    out = forward()
    sync = torch.cuda.synchronize
    f_us, _ = bvt.median_us(lambda: forward(), sync, iters)
    b_us, _ = bvt.median_us(lambda: torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True), sync, iters)
    kernels: List[str] = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        o2 = forward()
        torch.autograd.grad(o2, (q, k, v), d_out)
        sync()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name not in kernels:
            kernels.append(e.name)
    return {"forward_us": f_us, "backward_us": b_us, "kernels": [n[:80] for n in kernels[:6]],
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}


def ratio(torch_us: Optional[float], sg_us: Optional[float]) -> Optional[float]:
    return torch_us / sg_us if torch_us and sg_us else None


def render_section(meta: Dict[str, Any], sg: Optional[dict], sg_nd: Optional[dict], tv: Optional[dict],
                   errors: Dict[str, str]) -> str:
    def us(d: Optional[dict], k: str) -> str:
        return f"{d[k]:.1f}" if d and d.get(k) is not None else "error"

    def x(v: Optional[float]) -> str:
        return f"{v:.2f}x" if v else "—"

    f_ratio = ratio(tv and tv.get("forward_us"), sg and sg.get("forward_us"))
    b_ratio = ratio(tv and tv.get("backward_us"), sg and sg.get("backward_us"))
    b_ratio_nd = ratio(tv and tv.get("backward_us"), sg_nd and sg_nd.get("backward_us"))
    shape = f"B {SDPA['batch']}, H {SDPA['heads']}, S {SDPA['seq']}, D {SDPA['dim']}, causal, bf16"
    lines = [f"### {meta['date']} — {meta.get('gpu') or 'GPU ?'} — single cuDNN ops", "",
             f"- command: `{meta['command']}`",
             f"- driver {meta.get('driver') or '?'}, torch {tv.get('torch') if tv else '?'} "
             f"(cuDNN {tv.get('cudnn') if tv else '?'}), python {meta['python']}",
             f"- stepgraph: `{meta['stepgraph']}` ({meta.get('git') or '?'}); "
             f"plans: {'; '.join(sg['plans']) if sg else '?'}",
             f"- median of 5 repeats of {meta['iters']} calls after warm-up, µs per call; q, k, v "
             "as [B, S, H, D] rows; torch: F.scaled_dot_product_attention on transposed views, its "
             f"default backend (kernels: {', '.join(tv['kernels']) if tv else '?'}); backward alone "
             "(torch.autograd.grad with retain_graph)", "",
             "| op | stepgraph fwd µs | torch fwd µs | fwd torch / stepgraph | stepgraph bwd µs "
             "(deterministic) | stepgraph bwd µs (any order) | torch bwd µs | bwd torch / stepgraph "
             "(deterministic; any order) | stepgraph fwd+bwd as one CUDA graph µs |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
             f"| SDPA {shape} | {us(sg, 'forward_us')} | {us(tv, 'forward_us')} | {x(f_ratio)} | "
             f"{us(sg, 'backward_us')} | {us(sg_nd, 'backward_us')} | {us(tv, 'backward_us')} | "
             f"{x(b_ratio)}; {x(b_ratio_nd)} | {us(sg, 'forward_backward_graph_us')} |", ""]
    verdict = lambda r: "—" if r is None else ("PASS" if r >= 1.0 else "FAIL")  # noqa: E731
    lines += [f"Targets (parity, torch / stepgraph >= 1): forward {verdict(f_ratio)} ({x(f_ratio)}), "
              f"backward {verdict(b_ratio)} ({x(b_ratio)} deterministic, {x(b_ratio_nd)} any order)", ""]
    if errors:
        lines += ["Errors:", *[f"- {k}: {v}" for k, v in errors.items()], ""]
    return "\n".join(lines) + "\n"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepgraph", default=str(bvt.REPO / "build" / "stepgraph"), help="the stepgraph binary")
    ap.add_argument("--results-md", type=Path, help="append a section to this RESULTS.md")
    ap.add_argument("--iters", type=int, default=ITERS, help=f"calls per timed repeat (default {ITERS})")
    ap.add_argument("--self-test", action="store_true", help="run this script's own tests (no GPU)")
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    errors: Dict[str, str] = {}
    sg = sg_nd = tv = None
    try:
        sg = stepgraph_sdpa(args.stepgraph, True, args.iters)
        sg_nd = stepgraph_sdpa(args.stepgraph, False, args.iters)
    except Exception as e:  # noqa: BLE001 - recorded in the section
        errors["stepgraph"] = bvt.err_str(e)
    try:
        tv = torch_sdpa(args.iters)
    except Exception as e:  # noqa: BLE001
        errors["torch"] = bvt.err_str(e)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": sg.get("gpu") if sg else None,
            "command": "python3 bench/bench_ops_vs_torch.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "driver": bvt.driver_version(), "python": sys.version.split()[0], "stepgraph": args.stepgraph,
            "git": bvt.git_describe(), "iters": args.iters}
    section = render_section(meta, sg, sg_nd, tv, errors)
    print(section)
    if args.results_md:
        bvt.append_results_md(args.results_md, section)
        print(f"appended to {args.results_md}")
    return 0 if sg else 1


def self_test() -> int:
    import contextlib
    import io
    import os
    import tempfile
    import unittest

    fake_line = {"event": "bench_op", "op": "sdpa", "forward_us": 40.0, "backward_us": 130.0,
                 "forward_backward_graph_us": 170.0, "plans": ["cuDNN graph sdpa forward (causal)", "bwd"],
                 "gpu": "NVIDIA H200"}

    class T(unittest.TestCase):
        def test_section(self) -> None:
            meta = {"date": "d", "gpu": "G", "command": "c", "driver": "1", "python": "3", "stepgraph": "s",
                    "git": "g", "iters": 5}
            tv = {"forward_us": 50.0, "backward_us": 120.0, "kernels": ["k"], "torch": "2", "cudnn": 9}
            nd = dict(fake_line, backward_us=100.0)
            sec = render_section(meta, fake_line, nd, tv, {})
            self.assertIn("| 40.0 | 50.0 | 1.25x | 130.0 | 100.0 | 120.0 | 0.92x; 1.20x | 170.0 |", sec)
            self.assertIn("forward PASS (1.25x), backward FAIL (0.92x deterministic, 1.20x any order)", sec)
            self.assertIn("| error | 50.0 | — |", render_section(meta, None, None, tv, {"stepgraph": "boom"}))

        def test_main_with_a_fake_binary_and_no_torch(self) -> None:
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "stepgraph"
                fake.write_text("#!/bin/sh\n"
                                "case \"$*\" in *--nondeterministic*) echo '" + json.dumps(dict(fake_line, backward_us=99.0)) +
                                "';; *) echo '" + json.dumps(fake_line) + "';; esac\n")
                fake.chmod(0o755)
                md = Path(d) / "RESULTS.md"
                md.write_text("# x\n\n## Runs\n")
                had_torch = "torch" in sys.modules
                sys.modules.setdefault("torch", None)  # `import torch` raises ImportError
                try:
                    with contextlib.redirect_stdout(io.StringIO()) as so:
                        rc = main(["--stepgraph", str(fake), "--results-md", str(md), "--iters", "3"])
                finally:
                    if not had_torch:
                        del sys.modules["torch"]
                self.assertEqual(rc, 0)
                out = so.getvalue()
                self.assertIn("| 40.0 | error | — | 130.0 | 99.0 | error |", out)
                self.assertIn("- torch: ", out)
                self.assertIn("single cuDNN ops", md.read_text())
                self.assertEqual(md.read_text().count("## Runs"), 1)

        def test_failing_binary_is_an_error(self) -> None:
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "stepgraph"
                fake.write_text("#!/bin/sh\necho 'stepgraph: error: no GPU' >&2\nexit 1\n")
                fake.chmod(0o755)
                with self.assertRaisesRegex(RuntimeError, "no GPU"):
                    stepgraph_sdpa(str(fake), True, 3)
                _ = os.environ  # the environment is passed through unchanged

    res = unittest.TextTestRunner(verbosity=1).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))
    return 0 if res.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
