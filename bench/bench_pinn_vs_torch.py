#!/usr/bin/env python3
"""stepgraph's physics-informed training step against PyTorch nested autograd on the same GPU.

Both workloads solve Poisson 2D, -(u_xx + u_yy) = 2 pi^2 sin(pi x) sin(pi y) on the unit square
with u = 0 on its boundary (u = sin(pi x) sin(pi y)); loss = mean(residual^2) + mean(u_b^2), Adam
lr 1e-3, fp32 with TF32 off, collocation points fixed:
  poisson_4x64:  2 -> 4 x 64 tanh -> 1, 8192 interior + 1024 boundary points;
  fourier_4x128: Fourier features (32, sigma 2, fixed) -> 4 x 128 tanh -> 1, 16384 + 2048 points.
For each one:
  1. `stepgraph bench bench/pinn_configs/NAME.json --steps N --json` (graph replay and eager),
  2. PyTorch in this process, as shared/reference/torch_baselines.py pinn_bench: u_xx and u_yy by
     nested torch.autograd.grad(create_graph=True), capturable Adam; eager, and the whole step
     captured as one CUDA graph (plus the memory that graph run holds and the kernels of one eager
     step).
Timing, table and RESULTS.md sections follow bench/bench_vs_torch.py, whose helpers this imports.

    python3 bench/bench_pinn_vs_torch.py --stepgraph build/stepgraph --results-md bench/RESULTS.md
    python3 bench/bench_pinn_vs_torch.py --only poisson_4x64 --quick
    python3 bench/bench_pinn_vs_torch.py --self-test     # CPU only, never imports torch
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_vs_torch as bvt  # noqa: E402  (imports neither torch nor jax)
import current_figures as cf  # noqa: E402  (the table at the top of RESULTS.md)

REPO = HERE.parent
CONFIG_DIR = HERE / "pinn_configs"  # not bench/configs/: other scripts glob that folder
LR = 1e-3
CUDA_LIB = "/usr/local/cuda/lib64"
POINTS_NOTE = ("points fixed on both sides: torch draws them once; the stepgraph configs have no "
               "resample_every, so stepgraph draws them once too, before the first step, with the "
               "frozen Fourier features that follow from them (its invariant prefix, outside the graph)")


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    config: str              # file name in bench/pinn_configs/
    interior: int            # interior (residual) points
    boundary: int            # boundary points, on the four faces
    width: int
    depth: int               # tanh layers
    fourier: int             # Fourier frequencies (0: none); the encoding has twice as many
    sigma: float
    iters: int               # steps per timed repeat (divided by 5 with --quick)
    title: str
    target_us: float         # stepgraph graph µs/step must be at most this
    target_speedup: Optional[float]  # and torch graph µs / stepgraph graph µs at least this
    # stepgraph's train.precision: tf32x3 runs the same problem with fp32-accurate 3xTF32
    # products (its own target ids); PyTorch stays fp32, measured once for both (torch_same_as).
    precision: str = "fp32"
    torch_same_as: Optional[str] = None

    @property
    def config_path(self) -> Path:
        return CONFIG_DIR / self.config

    @property
    def parameters(self) -> int:
        """Trainable parameters (the Fourier matrix is fixed)."""
        d = [2 * self.fourier or 2, *[self.width] * self.depth, 1]
        return sum(d[i] * d[i + 1] + d[i + 1] for i in range(len(d) - 1))


WORKLOADS: Dict[str, Workload] = {w.name: w for w in [
    Workload("poisson_4x64", "poisson_4x64.json", 8192, 1024, 64, 4, 0, 0.0, 300,
             "Poisson 2D, 4x64 tanh, 8192 + 1024 pts", 300.0, 4.0),
    Workload("fourier_4x128", "fourier_4x128.json", 16384, 2048, 128, 4, 32, 2.0, 200,
             "Poisson 2D, Fourier 32 + 4x128 tanh, 16384 + 2048 pts", 800.0, None),
    Workload("poisson_4x64_tf32x3", "poisson_4x64_tf32x3.json", 8192, 1024, 64, 4, 0, 0.0, 300,
             "Poisson 2D, 4x64 tanh, 8192 + 1024 pts, stepgraph tf32x3", 300.0, 4.0,
             precision="tf32x3", torch_same_as="poisson_4x64"),
    Workload("fourier_4x128_tf32x3", "fourier_4x128_tf32x3.json", 16384, 2048, 128, 4, 32, 2.0, 200,
             "Poisson 2D, Fourier 32 + 4x128 tanh, 16384 + 2048 pts, stepgraph tf32x3", 800.0, None,
             precision="tf32x3", torch_same_as="fourier_4x128"),
]}
FIGURES = ["stepgraph_graph_us", "stepgraph_eager_us", "torch_eager_us", "torch_graph_us",
           "torch_kernels_per_step", "stepgraph_graph_nodes", "stepgraph_peak_bytes",
           "torch_graph_peak_bytes"]


def check_config(w: Workload, cfg: Optional[dict] = None) -> List[str]:
    """Differences between the workload (which the PyTorch model is built from) and its config."""
    if cfg is None:
        try:
            cfg = json.loads(w.config_path.read_text())
        except (OSError, ValueError) as e:
            return [f"cannot read {w.config_path}: {e}"]
    bad: List[str] = []

    def expect(where: str, got: dict, want: dict) -> None:
        bad.extend(f"{where}{k}: config has {got.get(k)!r}, the benchmark uses "
                   + ("no such key" if v is None else repr(v))
                   for k, v in want.items() if got.get(k) != v)

    expect("top-level ", {"sections": sorted(cfg)},
           {"sections": ["model", "optimizer", "problem", "train"]})
    model = cfg.get("model", {})
    expect("model.", {"inputs": 2, **model}, {"inputs": 2})
    layers = list(model.get("layers", []))
    if w.fourier:  # the fixed encoding first
        expect("model.layers[0].", {"sigma": 1.0, "trainable": False, **(layers or [{}])[0]},
               {"type": "fourier_features", "features": w.fourier, "sigma": w.sigma,
                "trainable": False})
        layers = layers[1:]
    units = [w.width] * w.depth + [1]
    expect("model.", {"dense layers": len(layers)}, {"dense layers": len(units)})
    for i, (layer, u) in enumerate(zip(layers, units)):
        at = f"model.layers[{i + bool(w.fourier)}]."
        expect(at, {"activation": "none", "bias": True, **layer},
               {"type": "dense", "units": u, "activation": "tanh" if i < w.depth else "none",
                "bias": True})
    expect("problem.", {"residual_weight": 1, "boundary_weight": 1, **cfg.get("problem", {})},
           {"type": "poisson2d", "interior_points": w.interior, "boundary_points": w.boundary,
            "residual_weight": 1, "boundary_weight": 1,
            "resample_every": None})  # absent: fixed points
    opt = cfg.get("optimizer", {})
    adam = {"type": "adam", "lr": LR, "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999,
            "eps": 1e-8, "schedule": "constant"}
    expect("optimizer.", {**adam, "type": "adamw", **opt,
                          "schedule": opt.get("schedule", {}).get("type", "constant")}, adam)
    expect("train.", {"precision": "fp32", **cfg.get("train", {})},
           {"device": "cuda", "precision": w.precision})
    return bad


def cuda_lib_env(env: Dict[str, str], lib: str = CUDA_LIB) -> None:
    """Put the CUDA toolkit's libraries (cuBLAS) on LD_LIBRARY_PATH for the stepgraph binary."""
    old = env.get("LD_LIBRARY_PATH", "")
    if os.path.isdir(lib) and lib not in old.split(":"):
        env["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")


