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

conv: the seed's fused convolution, N 32, C 128, 56x56 -> K 256, 3x3, padding 1, stride 1, bias and
ReLU, bf16 NHWC (channels_last):
  1. `stepgraph bench-op conv --json`: one cuDNN graph conv_fprop -> bias -> relu (bf16 tensors,
     fp32 sums), autotuned (heuristic), its output checked at sampled points, then timed: eager
     calls, and one call captured in a CUDA graph and replayed (median of 5 repeats);
  2. PyTorch in this process: torch.relu(F.conv2d(x, w, b)) on bf16 channels_last tensors with
     torch.backends.cudnn.benchmark on, eager, and one call captured in a torch.cuda.CUDAGraph
     and replayed (median of 5 repeats after warm-up); which kernels ran is recorded.

Parity is the issue's aim: torch time / stepgraph time >= 1.

    python3 bench/bench_ops_vs_torch.py --stepgraph build-cuda/stepgraph --results-md bench/RESULTS.md
    python3 bench/bench_ops_vs_torch.py --stepgraph build-cuda/stepgraph --ops conv
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
# The seed's shape (bench-op conv's defaults, passed explicitly so the two sides cannot drift).
CONV = {"batch": 32, "channels": 128, "height": 56, "width": 56, "filters": 256, "kernel": 3, "pad": 1,
        "stride": 1}
OPS = ("sdpa", "conv")
ITERS = 50


def stepgraph_op(binary: str, op: str, options: Sequence[str], iters: int, timeout_s: float = 300) -> Dict[str, Any]:
    """Runs `stepgraph bench-op OP --json` and returns its JSON object (with the command)."""
    cmd = [binary, "bench-op", op, "--json", "--iters", str(iters), *options]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=bvt.library_path_env())
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    lines = p.stdout.strip().splitlines()
    try:
        obj = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or obj.get("event") != "bench_op" or obj.get("op") != op:
        raise RuntimeError(f"unexpected output of {' '.join(cmd)}: {p.stdout[-200:]!r}")
    obj["command"] = " ".join(cmd)
    return obj


def stepgraph_sdpa(binary: str, deterministic: bool, iters: int, timeout_s: float = 300) -> Dict[str, Any]:
    return stepgraph_op(binary, "sdpa", [] if deterministic else ["--nondeterministic"], iters, timeout_s)


def conv_options() -> List[str]:
    return [a for k, v in CONV.items() for a in (f"--{k}", str(v))]


def stepgraph_conv(binary: str, iters: int, timeout_s: float = 300) -> Dict[str, Any]:
    obj = stepgraph_op(binary, "conv", conv_options(), iters, timeout_s)
    for k, v in CONV.items():
        if obj.get(k) != v:
            raise RuntimeError(f"bench-op conv ran {k} {obj.get(k)!r}, not {v}")
    return obj


def conv_flop() -> float:
    """Multiply-adds x 2 of the conv (bias and ReLU not counted), as bench-op conv counts them."""
    c = CONV
    p = (c["height"] + 2 * c["pad"] - c["kernel"]) // c["stride"] + 1
    q = (c["width"] + 2 * c["pad"] - c["kernel"]) // c["stride"] + 1
    return 2.0 * c["batch"] * c["filters"] * p * q * c["channels"] * c["kernel"] ** 2


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
    kernels = cuda_kernels(torch, lambda: torch.autograd.grad(forward(), (q, k, v), d_out))
    return {"forward_us": f_us, "backward_us": b_us, "kernels": kernels,
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}


def cuda_kernels(torch: Any, fn: Any) -> List[str]:
    """The names of the CUDA kernels (and memsets) one call of fn runs, in order, first 6."""
    kernels: List[str] = []
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name not in kernels:
            kernels.append(e.name)
    return [n[:80] for n in kernels[:6]]


