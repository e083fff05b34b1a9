"""Trainer.export(path, format="onnx"): the forward program predict runs, as an ONNX model.

The trainer gives its inference program as plain data (Trainer._inference_graph: tensors, and
ops with their attributes); each op kind below becomes the ONNX nodes that compute the same
thing, parameters and constants become initializers under their stepgraph names, and the batch
axis is left symbolic ("batch"). Images are NHWC here and NCHW in ONNX's Conv and MaxPool, so
those are wrapped in transposes. An op kind with no mapping is an error naming it.

Needs the onnx package (pip install onnx); onnxruntime runs the result (docs/interop.md).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional

import numpy as np


class _Builder:
    """Collects nodes and initializers; names every intermediate tensor uniquely."""

    def __init__(self, onnx: Any, graph: dict, values: Dict[str, np.ndarray], opset: int) -> None:
        self.onnx = onnx
        self.h = onnx.helper
        self.graph = graph
        self.values = values
        self.opset = opset
        self.nodes: List[Any] = []
        self.inits: Dict[str, Any] = {}
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}__{self.count}"

    def node(self, op: str, inputs: List[str], outputs: Optional[List[str]] = None, **attrs: Any) -> str:
        outs = outputs or [self.fresh(op.lower())]
        self.nodes.append(self.h.make_node(op, inputs, outs, **attrs))
        return outs[0]

    def const(self, value: Any, hint: str = "const", dtype: Any = np.float32) -> str:
        name = self.fresh(hint)
        self.inits[name] = self.onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name)
        return name

    def ints(self, values: List[int], hint: str = "ints") -> str:
        return self.const(values, hint, np.int64)

    def weight(self, name: str) -> str:
        """A parameter or constant as an initializer (once), under its own name."""
        if name not in self.inits:
            if name not in self.values:
                raise ValueError(f"export onnx: tensor '{name}' has no value in the trainer")
            self.inits[name] = self.onnx.numpy_helper.from_array(np.ascontiguousarray(self.values[name]), name)
        return name

    def rank(self, tensor: str) -> int:
        return len(self.graph["tensors"][tensor]["shape"])

    def shape(self, tensor: str) -> List[int]:
        return list(self.graph["tensors"][tensor]["shape"])


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _activation(b: _Builder, x: str, act: str, out: str, slope: float = 0.01, alpha: float = 1.0) -> str:
    if act == "none":
        return b.node("Identity", [x], [out])
    simple = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "sin": "Sin", "softplus": "Softplus", "exp": "Exp"}
    if act in simple:
        return b.node(simple[act], [x], [out])
    if act == "leaky_relu":
        return b.node("LeakyRelu", [x], [out], alpha=float(slope))
    if act == "elu":
        return b.node("Elu", [x], [out], alpha=float(alpha))
    if act == "silu":
        return b.node("Mul", [x, b.node("Sigmoid", [x])], [out])
    if act == "square":
        return b.node("Mul", [x, x], [out])
    if act == "gelu_erf":  # 0.5 x (1 + erf(x / sqrt 2))
        e = b.node("Erf", [b.node("Mul", [x, b.const(1 / np.sqrt(2.0))])])
        return b.node("Mul", [b.node("Mul", [x, b.const(0.5)]), b.node("Add", [e, b.const(1.0)])], [out])
    if act == "gelu":  # the tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = b.node("Mul", [b.node("Mul", [x, x]), x])
        inner = b.node("Mul", [b.node("Add", [x, b.node("Mul", [x3, b.const(0.044715)])]), b.const(np.sqrt(2 / np.pi))])
        t = b.node("Add", [b.node("Tanh", [inner]), b.const(1.0)])
        return b.node("Mul", [b.node("Mul", [x, b.const(0.5)]), t], [out])
    raise ValueError(f"export onnx: activation '{act}' has no ONNX form")


def _swap_last_two(b: _Builder, x: str, rank: int) -> str:
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return b.node("Transpose", [x], perm=perm)


def _dense(b: _Builder, op: dict) -> None:
    x, w, bias = op["in"]
    y, z = op["out"][0], op["out"][1] if len(op["out"]) > 1 else None
    a = op["attrs"]
    if a.get("bias_rows", 0):
        raise ValueError(f"export onnx: op '{op['name']}' is a jet's dense layer (physics-informed steps only)")
    pre = z or b.fresh("dense")
    if b.rank(x) == 2:
        ins = [x, b.weight(w)] + ([b.weight(bias)] if bias else [])
        b.node("Gemm", ins, [pre], transB=1)
    else:
        prod = b.node("MatMul", [x, b.node("Transpose", [b.weight(w)], perm=[1, 0])], None if bias else [pre])
        if bias:
            b.node("Add", [prod, b.weight(bias)], [pre])
    _activation(b, pre, a["act"], y)


def _binary(onnx_op: str) -> Callable[[_Builder, dict], None]:
    def emit(b: _Builder, op: dict) -> None:
        b.node(onnx_op, [op["in"][0], op["in"][1]], [op["out"][0]])

    return emit


def _scale_shift(b: _Builder, op: dict) -> None:
    a = op["attrs"]
    scaled = b.node("Mul", [op["in"][0], b.const(a["a"])])
    b.node("Add", [scaled, b.const(a["b"])], [op["out"][0]])


def _activation_op(b: _Builder, op: dict) -> None:
    a = op["attrs"]
    _activation(b, op["in"][0], a["act"], op["out"][0], a["negative_slope"], a["alpha"])


def _concat(b: _Builder, op: dict) -> None:
    b.node("Concat", [t for t in op["in"] if t], [op["out"][0]], axis=op["attrs"]["axis"])


def _split(b: _Builder, op: dict) -> None:
    outs = [t or b.fresh("unused") for t in op["out"]]
    b.node("Split", [op["in"][0], b.ints(op["attrs"]["sizes"])], outs, axis=op["attrs"]["axis"])


def _slice(b: _Builder, op: dict) -> None:
    a = op["attrs"]
    b.node("Slice", [op["in"][0], b.ints([a["begin"]]), b.ints([a["end"]]), b.ints([a["axis"]])], [op["out"][0]])


def _reduce_node(b: _Builder, onnx_op: str, x: str, axes: List[int], keepdims: bool, out: str) -> None:
    # ReduceSum takes its axes as an input from opset 13, ReduceMean from opset 18.
    if onnx_op == "ReduceSum" or b.opset >= 18:
        b.node(onnx_op, [x, b.ints(axes)], [out], keepdims=int(keepdims))
    else:
        b.node(onnx_op, [x], [out], axes=axes, keepdims=int(keepdims))


def _reduce(onnx_op: str) -> Callable[[_Builder, dict], None]:
    def emit(b: _Builder, op: dict) -> None:
        a = op["attrs"]
        _reduce_node(b, onnx_op, op["in"][0], [a["axis"]], a["keepdims"], op["out"][0])

    return emit


def _matmul(b: _Builder, op: dict) -> None:
    x, y = op["in"]
    a = op["attrs"]
    if a["trans_a"]:
        x = _swap_last_two(b, x, b.rank(x))
    if a["trans_b"]:
        y = _swap_last_two(b, y, b.rank(y))
    b.node("MatMul", [x, y], [op["out"][0]])


def _transpose(b: _Builder, op: dict) -> None:
    x = op["in"][0]
    r = b.rank(x)
    perm = list(range(r))
    i, j = _axis(op["attrs"]["axis_a"], r), _axis(op["attrs"]["axis_b"], r)
    perm[i], perm[j] = perm[j], perm[i]
    b.node("Transpose", [x], [op["out"][0]], perm=perm)


def _reshape(b: _Builder, op: dict) -> None:
    shape = b.shape(op["out"][0])
    b.node("Reshape", [op["in"][0], b.ints([0] + shape[1:])], [op["out"][0]])  # 0: keep the batch


def _layer_norm(b: _Builder, op: dict) -> None:
    x, gamma, beta = op["in"]
    b.node("LayerNormalization", [x, b.weight(gamma), b.weight(beta)], [op["out"][0]], axis=-1,
           epsilon=float(op["attrs"]["eps"]))


def _batch_norm_inference(b: _Builder, op: dict) -> None:
    # Y = X * scale + shift per channel (the last axis), folded from the running statistics.
    x, gamma, beta, rm, rv = op["in"]
    v = b.values
    scale = v[gamma] / np.sqrt(v[rv].astype(np.float64) + op["attrs"]["eps"])
    shift = v[beta] - v[rm] * scale
    scaled = b.node("Mul", [x, b.const(scale, gamma + ".folded_scale")])
    b.node("Add", [scaled, b.const(shift, beta + ".folded_shift")], [op["out"][0]])


def _nchw(b: _Builder, x: str) -> str:
    return b.node("Transpose", [x], perm=[0, 3, 1, 2])


def _conv2d(b: _Builder, op: dict) -> None:
    x, w, bias = op["in"]
    a = op["attrs"]
    ph, pw = a["pad"]
    ins = [_nchw(b, x), b.node("Transpose", [b.weight(w)], perm=[0, 3, 1, 2])] + ([b.weight(bias)] if bias else [])
    y = b.node("Conv", ins, pads=[ph, pw, ph, pw], strides=a["stride"], dilations=a["dilation"])
    if a["act"] == "relu":
        y = b.node("Relu", [y])
    elif a["act"] != "none":
        raise ValueError(f"export onnx: conv2d '{op['name']}' has activation {a['act']}")
    b.node("Transpose", [y], [op["out"][0]], perm=[0, 2, 3, 1])


def _max_pool2d(b: _Builder, op: dict) -> None:
    a = op["attrs"]
    ph, pw = a["pad"]
    y = b.node("MaxPool", [_nchw(b, op["in"][0])], kernel_shape=a["window"], strides=a["stride"],
               pads=[ph, pw, ph, pw])
    b.node("Transpose", [y], [op["out"][0]], perm=[0, 2, 3, 1])


def _global_avg_pool(b: _Builder, op: dict) -> None:
    _reduce_node(b, "ReduceMean", op["in"][0], [1, 2], False, op["out"][0])


def _embedding(b: _Builder, op: dict) -> None:
    ids, table, pos = op["in"]
    gathered = b.node("Gather", [b.weight(table), b.node("Cast", [ids], to=b.onnx.TensorProto.INT64)],
                      None if pos else [op["out"][0]])
    if pos:
        seq = b.shape(ids)[1]
        rows = b.node("Slice", [b.weight(pos), b.ints([0]), b.ints([seq]), b.ints([0])])
        b.node("Add", [gathered, rows], [op["out"][0]])


def _attention(b: _Builder, op: dict) -> None:
    q, k, v = op["in"]
    a = op["attrs"]
    _, seq, width = b.shape(q)
    heads = a["heads"]
    d = width // heads
    scale = a["scale"] or 1.0 / np.sqrt(d)

    def heads_first(t: str) -> str:  # [B, S, H*D] -> [B, H, S, D]
        return b.node("Transpose", [b.node("Reshape", [t, b.ints([0, seq, heads, d])])], perm=[0, 2, 1, 3])

    qh, kh, vh = heads_first(q), heads_first(k), heads_first(v)
    scores = b.node("Mul", [b.node("MatMul", [qh, b.node("Transpose", [kh], perm=[0, 1, 3, 2])]), b.const(scale)])
    if a["causal"]:
        mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), k=1)
        scores = b.node("Add", [scores, b.const(mask, "causal_mask")])
    probs = b.node("Softmax", [scores], axis=-1)
    o = b.node("Transpose", [b.node("MatMul", [probs, vh])], perm=[0, 2, 1, 3])
    b.node("Reshape", [o, b.ints([0, seq, width])], [op["out"][0]])


def _fourier_features(b: _Builder, op: dict) -> None:
    if op["attrs"].get("components", 1) != 1 or op["attrs"].get("head", 0):
        raise ValueError(f"export onnx: op '{op['name']}' works on jets (physics-informed steps only)")
    p = b.node("Mul", [op["in"][0], b.const(2 * np.pi)])
    b.node("Concat", [b.node("Sin", [p]), b.node("Cos", [p])], [op["out"][0]], axis=-1)


_EMIT: Dict[str, Callable[[_Builder, dict], None]] = {
    "dense": _dense,
    "add": _binary("Add"),
    "sub": _binary("Sub"),
    "mul": _binary("Mul"),
    "div": _binary("Div"),
    "scale_shift": _scale_shift,
    "activation": _activation_op,
    "concat": _concat,
    "split": _split,
    "slice": _slice,
    "sum": _reduce("ReduceSum"),
    "mean": _reduce("ReduceMean"),
    "matmul": _matmul,
    "transpose": _transpose,
    "reshape": _reshape,
    "layer_norm": _layer_norm,
    "batch_norm_inference": _batch_norm_inference,
    "conv2d": _conv2d,
    "max_pool2d": _max_pool2d,
    "global_avg_pool": _global_avg_pool,
    "embedding": _embedding,
    "attention": _attention,
    "fourier_features": _fourier_features,
}


def _needed_ops(graph: dict) -> List[dict]:
    """The ops the outputs depend on, in program order (losses and statistics are left out)."""
    producer = {}
    for i, op in enumerate(graph["ops"]):
        for t in op["out"]:
            if t is not None and t not in producer:
                producer[t] = i
    need, stack = set(), [o["tensor"] for o in graph["outputs"]]
    while stack:
        t = stack.pop()
        i = producer.get(t)
        if i is None or i in need:
            continue
        need.add(i)
        stack.extend(x for x in graph["ops"][i]["in"] if x is not None)
    return [op for i, op in enumerate(graph["ops"]) if i in need]


def _elem_type(onnx: Any, dtype: str) -> int:
    return onnx.TensorProto.INT32 if dtype == "i32" else onnx.TensorProto.FLOAT


def export_onnx(trainer: Any, path: "str | os.PathLike[str]", opset: int = 17,
                input_scaling: Optional[Dict[str, Dict[str, List[float]]]] = None) -> None:
    """input_scaling: {input: {"mean": [...], "sd": [...]}} per value of a sample (a config's
    data.standardize; "X" is a one-input model's input): the graph then standardizes its raw
    inputs as training did, (x - mean) / sd, before the model."""
    try:
        import onnx
    except ImportError as e:
        raise ImportError("export(format='onnx') needs the onnx package: pip install onnx") from e
    if not isinstance(opset, int) or opset < 17:
        raise ValueError(f"export onnx: opset must be an integer 17 or later (LayerNormalization), got {opset!r}")
    graph = json.loads(trainer._inference_graph(1))
    ops = _needed_ops(graph)
    values = dict(trainer.state())
    b = _Builder(onnx, graph, values, opset)
    for op in ops:
        emit = _EMIT.get(op["kind"])
        if emit is None:
            raise ValueError(
                f"export onnx: op '{op['name']}' ({op['kind']}) has no ONNX form; supported: {', '.join(sorted(_EMIT))}"
            )
        emit(b, op)
    # Parameters and constants read directly by an op (e.g. a matmul with a fixed table) are initializers.
    for op in ops:
        for t in op["in"]:
            if t is not None and graph["tensors"][t]["role"] in ("parameter", "constant"):
                b.weight(t)

    def value_info(name: str, tensor: str) -> Any:
        info = graph["tensors"][tensor]
        return onnx.helper.make_tensor_value_info(name, _elem_type(onnx, info["dtype"]), ["batch"] + info["shape"][1:])

    inputs = [value_info(i["tensor"], i["tensor"]) for i in graph["inputs"]]
    outputs = []
    for o in graph["outputs"]:
        # Graph outputs take the model's names (a graph model's "u", a sequential's "output").
        if o["tensor"] != o["name"]:
            b.node("Identity", [o["tensor"]], [o["name"]])
        outputs.append(value_info(o["name"], o["tensor"]))
    scaling = dict(input_scaling or {})
    if "X" in scaling and len(graph["inputs"]) == 1:
        scaling[graph["inputs"][0]["name"]] = scaling.pop("X")
    prologue = []
    for k, i in enumerate(graph["inputs"]):
        external, internal = i["name"], i["tensor"]
        target = external  # what the model's nodes read in place of the program's input tensor
        if external in scaling:  # raw inputs in, standardized ones to the model
            target = internal + "__standardized"
            per_sample = graph["tensors"][internal]["shape"][1:]
            mean = np.asarray(scaling[external]["mean"], np.float32).reshape(per_sample)
            sd = np.asarray(scaling[external]["sd"], np.float32).reshape(per_sample)
            centred = b.fresh("centred")
            prologue += [onnx.helper.make_node("Sub", [external, b.const(mean, external + ".mean")], [centred]),
                         onnx.helper.make_node("Div", [centred, b.const(sd, external + ".sd")], [target])]
        if target != internal:
            for n in b.nodes:
                for j, x in enumerate(n.input):
                    if x == internal:
                        n.input[j] = target
        inputs[k].name = external
    b.nodes[:0] = prologue
    g = onnx.helper.make_graph(b.nodes, "stepgraph", inputs, outputs, list(b.inits.values()))
    opsets = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(g, opset_imports=opsets, producer_name="stepgraph")
    # The oldest IR version that carries this opset, not the onnx package's newest: runtimes
    # older than the package (onnxruntime lags it) load the file as torch.onnx's exports do.
    model.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    onnx.checker.check_model(model)
    onnx.save(model, os.fspath(path))