# --------------------------------------------------------------------------------------------
# PyTorch (imported lazily, only here).
# --------------------------------------------------------------------------------------------

def torch_pinn(torch: Any, w: Workload, seed: int = 0, device: str = "cuda") -> Dict[str, Any]:
    """The network, capturable Adam, fixed points and the loss closure, on `device`."""
    nn = torch.nn
    g = torch.Generator().manual_seed(seed)
    xi = torch.rand(w.interior, 2, generator=g)
    xb = torch.rand(w.boundary, 2, generator=g)
    face = torch.randint(0, 4, (w.boundary,), generator=g)  # x=0, x=1, y=0, y=1
    xb[torch.arange(w.boundary), face // 2] = (face % 2).float()
    fsrc = 2 * math.pi ** 2 * torch.sin(math.pi * xi[:, 0]) * torch.sin(math.pi * xi[:, 1])

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("B", torch.randn(2, w.fourier, generator=g) * w.sigma
                                 if w.fourier else None)
            d, ls = (2 * w.fourier or 2), []
            for _ in range(w.depth):
                ls += [nn.Linear(d, w.width), nn.Tanh()]
                d = w.width
            self.f = nn.Sequential(*ls, nn.Linear(d, 1))

        def forward(self, x: Any) -> Any:
            if self.B is not None:
                p = 2 * math.pi * x @ self.B
                x = torch.cat([torch.sin(p), torch.cos(p)], -1)
            return self.f(x)

    torch.manual_seed(seed)
    net = Net().to(device)
    xi, xb, fsrc = xi.to(device), xb.to(device), fsrc.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=LR, capturable=device.startswith("cuda"))

    def loss_fn() -> Any:
        x = xi.clone().requires_grad_(True)
        u = net(x)
        gr = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
        uxx = torch.autograd.grad(gr[:, 0].sum(), x, create_graph=True)[0][:, 0]
        uyy = torch.autograd.grad(gr[:, 1].sum(), x, create_graph=True)[0][:, 1]
        r = -(uxx + uyy) - fsrc
        return (r * r).mean() + (net(xb) ** 2).mean()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn().backward()
        opt.step()

    return {"net": net, "opt": opt, "loss_fn": loss_fn, "step": step,
            "loss": lambda: float(loss_fn().detach())}


