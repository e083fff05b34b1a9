#!/usr/bin/env python3
"""stepgraph's CNN and transformer training steps against PyTorch on the same GPU.

Softmax cross-entropy (mean), AdamW with a constant lr, fp32 with TF32 off:
  digits_cnn: configs/digits_cnn.json's net on 8x8x1 images, batch 64: conv 3x3 16 relu pad 1 ->
              conv 3x3 32 relu pad 1 -> max pool 2 -> flatten -> dense 10 (launch-bound);
  cnn_wide:   32x32x3 images, batch 256: conv 3x3 32 -> conv 3x3 64 -> max pool 2 -> conv 3x3 128
              (relu, pad 1) -> global average pool -> dense 10 (not launch-bound);
  reverse_transformer: configs/reverse_transformer.json's decoder on the reverse task (24 tokens,
              vocabulary 21, width 32, 2 causal blocks of 4 heads, batch 64; launch-bound);
  tiny_gpt:   the same kind of decoder at 128 tokens, vocabulary 64, width 128, 4 blocks of 4
              heads with MLP 512, batch 32;
  digits_cnn_nd, cnn_wide_nd: the two CNNs with train.deterministic false, so cuDNN may pick
              nondeterministic (atomic) engines on stepgraph's side too, as PyTorch does by
              default (torch.backends.cudnn.deterministic = False in every row);
  tiny_gpt_bf16: tiny_gpt with attention in bf16 on both sides: stepgraph's train.attention
              "cudnn_bf16" (cuDNN's fused SDPA, deterministic backward, between fp32<->bf16
              conversion kernels), PyTorch's F.scaled_dot_product_attention on q, k, v cast to
              bf16 (its own backend choice), the output cast back to fp32; everything else fp32.
A transformer block is pre-norm: x + attention(layer_norm(x)), then x + mlp(layer_norm(x)) with a
tanh-GELU MLP; attention has separate query/key/value/output projections with biases (none on
the key, as stepgraph: it would not change the softmax); labels of
the prompt half are ignored (-1), as the sequence task makes them.
For each one:
  1. `stepgraph bench bench/cnn_configs/NAME.json --steps N --json` (eager steps, graph replays),
  2. PyTorch in this process: nn.Conv2d with the inputs and the model in torch.channels_last (the
     NHWC layout stepgraph uses), cudnn.benchmark on; for transformers nn.Embedding, nn.LayerNorm,
     nn.Linear and F.scaled_dot_product_attention (fp32, is_causal; bf16 q, k, v for
     tiny_gpt_bf16); eager (foreach and fused
     AdamW), and the whole step captured as one torch.cuda.CUDAGraph (capturable AdamW, foreach
     and fused), plus the memory that graph run holds and the kernels of one eager step.
Timing, table and RESULTS.md sections follow bench/bench_vs_torch.py, whose helpers this imports.

    python3 bench/bench_cnn_vs_torch.py --stepgraph build/stepgraph --results-md bench/RESULTS.md
    python3 bench/bench_cnn_vs_torch.py --only digits_cnn --quick
    python3 bench/bench_cnn_vs_torch.py --self-test     # CPU only, never imports torch
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_vs_torch as bvt  # noqa: E402  (imports neither torch nor jax)
import current_figures as cf  # noqa: E402  (the table at the top of RESULTS.md)
import bench_pinn_vs_torch as bpt  # noqa: E402  (cuda_lib_env; no torch either)

REPO = HERE.parent
CONFIG_DIR = HERE / "cnn_configs"  # not bench/configs/: other scripts glob that folder
BETAS, EPS = (0.9, 0.999), 1e-8
VARIANTS = ("eager", "eager_fused", "graph", "graph_fused")
TORCH_NOTE = ("torch: nn.Conv2d/MaxPool2d/Linear with inputs and model in torch.channels_last "
              "(NHWC, as stepgraph), flatten in NHWC order (permute(0, 2, 3, 1).flatten(1), "
              "a view), global average pool = AdaptiveAvgPool2d(1); "
              "torch.backends.cudnn.benchmark = True; TF32 off (cudnn.allow_tf32 = "
              "matmul.allow_tf32 = False): stepgraph's fp32 conv engines exclude TF32; eager: "
              "AdamW foreach / fused; graph: the whole step in one torch.cuda.CUDAGraph with "
              "AdamW(capturable=True), foreach / fused; random data already on the GPU "
              "(stepgraph: the first batch rows of its config's data, set once); inits differ "
              "(timing only); tiny_gpt_bf16: attention in bf16 on both sides (stepgraph "
              "train.attention cudnn_bf16; torch F.scaled_dot_product_attention on bf16 q, k, v); "
              "torch keeps cudnn.deterministic = False (its default: atomic engines allowed); "
              "stepgraph is deterministic except in the *_nd rows (train.deterministic false)")

# A layer of the benchmark's net: ("conv", filters) = conv2d 3x3, stride 1, pad 1, relu, bias;
# ("maxpool", 2) = 2x2 window, stride 2; ("flatten",); ("gap",) = global average pool;
# ("dense", units) = dense, no activation, bias (on the last dimension);
# ("embedding", vocab, dim, positions) = token + position tables; ("block", heads, mlp) = a causal
# pre-norm transformer block; ("layer_norm",) = layer norm over the last dimension, eps 1e-5.
Layer = Tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    config: str                       # file name in bench/cnn_configs/
    input_shape: Tuple[int, ...]     # height, width, channels (NHWC rows); (positions,) for tokens
    batch: int
    layers: Tuple[Layer, ...]
    lr: float
    weight_decay: float
    iters: int                        # steps per timed repeat (divided by 5 with --quick)
    title: str
    attention: str = "fp32"           # train.attention: fp32 | cudnn_bf16 (torch: bf16 SDPA)
    deterministic: bool = True        # train.deterministic (torch: cudnn.deterministic False always)

    @property
    def config_path(self) -> Path:
        return CONFIG_DIR / self.config

    @property
    def features(self) -> int:
        n = 1
        for d in self.input_shape:
            n *= d
        return n

    @property
    def tokens(self) -> bool:
        return self.layers[0][0] == "embedding"

    def shapes(self) -> List[Tuple[int, ...]]:
        """The per-sample shape after each layer: (h, w, c) for images, (n,) after flatten/gap."""
        s: Tuple[int, ...] = tuple(self.input_shape)
        out = []
        for layer in self.layers:
            kind = layer[0]
            if kind == "conv":
                s = (s[0], s[1], layer[1])
            elif kind == "maxpool":
                s = (s[0] // layer[1], s[1] // layer[1], s[2])
            elif kind == "flatten":
                s = (s[0] * s[1] * s[2],)
            elif kind == "gap":
                s = (s[2],)
            elif kind == "dense":
                s = s[:-1] + (layer[1],)
            elif kind == "embedding":
                s = (s[0], layer[2])
            elif kind not in ("block", "layer_norm"):
                raise ValueError(f"unknown layer {layer!r}")
            out.append(s)
        return out

    @property
    def classes(self) -> int:
        return self.shapes()[-1][-1]

    @property
    def parameters(self) -> int:
        n, prev = 0, tuple(self.input_shape)
        for layer, s in zip(self.layers, self.shapes()):
            if layer[0] == "conv":
                n += 9 * prev[-1] * layer[1] + layer[1]
            elif layer[0] == "dense":
                n += prev[-1] * layer[1] + layer[1]
            elif layer[0] == "embedding":
                n += (layer[1] + layer[3]) * layer[2]
            elif layer[0] == "layer_norm":
                n += 2 * s[-1]
            elif layer[0] == "block":
                e, m = s[-1], layer[2]
                n += 4 * e * e + 3 * e + 2 * 2 * e + (e * m + m) + (m * e + e)  # no key bias
            prev = s
        return n


WORKLOADS: Dict[str, Workload] = {w.name: w for w in [
    Workload("digits_cnn", "digits_cnn.json", (8, 8, 1), 64,
             (("conv", 16), ("conv", 32), ("maxpool", 2), ("flatten",), ("dense", 10)),
             0.002, 1e-4, 500, "digits CNN 8x8x1, conv 16-32, pool, dense 10, batch 64"),
    Workload("cnn_wide", "cnn_wide.json", (32, 32, 3), 256,
             (("conv", 32), ("conv", 64), ("maxpool", 2), ("conv", 128), ("gap",), ("dense", 10)),
             0.001, 1e-4, 100, "CNN 32x32x3, conv 32-64, pool, conv 128, GAP, dense 10, batch 256"),
    Workload("reverse_transformer", "reverse_transformer.json", (24,), 64,
             (("embedding", 21, 32, 24), ("block", 4, 64), ("block", 4, 64), ("layer_norm",),
              ("dense", 21)),
             0.003, 0.01, 300, "transformer 24 tokens, vocab 21, width 32, 2 blocks x 4 heads, batch 64"),
    Workload("tiny_gpt", "tiny_gpt.json", (128,), 32,
             (("embedding", 64, 128, 128), ("block", 4, 512), ("block", 4, 512), ("block", 4, 512),
              ("block", 4, 512), ("layer_norm",), ("dense", 64)),
             0.001, 0.01, 100, "transformer 128 tokens, vocab 64, width 128, 4 blocks x 4 heads, batch 32"),
    Workload("tiny_gpt_bf16", "tiny_gpt_bf16.json", (128,), 32,
             (("embedding", 64, 128, 128), ("block", 4, 512), ("block", 4, 512), ("block", 4, 512),
              ("block", 4, 512), ("layer_norm",), ("dense", 64)),
             0.001, 0.01, 100, "tiny_gpt with bf16 attention (cuDNN SDPA / torch bf16 SDPA)",
             attention="cudnn_bf16"),
    Workload("digits_cnn_nd", "digits_cnn_nd.json", (8, 8, 1), 64,
             (("conv", 16), ("conv", 32), ("maxpool", 2), ("flatten",), ("dense", 10)),
             0.002, 1e-4, 500, "digits_cnn, nondeterministic cuDNN engines allowed (as torch)",
             deterministic=False),
    Workload("cnn_wide_nd", "cnn_wide_nd.json", (32, 32, 3), 256,
             (("conv", 32), ("conv", 64), ("maxpool", 2), ("conv", 128), ("gap",), ("dense", 10)),
             0.001, 1e-4, 100, "cnn_wide, nondeterministic cuDNN engines allowed (as torch)",
             deterministic=False),
]}
FIGURES = ["stepgraph_graph_us", "stepgraph_eager_us", *[f"torch_{v}_us" for v in VARIANTS],
           "torch_kernels_per_step", "stepgraph_graph_nodes", "stepgraph_peak_bytes",
           "torch_graph_peak_bytes"]


def config_layer(layer: Layer) -> dict:
    """The config entry (with its defaults filled in) that a benchmark layer stands for."""
    kind = layer[0]
    if kind == "conv":
        return {"type": "conv2d", "filters": layer[1], "kernel": 3, "stride": 1, "padding": 1,
                "dilation": 1, "activation": "relu", "bias": True}
    if kind == "maxpool":
        return {"type": "max_pool2d", "window": layer[1], "stride": layer[1], "padding": 0}
    if kind == "dense":
        return {"type": "dense", "units": layer[1], "activation": "none", "bias": True}
    if kind == "embedding":
        return {"type": "embedding", "vocab": layer[1], "dim": layer[2], "positions": layer[3]}
    if kind == "block":
        return {"type": "transformer_block", "heads": layer[1], "causal": True, "mlp": layer[2]}
    if kind == "layer_norm":
        return {"type": "layer_norm", "eps": 1e-5}
    return {"type": {"flatten": "flatten", "gap": "global_avg_pool"}[kind]}


_LAYER_DEFAULTS = {"conv2d": {"stride": 1, "padding": 0, "dilation": 1, "activation": "none",
                              "bias": True},
                   "dense": {"activation": "none", "bias": True},
                   "embedding": {"positions": 0}, "transformer_block": {"causal": False},
                   "layer_norm": {"eps": 1e-5}}


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
           {"sections": ["data", "loss", "model", "optimizer", "train"]})
    model = cfg.get("model", {})
    expect("model.", model, {"input_shape": None if w.tokens else list(w.input_shape), "inputs": None})
    layers = list(model.get("layers", []))
    expect("model.", {"layers": len(layers)}, {"layers": len(w.layers)})
    for i, (got, layer) in enumerate(zip(layers, w.layers)):
        want = config_layer(layer)
        got = {k: v for k, v in got.items() if k not in ("init", "std")}  # timing only
        if want["type"] == "max_pool2d":
            got = {"stride": got.get("window"), "padding": 0, **got}
        expect(f"model.layers[{i}].", {**_LAYER_DEFAULTS.get(got.get("type"), {}), **got}, want)
    expect("loss.", {"type": "softmax_cross_entropy", "reduction": "mean", **cfg.get("loss", {})},
           {"type": "softmax_cross_entropy", "reduction": "mean"})
    opt = cfg.get("optimizer", {})
    adamw = {"type": "adamw", "lr": w.lr, "weight_decay": w.weight_decay, "beta1": BETAS[0],
             "beta2": BETAS[1], "eps": EPS, "schedule": "constant"}
    expect("optimizer.", {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, **opt,
                          "schedule": opt.get("schedule", {}).get("type", "constant")}, adamw)
    data = cfg.get("data", {})
    if w.tokens:  # position i predicts token i + 1 of the reversed (or copied) prompt
        expect("data (sequence_task).", data,
               {"source": "sequence_task", "length": w.input_shape[0] // 2, "symbols": w.classes - 1})
    elif data.get("source") == "digits":  # 1797 rows of 8x8x1, 10 classes
        expect("data (digits).", {"features": 64, "classes": 10, "rows": max(1797, w.batch)},
               {"features": w.features, "classes": w.classes, "rows": 1797})
    else:
        expect("data.", {"samples": 1000, "features": 16, "classes": 4, **data},
               {"source": "synthetic_classification", "features": w.features,
                "classes": w.classes, "samples": max(data.get("samples", 1000), w.batch)})
    expect("train.", {"precision": "fp32", "attention": "fp32", "deterministic": True, **cfg.get("train", {})},
           {"device": "cuda", "precision": "fp32", "batch_size": w.batch, "attention": w.attention,
            "deterministic": w.deterministic})
    return bad


# --------------------------------------------------------------------------------------------
# PyTorch (imported lazily, only here).
# --------------------------------------------------------------------------------------------

def torch_cnn(torch: Any, w: Workload, seed: int = 0) -> Any:
    """The workload's net as nn.Sequential on the GPU in channels_last."""
    nn = torch.nn

    class FlattenNHWC(nn.Module):  # stepgraph's flatten order; a view of a channels_last tensor
        def forward(self, x: Any) -> Any:
            return x.permute(0, 2, 3, 1).flatten(1)

    torch.manual_seed(seed)
    mods, prev = [], tuple(w.input_shape)
    for layer, s in zip(w.layers, w.shapes()):
        kind = layer[0]
        if kind == "conv":
            mods += [nn.Conv2d(prev[-1], layer[1], 3, padding=1), nn.ReLU()]
        elif kind == "maxpool":
            mods.append(nn.MaxPool2d(layer[1]))
        elif kind == "flatten":
            mods.append(FlattenNHWC())
        elif kind == "gap":
            mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        else:
            mods.append(nn.Linear(prev[0], layer[1]))
        prev = s
    return nn.Sequential(*mods).to("cuda", memory_format=torch.channels_last)


