#!/usr/bin/env python3
"""stepgraph against PyTorch and JAX on the same GPU, in one run.

For each workload (a config in bench/configs/ and the same model written in PyTorch and JAX):
  1. `stepgraph bench CONFIG --steps N --json` in a subprocess (eager steps and graph replays),
  2. PyTorch in this process: eager with foreach AdamW, eager with fused AdamW, and the whole step
     (forward, loss, backward, capturable AdamW) captured as one CUDA graph, plus the memory that
     graph run holds,
  3. JAX in a subprocess: the whole step under jax.jit (value_and_grad and a hand-written AdamW,
     parameters and optimizer state donated).
Timing follows shared/reference/torch_baselines.py: warm-up first, then 5 repeats of N steps
between synchronizations, median microseconds per step; data already on the GPU; fp32 with TF32
off everywhere.

Then prints a table with the issue's targets, writes $OUT/bench_results.json when OUT is set and
appends a section to --results-md (the project's bench/RESULTS.md).

    python3 bench/bench_vs_torch.py --stepgraph build/stepgraph --results-md bench/RESULTS.md
    python3 bench/bench_vs_torch.py --only seed_mlp --quick
    python3 bench/bench_vs_torch.py --self-test      # CPU only: table, targets and parsing

The module imports neither torch nor jax at the top, so the pure parts (and --self-test) run on a
machine without them.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import current_figures  # noqa: E402  (the table at the top of RESULTS.md; pure Python)
CONFIG_DIR = HERE / "configs"

# Shared by every workload and by the three configs (checked by check_config()).
LR = 1e-3
WEIGHT_DECAY = 1e-4
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
REPEATS = 5          # timed repeats; the median is reported
WARMUP = 20          # untimed steps before the repeats
JAX_MARK = "JAXRESULT "


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    config: str            # file name in bench/configs/
    batch: int
    features: int
    hidden: Tuple[int, ...]  # widths of the relu layers
    classes: int
    iters: int             # steps per timed repeat (divided by 5 with --quick)
    title: str

    @property
    def config_path(self) -> Path:
        return CONFIG_DIR / self.config

    @property
    def dims(self) -> List[int]:
        return [self.features, *self.hidden, self.classes]

    @property
    def parameters(self) -> int:
        d = self.dims
        return sum(d[i] * d[i + 1] + d[i + 1] for i in range(len(d) - 1))

    @property
    def flops_per_step(self) -> int:
        # forward + backward GEMMs (2 + 4 flops per multiply-add); the input gradient of the first
        # layer is not needed but counted, as in the reference script.
        d = self.dims
        return 6 * self.batch * sum(d[i] * d[i + 1] for i in range(len(d) - 1))


WORKLOADS: Dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("seed_mlp", "seed_mlp.json", 64, 128, (256,), 11, 2000,
                 "seed MLP B64 128-256-11"),
        Workload("mlp_8x256", "mlp_8x256.json", 1024, 256, (256,) * 7, 10, 1000,
                 "MLP 8x256 B1024 (256 in, 10 out)"),
        Workload("large_mlp", "large_mlp.json", 8192, 1024, (4096,) * 3, 1000, 50,
                 "MLP 1024-4096x3-1000 B8192"),
    ]
}

# The figures a workload record carries (None when not measured), in table order.
FIGURES = [
    "stepgraph_graph_us", "stepgraph_eager_us", "torch_eager_us", "torch_eager_fused_us",
    "torch_graph_us", "jax_jit_us", "stepgraph_peak_bytes", "stepgraph_arena_bytes",
    "torch_graph_peak_bytes",
]


# --------------------------------------------------------------------------------------------
# Config check: the PyTorch/JAX models are built from Workload; the config must say the same.
# --------------------------------------------------------------------------------------------

def check_config(w: Workload, cfg: Optional[dict] = None) -> List[str]:
    """Differences between the workload and its stepgraph config (empty when they match)."""
    if cfg is None:
        try:
            cfg = json.loads(w.config_path.read_text())
        except (OSError, ValueError) as e:
            return [f"cannot read {w.config_path}: {e}"]
    bad: List[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        if isinstance(want, float):
            ok = isinstance(got, (int, float)) and not isinstance(got, bool) and math.isclose(
                got, want, rel_tol=1e-12)
        else:
            ok = got == want
        if not ok:
            bad.append(f"{what}: config has {got!r}, the benchmark uses {want!r}")

    model = cfg.get("model", {})
    layers = model.get("layers", [])
    if "inputs" in model:
        expect("model.inputs", model["inputs"], w.features)
    want_units = [*w.hidden, w.classes]
    expect("number of layers", len(layers), len(want_units))
    for i, (layer, units) in enumerate(zip(layers, want_units)):
        expect(f"layers[{i}].type", layer.get("type"), "dense")
        expect(f"layers[{i}].units", layer.get("units"), units)
        act = "relu" if i < len(w.hidden) else "none"
        expect(f"layers[{i}].activation", layer.get("activation", "none"), act)
        expect(f"layers[{i}].bias", layer.get("bias", True), True)
    loss = cfg.get("loss", {})
    expect("loss.type", loss.get("type", "softmax_cross_entropy"), "softmax_cross_entropy")
    expect("loss.reduction", loss.get("reduction", "mean"), "mean")
    opt = cfg.get("optimizer", {})
    expect("optimizer.type", opt.get("type", "adamw"), "adamw")
    expect("optimizer.lr", opt.get("lr", 1e-3), LR)
    expect("optimizer.weight_decay", opt.get("weight_decay", 1e-2), WEIGHT_DECAY)
    expect("optimizer.beta1", opt.get("beta1", 0.9), BETA1)
    expect("optimizer.beta2", opt.get("beta2", 0.999), BETA2)
    expect("optimizer.eps", opt.get("eps", 1e-8), EPS)
    expect("optimizer.schedule", opt.get("schedule", {}).get("type", "constant"), "constant")
    data = cfg.get("data", {})
    expect("data.source", data.get("source"), "synthetic_classification")
    expect("data.features", data.get("features"), w.features)
    expect("data.classes", data.get("classes"), w.classes)
    expect("data.validation_split", data.get("validation_split"), 0)
    samples = data.get("samples", 1000)
    if not isinstance(samples, int) or samples < w.batch:
        bad.append(f"data.samples: {samples!r} is fewer than one batch of {w.batch}")
    expect("train.batch_size", cfg.get("train", {}).get("batch_size"), w.batch)
    return bad


# --------------------------------------------------------------------------------------------
# stepgraph: run the CLI, parse its last line.
# --------------------------------------------------------------------------------------------

class BenchParseError(Exception):
    pass


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# key -> (type check, required)
_BENCH_KEYS: Dict[str, Tuple[Callable[[Any], bool], bool]] = {
    "graph_us_per_step": (_is_num, True),
    "eager_us_per_step": (_is_num, True),
    "batch": (_is_int, False),
    "config": (lambda v: isinstance(v, str), False),
    "device": (lambda v: isinstance(v, str), False),
    "gpu": (lambda v: isinstance(v, str), False),
    "graph_nodes": (_is_int, False),
    "peak_device_bytes": (_is_int, False),
    "arena_bytes": (_is_int, False),
    "tf32": (lambda v: isinstance(v, bool), False),
}


def parse_bench_output(stdout: str) -> Tuple[dict, List[str]]:
    """The bench object from the LAST non-empty line of `stdout`, and warnings about it.

    Raises BenchParseError when that line is not a usable bench object (an {"event": "error"} line
    raises with its message)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise BenchParseError("no output")
    last = lines[-1]
    try:
        obj = json.loads(last)
    except ValueError as e:
        raise BenchParseError(f"last line is not JSON ({e}): {last[:200]!r}") from None
    if not isinstance(obj, dict):
        raise BenchParseError(f"last line is not a JSON object: {last[:200]!r}")
    event = obj.get("event")
    if event == "error":
        raise BenchParseError(f"stepgraph error: {obj.get('message', '(no message)')}")
    if event != "bench":
        raise BenchParseError(f"last line has event {event!r}, expected \"bench\": {last[:200]!r}")
    warnings: List[str] = []
    for key, (ok, required) in _BENCH_KEYS.items():
        if key not in obj:
            if required:
                raise BenchParseError(f"bench line lacks \"{key}\": {last[:300]!r}")
            warnings.append(f"bench line lacks \"{key}\"")
        elif not ok(obj[key]):
            if required:
                raise BenchParseError(f"bench line has a bad \"{key}\": {obj[key]!r}")
            warnings.append(f"bench line has a bad \"{key}\": {obj[key]!r}")
    for key in ("graph_us_per_step", "eager_us_per_step"):
        if obj[key] <= 0:
            raise BenchParseError(f"bench line has a non-positive \"{key}\": {obj[key]!r}")
    if obj.get("device", "cuda") != "cuda":
        warnings.append(f"stepgraph ran on device {obj.get('device')!r}, not cuda")
    return obj, warnings