def torch_variant(torch: Any, w: Workload, iters: int, warm: int, graph: bool) -> Dict[str, Any]:
    """Eager steps, or replays of the whole step captured as one CUDA graph (the warm-up and
    capture of shared/reference/torch_baselines.py); {"us": float|None, "error": str|None, ...}."""
    rec: Dict[str, Any] = {"us": None, "error": None}
    p = g = run = static_loss = None
    try:
        torch.cuda.reset_peak_memory_stats()
        base, base_reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        p = torch_pinn(torch, w)
        loss0, run = p["loss"](), p["step"]
        if graph:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):  # warm-up on a side stream, as the CUDA graph docs ask
                for _ in range(3):
                    p["step"]()
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            p["opt"].zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                static_loss = p["loss_fn"]()
                static_loss.backward()
                p["opt"].step()
            run = g.replay
        rec["us"], rec["runs_us"] = bvt.median_us(run, torch.cuda.synchronize, iters, warm)
        rec["check"] = bvt.training_check(
            loss0, float(static_loss.detach()) if graph else p["loss"]())
        if graph:
            peak_alloc = torch.cuda.max_memory_allocated() - base
            try:
                mem = bvt.torch_graph_memory(torch, g.pool(), base, base_reserved)
            except Exception as e:  # noqa: BLE001 - keep the timing
                mem = {"method": f"memory_reserved ({bvt.err_str(e)})",
                       "bytes": torch.cuda.memory_reserved() - base_reserved}
            rec["memory"] = {**mem, "max_memory_allocated_bytes": peak_alloc,
                             "peak_bytes": max(mem["bytes"], peak_alloc)}
        else:  # device activities of one eager step, counted as the reference script does
            try:
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    p["step"]()
                    torch.cuda.synchronize()
                rec["kernels"] = sum(1 for e in prof.events()
                                     if e.device_type == torch.autograd.DeviceType.CUDA)
            except Exception as e:  # noqa: BLE001
                rec["kernels_error"] = bvt.err_str(e)
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        rec["error"] = bvt.err_str(e)
    finally:
        if g is not None:
            try:
                g.reset()
            except Exception:  # noqa: BLE001
                pass
        p = g = run = static_loss = None  # drop the references, then free the memory
        bvt.torch_free(torch)
    return rec


def torch_measure(w: Workload, iters: int, warm: int = bvt.WARMUP) -> Dict[str, Any]:
    try:
        torch = bvt.torch_setup()
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001
        return {v: {"us": None, "error": bvt.err_str(e)} for v in ("eager", "graph")}
    return {v: torch_variant(torch, w, iters, warm, graph=v == "graph") for v in ("eager", "graph")}


# --------------------------------------------------------------------------------------------
# Records, targets, table.
# --------------------------------------------------------------------------------------------