def torch_transformer(torch: Any, w: Workload, seed: int = 0) -> Any:
    """The workload's decoder (see the module docstring) on the GPU."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, e: int, heads: int, mlp: int) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(e, eps=1e-5), nn.LayerNorm(e, eps=1e-5)
            self.q, self.v, self.o = (nn.Linear(e, e) for _ in range(3))
            self.k = nn.Linear(e, e, bias=False)  # as stepgraph: a key bias has no gradient
            self.fc1, self.fc2 = nn.Linear(e, mlp), nn.Linear(mlp, e)

        def forward(self, x: Any) -> Any:
            b, s, e = x.shape
            h = self.ln1(x)
            q, k, v = (p(h).view(b, s, self.heads, e // self.heads).transpose(1, 2)
                       for p in (self.q, self.k, self.v))
            if bf16:  # as stepgraph's cudnn_bf16: bf16 in and out, fp32 around it
                a = F.scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(),
                                                   is_causal=True).float()
            else:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, s, e))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            mods: List[Any] = []
            for layer in w.layers[1:]:
                e = layer_width
                if layer[0] == "block":
                    mods.append(Block(e, layer[1], layer[2]))
                elif layer[0] == "layer_norm":
                    mods.append(nn.LayerNorm(e, eps=1e-5))
                else:
                    mods.append(nn.Linear(e, layer[1]))
            self.table = nn.Embedding(w.layers[0][1], layer_width)
            self.pos = nn.Parameter(torch.randn(w.layers[0][3], layer_width) * 0.02)
            self.body = nn.Sequential(*mods)

        def forward(self, ids: Any) -> Any:
            return self.body(self.table(ids) + self.pos[: ids.shape[1]])

    torch.manual_seed(seed)
    layer_width = w.layers[0][2]
    bf16 = w.attention == "cudnn_bf16"
    return Decoder().to("cuda")


def torch_data(torch: Any, w: Workload, seed: int = 0) -> Tuple[Any, Any]:
    """Random NHWC images as an NCHW tensor in channels_last, random labels; on the GPU. For
    transformers: random token ids [B, S] and next-token labels with the prompt half ignored."""
    g = torch.Generator().manual_seed(seed)
    if w.tokens:
        s = w.input_shape[0]
        ids = torch.randint(0, w.classes, (w.batch, s), generator=g)
        y = torch.randint(0, w.classes, (w.batch, s), generator=g)
        y[:, : s // 2] = -1
        return ids.to("cuda"), y.to("cuda")
    h, wd, c = w.input_shape
    X = torch.randn(w.batch, h, wd, c, generator=g).to("cuda").permute(0, 3, 1, 2)
    y = torch.randint(0, w.classes, (w.batch,), generator=g).to("cuda")
    return X.contiguous(memory_format=torch.channels_last), y


def torch_variant(torch: Any, w: Workload, iters: int, warm: int, variant: str) -> Dict[str, Any]:
    """One of VARIANTS: eager steps or replays of the whole step captured as one CUDA graph;
    {"us": float|None, "error": str|None, ...}."""
    F = torch.nn.functional
    rec: Dict[str, Any] = {"us": None, "error": None}
    graph, fused = variant.startswith("graph"), variant.endswith("fused")
    g = m = opt = X = y = static_loss = None
    try:
        torch.cuda.reset_peak_memory_stats()
        base, base_reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
        X, y = torch_data(torch, w)
        m = torch_transformer(torch, w) if w.tokens else torch_cnn(torch, w)
        kw: Dict[str, Any] = {"fused": True} if fused else {"foreach": True}
        if graph:
            kw["capturable"] = True
        opt = torch.optim.AdamW(m.parameters(), lr=w.lr, betas=BETAS, eps=EPS,
                                weight_decay=w.weight_decay, **kw)

        def loss_of() -> Any:  # labels < 0: no target (the sequence task's prompt half)
            out = m(X)
            return F.cross_entropy(out.flatten(0, -2), y.flatten(), ignore_index=-1)

        def loss_value() -> float:
            with torch.no_grad():
                return float(loss_of())

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            loss_of().backward()
            opt.step()

        loss0, run = loss_value(), step
        if graph:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):  # warm-up (and cuDNN's benchmark) on a side stream
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                static_loss = loss_of()
                static_loss.backward()
                opt.step()
            run = g.replay
        rec["us"], rec["runs_us"] = bvt.median_us(run, torch.cuda.synchronize, iters, warm)
        rec["check"] = bvt.training_check(loss0, loss_value())
        if graph:
            peak_alloc = torch.cuda.max_memory_allocated() - base
            try:
                mem = bvt.torch_graph_memory(torch, g.pool(), base, base_reserved)
            except Exception as e:  # noqa: BLE001 - keep the timing
                mem = {"method": f"memory_reserved ({bvt.err_str(e)})",
                       "bytes": torch.cuda.memory_reserved() - base_reserved}
            rec["memory"] = {**mem, "max_memory_allocated_bytes": peak_alloc,
                             "peak_bytes": max(mem["bytes"], peak_alloc)}
        elif not fused:  # device activities of one eager step, counted as the PINN script does
            try:
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    step()
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
        g = m = opt = X = y = static_loss = run = None  # drop the references, then free
        bvt.torch_free(torch)
    return rec


def torch_setup() -> Any:
    torch = bvt.torch_setup()  # TF32 off
    torch.backends.cudnn.benchmark = True
    return torch


def torch_measure(w: Workload, iters: int, warm: int = bvt.WARMUP) -> Dict[str, Any]:
    try:
        torch = torch_setup()
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except Exception as e:  # noqa: BLE001
        return {v: {"us": None, "error": bvt.err_str(e)} for v in VARIANTS}
    return {v: torch_variant(torch, w, iters, warm, v) for v in VARIANTS}


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
            if r.get("attention", "fp32") != w.attention:
                notes.append(f"stepgraph ran with attention {r.get('attention', 'fp32')} (PyTorch "
                             f"ran {'bf16' if w.attention == 'cudnn_bf16' else 'fp32'} attention)")
            if bvt._is_int(r.get("batch")) and r["batch"] != w.batch:
                notes.append(f"stepgraph batch {r['batch']} != {w.batch}")
        else:
            errors["stepgraph"] = sg.get("error") or "no result"
        notes += [f"stepgraph: {m}" for m in sg.get("warnings", [])]
    for variant in VARIANTS if tv is not None else ():
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
        if variant == "graph" and v.get("memory"):
            fig["torch_graph_peak_bytes"] = v["memory"].get("peak_bytes")
    torch_best = min((fig[f"torch_{v}_us"] for v in VARIANTS
                      if fig[f"torch_{v}_us"] is not None), default=None)
    rec = {"workload": w.name, "title": w.title, "config": str(w.config_path.relative_to(REPO)),
           "batch": w.batch, "input_shape": list(w.input_shape), "parameters": w.parameters,
           "iters": iters, "figures": fig, "errors": errors, "notes": notes, "stepgraph": sg,
           "torch": tv}
    rec["derived"] = {
        "speedup_vs_torch_graph": bvt._ratio(fig["torch_graph_us"], fig["stepgraph_graph_us"]),
        "speedup_vs_best_torch": bvt._ratio(torch_best, fig["stepgraph_graph_us"]),
    }
    rec["targets"] = evaluate_targets(w, fig, notes)
    return rec


def evaluate_targets(w: Workload, fig: Dict[str, Optional[float]], notes: Sequence[str] = ()
                     ) -> List[dict]:
    """[{"id", "text", "ok": True|False|None, "detail"}]: stepgraph's graph replay faster than
    PyTorch's whole-step graph (capturable AdamW); None when a figure is missing or the run is not
    like for like (TF32 on, another attention precision, another batch, not on the GPU)."""
    r = bvt._ratio(fig["torch_graph_us"], fig["stepgraph_graph_us"])
    unfair = [n for n in notes
              if "TF32 on" in n or "ran with attention" in n or "batch" in n or "not cuda" in n]
    ok = None if r is None or unfair else r > 1.0
    detail = "missing figure" if r is None else f"{r:.2f}x"
    if unfair and r is not None:
        detail += f"; not like for like: {'; '.join(unfair)}"
    return [{"id": w.name, "text": f"{w.name}: stepgraph graph faster than torch graph",
             "ok": ok, "detail": detail}]


def _count(v: Optional[float]) -> str:
    return "—" if v is None else str(int(v))


TABLE_HEADER = ["workload", "stepgraph graph µs", "stepgraph eager µs", "torch eager µs",
                "torch eager fused µs", "torch graph µs", "torch graph fused µs",
                "torch graph / stepgraph", "best torch / stepgraph", "torch kernels/step (eager)",
                "stepgraph graph nodes", "peak MiB stepgraph", "peak MiB torch graph", "targets"]


def render_table(records: Sequence[dict]) -> str:
    rows = [TABLE_HEADER, ["---"] * len(TABLE_HEADER)]
    for r in records:
        f, e, d = r["figures"], r["errors"], r["derived"]
        rows.append([
            r["title"], bvt.fmt_us(f["stepgraph_graph_us"], e.get("stepgraph")),
            bvt.fmt_us(f["stepgraph_eager_us"], e.get("stepgraph")),
            *[bvt.fmt_us(f[f"torch_{v}_us"], e.get(f"torch_{v}")) for v in VARIANTS],
            bvt.fmt_x(d["speedup_vs_torch_graph"]), bvt.fmt_x(d["speedup_vs_best_torch"]),
            _count(f["torch_kernels_per_step"]), _count(f["stepgraph_graph_nodes"]),
            bvt.mib(f["stepgraph_peak_bytes"]), bvt.mib(f["torch_graph_peak_bytes"]),
            "; ".join(f"{bvt.fmt_ok(t['ok'])} {t['detail']}" for t in r["targets"]),
        ])
    return "\n".join("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |"
                     for row in rows)


def render_section(meta: dict, records: Sequence[dict]) -> str:
    lines = [f"### {meta['date_utc']} — {meta['gpu']} — CNN and transformer training steps", "",
             f"- command: `{meta['command']}`",
             f"- driver {meta.get('driver') or '?'}, torch {meta.get('torch') or '?'} "
             f"(CUDA {meta.get('torch_cuda') or '?'}, cuDNN {meta.get('cudnn') or '?'}), "
             f"python {meta.get('python') or '?'}",
             f"- stepgraph: `{meta.get('stepgraph_binary')}`"
             + (f" ({meta['stepgraph_git']})" if meta.get("stepgraph_git") else ""),
             f"- median of {bvt.REPEATS} repeats after {bvt.WARMUP} warm-up steps, µs per "
             "training step, fp32, TF32 off; steps per repeat: "
             + ", ".join(f"{r['workload']} {r['iters']}" for r in records)
             + (" (--quick)" if meta.get("quick") else ""),
             f"- {TORCH_NOTE}; kernels/step: CUDA events of one eager (foreach) step in "
             "torch.profiler; peak as in bench_vs_torch.py (torch graph, foreach)",
             "", render_table(records), ""]
    for r in records:
        for t in r["targets"]:
            lines.append(f"- target {t['text']}: {bvt.fmt_ok(t['ok'])} ({t['detail']})")
    summary = bvt.target_summary(records)
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

def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    return bpt.parse_args_for(WORKLOADS, __doc__, argv)


iters_for = bpt.iters_for


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return self_test()
    return bpt.run_comparison(bpt.Comparison(
        script="bench/bench_cnn_vs_torch.py", workloads=WORKLOADS, check_config=check_config,
        torch_setup=torch_setup, torch_measure=torch_measure, variants=VARIANTS,
        torch_meta=lambda torch: {"cudnn": torch.backends.cudnn.version()},
        meta={"torch_setup": TORCH_NOTE}, make_record=make_record, render_section=render_section,
        results_json="bench_cnn_results.json"), args, argv)


# --------------------------------------------------------------------------------------------
# Self-test (CPU only; torch is never imported).
# --------------------------------------------------------------------------------------------

def _fake_bench(w: Workload, **over: Any) -> dict:
    obj = {"event": "bench", "config": f"bench/cnn_configs/{w.config}", "device": "cuda",
           "gpu": "NVIDIA H200", "batch": w.batch, "eager_us_per_step": 120.0,
           "graph_us_per_step": 40.0, "graph_nodes": 16, "peak_device_bytes": 2 << 20,
           "arena_bytes": 2 << 20, "per_op_us": [], "steps": 20, "tf32": False, **over}
    return {k: v for k, v in obj.items() if v is not None}


def _fake_record(name: str, sg_us: Optional[float], torch_graph_us: Optional[float],
                 **over: Any) -> dict:
    w = WORKLOADS[name]
    sg = {"result": None, "error": "stepgraph error: no CUDA device", "warnings": []}
    if sg_us:
        sg["result"], sg["warnings"] = bvt.parse_bench_output(
            json.dumps(_fake_bench(w, graph_us_per_step=sg_us, **over)))
        sg["error"] = None
    tv = {"eager": {"us": 310.0, "check": {"ok": True}, "kernels": 41},
          "eager_fused": {"us": 290.0, "check": {"ok": True}},
          "graph": {"us": torch_graph_us, "error": None if torch_graph_us else "RuntimeError: x",
                    "check": {"ok": True}, "memory": {"peak_bytes": 12 << 20}},
          "graph_fused": {"us": 60.0, "check": {"ok": False, "why": "loss did not decrease"}}}
    return make_record(w, w.iters, sg, tv)


def self_test() -> int:
    import contextlib
    import copy
    import io
    import tempfile
    import unittest

    class T(unittest.TestCase):
        def test_configs_match_workloads(self) -> None:
            for w in WORKLOADS.values():
                self.assertEqual(check_config(w), [], w.name)
            # `stepgraph explain`: "parameters: 9930 in 6 tensors", "94538 in 8 tensors"
            self.assertEqual(WORKLOADS["digits_cnn"].parameters, 9930)
            self.assertEqual(WORKLOADS["cnn_wide"].parameters, 94538)
            self.assertEqual(WORKLOADS["digits_cnn"].shapes()[3], (512,))  # 4 x 4 x 32
            self.assertEqual(WORKLOADS["cnn_wide"].shapes()[4], (128,))
            self.assertEqual([w.features for w in WORKLOADS.values()], [64, 3072, 24, 128, 128, 64, 3072])
            self.assertEqual([w.classes for w in WORKLOADS.values()], [10, 10, 21, 64, 64, 10, 10])
            # the *_nd CNNs are the CNNs with train.deterministic false, and nothing else
            for name in ("digits_cnn", "cnn_wide"):
                det = json.loads(WORKLOADS[name].config_path.read_text())
                nd = json.loads(WORKLOADS[name + "_nd"].config_path.read_text())
                self.assertIs(nd["train"].pop("deterministic"), False)
                self.assertEqual(nd, det)
                self.assertEqual(dataclasses.replace(WORKLOADS[name], name=name + "_nd",
                                                     config=name + "_nd.json",
                                                     title=WORKLOADS[name + "_nd"].title,
                                                     deterministic=False),
                                 WORKLOADS[name + "_nd"])
            # `stepgraph explain`: "parameters: 19221 in 36 tensors", "825664 in 66 tensors"
            self.assertEqual(WORKLOADS["reverse_transformer"].parameters, 19221)
            self.assertEqual(WORKLOADS["tiny_gpt"].parameters, 825664)
            self.assertEqual(WORKLOADS["tiny_gpt"].shapes()[-1], (128, 64))
            # tiny_gpt_bf16 is tiny_gpt with train.attention "cudnn_bf16", and nothing else
            g32 = json.loads(WORKLOADS["tiny_gpt"].config_path.read_text())
            g16 = json.loads(WORKLOADS["tiny_gpt_bf16"].config_path.read_text())
            self.assertEqual(g16["train"].pop("attention"), "cudnn_bf16")
            self.assertEqual(g16, g32)
            self.assertEqual(dataclasses.replace(WORKLOADS["tiny_gpt"], name="tiny_gpt_bf16",
                                                 config="tiny_gpt_bf16.json",
                                                 title=WORKLOADS["tiny_gpt_bf16"].title,
                                                 attention="cudnn_bf16"),
                             WORKLOADS["tiny_gpt_bf16"])
            self.assertEqual(check_config(WORKLOADS["tiny_gpt"], {**g32, "train": {
                **g32["train"], "attention": "cudnn_bf16"}}),
                ["train.attention: config has 'cudnn_bf16', the benchmark uses 'fp32'"])
            self.assertEqual(len(check_config(WORKLOADS["tiny_gpt_bf16"], g32)), 1)
            # configs/reverse_transformer.json is the same net (schedule and device differ)
            ref_t = json.loads((REPO / "configs" / "reverse_transformer.json").read_text())
            mine_t = json.loads(WORKLOADS["reverse_transformer"].config_path.read_text())
            self.assertEqual(ref_t["model"], mine_t["model"])
            # configs/digits_cnn.json is the same net (it differs in schedule, device, lr split)
            ref = json.loads((REPO / "configs" / "digits_cnn.json").read_text())
            mine = json.loads(WORKLOADS["digits_cnn"].config_path.read_text())
            self.assertEqual(ref["model"], mine["model"])
            self.assertEqual(ref["train"]["batch_size"], mine["train"]["batch_size"])
            bad = copy.deepcopy(mine)
            bad["model"]["layers"][1]["filters"] = 64
            bad["model"]["layers"][2]["window"] = 3
            bad["optimizer"]["schedule"] = {"type": "cosine"}
            bad["train"]["device"] = "cpu"
            bad["train"]["precision"] = "tf32"
            self.assertEqual(len(check_config(WORKLOADS["digits_cnn"], bad)), 5)
            cfg = json.loads(WORKLOADS["cnn_wide"].config_path.read_text())
            cfg["data"].update(features=1024, samples=100)
            cfg["model"]["layers"].pop(4)
            cfg["problem"] = {}
            self.assertEqual(len(check_config(WORKLOADS["cnn_wide"], cfg)), 5)  # + layers[4].type
            self.assertIn("cannot read", check_config(
                dataclasses.replace(WORKLOADS["cnn_wide"], config="missing.json"))[0])

        def test_run_stepgraph_fake_binary(self) -> None:
            w = WORKLOADS["cnn_wide"]
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "sg.sh"
                fake.write_text(f"#!/bin/sh\necho log\necho '{json.dumps(_fake_bench(w))}'\n"
                                'echo "$@" >&2\n')
                fake.chmod(0o755)
                r = bvt.run_stepgraph(str(fake), w, 40, 30, config=w.config_path)
                self.assertEqual((r["error"], r["result"]["batch"]), (None, 256))
                self.assertIn("cnn_configs/cnn_wide.json --steps 40 --json", r["stderr_tail"])

        def test_targets(self) -> None:
            for name, sg_us, tg_us, over, want in [
                    ("digits_cnn", 40.0, 95.0, {}, True),
                    ("digits_cnn", 95.0, 95.0, {}, False),  # equal is not faster
                    ("digits_cnn", 100.0, 95.0, {}, False),
                    ("digits_cnn", None, 95.0, {}, None),
                    ("digits_cnn", 40.0, None, {}, None),
                    ("cnn_wide", 900.0, 1000.0, {}, True),
                    ("cnn_wide", 900.0, 1000.0, {"tf32": True}, None),
                    ("tiny_gpt_bf16", 900.0, 1000.0, {"attention": "cudnn_bf16"}, True),
                    ("tiny_gpt_bf16", 900.0, 1000.0, {"attention": "fp32"}, None),
                    ("tiny_gpt_bf16", 900.0, 1000.0, {}, None),  # an older binary: no key
                    ("tiny_gpt", 900.0, 1000.0, {"attention": "cudnn_bf16"}, None),
                    ("tiny_gpt", 900.0, 1000.0, {"attention": "fp32"}, True),
                    ("cnn_wide", 900.0, 1000.0, {"device": "cpu"}, None),
                    ("cnn_wide", 900.0, 1000.0, {"batch": 128}, None)]:
                r = _fake_record(name, sg_us, tg_us, **over)
                self.assertEqual([t["ok"] for t in r["targets"]], [want],
                                 (name, sg_us, tg_us, over))
            recs = [_fake_record("digits_cnn", 40.0, 95.0),
                    _fake_record("cnn_wide", 1100.0, 1000.0)]
            self.assertEqual(bvt.target_summary(recs), {"digits_cnn": True, "cnn_wide": False})
            self.assertEqual(recs[0]["derived"]["speedup_vs_best_torch"], 1.5)  # graph_fused 60
            self.assertIn("torch graph_fused: check failed (loss did not decrease)",
                          recs[0]["notes"])

        def test_table_and_section(self) -> None:
            recs = [_fake_record("digits_cnn", 40.0, 95.0), _fake_record("cnn_wide", None, None)]
            self.assertEqual(set(recs[1]["errors"]), {"stepgraph", "torch_graph"})
            lines = render_table(recs).splitlines()
            self.assertEqual(len(lines), 2 + len(recs))
            for ln in lines:
                self.assertEqual(ln.count("|"), len(TABLE_HEADER) + 1, ln)
            self.assertIn("| 40.0 | 120.0 | 310.0 | 290.0 | 95.0 | 60.0 | 2.38x | 1.50x | 41 | 16 "
                          "| 2.0 | 12.0 | PASS 2.38x |", lines[2])
            self.assertIn("| error | error | 310.0 | 290.0 | error | 60.0 | — | — | 41 | — | — "
                          "| — | n/a missing figure |", lines[3])
            meta = {"date_utc": "2026-12-01 10:00 UTC", "gpu": "NVIDIA H200",
                    "command": "python3 bench/bench_cnn_vs_torch.py", "driver": "580.159.04",
                    "torch": "2.11.0+cu130", "torch_cuda": "13.0", "cudnn": 91400,
                    "python": "3.12.3", "stepgraph_binary": "build/stepgraph",
                    "stepgraph_git": "49c8bef-dirty"}
            sec = render_section(meta, recs)
            for piece in ("### 2026-12-01 10:00 UTC — NVIDIA H200 — CNN and transformer training steps",
                          "`" + meta["command"] + "`", "cuDNN 91400", "(49c8bef-dirty)",
                          "digits_cnn 500, cnn_wide 100", "channels_last", "cudnn.benchmark",
                          "TF32 off (cudnn.allow_tf32", "exclude TF32",
                          "- target cnn_wide: stepgraph graph faster than torch graph: n/a",
                          "Targets: (digits_cnn) PASS, (cnn_wide) n/a",
                          "cnn_wide / torch_graph: RuntimeError: x"):
                self.assertIn(piece, sec)
            json.dumps(recs)

        def test_args(self) -> None:
            a = parse_args(["--only", "cnn_wide", "--quick"])
            self.assertEqual((a.only_list, iters_for(WORKLOADS["cnn_wide"], a.quick)),
                             (["cnn_wide"], 20))
            self.assertEqual(parse_args([]).only_list, list(WORKLOADS))
            for bad in (["--only", "nope"], ["--skip", "jax"]):
                with self.assertRaises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
                    parse_args(bad)

        def test_main_end_to_end_without_torch(self) -> None:
            # A fake stepgraph, and `import torch` failing as on a machine without it.
            with tempfile.TemporaryDirectory() as d:
                fake = Path(d) / "stepgraph"
                line = _fake_bench(WORKLOADS["digits_cnn"], graph_us_per_step=35.0)
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
                            contextlib.redirect_stderr(io.StringIO()) as se:
                        rc = main(["--only", "digits_cnn", "--quick", "--stepgraph", str(fake),
                                   "--results-md", str(md)])
                finally:
                    if not had_torch:
                        del sys.modules["torch"]
                    for k, v in saved.items():
                        os.environ.pop(k, None) if v is None else os.environ.update({k: v})
                self.assertEqual(rc, 0)
                self.assertNotIn("warning: digits_cnn", se.getvalue())  # the config matches
                res = json.loads((Path(d) / "bench_cnn_results.json").read_text())
                self.assertEqual(res["meta"]["gpu"], "NVIDIA H200")  # from stepgraph's line
                (rec,) = res["workloads"]
                self.assertEqual((rec["iters"], rec["figures"]["stepgraph_graph_us"]), (100, 35.0))
                self.assertIn("--steps 100 --json", rec["stepgraph"]["command"])
                for v in VARIANTS:
                    self.assertIn("import of torch halted", rec["errors"][f"torch_{v}"])
                self.assertEqual(res["targets"], {"digits_cnn": None})
                self.assertIn("| 35.0 | 120.0 | error |", so.getvalue())
                text = md.read_text()
                self.assertEqual(text.count("## Runs"), 1)
                # A new workload: its row added after the others, which are kept; the earlier
                # text below the table untouched; the project's own table covers WORKLOADS.
                rows = {r[0]: r for r in cf.parse_rows(text)}
                self.assertEqual(list(rows), ["seed_mlp", "poisson_4x64", "digits_cnn"])
                self.assertEqual(rows["digits_cnn"][1:5], ["35.0", "error", "—", "—"])
                self.assertTrue(cf.anchors(text)[-1].endswith("cnn-and-transformer-training-steps"))
                self.assertEqual(list(rows.values())[:2], cf.parse_rows(cf.SAMPLE))
                self.assertIn(cf.SAMPLE[cf.SAMPLE.index(cf.END):], text)
                cf.check_project_table(self, (HERE / "RESULTS.md").read_text(), list(WORKLOADS))
                self.assertIn("— CNN and transformer training steps", text)
                self.assertIn("--stepgraph " + str(fake), text)

        def test_no_torch_imported(self) -> None:
            self.assertIsNone(sys.modules.get("torch"))
            self.assertNotIn("jax", sys.modules)

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(T)
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