def library_path_env() -> Dict[str, str]:
    """The environment for the stepgraph binary: cuDNN and NCCL live in the Python environment on
    the GPU machine (shared/DEVICE.md), so put their lib folders on LD_LIBRARY_PATH."""
    env = dict(os.environ)
    extra: List[str] = []
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
        roots = list(spec.submodule_search_locations or []) if spec else []
    except (ImportError, ValueError):
        roots = []
    for root in roots:
        for sub in ("cudnn", "nccl"):  # cuBLAS stays the system one in /usr/local/cuda
            lib = Path(root) / sub / "lib"
            if lib.is_dir() and str(lib) not in extra:
                extra.append(str(lib))
    if extra:
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = ":".join(extra + ([old] if old else []))
    return env


def run_stepgraph(binary: str, w: Workload, steps: int, timeout_s: float,
                  config: Optional[Path] = None) -> dict:
    """Run `binary bench CONFIG --steps N --json`; the record has result or error."""
    config = config or w.config_path
    if not Path(binary).exists() and not os.path.isabs(binary) and (REPO / binary).exists():
        binary = str(REPO / binary)
    try:
        shown = str(config.relative_to(Path.cwd()))
    except ValueError:
        shown = str(config)
    cmd = [binary, "bench", shown, "--steps", str(steps), "--json"]
    rec: Dict[str, Any] = {"command": shlex.join(cmd), "result": None, "error": None, "warnings": []}
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                           env=library_path_env())
    except FileNotFoundError:
        rec["error"] = f"binary not found: {binary}"
        return rec
    except PermissionError as e:
        rec["error"] = f"cannot run {binary}: {e}"
        return rec
    except subprocess.TimeoutExpired as e:
        rec["error"] = f"timed out after {timeout_s:.0f} s"
        rec["stdout_tail"] = (e.stdout or b"")[-2000:].decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")[-2000:]
        return rec
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    rec["returncode"] = p.returncode
    rec["stderr_tail"] = p.stderr[-2000:]
    try:
        rec["result"], rec["warnings"] = parse_bench_output(p.stdout)
    except BenchParseError as e:
        msg = str(e)
        if p.returncode != 0:
            tail = [ln for ln in p.stderr.strip().splitlines()
                    if ln.strip() and not ln.startswith("Run with --help")][-1:]
            msg = f"exit {p.returncode}: {msg}" + (f" (stderr: {tail[0][:300]})" if tail and
                                                  tail[0] not in msg else "")
        rec["error"] = msg
        rec["stdout_tail"] = p.stdout[-2000:]
        return rec
    if p.returncode != 0:
        rec["warnings"].append(f"exit status {p.returncode} despite a bench line")
    return rec


# --------------------------------------------------------------------------------------------
# Timing (shared by PyTorch and JAX).
# --------------------------------------------------------------------------------------------

def median_us(step: Callable[[], None], sync: Callable[[], None], iters: int,
              warm: int = WARMUP, repeats: int = REPEATS) -> Tuple[float, List[float]]:
    """Median microseconds per step over `repeats` runs of `iters` steps, after `warm` steps."""
    for _ in range(warm):
        step()
    sync()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        runs.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(runs), runs


def err_str(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}".strip()
    s = " ".join(s.split())
    return s[:400]


# --------------------------------------------------------------------------------------------
# PyTorch (imported lazily).
# --------------------------------------------------------------------------------------------

def torch_setup() -> Any:
    """Import torch with TF32 off. The legacy flags, as the reference script sets them (torch
    refuses a mix of the legacy and the newer fp32_precision settings, so use one or the other)."""
    import torch
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except (AttributeError, RuntimeError):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.fp32_precision = "ieee"
    return torch


def torch_model(torch: Any, w: Workload, seed: int) -> Any:
    """nn.Sequential(Linear, ReLU, ..., Linear) with the config's init: he (Kaiming normal,
    fan_in) for relu layers, Xavier uniform for the output layer, zero biases."""
    nn = torch.nn
    g = torch.Generator().manual_seed(seed)
    d = w.dims
    layers = []
    for i in range(len(d) - 1):
        lin = nn.Linear(d[i], d[i + 1])
        with torch.no_grad():
            if i < len(d) - 2:
                lin.weight.normal_(0.0, math.sqrt(2.0 / d[i]), generator=g)
            else:
                a = math.sqrt(6.0 / (d[i] + d[i + 1]))
                lin.weight.uniform_(-a, a, generator=g)
            lin.bias.zero_()
        layers.append(lin)
        if i < len(d) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to("cuda")


def torch_data(torch: Any, w: Workload, seed: int = 0) -> Tuple[Any, Any]:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(w.batch, w.features, generator=g)
    y = torch.randint(0, w.classes, (w.batch,), generator=g)
    return X.to("cuda"), y.to("cuda")


def torch_free(torch: Any) -> None:
    """Collect garbage and hand cached blocks back; never raises (after a sticky CUDA error the
    next measurement records its own error)."""
    import gc
    gc.collect()
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


def torch_graph_memory(torch: Any, pool: Any, base_allocated: int,
                       base_reserved: int) -> Dict[str, Any]:
    """Bytes the graph run holds while replaying: tensors allocated outside the graph's private
    pool (parameters, AdamW state, the batch) plus every segment of the private pool (activations,
    gradients, temporaries of the captured step), less what was allocated before it started."""
    dev = torch.cuda.current_device()
    outside = pool_total = 0
    have_pool_ids = True
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", dev) != dev:
            continue
        pid = seg.get("segment_pool_id")
        if pid is None:
            have_pool_ids = False
            break
        if tuple(pid) == tuple(pool):
            pool_total += int(seg["total_size"])
        elif tuple(pid) == (0, 0):
            outside += int(seg["allocated_size"])
    if not have_pool_ids:  # older snapshot format: all reserved memory
        return {"method": "memory_reserved",
                "bytes": torch.cuda.memory_reserved() - base_reserved}
    return {"method": "snapshot: allocated outside pool + graph pool",
            "bytes": outside - base_allocated + pool_total,
            "graph_pool_bytes": pool_total, "outside_pool_bytes": outside - base_allocated}