def make_record(w: Workload, iters: int, sg: Optional[dict], tv: Optional[dict]) -> dict:
    fig: Dict[str, Optional[float]] = {k: None for k in FIGURES}
    errors: Dict[str, str] = {}
    notes: List[str] = []
    if sg is not None:
        r = sg.get("result")
        if r:
            fig["stepgraph_graph_us"] = float(r["graph_us_per_step"])
            fig["stepgraph_eager_us"] = float(r["eager_us_per_step"])
            for src, key in (("graph_nodes", "stepgraph_graph_nodes"),
                             ("peak_device_bytes", "stepgraph_peak_bytes")):
                if bvt._is_int(r.get(src)):
                    fig[key] = r[src]
            if r.get("tf32") is True:
                notes.append("stepgraph ran with TF32 on (PyTorch ran without)")
            if r.get("precision", w.precision) != w.precision:
                notes.append(f"stepgraph precision {r['precision']} != the workload's {w.precision} (TF32 on?)")
            if bvt._is_int(r.get("batch")) and r["batch"] != w.interior:
                notes.append(f"stepgraph batch {r['batch']} != {w.interior} interior points")
        else:
            errors["stepgraph"] = sg.get("error") or "no result"
        notes += [f"stepgraph: {m}" for m in sg.get("warnings", [])]
    for variant in ("eager", "graph") if tv is not None else ():
        v = tv.get(variant, {})
        if v.get("us") is None:
            errors[f"torch_{variant}"] = v.get("error") or "no result"
            continue
        fig[f"torch_{variant}_us"] = float(v["us"])
        if not v.get("check", {}).get("ok", True):
            notes.append(f"torch {variant}: check failed ({v['check'].get('why')})")
        if v.get("kernels_error"):
            notes.append(f"torch {variant}: kernel count failed ({v['kernels_error']})")
        if bvt._is_int(v.get("kernels")):
            fig["torch_kernels_per_step"] = v["kernels"]
        if v.get("memory"):
            fig["torch_graph_peak_bytes"] = v["memory"].get("peak_bytes")
    rec = {"workload": w.name, "title": w.title, "config": str(w.config_path.relative_to(REPO)),
           "interior_points": w.interior, "boundary_points": w.boundary,
           "parameters": w.parameters, "iters": iters, "figures": fig, "errors": errors,
           "notes": notes, "stepgraph": sg, "torch": tv}
    rec["derived"] = {
        "speedup_vs_torch_graph": bvt._ratio(fig["torch_graph_us"], fig["stepgraph_graph_us"]),
        "speedup_vs_torch_eager": bvt._ratio(fig["torch_eager_us"], fig["stepgraph_graph_us"]),
    }
    rec["targets"] = evaluate_targets(w, fig, notes)
    return rec


def evaluate_targets(w: Workload, fig: Dict[str, Optional[float]], notes: Sequence[str] = ()
                     ) -> List[dict]:
    """[{"id", "text", "ok": True|False|None, "detail"}]; None when a figure is missing or the run
    is not like for like (TF32 on, other point counts, not on the GPU)."""
    sg, tg = fig["stepgraph_graph_us"], fig["torch_graph_us"]
    unfair = [n for n in notes if "TF32 on" in n or "batch" in n or "not cuda" in n]
    tid = w.name.split("_")[0] + ("" if w.precision == "fp32" else f" {w.precision}")
    out: List[dict] = []

    def add(text: str, ok: Optional[bool], detail: str) -> None:
        if ok is not None and unfair:
            ok, detail = None, f"{detail}; not like for like: {'; '.join(unfair)}"
        out.append({"id": tid, "text": text, "ok": ok, "detail": detail})

    add(f"{w.name} <= {w.target_us:g} us/step", None if sg is None else sg <= w.target_us,
        "no stepgraph figure" if sg is None else f"{sg:.1f} us")
    if w.target_speedup is not None:
        r = bvt._ratio(tg, sg)
        add(f"{w.name} >= {w.target_speedup:g}x faster than PyTorch's graph",
            None if r is None else r >= w.target_speedup,
            "missing figure" if r is None else f"{r:.2f}x")
    return out


def _count(v: Optional[float]) -> str:
    return "—" if v is None else str(int(v))


TABLE_HEADER = ["workload", "stepgraph graph µs", "stepgraph eager µs", "torch eager µs",
                "torch graph µs", "torch graph / stepgraph", "torch eager / stepgraph",
                "torch kernels/step (eager)", "stepgraph graph nodes", "peak MiB stepgraph",
                "peak MiB torch graph", "targets"]


def render_table(records: Sequence[dict]) -> str:
    rows = [TABLE_HEADER, ["---"] * len(TABLE_HEADER)]
    for r in records:
        f, e, d = r["figures"], r["errors"], r["derived"]
        rows.append([
            r["title"], bvt.fmt_us(f["stepgraph_graph_us"], e.get("stepgraph")),
            bvt.fmt_us(f["stepgraph_eager_us"], e.get("stepgraph")),
            bvt.fmt_us(f["torch_eager_us"], e.get("torch_eager")),
            bvt.fmt_us(f["torch_graph_us"], e.get("torch_graph")),
            bvt.fmt_x(d["speedup_vs_torch_graph"]), bvt.fmt_x(d["speedup_vs_torch_eager"]),
            _count(f["torch_kernels_per_step"]), _count(f["stepgraph_graph_nodes"]),
            bvt.mib(f["stepgraph_peak_bytes"]), bvt.mib(f["torch_graph_peak_bytes"]),
            "; ".join(f"({t['id']}) {bvt.fmt_ok(t['ok'])} {t['detail']}" for t in r["targets"]),
        ])
    return "\n".join("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |"
                     for row in rows)