def torch_conv(iters: int) -> Dict[str, Any]:
    import torch
    import torch.nn.functional as F
    c = CONV
    torch.backends.cudnn.benchmark = True  # PyTorch's own autotuning, as stepgraph tunes its plan
    g = torch.Generator(device="cuda").manual_seed(0)

    def uniform(*shape: int) -> Any:
        return (torch.rand(*shape, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)

    k = c["kernel"]
    x = uniform(c["batch"], c["channels"], c["height"], c["width"]).contiguous(memory_format=torch.channels_last)
    w = uniform(c["filters"], c["channels"], k, k).contiguous(memory_format=torch.channels_last)
    b = uniform(c["filters"])

    def forward() -> Any:
        return torch.relu(F.conv2d(x, w, b, stride=c["stride"], padding=c["pad"]))

    sync = torch.cuda.synchronize
    eager_us, _ = bvt.median_us(forward, sync, iters)
    # One call captured (after warm-up on a side stream, as torch.cuda.graph asks) and replayed.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = forward()
    graph.replay()
    sync()
    if not y.is_contiguous(memory_format=torch.channels_last):
        raise RuntimeError("torch's conv output is not channels_last")
    graph_us, _ = bvt.median_us(graph.replay, sync, iters)
    return {"eager_us": eager_us, "graph_us": graph_us, "kernels": cuda_kernels(torch, forward),
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}


def ratio(torch_us: Optional[float], sg_us: Optional[float]) -> Optional[float]:
    return torch_us / sg_us if torch_us and sg_us else None


def us(d: Optional[dict], k: str) -> str:
    return f"{d[k]:.1f}" if d and d.get(k) is not None else "error"


def x(v: Optional[float]) -> str:
    return f"{v:.2f}x" if v else "—"


def verdict(r: Optional[float]) -> str:
    return "—" if r is None else ("PASS" if r >= 1.0 else "FAIL")


def sdpa_lines(meta: Dict[str, Any], sg: Optional[dict], sg_nd: Optional[dict], tv: Optional[dict]) -> List[str]:
    f_ratio = ratio(tv and tv.get("forward_us"), sg and sg.get("forward_us"))
    b_ratio = ratio(tv and tv.get("backward_us"), sg and sg.get("backward_us"))
    b_ratio_nd = ratio(tv and tv.get("backward_us"), sg_nd and sg_nd.get("backward_us"))
    shape = f"B {SDPA['batch']}, H {SDPA['heads']}, S {SDPA['seq']}, D {SDPA['dim']}, causal, bf16"
    return [f"- stepgraph: `{meta['stepgraph']}` ({meta.get('git') or '?'}); "
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
            f"{x(b_ratio)}; {x(b_ratio_nd)} | {us(sg, 'forward_backward_graph_us')} |", "",
            f"Targets (parity, torch / stepgraph >= 1): forward {verdict(f_ratio)} ({x(f_ratio)}), "
            f"backward {verdict(b_ratio)} ({x(b_ratio)} deterministic, {x(b_ratio_nd)} any order)", ""]


def conv_lines(meta: Dict[str, Any], sg: Optional[dict], tv: Optional[dict]) -> List[str]:
    c = CONV
    e_ratio = ratio(tv and tv.get("eager_us"), sg and sg.get("eager_us"))
    g_ratio = ratio(tv and tv.get("graph_us"), sg and sg.get("graph_us"))

    def tflops(d: Optional[dict], k: str) -> str:
        return f"{conv_flop() / d[k] * 1e-6:.0f}" if d and d.get(k) else "—"

    checked = (f"output checked at {sg.get('checked_points')} sampled points against a double-precision "
               f"reference (largest difference {sg.get('max_abs_error', 0):.3g})") if sg else "?"
    shape = (f"N {c['batch']}, C {c['channels']}, {c['height']}x{c['width']} → K {c['filters']}, "
             f"{c['kernel']}x{c['kernel']} pad {c['pad']} stride {c['stride']}, + bias + relu, bf16 NHWC")
    return [f"- conv: stepgraph `{meta['stepgraph']}`: one cuDNN graph conv_fprop → bias → relu "
            f"(bf16 tensors, fp32 sums), engine {sg.get('engine') if sg else '?'}, autotune "
            f"{sg.get('autotune') if sg else '?'}; {checked}; plan: {sg.get('plan') if sg else '?'}",
            f"- conv: median of 5 repeats of {meta['iters']} calls after warm-up, µs per call; torch: "
            "torch.relu(F.conv2d(x, w, b)) on bf16 channels_last tensors, cudnn.benchmark on (kernels: "
            f"{', '.join(tv['kernels']) if tv else '?'}); CUDA graph: one call captured (stepgraph: "
            "cudaStreamBeginCapture; torch: torch.cuda.graph) and replayed", "",
            "| op | stepgraph eager µs | torch eager µs | eager torch / stepgraph | stepgraph CUDA graph µs "
            "| torch CUDA graph µs | graph torch / stepgraph | TFLOP/s graph (stepgraph; torch) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
            f"| conv {shape} | {us(sg, 'eager_us')} | {us(tv, 'eager_us')} | {x(e_ratio)} | "
            f"{us(sg, 'graph_us')} | {us(tv, 'graph_us')} | {x(g_ratio)} | "
            f"{tflops(sg, 'graph_us')}; {tflops(tv, 'graph_us')} |", "",
            f"Targets (parity, torch / stepgraph >= 1): conv eager {verdict(e_ratio)} ({x(e_ratio)}), "
            f"conv CUDA graph {verdict(g_ratio)} ({x(g_ratio)})", ""]


def render_section(meta: Dict[str, Any], errors: Dict[str, str], sdpa: Optional[Dict[str, Optional[dict]]] = None,
                   conv: Optional[Dict[str, Optional[dict]]] = None) -> str:
    """One RESULTS.md section: the sdpa rows (sdpa = {"sg", "sg_nd", "torch"}) and the conv rows
    (conv = {"sg", "torch"}), each only when that op was run."""
    tv = (sdpa or {}).get("torch") or (conv or {}).get("torch")
    lines = [f"### {meta['date']} — {meta.get('gpu') or 'GPU ?'} — single cuDNN ops", "",
             f"- command: `{meta['command']}`",
             f"- driver {meta.get('driver') or '?'}, torch {tv.get('torch') if tv else '?'} "
             f"(cuDNN {tv.get('cudnn') if tv else '?'}), python {meta['python']}"]
    if sdpa is not None:
        lines += sdpa_lines(meta, sdpa.get("sg"), sdpa.get("sg_nd"), sdpa.get("torch"))
    if conv is not None:
        lines += conv_lines(meta, conv.get("sg"), conv.get("torch"))
    if errors:
        lines += ["Errors:", *[f"- {k}: {v}" for k, v in errors.items()], ""]
    return "\n".join(lines) + "\n"


def parse_ops(text: str) -> List[str]:
    ops = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad or not ops:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(OPS)}; got {text!r}")
    return list(dict.fromkeys(ops))


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stepgraph", default=str(bvt.REPO / "build" / "stepgraph"), help="the stepgraph binary")
    ap.add_argument("--results-md", type=Path, help="append a section to this RESULTS.md")
    ap.add_argument("--iters", type=int, default=ITERS, help=f"calls per timed repeat (default {ITERS})")
    ap.add_argument("--ops", type=parse_ops, default=list(OPS),
                    help=f"which ops, comma-separated (default {','.join(OPS)})")
    ap.add_argument("--self-test", action="store_true", help="run this script's own tests (no GPU)")
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    errors: Dict[str, str] = {}
    sdpa: Optional[Dict[str, Optional[dict]]] = None
    conv: Optional[Dict[str, Optional[dict]]] = None
    if "sdpa" in args.ops:
        sdpa = {"sg": None, "sg_nd": None, "torch": None}
        try:
            sdpa["sg"] = stepgraph_sdpa(args.stepgraph, True, args.iters)
            sdpa["sg_nd"] = stepgraph_sdpa(args.stepgraph, False, args.iters)
        except Exception as e:  # noqa: BLE001 - recorded in the section
            errors["stepgraph sdpa"] = bvt.err_str(e)
        try:
            sdpa["torch"] = torch_sdpa(args.iters)
        except Exception as e:  # noqa: BLE001
            errors["torch sdpa"] = bvt.err_str(e)
    if "conv" in args.ops:
        conv = {"sg": None, "torch": None}
        try:
            conv["sg"] = stepgraph_conv(args.stepgraph, args.iters)
        except Exception as e:  # noqa: BLE001
            errors["stepgraph conv"] = bvt.err_str(e)
        try:
            conv["torch"] = torch_conv(args.iters)
        except Exception as e:  # noqa: BLE001
            errors["torch conv"] = bvt.err_str(e)
    ran = [r["sg"] for r in (sdpa, conv) if r is not None]
    gpu = next((r.get("gpu") for r in ran if r), None)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "gpu": gpu,
            "command": "python3 bench/bench_ops_vs_torch.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "driver": bvt.driver_version(), "python": sys.version.split()[0], "stepgraph": args.stepgraph,
            "git": bvt.git_describe(), "iters": args.iters}
    section = render_section(meta, errors, sdpa=sdpa, conv=conv)
    print(section)
    if args.results_md:
        bvt.append_results_md(args.results_md, section)
        print(f"appended to {args.results_md}")
    return 0 if all(ran) else 1