def torch_measure(w: Workload, iters: int, warm: int = WARMUP) -> Dict[str, Any]:
    """{variant: {"us": float|None, "error": str|None, ...}} for eager, eager_fused, graph."""
    out: Dict[str, Any] = {}
    try:
        torch = torch_setup()
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        return {v: {"us": None, "error": err_str(e)} for v in ("eager", "eager_fused", "graph")}
    F = torch.nn.functional

    def loss_value(m: Any, X: Any, y: Any) -> float:
        with torch.no_grad():
            return float(F.cross_entropy(m(X), y))

    def eager_variant(fused: bool) -> Dict[str, Any]:
        rec: Dict[str, Any] = {"us": None, "error": None}
        try:
            X, y = torch_data(torch, w)
            m = torch_model(torch, w, seed=0)
            kw = {"fused": True} if fused else {"foreach": True}
            opt = torch.optim.AdamW(m.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS,
                                    weight_decay=WEIGHT_DECAY, **kw)
            loss0 = loss_value(m, X, y)

            def step() -> None:
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(m(X), y).backward()
                opt.step()

            rec["us"], rec["runs_us"] = median_us(step, torch.cuda.synchronize, iters, warm)
            rec["check"] = training_check(loss0, loss_value(m, X, y))
        except Exception as e:  # noqa: BLE001
            rec["error"] = err_str(e)
        finally:
            torch_free(torch)
        return rec

    out["eager"] = eager_variant(fused=False)
    out["eager_fused"] = eager_variant(fused=True)

    rec: Dict[str, Any] = {"us": None, "error": None}
    g = None
    try:
        torch_free(torch)
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        base_reserved = torch.cuda.memory_reserved()
        X, y = torch_data(torch, w)  # the graph's static inputs
        m = torch_model(torch, w, seed=0)
        opt = torch.optim.AdamW(m.parameters(), lr=LR, betas=(BETA1, BETA2), eps=EPS,
                                weight_decay=WEIGHT_DECAY, capturable=True)
        loss0 = loss_value(m, X, y)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up on a side stream, as the CUDA graph docs ask
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(m(X), y).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            static_loss = F.cross_entropy(m(X), y)
            static_loss.backward()
            opt.step()
        torch.cuda.synchronize()
        w0 = m[0].weight.detach().clone()
        rec["us"], rec["runs_us"] = median_us(g.replay, torch.cuda.synchronize, iters, warm)
        check = training_check(loss0, float(static_loss))
        if torch.equal(w0, m[0].weight.detach()):
            check["ok"] = False
            check["why"] = "replays did not change the first layer's weight"
        del w0
        rec["check"] = check
        peak_alloc = torch.cuda.max_memory_allocated() - base
        try:
            mem = torch_graph_memory(torch, g.pool(), base, base_reserved)
        except Exception as e:  # noqa: BLE001 - keep the timing; fall back to reserved bytes
            mem = {"method": f"memory_reserved ({err_str(e)})",
                   "bytes": torch.cuda.memory_reserved() - base_reserved}
        mem["max_memory_allocated_bytes"] = peak_alloc
        mem["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved() - base_reserved
        # The peak of the graph run: the larger of the replay footprint and the live-tensor peak
        # seen while warming up and capturing.
        mem["peak_bytes"] = max(mem["bytes"], peak_alloc)
        rec["memory"] = mem
    except Exception as e:  # noqa: BLE001
        rec["error"] = err_str(e)
    finally:
        if g is not None:
            try:
                g.reset()
            except Exception:  # noqa: BLE001
                pass
        g = None
        torch_free(torch)
    out["graph"] = rec
    return out


def training_check(loss0: float, loss1: float) -> Dict[str, Any]:
    """The timed steps must have trained: finite losses, lower on the (fixed) batch."""
    ok = math.isfinite(loss0) and math.isfinite(loss1) and loss1 < loss0
    c: Dict[str, Any] = {"ok": ok, "loss_before": loss0, "loss_after": loss1}
    if not ok:
        c["why"] = "loss did not decrease or is not finite"
    return c


# --------------------------------------------------------------------------------------------
# JAX (in a subprocess, so its allocator and any crash stay apart from torch's numbers).
# --------------------------------------------------------------------------------------------

def jax_build(w: Workload) -> Dict[str, Any]:
    """The JAX workload: initial params and AdamW state, the batch, loss_fn(p, X, y) and the
    un-jitted step(p, state, X, y) -> (p, state, loss). Imports jax; call jax_worker on the GPU."""
    import jax
    import jax.numpy as jnp
    hi = jax.lax.Precision.HIGHEST  # no TF32 (also set globally by jax_worker)
    d = w.dims
    key = jax.random.PRNGKey(0)
    params = []  # [(W [in, out], b [out]), ...], he for relu layers, xavier for the output
    for i in range(len(d) - 1):
        key, k = jax.random.split(key)
        if i < len(d) - 2:
            W = jax.random.normal(k, (d[i], d[i + 1]), jnp.float32) * math.sqrt(2.0 / d[i])
        else:
            a = math.sqrt(6.0 / (d[i] + d[i + 1]))
            W = jax.random.uniform(k, (d[i], d[i + 1]), jnp.float32, -a, a)
        params.append((W, jnp.zeros((d[i + 1],), jnp.float32)))
    key, kx, ky = jax.random.split(key, 3)
    X = jax.random.normal(kx, (w.batch, w.features), jnp.float32)
    y = jax.random.randint(ky, (w.batch,), 0, w.classes)

    def loss_fn(p, X, y):
        h = X
        for i, (W, b) in enumerate(p):
            h = jnp.matmul(h, W, precision=hi) + b
            if i < len(p) - 1:
                h = jax.nn.relu(h)
        lse = jax.nn.logsumexp(h, axis=-1)
        picked = jnp.take_along_axis(h, y[:, None], axis=-1)[:, 0]
        return jnp.mean(lse - picked)

    # AdamW as torch.optim.AdamW computes it: decoupled decay first, bias corrections, eps added
    # after the square root.
    def adamw(p, g, m, v, t):
        t = t + 1
        tf = t.astype(jnp.float32)
        bc1 = 1.0 - BETA1 ** tf
        bc2 = 1.0 - BETA2 ** tf

        def one(p, g, m, v):
            p = p * (1.0 - LR * WEIGHT_DECAY)
            m = BETA1 * m + (1.0 - BETA1) * g
            v = BETA2 * v + (1.0 - BETA2) * g * g
            p = p - (LR / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + EPS)
            return p, m, v

        leaves_p, tree = jax.tree_util.tree_flatten(p)
        leaves_g, leaves_m, leaves_v = (jax.tree_util.tree_leaves(x) for x in (g, m, v))
        upd = [one(*a) for a in zip(leaves_p, leaves_g, leaves_m, leaves_v)]
        unflat = jax.tree_util.tree_unflatten
        return (unflat(tree, [u[0] for u in upd]), unflat(tree, [u[1] for u in upd]),
                unflat(tree, [u[2] for u in upd]), t)

    def step(p, st, X, y):
        loss, g = jax.value_and_grad(loss_fn)(p, X, y)
        m, v, t = st
        p, m, v, t = adamw(p, g, m, v, t)
        return p, (m, v, t), loss

    zeros = lambda: jax.tree_util.tree_map(jnp.zeros_like, params)  # noqa: E731
    state = (zeros(), zeros(), jnp.zeros((), jnp.int32))
    return {"params": params, "state": state, "X": X, "y": y, "loss_fn": loss_fn, "step": step}


def jax_worker(w: Workload, iters: int, budget_s: float, warm: int = WARMUP) -> dict:
    """Runs in the subprocess; returns {"us": ..., "error": ..., ...}."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    rec: Dict[str, Any] = {"us": None, "error": None, "iters": iters}
    import jax
    jax.config.update("jax_default_matmul_precision", "highest")  # no TF32
    rec["jax_version"] = jax.__version__
    dev = jax.devices()[0]
    rec["jax_device"] = f"{dev.platform}:{getattr(dev, 'device_kind', '')}"
    if dev.platform != "gpu":
        raise RuntimeError(f"JAX has no GPU backend (first device: {dev.platform})")
    b = jax_build(w)
    X, y, loss_fn = b["X"], b["y"], b["loss_fn"]
    step = jax.jit(b["step"], donate_argnums=(0, 1))  # params and AdamW state updated in place
    loss0 = float(jax.jit(loss_fn)(b["params"], X, y))
    state = {"p": b["params"], "st": b["state"], "loss": None}
    del b

    def one_step():
        state["p"], state["st"], state["loss"] = step(state["p"], state["st"], X, y)

    def sync():
        jax.block_until_ready((state["p"], state["st"], state["loss"]))

    t0 = time.perf_counter()
    one_step()  # compiles
    sync()
    rec["compile_and_first_step_s"] = round(time.perf_counter() - t0, 3)
    # Estimate the cost and fit the repeats into the budget; skip if even 5 steps do not fit.
    t0 = time.perf_counter()
    for _ in range(3):
        one_step()
    sync()
    per_step = (time.perf_counter() - t0) / 3
    rec["estimated_us"] = per_step * 1e6
    fit = int(budget_s / (per_step * REPEATS)) - 1
    if fit < 5:
        rec["skipped"] = (f"too slow for the {budget_s:g} s JAX budget: "
                          f"~{per_step * 1e3:.1f} ms/step")
        return rec
    if fit < iters:
        rec["iters"] = iters = fit
        warm = min(warm, max(2, fit // 5))
    rec["us"], rec["runs_us"] = median_us(one_step, sync, iters, warm)
    rec["check"] = training_check(loss0, float(jax.jit(loss_fn)(state["p"], X, y)))
    return rec


def run_jax(w: Workload, iters: int, budget_s: float, timeout_s: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--jax-worker", w.name,
           "--jax-iters", str(iters), "--jax-budget-s", str(budget_s)]
    env = dict(os.environ)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"us": None, "error": f"timed out after {timeout_s:.0f} s"}
    return parse_jax_output(p.stdout, p.stderr, p.returncode)


def parse_jax_output(stdout: str, stderr: str, returncode: int) -> dict:
    for line in reversed(stdout.splitlines()):
        if line.startswith(JAX_MARK):
            try:
                rec = json.loads(line[len(JAX_MARK):])
            except ValueError as e:
                return {"us": None, "error": f"bad worker line: {e}"}
            if isinstance(rec, dict):
                return rec
    tail = (stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"us": None, "error": f"JAX worker exit {returncode}: {tail[:400]}"}


# --------------------------------------------------------------------------------------------
# Records, targets, table.
# --------------------------------------------------------------------------------------------

def make_record(w: Workload, iters: int, sg: Optional[dict], tv: Optional[dict],
                jx: Optional[dict]) -> dict:
    """One workload's figures (None when not measured), errors and raw details."""
    fig: Dict[str, Optional[float]] = {k: None for k in FIGURES}
    errors: Dict[str, str] = {}
    notes: List[str] = []
    if sg is not None:
        r = sg.get("result")
        if r:
            fig["stepgraph_graph_us"] = float(r["graph_us_per_step"])
            fig["stepgraph_eager_us"] = float(r["eager_us_per_step"])
            if _is_int(r.get("peak_device_bytes")):
                fig["stepgraph_peak_bytes"] = r["peak_device_bytes"]
            if _is_int(r.get("arena_bytes")):
                fig["stepgraph_arena_bytes"] = r["arena_bytes"]
            if r.get("tf32") is True:
                notes.append("stepgraph ran with TF32 on (PyTorch and JAX ran without)")
            if _is_int(r.get("batch")) and r["batch"] != w.batch:
                notes.append(f"stepgraph batch {r['batch']} != {w.batch}")
        else:
            errors["stepgraph"] = sg.get("error") or "no result"
        notes += [f"stepgraph: {m}" for m in sg.get("warnings", [])]
    for variant, key in (("eager", "torch_eager_us"), ("eager_fused", "torch_eager_fused_us"),
                         ("graph", "torch_graph_us")):
        if tv is None:
            continue
        v = tv.get(variant, {})
        if v.get("us") is not None:
            fig[key] = float(v["us"])
            if not v.get("check", {}).get("ok", True):
                notes.append(f"torch {variant}: check failed ({v['check'].get('why')})")
        else:
            errors[f"torch_{variant}"] = v.get("error") or "no result"
        if variant == "graph" and v.get("memory"):
            fig["torch_graph_peak_bytes"] = v["memory"].get("peak_bytes")
    if jx is not None:
        if jx.get("us") is not None:
            fig["jax_jit_us"] = float(jx["us"])
            if not jx.get("check", {}).get("ok", True):
                notes.append(f"jax: check failed ({jx['check'].get('why')})")
            if jx.get("iters") not in (None, iters):
                notes.append(f"jax timed {jx['iters']} steps per repeat (budget)")
        elif jx.get("skipped"):
            errors["jax"] = "skipped: " + jx["skipped"]
        else:
            errors["jax"] = jx.get("error") or "no result"
    rec = {"workload": w.name, "title": w.title, "config": str(w.config_path.relative_to(REPO)),
           "batch": w.batch, "dims": w.dims, "parameters": w.parameters,
           "flops_per_step": w.flops_per_step, "iters": iters, "figures": fig, "errors": errors,
           "notes": notes, "stepgraph": sg, "torch": tv, "jax": jx}
    rec["derived"] = derive(fig)
    rec["targets"] = evaluate_targets(w.name, fig, notes)
    return rec


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b is not None and b > 0 else None


def derive(fig: Dict[str, Optional[float]]) -> Dict[str, Optional[float]]:
    sg = fig["stepgraph_graph_us"]
    others = [fig[k] for k in ("torch_eager_us", "torch_eager_fused_us", "torch_graph_us",
                               "jax_jit_us") if fig[k] is not None]
    return {
        # Time ratio = throughput ratio: > 1 means stepgraph is faster than PyTorch's graph.
        "speedup_vs_torch_graph": _ratio(fig["torch_graph_us"], sg),
        "speedup_vs_best_other": _ratio(min(others), sg) if others else None,
        "speedup_vs_jax": _ratio(fig["jax_jit_us"], sg),
        "stepgraph_eager_over_graph": _ratio(fig["stepgraph_eager_us"], sg),
        "peak_ratio_stepgraph_over_torch": _ratio(fig["stepgraph_peak_bytes"],
                                                  fig["torch_graph_peak_bytes"]),
    }


def evaluate_targets(name: str, fig: Dict[str, Optional[float]], notes: Sequence[str] = ()
                     ) -> List[dict]:
    """The issue's targets for this workload: [{"id", "text", "ok": True|False|None, "detail"}];
    ok is None when a figure is missing or the comparison is not like for like (TF32, batch)."""
    sg = fig["stepgraph_graph_us"]
    tg = fig["torch_graph_us"]
    unfair = [n for n in notes if "TF32 on" in n or "batch" in n]
    out: List[dict] = []

    def add(tid: str, text: str, ok: Optional[bool], detail: str) -> None:
        if ok is not None and unfair:
            ok, detail = None, f"{detail}; not like for like: {'; '.join(unfair)}"
        out.append({"id": tid, "text": text, "ok": ok, "detail": detail})

    if name == "seed_mlp":
        add("a", "seed MLP <= 30 us/step",
            None if sg is None else sg <= 30.0,
            "no stepgraph figure" if sg is None else f"{sg:.1f} us")
        r = _ratio(tg, sg)
        add("a", "seed MLP >= 4x faster than PyTorch's graph",
            None if r is None else r >= 4.0,
            "missing figure" if r is None else f"{r:.2f}x")
    elif name == "mlp_8x256":
        add("b", "MLP 8x256 B1024 <= 150 us/step",
            None if sg is None else sg <= 150.0,
            "no stepgraph figure" if sg is None else f"{sg:.1f} us")
    elif name == "large_mlp":
        r = _ratio(tg, sg)
        add("c", "large MLP >= 0.95x PyTorch's graph throughput",
            None if r is None else sg <= tg / 0.95,
            "missing figure" if r is None else f"{r:.3f}x")
    ps, pt = fig["stepgraph_peak_bytes"], fig["torch_graph_peak_bytes"]
    add("mem", "peak memory <= PyTorch's graph run",
        None if ps is None or pt is None else ps <= pt,
        "missing figure" if ps is None or pt is None else f"{mib(ps)} vs {mib(pt)} MiB")
    return out


def mib(b: Optional[float]) -> str:
    return "—" if b is None else f"{b / 2**20:.1f}"


def fmt_us(v: Optional[float], err: Optional[str] = None) -> str:
    if v is None:
        return "skipped" if err and err.startswith("skipped") else ("error" if err else "—")
    return f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def fmt_x(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:.2f}x"


def fmt_ok(ok: Optional[bool]) -> str:
    return {True: "PASS", False: "FAIL", None: "n/a"}[ok]


TABLE_HEADER = ["workload", "stepgraph graph µs", "stepgraph eager µs", "torch eager µs",
                "torch eager fused µs", "torch graph µs", "JAX jit µs",
                "torch graph / stepgraph (throughput)", "best other / stepgraph",
                "stepgraph graph nodes", "peak MiB stepgraph (arena)", "peak MiB torch graph",
                "targets"]


def _nodes(r: dict) -> str:
    res = (r.get("stepgraph") or {}).get("result") or {}
    return str(res["graph_nodes"]) if _is_int(res.get("graph_nodes")) else "—"


def render_table(records: Sequence[dict]) -> str:
    rows = [TABLE_HEADER, ["---"] * len(TABLE_HEADER)]
    for r in records:
        f, e, d = r["figures"], r["errors"], r["derived"]
        targets = "; ".join(f"({t['id']}) {fmt_ok(t['ok'])} {t['detail']}" for t in r["targets"])
        rows.append([
            r["title"],
            fmt_us(f["stepgraph_graph_us"], e.get("stepgraph")),
            fmt_us(f["stepgraph_eager_us"], e.get("stepgraph")),
            fmt_us(f["torch_eager_us"], e.get("torch_eager")),
            fmt_us(f["torch_eager_fused_us"], e.get("torch_eager_fused")),
            fmt_us(f["torch_graph_us"], e.get("torch_graph")),
            fmt_us(f["jax_jit_us"], e.get("jax")),
            fmt_x(d["speedup_vs_torch_graph"]),
            fmt_x(d["speedup_vs_best_other"]),
            _nodes(r),
            mib(f["stepgraph_peak_bytes"]) + (f" ({mib(f['stepgraph_arena_bytes'])})"
                                              if f["stepgraph_arena_bytes"] is not None else ""),
            mib(f["torch_graph_peak_bytes"]),
            targets,
        ])
    return "\n".join("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |"
                     for row in rows)


def render_problems(records: Sequence[dict]) -> List[str]:
    lines = []
    for r in records:
        for k, v in r["errors"].items():
            lines.append(f"- {r['workload']} / {k}: {v}")
        for n in r["notes"]:
            lines.append(f"- {r['workload']}: {n}")
    return lines


def target_summary(records: Sequence[dict]) -> Dict[str, Optional[bool]]:
    """Per target id over all workloads: False if any FAIL, None if any n/a, else True."""
    out: Dict[str, Optional[bool]] = {}
    for r in records:
        for t in r["targets"]:
            prev = out.get(t["id"], True)
            if prev is False or t["ok"] is False:
                out[t["id"]] = False
            elif prev is None or t["ok"] is None:
                out[t["id"]] = None
            else:
                out[t["id"]] = True
    return out


def render_section(meta: dict, records: Sequence[dict]) -> str:
    lines = [f"### {meta['date_utc']} — {meta['gpu']}", ""]
    lines.append(f"- command: `{meta['command']}`")
    lines.append(f"- driver {meta.get('driver') or '?'}, torch {meta.get('torch') or '?'} "
                 f"(CUDA {meta.get('torch_cuda') or '?'}), jax {meta.get('jax') or '?'}, "
                 f"python {meta.get('python') or '?'}")
    lines.append(f"- stepgraph: `{meta.get('stepgraph_binary')}`"
                 + (f" ({meta['stepgraph_git']})" if meta.get("stepgraph_git") else ""))
    lines.append(f"- median of {REPEATS} repeats after {WARMUP} warm-up steps, µs per training "
                 f"step, fp32, TF32 off, data on the GPU; steps per repeat: "
                 + ", ".join(f"{r['workload']} {r['iters']}" for r in records)
                 + (" (--quick)" if meta.get("quick") else ""))
    lines.append("- peak: stepgraph's `peak_device_bytes`; torch: tensors outside the graph pool "
                 "+ the graph's private pool while replaying, or the max_memory_allocated peak of "
                 "warm-up and capture if larger")
    lines += ["", render_table(records), ""]
    summary = target_summary(records)
    if summary:
        lines.append("Targets: " + ", ".join(f"({k}) {fmt_ok(v)}" for k, v in summary.items()))
        lines.append("")
    problems = render_problems(records)
    if problems:
        lines += ["Errors and notes:", *problems, ""]
    return "\n".join(lines) + "\n"


def append_results_md(path: Path, section: str, records: Optional[Sequence[dict]] = None,
                      meta: Optional[dict] = None) -> None:
    """Appends `section` under "## Runs" and, given the run's records and meta, replaces the
    rows of the "Current figures" table for the workloads it measured (current_figures.py), in
    one write: a malformed table stops it before the file changes."""
    text = path.read_text() if path.exists() else ""
    if "## Runs" not in text:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + "## Runs\n"
    if not text.endswith("\n"):
        text += "\n"
    text += "\n" + section
    if records is not None:
        anchor = current_figures.last_anchor(text, current_figures.section_heading(section))
        rows = current_figures.rows_from_records(records, meta or {}, anchor, fmt_us, fmt_x)
        text = current_figures.update_table(text, rows)
    path.write_text(text)


# --------------------------------------------------------------------------------------------
# Environment facts.
# --------------------------------------------------------------------------------------------

def _version(dist: str) -> Optional[str]:
    try:
        from importlib import metadata
        return metadata.version(dist)
    except Exception:  # noqa: BLE001
        return None


def driver_version() -> Optional[str]:
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        if p.returncode == 0 and p.stdout.strip():
            return p.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:  # NVML directly
        import ctypes
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() == 0:
            buf = ctypes.create_string_buffer(96)
            if nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
                return buf.value.decode()
    except (OSError, AttributeError):
        pass
    return None


def git_describe() -> Optional[str]:
    try:
        p = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip() or None if p.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


# --------------------------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------------------------

def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stepgraph", default="build/stepgraph", help="the stepgraph binary")
    ap.add_argument("--only", default="", help="comma-separated workloads: " + ",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="5x fewer steps per repeat")
    ap.add_argument("--skip", default="", help="comma-separated: stepgraph,torch,jax")
    ap.add_argument("--results-md", type=Path, help="append a section to this file "
                                                    "(the project's bench/RESULTS.md)")
    ap.add_argument("--jax-budget-s", type=float, default=120.0,
                    help="JAX timing budget per workload; fewer steps, or skipped, if slower")
    ap.add_argument("--timeout-s", type=float, default=300.0,
                    help="limit for each stepgraph and JAX subprocess")
    ap.add_argument("--self-test", action="store_true", help="CPU-only test of the pure parts")
    ap.add_argument("--jax-worker", help=argparse.SUPPRESS)
    ap.add_argument("--jax-iters", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.only_list = [s for s in args.only.split(",") if s] or list(WORKLOADS)
    unknown = [s for s in args.only_list if s not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    args.skip_set = {s for s in args.skip.split(",") if s}
    if args.skip_set - {"stepgraph", "torch", "jax"}:
        ap.error(f"--skip takes stepgraph, torch, jax; got {args.skip}")
    return args


def iters_for(w: Workload, quick: bool) -> int:
    return max(5, w.iters // 5) if quick else w.iters


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    if args.jax_worker:
        w = WORKLOADS[args.jax_worker]
        try:
            rec = jax_worker(w, args.jax_iters or w.iters, args.jax_budget_s)
        except Exception as e:  # noqa: BLE001
            rec = {"us": None, "error": err_str(e)}
        print(JAX_MARK + json.dumps(rec), flush=True)
        return 0

    # JAX runs in subprocesses, but keep this process's environment safe too.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    command = shlex.join(["python3", *(sys.argv if argv is None else ["bench/bench_vs_torch.py",
                                                                      *argv])])
    workloads = [WORKLOADS[n] for n in args.only_list]
    for w in workloads:
        for problem in check_config(w):
            print(f"warning: {w.name}: {problem}", file=sys.stderr)

    # 1. stepgraph first, before this process creates a CUDA context.
    sg: Dict[str, Optional[dict]] = {w.name: None for w in workloads}
    if "stepgraph" not in args.skip_set:
        for w in workloads:
            print(f"[stepgraph] {w.name} ...", flush=True)
            sg[w.name] = run_stepgraph(args.stepgraph, w, iters_for(w, args.quick), args.timeout_s)
            print(f"  {json.dumps(sg[w.name].get('result') or sg[w.name].get('error'))}",
                  flush=True)

    # 2. PyTorch in this process.
    tv: Dict[str, Optional[dict]] = {w.name: None for w in workloads}
    meta: Dict[str, Any] = {"torch": _version("torch"), "jax": _version("jax"),
                            "jaxlib": _version("jaxlib"), "python": sys.version.split()[0],
                            "driver": driver_version(), "gpu": None, "torch_cuda": None}
    if "torch" not in args.skip_set:
        torch = None
        try:
            torch = torch_setup()
            meta["torch"] = torch.__version__
            meta["torch_cuda"] = torch.version.cuda
            meta["gpu"] = torch.cuda.get_device_name(0)
        except Exception as e:  # noqa: BLE001 - torch_measure records it per workload
            print(f"warning: torch: {err_str(e)}", file=sys.stderr)
        for w in workloads:
            print(f"[torch] {w.name} ...", flush=True)
            try:
                tv[w.name] = torch_measure(w, iters_for(w, args.quick))
            except Exception as e:  # noqa: BLE001 - torch_measure records its own; belt and braces
                tv[w.name] = {v: {"us": None, "error": err_str(e)}
                              for v in ("eager", "eager_fused", "graph")}
            print("  " + json.dumps({k: v.get("us") if v.get("us") is not None else v.get("error")
                                     for k, v in tv[w.name].items()}), flush=True)
        if torch is not None:  # hand the cached memory back before JAX runs
            torch_free(torch)

    # 3. JAX in subprocesses.
    jx: Dict[str, Optional[dict]] = {w.name: None for w in workloads}
    if "jax" not in args.skip_set:
        for w in workloads:
            print(f"[jax] {w.name} ...", flush=True)
            jx[w.name] = run_jax(w, iters_for(w, args.quick), args.jax_budget_s, args.timeout_s)
            print("  " + json.dumps({k: jx[w.name].get(k) for k in ("us", "error", "skipped")
                                     if jx[w.name].get(k) is not None}), flush=True)
            if jx[w.name].get("jax_version"):
                meta["jax"] = jx[w.name]["jax_version"]

    if meta["gpu"] is None:
        for s in sg.values():
            if s and s.get("result") and s["result"].get("gpu"):
                meta["gpu"] = s["result"]["gpu"]
                break
    meta.update({
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": meta["gpu"] or "unknown GPU",
        "command": command, "cwd": os.getcwd(), "quick": args.quick,
        "stepgraph_binary": args.stepgraph, "stepgraph_git": git_describe(),
        "repeats": REPEATS, "warmup": WARMUP,
    })
    records = [make_record(w, iters_for(w, args.quick), sg[w.name], tv[w.name], jx[w.name])
               for w in workloads]
    result = {"meta": meta, "workloads": records, "targets": target_summary(records)}

    section = render_section(meta, records)
    print()
    print(section)
    out = os.environ.get("OUT")
    if out:
        path = Path(out) / "bench_results.json"
        path.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {path}")
    if args.results_md:
        append_results_md(args.results_md, section, records, meta)
        print(f"appended to {args.results_md} (and its current figures)")
    else:
        print("note: not recorded; pass --results-md bench/RESULTS.md to append this run")
    return 0


# --------------------------------------------------------------------------------------------
# Self-test (CPU only, no torch or jax).
# --------------------------------------------------------------------------------------------

def _fake_bench(**over: Any) -> dict:
    obj = {"event": "bench", "config": "bench/configs/seed_mlp.json", "device": "cuda",
           "gpu": "NVIDIA H200", "batch": 64, "eager_us_per_step": 80.0,
           "graph_us_per_step": 25.0, "graph_nodes": 11, "peak_device_bytes": 3 << 20,
           "arena_bytes": 1 << 20, "tf32": False}
    obj.update(over)
    return {k: v for k, v in obj.items() if v is not None}


def _fake_record(name: str, sg_graph: Optional[float], torch_graph: Optional[float],
                 sg_peak: Optional[int] = 3 << 20, torch_peak: Optional[int] = 8 << 20,
                 **bench_over: Any) -> dict:
    w = WORKLOADS[name]
    sg = None
    if sg_graph is not None:
        over = {"batch": w.batch, **bench_over}
        sg = {"result": _fake_bench(graph_us_per_step=sg_graph, peak_device_bytes=sg_peak,
                                    **over),
              "error": None, "warnings": []}
    else:
        sg = {"result": None, "error": "stepgraph error: no CUDA device", "warnings": []}
    tv = {"eager": {"us": 1000.0, "error": None, "check": {"ok": True}},
          "eager_fused": {"us": None, "error": "RuntimeError: boom"},
          "graph": {"us": torch_graph, "error": None if torch_graph else "OOM",
                    "check": {"ok": True},
                    "memory": {"peak_bytes": torch_peak} if torch_peak else None}}
    jx = {"us": None, "skipped": "too slow"} if name == "large_mlp" else {"us": 170.0}
    return make_record(w, w.iters, sg, tv, jx)


def self_test() -> int:
    import tempfile
    import unittest

    class T(unittest.TestCase):
        def test_parse_last_line(self) -> None:
            good = json.dumps(_fake_bench())
            out = "\n".join(['{"event": "info", "message": "x"}', "plain log", good, "", "  "])
            obj, warn = parse_bench_output(out)
            self.assertEqual(obj["graph_us_per_step"], 25.0)
            self.assertEqual(warn, [])

        def test_parse_only_last_line_counts(self) -> None:
            out = json.dumps(_fake_bench()) + "\n" + '{"event": "summary", "steps": 3}'
            with self.assertRaisesRegex(BenchParseError, "expected \"bench\""):
                parse_bench_output(out)

        def test_parse_error_event(self) -> None:
            out = '{"event": "error", "message": "--device cuda: no GPU"}\n'
            with self.assertRaisesRegex(BenchParseError, "no GPU"):
                parse_bench_output(out)

        def test_parse_garbage(self) -> None:
            for bad, pat in [("", "no output"), ("not json", "not JSON"), ("[1, 2]", "object"),
                             (json.dumps(_fake_bench(graph_us_per_step=None)), "lacks"),
                             (json.dumps(_fake_bench(graph_us_per_step="12")), "bad"),
                             (json.dumps(_fake_bench(graph_us_per_step=0)), "non-positive"),
                             (json.dumps(_fake_bench(eager_us_per_step=True)), "bad")]:
                with self.assertRaisesRegex(BenchParseError, pat, msg=bad):
                    parse_bench_output(bad)
            # NaN is accepted by json.loads but is not a figure.
            with self.assertRaises(BenchParseError):
                parse_bench_output(json.dumps(_fake_bench(graph_us_per_step=float("nan"))))

        def test_parse_optional_keys_warn(self) -> None:
            obj, warn = parse_bench_output(json.dumps(_fake_bench(graph_nodes=None, tf32="no",
                                                                  device="cpu")))
            self.assertIn('bench line lacks "graph_nodes"', warn)
            self.assertTrue(any('"tf32"' in x for x in warn))
            self.assertTrue(any("not cuda" in x for x in warn))

        def test_run_stepgraph_fake_binary(self) -> None:
            with tempfile.TemporaryDirectory() as d:
                ok = Path(d) / "ok.sh"
                ok.write_text("#!/bin/sh\necho '{\"event\": \"info\", \"message\": \"warm\"}'\n"
                              f"echo '{json.dumps(_fake_bench())}'\n"
                              'echo "$@" >&2\n')
                fail = Path(d) / "fail.sh"
                fail.write_text("#!/bin/sh\necho '{\"event\": \"error\", \"message\": \"bad "
                                "config\"}'\necho 'stepgraph: error: bad config' >&2\nexit 1\n")
                cli = Path(d) / "cli.sh"  # a CLI11 parse error: nothing on stdout
                cli.write_text("#!/bin/sh\necho 'The following argument was not expected: bench'"
                               " >&2\necho 'Run with --help for more information.' >&2\n"
                               "exit 106\n")
                for f in (ok, fail, cli):
                    f.chmod(0o755)
                w = WORKLOADS["seed_mlp"]
                r = run_stepgraph(str(ok), w, 7, 30)
                self.assertIsNone(r["error"])
                self.assertEqual(r["result"]["graph_nodes"], 11)
                self.assertIn("bench", r["stderr_tail"])
                self.assertIn("--steps 7 --json", r["stderr_tail"])
                self.assertTrue(r["stderr_tail"].split()[1].endswith("seed_mlp.json"))
                r = run_stepgraph(str(fail), w, 7, 30)
                self.assertIsNone(r["result"])
                self.assertIn("exit 1", r["error"])
                self.assertIn("bad config", r["error"])
                r = run_stepgraph(str(cli), w, 7, 30)
                self.assertEqual(r["error"], "exit 106: no output (stderr: The following "
                                             "argument was not expected: bench)")
                r = run_stepgraph(str(Path(d) / "missing"), w, 7, 30)
                self.assertIn("not found", r["error"])

        def test_targets_pass(self) -> None:
            recs = [_fake_record("seed_mlp", 25.0, 117.0),
                    _fake_record("mlp_8x256", 140.0, 493.0),
                    _fake_record("large_mlp", 42000.0, 40714.0, sg_peak=500 << 20,
                                 torch_peak=900 << 20)]
            for r in recs:
                for t in r["targets"]:
                    self.assertIs(t["ok"], True, (r["workload"], t))
            self.assertEqual(target_summary(recs), {"a": True, "mem": True, "b": True, "c": True})
            # 40714 / 0.95 = 42857: 42000 passes, 42900 fails.
            self.assertAlmostEqual(recs[2]["derived"]["speedup_vs_torch_graph"], 40714 / 42000)

        def test_targets_fail_and_boundaries(self) -> None:
            # 30 us exactly passes (a), but 117/30 = 3.9x fails the 4x half.
            r = _fake_record("seed_mlp", 30.0, 117.0)
            self.assertEqual([t["ok"] for t in r["targets"]], [True, False, True])
            r = _fake_record("seed_mlp", 29.25, 117.0)  # exactly 4x
            self.assertEqual([t["ok"] for t in r["targets"]], [True, True, True])
            r = _fake_record("seed_mlp", 31.0, 200.0)
            self.assertEqual([t["ok"] for t in r["targets"]], [False, True, True])
            r = _fake_record("mlp_8x256", 150.0, 493.0)
            self.assertIs(r["targets"][0]["ok"], True)
            r = _fake_record("mlp_8x256", 150.1, 493.0, sg_peak=9 << 20)
            self.assertEqual([t["ok"] for t in r["targets"]], [False, False])
            r = _fake_record("large_mlp", 42900.0, 40714.0)
            self.assertIs(r["targets"][0]["ok"], False)
            r = _fake_record("large_mlp", 40714.0 / 0.95, 40714.0)
            self.assertIs(r["targets"][0]["ok"], True)
            summary = target_summary([_fake_record("seed_mlp", 25.0, 117.0),
                                      _fake_record("mlp_8x256", 150.1, 493.0)])
            self.assertEqual(summary, {"a": True, "mem": True, "b": False})

        def test_targets_missing_and_unfair(self) -> None:
            r = _fake_record("seed_mlp", None, 117.0)
            self.assertEqual([t["ok"] for t in r["targets"]], [None, None, None])
            self.assertIn("stepgraph", r["errors"])
            r = _fake_record("large_mlp", 100.0, None, torch_peak=None)
            self.assertEqual([t["ok"] for t in r["targets"]], [None, None])
            self.assertIn("torch_graph", r["errors"])
            r = _fake_record("seed_mlp", 10.0, 117.0, tf32=True)
            self.assertEqual([t["ok"] for t in r["targets"]], [None, None, None])
            self.assertIn("TF32", r["targets"][0]["detail"])
            r = _fake_record("seed_mlp", 10.0, 117.0, batch=128)
            self.assertIsNone(r["targets"][0]["ok"])
            self.assertEqual(target_summary([_fake_record("seed_mlp", 25.0, 117.0), r])["a"],
                             None)
            self.assertEqual(target_summary([r, _fake_record("seed_mlp", 31.0, 117.0)])["a"],
                             False)

        def test_record_figures_and_errors(self) -> None:
            r = _fake_record("large_mlp", 41000.0, 40714.0)
            f = r["figures"]
            self.assertEqual(f["torch_eager_us"], 1000.0)
            self.assertIsNone(f["torch_eager_fused_us"])
            self.assertEqual(r["errors"]["torch_eager_fused"], "RuntimeError: boom")
            self.assertTrue(r["errors"]["jax"].startswith("skipped"))
            self.assertEqual(f["stepgraph_arena_bytes"], 1 << 20)
            d = r["derived"]
            self.assertAlmostEqual(d["speedup_vs_best_other"], 1000.0 / 41000.0)
            self.assertAlmostEqual(d["stepgraph_eager_over_graph"], 80.0 / 41000.0)
            json.dumps(r)  # serialisable

        def test_table(self) -> None:
            recs = [_fake_record("seed_mlp", 25.0, 117.0), _fake_record("mlp_8x256", None, 493.0),
                    _fake_record("large_mlp", 41000.0, 40714.0)]
            table = render_table(recs)
            lines = table.splitlines()
            self.assertEqual(len(lines), 2 + len(recs))
            ncol = len(TABLE_HEADER)
            for ln in lines:
                self.assertEqual(ln.count("|"), ncol + 1, ln)
            seed = lines[2]
            for piece in ("25.0", "117.0", "1000", "error", "170.0", "4.68x", "3.0 (1.0)", "8.0",
                          "| 11 |",
                          "(a) PASS 25.0 us", "(mem) PASS"):
                self.assertIn(piece, seed)
            self.assertIn("(b) n/a no stepgraph figure", lines[3])
            self.assertIn("skipped", lines[4])
            self.assertIn("41000", lines[4])
            self.assertIn("0.99x", lines[4])

        def test_section_and_results_md(self) -> None:
            recs = [_fake_record("seed_mlp", 25.0, 117.0), _fake_record("mlp_8x256", None, 493.0)]
            meta = {"date_utc": "2026-12-01 10:00 UTC", "gpu": "NVIDIA H200",
                    "command": "python3 bench/bench_vs_torch.py --only seed_mlp,mlp_8x256",
                    "driver": "580.159.04", "torch": "2.11.0+cu130", "torch_cuda": "13.0",
                    "jax": "0.11.2", "python": "3.12.3", "stepgraph_binary": "build/stepgraph",
                    "quick": False}
            sec = render_section(meta, recs)
            for piece in ("### 2026-12-01 10:00 UTC — NVIDIA H200", meta["command"],
                          "driver 580.159.04", "torch 2.11.0+cu130", "jax 0.11.2",
                          "Targets: (a) PASS, (mem) n/a, (b) n/a",
                          "mlp_8x256 / stepgraph: stepgraph error: no CUDA device",
                          "seed_mlp / torch_eager_fused: RuntimeError: boom"):
                self.assertIn(piece, sec)
            with tempfile.TemporaryDirectory() as d:
                p = Path(d) / "RESULTS.md"
                p.write_text("# Results\n\nheader\n\n## Runs\n")
                append_results_md(p, sec)
                append_results_md(p, sec)
                text = p.read_text()
                self.assertEqual(text.count("## Runs"), 1)
                self.assertEqual(text.count("### 2026-12-01"), 2)
                self.assertTrue(text.index("## Runs") < text.index("### 2026"))
                q = Path(d) / "new.md"
                append_results_md(q, sec)
                self.assertTrue(q.read_text().startswith("## Runs\n\n### "))
            # The project's own file is well formed, its current figures covering these workloads.
            real = HERE / "RESULTS.md"
            self.assertTrue(real.exists(), real)
            self.assertIn("\n## Runs\n", real.read_text())
            current_figures.check_project_table(self, real.read_text(), list(WORKLOADS))

        def test_results_md_table_write_is_one_step(self) -> None:
            # A malformed table stops the append before the file changes.
            recs = [_fake_record("seed_mlp", 25.0, 117.0)]
            meta = {"date_utc": "2026-12-01 10:00 UTC", "gpu": "NVIDIA H200", "command": "x",
                    "stepgraph_binary": "b"}
            with tempfile.TemporaryDirectory() as d:
                p = Path(d) / "RESULTS.md"
                bad = "# x\n\n" + current_figures.BEGIN + "\n\n## Runs\n"
                p.write_text(bad)
                with self.assertRaises(ValueError):
                    append_results_md(p, render_section(meta, recs), recs, meta)
                self.assertEqual(p.read_text(), bad)
                p.write_text(current_figures.SAMPLE)
                append_results_md(p, render_section(meta, recs), recs, meta)
                append_results_md(p, render_section(meta, recs), recs, meta)  # same heading twice
                text = p.read_text()
                self.assertTrue(text.startswith(current_figures.SAMPLE.split(current_figures.BEGIN)[0]))
                self.assertIn(current_figures.SAMPLE[current_figures.SAMPLE.index("## Runs"):], text)
                row = current_figures.parse_rows(text)[0]
                self.assertEqual(row[1:5], ["25.0", "117.0", "170.0", "4.68x"])
                # the second of two equal headings: GitHub's anchor ends in -1
                self.assertTrue(row[7].endswith("-utc--nvidia-h200-1)"), row[7])
                current_figures.check_project_table(self, text, ["seed_mlp", "poisson_4x64"])

        def test_configs_match_models(self) -> None:
            for w in WORKLOADS.values():
                self.assertEqual(check_config(w), [], w.name)
            # And the check does catch a difference.
            cfg = json.loads(WORKLOADS["mlp_8x256"].config_path.read_text())
            cfg["model"]["layers"][3]["units"] = 255
            cfg["optimizer"]["weight_decay"] = 0.01
            del cfg["model"]["layers"][0]["activation"]
            bad = check_config(WORKLOADS["mlp_8x256"], cfg)
            self.assertEqual(len(bad), 3, bad)
            self.assertEqual(WORKLOADS["seed_mlp"].parameters, 35851)
            self.assertEqual(WORKLOADS["mlp_8x256"].parameters, 463114)
            self.assertEqual(WORKLOADS["large_mlp"].parameters, 41858024)
            # Same FLOP count as the reference script's classifier_bench.
            self.assertEqual(WORKLOADS["mlp_8x256"].flops_per_step,
                             6 * 1024 * (256 * 256 + 6 * 256 * 256 + 256 * 10))
            self.assertEqual(WORKLOADS["large_mlp"].flops_per_step,
                             6 * 8192 * (1024 * 4096 + 2 * 4096 * 4096 + 4096 * 1000))

        def test_jax_output_parsing(self) -> None:
            rec = parse_jax_output("noise\n" + JAX_MARK + json.dumps({"us": 171.0}) + "\n", "", 0)
            self.assertEqual(rec["us"], 171.0)
            rec = parse_jax_output("", "Traceback\nRuntimeError: CUDA_ERROR_OUT_OF_MEMORY\n", 1)
            self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", rec["error"])

        def test_args(self) -> None:
            a = parse_args(["--only", "seed_mlp,large_mlp", "--quick"])
            self.assertEqual(a.only_list, ["seed_mlp", "large_mlp"])
            self.assertEqual(iters_for(WORKLOADS["seed_mlp"], a.quick), 400)
            self.assertEqual(iters_for(WORKLOADS["large_mlp"], True), 10)
            self.assertEqual(parse_args([]).only_list, list(WORKLOADS))
            import contextlib
            import io
            for bad in (["--only", "nope"], ["--skip", "tensorflow"]):
                with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                    parse_args(bad)

        def test_main_end_to_end_without_frameworks(self) -> None:
            # stepgraph from a fake binary, torch and JAX skipped: JSON file and RESULTS section.
            import contextlib
            import io
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "stepgraph"
                fake.write_text("#!/bin/sh\n"
                                f"echo '{json.dumps(_fake_bench(graph_us_per_step=20.0))}'\n")
                fake.chmod(0o755)
                md = Path(d) / "RESULTS.md"
                md.write_text(current_figures.SAMPLE)  # a current-figures table, one section
                old_out = os.environ.get("OUT")
                os.environ["OUT"] = d
                try:
                    with contextlib.redirect_stdout(io.StringIO()) as so:
                        rc = main(["--only", "seed_mlp", "--skip", "torch,jax", "--quick",
                                   "--stepgraph", str(fake), "--results-md", str(md)])
                finally:
                    if old_out is None:
                        del os.environ["OUT"]
                    else:
                        os.environ["OUT"] = old_out
                self.assertEqual(rc, 0)
                res = json.loads((Path(d) / "bench_results.json").read_text())
                self.assertEqual(res["meta"]["gpu"], "NVIDIA H200")  # from stepgraph's line
                self.assertTrue(res["meta"]["quick"])
                (rec,) = res["workloads"]
                self.assertEqual(rec["figures"]["stepgraph_graph_us"], 20.0)
                self.assertEqual(rec["iters"], 400)
                self.assertIn("--steps 400 --json", rec["stepgraph"]["command"])
                self.assertEqual(res["targets"], {"a": None, "mem": None})
                text = md.read_text()
                self.assertIn("--skip torch,jax", text)
                self.assertIn("| 20.0 |", text)
                self.assertIn("(a) PASS 20.0 us", so.getvalue())
                # The run's workload has its row replaced, linking the new section; the other
                # row and the earlier section are as they were.
                sample = current_figures.SAMPLE
                rows = {r[0]: r for r in current_figures.parse_rows(text)}
                self.assertEqual(list(rows), ["seed_mlp", "poisson_4x64"])
                self.assertEqual(rows["seed_mlp"][1:5], ["20.0", "—", "—", "—"])
                self.assertEqual(rows["seed_mlp"][6], "NVIDIA H200")
                anchor = current_figures.anchors(text)[-1]
                self.assertTrue(anchor.endswith("-utc--nvidia-h200"), anchor)
                self.assertIn(f", --quick](#{anchor})", rows["seed_mlp"][7])
                self.assertEqual(rows["poisson_4x64"], current_figures.parse_rows(sample)[1])
                end = sample.index(current_figures.END)
                self.assertTrue(text[text.index(current_figures.END):].startswith(sample[end:]))

        def test_median_us(self) -> None:
            calls = []
            us, runs = median_us(lambda: calls.append(1), lambda: None, iters=10, warm=3)
            self.assertEqual(len(calls), 3 + REPEATS * 10)
            self.assertEqual(len(runs), REPEATS)
            self.assertGreaterEqual(us, 0.0)

        def test_no_framework_imported(self) -> None:
            self.assertNotIn("torch", sys.modules)
            self.assertNotIn("jax", sys.modules)

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(T)
    suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(current_figures.Tests))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