def render_section(meta: dict, records: Sequence[dict]) -> str:
    lines = [f"### {meta['date_utc']} — {meta['gpu']} — physics-informed step (PINN)", "",
             f"- command: `{meta['command']}`",
             f"- driver {meta.get('driver') or '?'}, torch {meta.get('torch') or '?'} "
             f"(CUDA {meta.get('torch_cuda') or '?'}), python {meta.get('python') or '?'}",
             f"- stepgraph: `{meta.get('stepgraph_binary')}`"
             + (f" ({meta['stepgraph_git']})" if meta.get("stepgraph_git") else ""),
             f"- median of {bvt.REPEATS} repeats after {bvt.WARMUP} warm-up steps, µs per "
             "training step, fp32, TF32 off; steps per repeat: "
             + ", ".join(f"{r['workload']} {r['iters']}" for r in records)
             + (" (--quick)" if meta.get("quick") else ""),
             "- torch: nested torch.autograd.grad (create_graph) for u_xx, u_yy; capturable Adam "
             "(eager too); graph = the whole step in one torch.cuda.CUDAGraph; kernels/step: CUDA "
             "events of one eager step in torch.profiler; peak as in bench_vs_torch.py",
             f"- {POINTS_NOTE}", "", render_table(records), ""]
    summary = bvt.target_summary(records)
    for r in records:
        for t in r["targets"]:
            lines.append(f"- target ({t['id']}) {t['text']}: {bvt.fmt_ok(t['ok'])} ({t['detail']})")
    if summary:
        lines += ["", "Targets: " + ", ".join(f"({k}) {bvt.fmt_ok(v)}" for k, v in summary.items()),
                  ""]
    problems = bvt.render_problems(records)
    if problems:
        lines += ["Errors and notes:", *problems, ""]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------------------------

def parse_args_for(workloads: Dict[str, Any], doc: str,
                   argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line of the stepgraph-vs-PyTorch scripts (this one and bench_cnn_vs_torch.py)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--stepgraph", default="build/stepgraph", help="the stepgraph binary")
    ap.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(workloads))
    ap.add_argument("--quick", action="store_true", help="5x fewer steps per repeat")
    ap.add_argument("--skip", default="", help="comma-separated: stepgraph,torch")
    ap.add_argument("--results-md", type=Path, help="append a section to this file "
                                                    "(the project's bench/RESULTS.md)")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="limit for each stepgraph run")
    ap.add_argument("--self-test", action="store_true", help="CPU-only test of the pure parts")
    args = ap.parse_args(argv)
    args.only_list = [s for s in args.only.split(",") if s] or list(workloads)
    unknown = [s for s in args.only_list if s not in workloads]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(workloads)}")
    args.skip_set = {s for s in args.skip.split(",") if s}
    if args.skip_set - {"stepgraph", "torch"}:
        ap.error(f"--skip takes stepgraph, torch; got {args.skip}")
    return args


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    return parse_args_for(WORKLOADS, __doc__, argv)