def self_test() -> int:
    import contextlib
    import io
    import tempfile
    import unittest

    fake_line = {"event": "bench_op", "op": "sdpa", "forward_us": 40.0, "backward_us": 130.0,
                 "forward_backward_graph_us": 170.0, "plans": ["cuDNN graph sdpa forward (causal)", "bwd"],
                 "gpu": "NVIDIA H200"}
    fake_conv = {"event": "bench_op", "op": "conv", **CONV, "bias": True, "relu": True, "eager_us": 200.0,
                 "graph_us": 190.0, "engine": "eng0", "autotune": "heuristic", "checked_points": 4096,
                 "max_abs_error": 0.0123, "plan": "cuDNN graph conv_fprop + bias + relu (bf16), engine eng0",
                 "gpu": "NVIDIA H200"}
    meta = {"date": "d", "gpu": "G", "command": "c", "driver": "1", "python": "3", "stepgraph": "s",
            "git": "g", "iters": 5}
    tv_conv = {"eager_us": 230.0, "graph_us": 180.0, "kernels": ["k1", "k2"], "torch": "2", "cudnn": 9}

    def fake_binary(d: str, body: str) -> Path:
        fake = Path(d) / "stepgraph"
        fake.write_text("#!/bin/sh\n" + body)
        fake.chmod(0o755)
        return fake

    def run_main(argv: List[str]) -> Any:
        had_torch = "torch" in sys.modules
        sys.modules.setdefault("torch", None)  # `import torch` raises ImportError
        try:
            with contextlib.redirect_stdout(io.StringIO()) as so:
                rc = main(argv)
        finally:
            if not had_torch:
                del sys.modules["torch"]
        return rc, so.getvalue()

    # Answers bench-op sdpa and bench-op conv as the real binary would, recording its arguments.
    both = ("echo \"$*\" >> \"$(dirname \"$0\")/args\"\n"
            "case \"$*\" in *conv*) echo '" + json.dumps(fake_conv) + "';; "
            "*--nondeterministic*) echo '" + json.dumps(dict(fake_line, backward_us=99.0)) + "';; "
            "*) echo '" + json.dumps(fake_line) + "';; esac\n")

    class T(unittest.TestCase):
        def test_section(self) -> None:
            tv = {"forward_us": 50.0, "backward_us": 120.0, "kernels": ["k"], "torch": "2", "cudnn": 9}
            nd = dict(fake_line, backward_us=100.0)
            sec = render_section(meta, {}, sdpa={"sg": fake_line, "sg_nd": nd, "torch": tv})
            self.assertIn("| 40.0 | 50.0 | 1.25x | 130.0 | 100.0 | 120.0 | 0.92x; 1.20x | 170.0 |", sec)
            self.assertIn("forward PASS (1.25x), backward FAIL (0.92x deterministic, 1.20x any order)", sec)
            self.assertNotIn("conv", sec)
            bad = render_section(meta, {"stepgraph sdpa": "boom"}, sdpa={"sg": None, "sg_nd": None, "torch": tv})
            self.assertIn("| error | 50.0 | — |", bad)
            self.assertIn("- stepgraph sdpa: boom", bad)

        def test_conv_section(self) -> None:
            self.assertEqual(conv_flop(), 2.0 * 32 * 256 * 56 * 56 * 128 * 9)
            sec = render_section(meta, {}, conv={"sg": fake_conv, "torch": tv_conv})
            tf_sg, tf_torch = conv_flop() / 190.0 * 1e-6, conv_flop() / 180.0 * 1e-6
            self.assertIn(f"| 200.0 | 230.0 | 1.15x | 190.0 | 180.0 | 0.95x | {tf_sg:.0f}; {tf_torch:.0f} |", sec)
            self.assertIn("N 32, C 128, 56x56 → K 256, 3x3 pad 1 stride 1, + bias + relu, bf16 NHWC", sec)
            self.assertIn("conv eager PASS (1.15x), conv CUDA graph FAIL (0.95x)", sec)
            self.assertIn("engine eng0, autotune heuristic", sec)
            self.assertIn("checked at 4096 sampled points", sec)
            self.assertIn("kernels: k1, k2", sec)
            self.assertIn("torch 2 (cuDNN 9)", sec)
            self.assertNotIn("SDPA", sec)
            bad = render_section(meta, {"stepgraph conv": "boom"}, conv={"sg": None, "torch": tv_conv})
            self.assertIn("| error | 230.0 | — | error | 180.0 | — | —; ", bad)
            self.assertIn("conv eager — (—), conv CUDA graph — (—)", bad)

        def test_options(self) -> None:
            self.assertEqual(conv_options()[:4], ["--batch", "32", "--channels", "128"])
            self.assertEqual(conv_options()[-2:], ["--stride", "1"])
            self.assertEqual(parse_args([]).ops, ["sdpa", "conv"])
            self.assertEqual(parse_args(["--ops", "conv"]).ops, ["conv"])
            self.assertEqual(parse_args(["--ops", "conv, sdpa,conv"]).ops, ["conv", "sdpa"])
            with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
                parse_args(["--ops", "sdpa,matmul"])
            self.assertIn("expected a comma-separated list of sdpa, conv", err.getvalue())

        def test_main_with_a_fake_binary_and_no_torch(self) -> None:
            with tempfile.TemporaryDirectory() as d:
                fake = fake_binary(d, both)
                md = Path(d) / "RESULTS.md"
                md.write_text("# x\n\n## Runs\n")
                rc, out = run_main(["--stepgraph", str(fake), "--results-md", str(md), "--iters", "3"])
                self.assertEqual(rc, 0)
                self.assertIn("| 40.0 | error | — | 130.0 | 99.0 | error |", out)
                self.assertIn("| 200.0 | error | — | 190.0 | error | — |", out)
                self.assertIn("- torch sdpa: ", out)
                self.assertIn("- torch conv: ", out)
                self.assertIn("single cuDNN ops", md.read_text())
                self.assertIn("conv eager — (—)", md.read_text())
                self.assertEqual(md.read_text().count("## Runs"), 1)
                args = (Path(d) / "args").read_text()
                self.assertIn("bench-op conv --json --iters 3 --batch 32 --channels 128 --height 56 --width 56 "
                              "--filters 256 --kernel 3 --pad 1 --stride 1", args)
                self.assertIn("bench-op sdpa --json --iters 3 --nondeterministic", args)

        def test_only_conv(self) -> None:
            with tempfile.TemporaryDirectory() as d:
                fake = fake_binary(d, both)
                rc, out = run_main(["--stepgraph", str(fake), "--ops", "conv", "--iters", "3"])
                self.assertEqual(rc, 0)
                self.assertIn("NVIDIA H200 — single cuDNN ops", out)
                self.assertIn("| 200.0 | error |", out)
                self.assertNotIn("SDPA", out)
                self.assertNotIn("sdpa", (Path(d) / "args").read_text())

        def test_failing_or_wrong_binary_is_an_error(self) -> None:
            with tempfile.TemporaryDirectory() as d:
                fake = fake_binary(d, "echo 'stepgraph: error: no GPU' >&2\nexit 1\n")
                with self.assertRaisesRegex(RuntimeError, "no GPU"):
                    stepgraph_sdpa(str(fake), True, 3)
                with self.assertRaisesRegex(RuntimeError, "no GPU"):
                    stepgraph_conv(str(fake), 3)
                rc, out = run_main(["--stepgraph", str(fake), "--ops", "conv", "--iters", "3"])
                self.assertEqual(rc, 1)
                self.assertIn("- stepgraph conv: RuntimeError: ", out)
            with tempfile.TemporaryDirectory() as d:
                fake = fake_binary(d, "echo 'not json'\n")
                with self.assertRaisesRegex(RuntimeError, "unexpected output"):
                    stepgraph_conv(str(fake), 3)
            with tempfile.TemporaryDirectory() as d:
                fake = fake_binary(d, "echo '" + json.dumps(dict(fake_conv, channels=64)) + "'\n")
                with self.assertRaisesRegex(RuntimeError, "channels 64, not 128"):
                    stepgraph_conv(str(fake), 3)
            with tempfile.TemporaryDirectory() as d:
                fake = fake_binary(d, "echo '" + json.dumps(fake_line) + "'\n")  # sdpa's answer to conv
                with self.assertRaisesRegex(RuntimeError, "unexpected output"):
                    stepgraph_conv(str(fake), 3)

    res = unittest.TextTestRunner(verbosity=1).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))
    return 0 if res.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