def iters_for(w: Any, quick: bool) -> int:
    return max(5, w.iters // 5) if quick else w.iters


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What one stepgraph-vs-PyTorch script plugs into run_comparison."""
    script: str                      # e.g. "bench/bench_pinn_vs_torch.py" (for the command line)
    workloads: Dict[str, Any]
    check_config: Callable[[Any], List[str]]
    torch_setup: Callable[[], Any]
    torch_measure: Callable[[Any, int], Dict[str, Any]]
    variants: Sequence[str]          # the torch variants torch_measure returns
    torch_meta: Callable[[Any], Dict[str, Any]]  # extra versions once torch is imported
    meta: Dict[str, Any]             # extra notes for the section
    make_record: Callable[[Any, int, Optional[dict], Optional[dict]], dict]
    render_section: Callable[[dict, Sequence[dict]], str]
    results_json: str                # file name under $OUT


def run_comparison(c: Comparison, args: argparse.Namespace, argv: Optional[Sequence[str]]) -> int:
    """stepgraph first (before this process creates a CUDA context), then PyTorch in this
    process; prints the section, writes $OUT/<results_json> and appends to --results-md."""
    command = shlex.join(["python3", *(sys.argv if argv is None else [c.script, *argv])])
    workloads = [c.workloads[n] for n in args.only_list]
    for w in workloads:
        for problem in c.check_config(w):
            print(f"warning: {w.name}: {problem}", file=sys.stderr)
    cuda_lib_env(os.environ)  # read by bvt.library_path_env for the subprocess

    sg: Dict[str, Optional[dict]] = {w.name: None for w in workloads}
    if "stepgraph" not in args.skip_set:
        for w in workloads:
            print(f"[stepgraph] {w.name} ...", flush=True)
            sg[w.name] = bvt.run_stepgraph(args.stepgraph, w, iters_for(w, args.quick),
                                           args.timeout_s, config=w.config_path)
            print("  " + json.dumps(sg[w.name].get("result") or sg[w.name].get("error")),
                  flush=True)

    tv: Dict[str, Optional[dict]] = {w.name: None for w in workloads}
    meta: Dict[str, Any] = {"torch": bvt._version("torch"), "torch_cuda": None, "gpu": None,
                            "python": sys.version.split()[0], "driver": bvt.driver_version()}
    if "torch" not in args.skip_set:
        try:
            torch = c.torch_setup()
            meta.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                        gpu=torch.cuda.get_device_name(0), **c.torch_meta(torch))
        except Exception as e:  # noqa: BLE001 - torch_measure records it per workload
            print(f"warning: torch: {bvt.err_str(e)}", file=sys.stderr)
        for w in workloads:
            same = getattr(w, "torch_same_as", None)
            if same and tv.get(same) is not None:  # the same PyTorch step: measured once
                tv[w.name] = tv[same]
                continue
            print(f"[torch] {w.name} ...", flush=True)
            try:
                tv[w.name] = c.torch_measure(w, iters_for(w, args.quick))
            except Exception as e:  # noqa: BLE001 - torch_measure records its own; belt and braces
                tv[w.name] = {v: {"us": None, "error": bvt.err_str(e)} for v in c.variants}
            print("  " + json.dumps({k: v.get("us") if v.get("us") is not None else v.get("error")
                                     for k, v in tv[w.name].items()}), flush=True)

    if meta["gpu"] is None:
        meta["gpu"] = next((s["result"]["gpu"] for s in sg.values()
                            if s and s.get("result") and s["result"].get("gpu")), None)
    meta.update({
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": meta["gpu"] or "unknown GPU", "command": command, "cwd": os.getcwd(),
        "quick": args.quick, "stepgraph_binary": args.stepgraph,
        "stepgraph_git": bvt.git_describe(), "repeats": bvt.REPEATS, "warmup": bvt.WARMUP,
        **c.meta,
    })
    records = [c.make_record(w, iters_for(w, args.quick), sg[w.name], tv[w.name])
               for w in workloads]
    result = {"meta": meta, "workloads": records, "targets": bvt.target_summary(records)}
    section = c.render_section(meta, records)
    print()
    print(section)
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / c.results_json
        path.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {path}")
    if args.results_md:
        bvt.append_results_md(args.results_md, section, records, meta)
        print(f"appended to {args.results_md} (and its current figures)")
    else:
        print("note: not recorded; pass --results-md bench/RESULTS.md to append this run")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    return run_comparison(Comparison(
        script="bench/bench_pinn_vs_torch.py", workloads=WORKLOADS, check_config=check_config,
        torch_setup=bvt.torch_setup, torch_measure=torch_measure, variants=("eager", "graph"),
        torch_meta=lambda torch: {}, meta={"points": POINTS_NOTE}, make_record=make_record,
        render_section=render_section, results_json="bench_pinn_results.json"), args, argv)


# --------------------------------------------------------------------------------------------
# Self-test (CPU only; torch is never imported).
# --------------------------------------------------------------------------------------------

def _fake_bench(w: Workload, **over: Any) -> dict:
    obj = {"event": "bench", "config": f"bench/pinn_configs/{w.config}", "device": "cuda",
           "gpu": "NVIDIA H200", "batch": w.interior, "eager_us_per_step": 900.0,
           "graph_us_per_step": 250.0, "graph_nodes": 35, "peak_device_bytes": 90 << 20,
           "arena_bytes": 90 << 20, "per_op_us": [], "steps": 20, "tf32": False, **over}
    return {k: v for k, v in obj.items() if v is not None}


def _fake_record(name: str, sg_us: Optional[float], torch_graph_us: Optional[float],
                 **over: Any) -> dict:
    w = WORKLOADS[name]
    sg = {"result": None, "error": "stepgraph error: no CUDA device", "warnings": []}
    if sg_us:
        sg["result"], sg["warnings"] = bvt.parse_bench_output(
            json.dumps(_fake_bench(w, graph_us_per_step=sg_us, **over)))
        sg["error"] = None
    tv = {"eager": {"us": 10092.0, "check": {"ok": True}, "kernels": 436},
          "graph": {"us": torch_graph_us, "error": None if torch_graph_us else "RuntimeError: x",
                    "check": {"ok": True}, "memory": {"peak_bytes": 300 << 20}}}
    return make_record(w, w.iters, sg, tv)


def self_test() -> int:
    import contextlib
    import io
    import tempfile
    import unittest

    class T(unittest.TestCase):
        def test_configs_match_workloads(self) -> None:
            for w in WORKLOADS.values():
                self.assertEqual(check_config(w), [], w.name)
            self.assertEqual(WORKLOADS["poisson_4x64"].parameters, 12737)   # stepgraph explain
            self.assertEqual(WORKLOADS["fourier_4x128"].parameters, 57985)  # 58049 less B [32, 2]
            cfg = json.loads(WORKLOADS["fourier_4x128"].config_path.read_text())
            cfg["model"]["layers"][2]["units"] = 64
            cfg["model"]["layers"][0]["sigma"] = 1
            cfg["problem"].update(resample_every=100, boundary_points=1024)
            cfg["optimizer"]["schedule"] = {"type": "cosine"}
            self.assertEqual(len(check_config(WORKLOADS["fourier_4x128"], cfg)), 5)
            cfg = json.loads(WORKLOADS["poisson_4x64"].config_path.read_text())
            cfg["model"]["layers"].insert(0, {"type": "fourier_features", "features": 32})
            cfg["data"] = {}
            self.assertEqual(len(check_config(WORKLOADS["poisson_4x64"], cfg)), 7)

        def test_run_stepgraph_fake_binary(self) -> None:
            w = WORKLOADS["fourier_4x128"]
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "sg.sh"
                fake.write_text(f"#!/bin/sh\necho log\necho '{json.dumps(_fake_bench(w))}'\n"
                                'echo "$@" >&2\n')
                fake.chmod(0o755)
                r = bvt.run_stepgraph(str(fake), w, 40, 30, config=w.config_path)
                self.assertEqual((r["error"], r["result"]["batch"]), (None, 16384))
                self.assertIn("pinn_configs/fourier_4x128.json --steps 40 --json",
                              r["stderr_tail"])

        def test_targets(self) -> None:
            for name, sg_us, tg_us, over, want in [
                    ("poisson_4x64", 250.0, 1316.0, {}, [True, True]),
                    ("poisson_4x64", 300.0, 1200.0, {}, [True, True]),  # both boundaries
                    ("poisson_4x64", 300.1, 1316.0, {}, [False, True]),
                    ("poisson_4x64", 290.0, 1100.0, {}, [True, False]),
                    ("poisson_4x64", None, 1316.0, {}, [None, None]),
                    ("poisson_4x64", 250.0, None, {}, [True, None]),
                    ("poisson_4x64", 250.0, 1316.0, {"tf32": True}, [None, None]),
                    ("poisson_4x64", 250.0, 1316.0, {"device": "cpu"}, [None, None]),
                    ("fourier_4x128", 800.0, 3396.0, {}, [True]),
                    ("fourier_4x128", 801.0, 3396.0, {}, [False]),
                    ("fourier_4x128", 700.0, 3396.0, {"batch": 8192}, [None])]:
                r = _fake_record(name, sg_us, tg_us, **over)
                self.assertEqual([t["ok"] for t in r["targets"]], want, (name, sg_us, tg_us, over))
            recs = [_fake_record("poisson_4x64", 250.0, 1316.0),
                    _fake_record("fourier_4x128", 801.0, 3396.0),
                    _fake_record("poisson_4x64_tf32x3", 310.0, 1316.0)]  # its own target ids
            self.assertEqual(bvt.target_summary(recs),
                             {"poisson": True, "fourier": False, "poisson tf32x3": False})

        def test_table_and_section(self) -> None:
            recs = [_fake_record("poisson_4x64", 250.0, 1316.0),
                    _fake_record("fourier_4x128", None, None)]
            self.assertEqual(set(recs[1]["errors"]), {"stepgraph", "torch_graph"})
            lines = render_table(recs).splitlines()
            self.assertEqual(len(lines), 2 + len(recs))
            for ln in lines:
                self.assertEqual(ln.count("|"), len(TABLE_HEADER) + 1, ln)
            self.assertIn("| 250.0 | 900.0 | 10092 | 1316 | 5.26x | 40.37x | 436 | 35 | 90.0 | "
                          "300.0 | (poisson) PASS 250.0 us; (poisson) PASS 5.26x |", lines[2])
            self.assertIn("| error | error | 10092 | error | — | — | 436 | — | — | — | "
                          "(fourier) n/a no stepgraph figure |", lines[3])
            meta = {"date_utc": "2026-12-01 10:00 UTC", "gpu": "NVIDIA H200",
                    "command": "python3 bench/bench_pinn_vs_torch.py", "driver": "580.159.04",
                    "torch": "2.11.0+cu130", "torch_cuda": "13.0", "python": "3.12.3",
                    "stepgraph_binary": "build/stepgraph", "stepgraph_git": "49c8bef-dirty"}
            sec = render_section(meta, recs)
            for piece in ("### 2026-12-01 10:00 UTC — NVIDIA H200", "`" + meta["command"] + "`",
                          "driver 580.159.04, torch 2.11.0+cu130", "(49c8bef-dirty)",
                          "poisson_4x64 300, fourier_4x128 200", "resample_every",
                          "- target (fourier) fourier_4x128 <= 800 us/step: n/a",
                          "Targets: (poisson) PASS, (fourier) n/a",
                          "fourier_4x128 / torch_graph: RuntimeError: x"):
                self.assertIn(piece, sec)
            json.dumps(recs)

        def test_args_and_env(self) -> None:
            a = parse_args(["--only", "fourier_4x128", "--quick"])
            self.assertEqual((a.only_list, iters_for(WORKLOADS["fourier_4x128"], a.quick)),
                             (["fourier_4x128"], 40))
            self.assertEqual(parse_args([]).only_list, list(WORKLOADS))
            for bad in (["--only", "nope"], ["--skip", "jax"]):
                with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                    parse_args(bad)
            with tempfile.TemporaryDirectory() as d:
                env = {"LD_LIBRARY_PATH": "/x"}
                cuda_lib_env(env, d)
                cuda_lib_env(env, d)
                cuda_lib_env(env, str(Path(d) / "missing"))
                self.assertEqual(env["LD_LIBRARY_PATH"], f"{d}:/x")

        def test_main_end_to_end_without_torch(self) -> None:
            # A fake stepgraph, and `import torch` failing as on a machine without it.
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "stepgraph"
                line = _fake_bench(WORKLOADS["poisson_4x64"], graph_us_per_step=280.0)
                fake.write_text(f"#!/bin/sh\necho '{json.dumps(line)}'\n")
                fake.chmod(0o755)
                md = Path(d) / "RESULTS.md"
                md.write_text(cf.SAMPLE)  # a current-figures table and one section
                saved = {k: os.environ.get(k) for k in ("OUT", "LD_LIBRARY_PATH")}
                had_torch = "torch" in sys.modules
                os.environ["OUT"] = d
                sys.modules.setdefault("torch", None)  # None: `import torch` raises ImportError
                try:
                    with contextlib.redirect_stdout(io.StringIO()) as so, \
                            contextlib.redirect_stderr(io.StringIO()):
                        rc = main(["--only", "poisson_4x64", "--quick", "--stepgraph", str(fake),
                                   "--results-md", str(md)])
                finally:
                    if not had_torch:
                        del sys.modules["torch"]
                    for k, v in saved.items():
                        os.environ.pop(k, None) if v is None else os.environ.update({k: v})
                self.assertEqual(rc, 0)
                res = json.loads((Path(d) / "bench_pinn_results.json").read_text())
                self.assertEqual(res["meta"]["gpu"], "NVIDIA H200")  # from stepgraph's line
                (rec,) = res["workloads"]
                self.assertEqual((rec["iters"], rec["figures"]["stepgraph_graph_us"]), (60, 280.0))
                self.assertIn("--steps 60 --json", rec["stepgraph"]["command"])
                self.assertIn("import of torch halted", rec["errors"]["torch_graph"])
                self.assertEqual(res["targets"], {"poisson": None})  # the 4x half is n/a
                self.assertIn("(poisson) PASS 280.0 us", so.getvalue())
                text = md.read_text()
                self.assertEqual(text.count("## Runs"), 1)
                # This workload's row replaced (torch failed: "error"), the others kept, the
                # earlier text below the table untouched; the project's own table covers WORKLOADS.
                rows = {r[0]: r for r in cf.parse_rows(text)}
                self.assertEqual(list(rows), ["seed_mlp", "poisson_4x64"])
                self.assertEqual(rows["poisson_4x64"][1:5], ["280.0", "error", "—", "—"])
                self.assertIn(f"(#{cf.anchors(text)[-1]})", rows["poisson_4x64"][7])
                self.assertTrue(cf.anchors(text)[-1].endswith("physics-informed-step-pinn"))
                self.assertEqual(rows["seed_mlp"], cf.parse_rows(cf.SAMPLE)[0])
                self.assertIn(cf.SAMPLE[cf.SAMPLE.index(cf.END):], text)
                cf.check_project_table(self, (HERE / "RESULTS.md").read_text(), list(WORKLOADS))
                self.assertIn("| 280.0 |", text)
                self.assertIn("--stepgraph " + str(fake), text)

        def test_no_torch_imported(self) -> None:
            self.assertIsNone(sys.modules.get("torch"))
            self.assertNotIn("jax", sys.modules)

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(T)
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
