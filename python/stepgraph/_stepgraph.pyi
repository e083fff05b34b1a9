"""
stepgraph: whole-step training of small neural networks (C++ extension).
"""

# Type stubs for the extension module (started from `python -m nanobind.stubgen -m
# stepgraph._stepgraph`, then given precise argument and return types by hand). Keep them in
# step with python/src/*.cpp: python/tests/test_api.py checks that every name is covered.

from collections.abc import Callable, Mapping, Sequence
import os
from typing import Any, Literal, Protocol, Union

import numpy as np
import numpy.typing as npt

__version__: str

class _SupportsDLPack(Protocol):
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

# What the trainer takes as X / y / parameter values: numpy arrays (or anything numpy.asarray
# accepts), or objects with __dlpack__ (PyTorch, CuPy, JAX arrays).
ArrayLike = Union[npt.ArrayLike, _SupportsDLPack]

# A zero-copy view: a numpy array for host memory, a DLPack-capable array for CUDA memory.
TensorView = Union[npt.NDArray[Any], _SupportsDLPack]

# gelu is the tanh form (also "gelu_tanh"); gelu_erf the exact form, PyTorch's default F.gelu.
ActivationName = Literal["none", "relu", "gelu", "tanh", "sigmoid", "sin", "softplus", "silu", "leaky_relu", "elu", "exp", "square", "gelu_erf", "gelu_tanh"]
InitSpec = Union[str, "Init", None]
Reduction = Literal["mean", "sum"]
DeviceName = Literal["auto", "cpu", "cuda"]
StreamLike = Union[int, Any, None]

class Error(RuntimeError):
    """An error raised by the stepgraph engine; the message is the C++ sg::Error's text."""

class InputError(Error, ValueError):
    """
    A bad argument: wrong dtype, shape or device of an input array, or an unknown option
    string. A subclass of both stepgraph.Error and ValueError.
    """


def cuda_enabled() -> bool:
    """Whether this build has the CUDA backend compiled in."""

def cuda_available() -> bool:
    """
    Whether a CUDA trainer can be made here (CUDA compiled in and a GPU present).
    """

def cuda_unavailable_reason() -> str:
    """Why cuda_available() is False (an empty string when it is True)."""

class Init:
    """
    Weight initialisation (biases start at zero):
      he:     N(0, 2 / fan_in)                    (Kaiming normal, for relu/gelu)
      xavier: U(-a, a), a = sqrt(6 / (fan_in + fan_out))   (Glorot uniform)
      normal: N(0, std^2)
      zeros
    Dense(init=...) also takes the strings 'he', 'xavier', 'zeros', 'normal' (std 0.02) and 'normal(STD)'.
    """

    @staticmethod
    def he() -> Init:
        """Kaiming normal: N(0, 2 / fan_in)."""

    @staticmethod
    def xavier() -> Init:
        """Glorot uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out))."""

    @staticmethod
    def normal(std: float) -> Init:
        """N(0, std^2)."""

    @staticmethod
    def zeros() -> Init:
        """All zeros."""

    @staticmethod
    def parse(spec: Union[str, Init]) -> Init:
        """An Init from 'he', 'xavier', 'zeros', 'normal' or 'normal(STD)'."""

    @property
    def kind(self) -> str:
        """'he', 'xavier', 'normal' or 'zeros'."""

    @property
    def std(self) -> float:
        """The standard deviation (normal only)."""

    def __str__(self) -> str: ...

    def __repr__(self) -> str: ...

class Layer:
    """Base class of the layers (Dense, Sequential, Residual)."""

    def describe(self) -> str:
        """One line of hyperparameters, e.g. 'dense(256, relu, init=he, bias)'."""

    def __repr__(self) -> str: ...

    def __call__(self, x: SymbolicTensor) -> SymbolicTensor:
        """The layer applied to a symbolic tensor (a model graph); calling one layer twice shares its parameters."""

    @property
    def name(self) -> str:
        """Names its parameters '<name>.weight', ... in a Sequential or Model ('' : by position)."""

    @name.setter
    def name(self, arg: str, /) -> None: ...

class SymbolicTensor:
    """
    One output of a model-graph node (Input, a layer called on a tensor, an op). Its shape is per sample (no batch axis) and known when it is made. Operators + - * / between symbolic tensors broadcast per axis (equal sizes, or one of them 1; the same rank); with numbers they scale and shift. x[:, a:b] slices a feature axis.
    """

    @property
    def shape(self) -> tuple[int, ...]:
        """Per sample."""

    @property
    def name(self) -> str:
        """The node's name, or its kind when it has none."""

    def sum(self, axis: int = -1, keepdims: bool = False) -> SymbolicTensor:
        """The sum over a feature axis."""

    def mean(self, axis: int = -1, keepdims: bool = False) -> SymbolicTensor:
        """The mean over a feature axis."""

    def transpose(self, axis_a: int = -2, axis_b: int = -1) -> SymbolicTensor:
        """Two feature axes swapped."""

    def reshape(self, shape: Union[int, Sequence[int]]) -> SymbolicTensor:
        """The same values per sample in another shape (row-major; one size may be -1: inferred)."""

    def __matmul__(self, other: SymbolicTensor) -> SymbolicTensor: ...
    def __getitem__(self, key: Any) -> SymbolicTensor: ...
    def __add__(self, other: Union[SymbolicTensor, float]) -> SymbolicTensor: ...
    def __radd__(self, other: float) -> SymbolicTensor: ...
    def __sub__(self, other: Union[SymbolicTensor, float]) -> SymbolicTensor: ...
    def __rsub__(self, other: float) -> SymbolicTensor: ...
    def __mul__(self, other: Union[SymbolicTensor, float]) -> SymbolicTensor: ...
    def __rmul__(self, other: float) -> SymbolicTensor: ...
    def __truediv__(self, other: Union[SymbolicTensor, float]) -> SymbolicTensor: ...
    def __neg__(self) -> SymbolicTensor: ...
    def __repr__(self) -> str: ...

def Input(shape: Union[int, Sequence[int]], name: str, dtype: Literal['float32', 'int32'] = 'float32') -> SymbolicTensor:
    """A model input: its per-sample shape (an int or a tuple: 3, or (8, 8, 1) for NHWC images) and its name (the key of its array in batches)."""

def concat(tensors: Sequence[SymbolicTensor], axis: int = -1, name: str = '') -> SymbolicTensor:
    """Joins tensors along a feature axis."""

def split(x: SymbolicTensor, sizes: Sequence[int], axis: int = -1, name: str = '') -> list[SymbolicTensor]:
    """Pieces of the given sizes along a feature axis."""

def custom(op: str, inputs: Sequence[SymbolicTensor], name: str = '') -> list[SymbolicTensor]:
    """A registered user-defined op applied to symbolic tensors: one tensor per output."""

def custom_layer(op: str, name: str = '') -> Layer:
    """A registered user-defined op of one input and one output as a layer."""

def _register_python_op(op: object, name: str, has_backward: bool) -> str:
    """Registers a stepgraph.CustomOp object as a user-defined op; returns its registry name."""

def activation(x: SymbolicTensor, activation: ActivationName, negative_slope: float = 0.01, alpha: float = 1.0, name: str = '') -> SymbolicTensor:
    """A standalone activation (any of Dense's; leaky_relu's slope, elu's alpha)."""

def matmul(a: SymbolicTensor, b: SymbolicTensor, transpose_a: bool = False, transpose_b: bool = False, name: str = '') -> SymbolicTensor:
    """Batched matrix products: per sample a [..., M, K] times b [..., K, N] (the same leading axes), either operand transposed over its last two axes (a @ b is matmul(a, b))."""

def named(x: SymbolicTensor, name: str) -> SymbolicTensor:
    """The op's result under a name (for explain, errors and describe)."""

class Model(Layer):
    """
    A model graph from its inputs to named outputs: Model(inputs=[x1, x2], outputs={'u': u, 'v': v}); outputs may also be one tensor (named 'output'). A model of one input and one output is also a layer; with several, a Trainer takes a dict of losses by output and batches as dicts by name.
    """

    def __init__(self, inputs: Sequence[SymbolicTensor], outputs: Union[SymbolicTensor, Mapping[str, SymbolicTensor]]) -> None: ...

    @property
    def input_names(self) -> list[str]: ...

    @property
    def output_names(self) -> list[str]: ...

    def input_shape(self, name: str) -> tuple[int, ...]: ...

    def output_shape(self, name: str) -> tuple[int, ...]: ...

    @property
    def warnings(self) -> list[str]:
        """What is legal but probably a mistake (an unused input)."""

class Dense(Layer):
    """
    A fully connected layer y = activation(x W^T + b) with W of shape [units, in] (like torch.nn.Linear) and b of shape [units]; its parameters are named '<index>.weight' and '<index>.bias' inside a Sequential.
    """

    def __init__(self, units: int, activation: ActivationName = 'none', init: InitSpec = None, bias: bool = True, amax: bool = False, name: str = '') -> None:
        """
        units: output width (> 0).
        activation: 'none', 'relu', 'gelu' (the tanh form; also 'gelu_tanh'), 'gelu_erf' (the exact erf form, PyTorch's default F.gelu), 'tanh', 'sigmoid', 'sin', 'softplus', 'silu', 'leaky_relu', 'elu', 'exp' or 'square'.
        init: None (he for relu/gelu, xavier otherwise), 'he', 'xavier', 'zeros', 'normal', 'normal(STD)' or a stepgraph.Init.
        bias: whether the layer has a bias.
        amax: also record max |output| every step (Trainer.amax; CPU backend in this version).
        name: names its parameters '<name>.weight', '<name>.bias' (default: by position).
        """

    @property
    def units(self) -> int:
        """The output width."""

class Sequential(Layer):
    """
    Layers applied in order: Sequential(Dense(256, activation='relu'), Dense(10)). The i-th layer's parameters are named 'i.weight', 'i.bias' (nested: 'i.j.weight').
    """

    def __init__(self, *layers: Union[Layer, Sequence[Layer]]) -> None:
        """Sequential(*layers) or Sequential([layers])."""

    def add(self, layer: Layer) -> Sequential:
        """Appends a layer; returns self."""

    @property
    def layers(self) -> list[Layer]:
        """The layers, in order."""

    def set_input_shape(self, shape: Sequence[int]) -> Sequential:
        """
        Views each input row as this per-sample shape (e.g. (8, 8, 1): a 64-feature row as an NHWC image) before the first layer; returns self.
        """

    def __len__(self) -> int: ...

    def __getitem__(self, arg: int, /) -> Layer: ...

class Residual(Layer):
    """
    y = x + body(x); the body must keep the width. Its parameters take the residual's position as prefix ('1.0.weight' for the first layer of a Sequential body at position 1).
    """

    def __init__(self, body: Layer) -> None: ...

class FourierFeatures(Layer):
    """
    Random Fourier features x -> [sin(2 pi x B^T), cos(2 pi x B^T)], B ~ N(0, sigma^2) of shape [features, inputs]; output width 2 * features. Fixed (a constant saved in checkpoints) unless trainable. For physics-informed networks (CPU and CUDA).
    """

    def __init__(self, features: int, sigma: float = 1.0, trainable: bool = False) -> None: ...

class Conv2d(Layer):
    """
    2-D convolution over NHWC images [batch, height, width, channels] with filters [filters, kernel, kernel, channels] (KRSC) and a bias per filter, optionally followed by relu.
    """

    def __init__(self, filters: int, kernel: int = 3, stride: int = 1, padding: int = 0, dilation: int = 1, activation: ActivationName = 'none', init: InitSpec = None, bias: bool = True) -> None:
        """
        filters: output channels. kernel: square window size. activation: 'none' or 'relu'.
        init: None (he for relu, xavier otherwise; fan_in = kernel * kernel * channels) or as for Dense.
        """

    @property
    def filters(self) -> int:
        """The output channels."""

class MaxPool2d(Layer):
    """
    Max over windows of NHWC images; stride defaults to the window. The gradient goes to the first maximum in scan order.
    """

    def __init__(self, window: int, stride: int | None = None, padding: int = 0) -> None: ...

class GlobalAvgPool(Layer):
    """Mean over height and width: [batch, h, w, c] -> [batch, c]."""

    def __init__(self) -> None: ...

class Flatten(Layer):
    """[batch, h, w, c] -> [batch, h * w * c] (NHWC order)."""

    def __init__(self) -> None: ...

class Dropout(Layer):
    """
    Zeroes each element with probability p in training steps and scales the rest by 1 / (1 - p), as torch.nn.Dropout; predict and evaluate pass the input through. The mask comes from a counter-based generator keyed by the trainer's seed, the layer's output and the step, inside the step graph.
    """

    def __init__(self, p: float = 0.5) -> None: ...

    @property
    def p(self) -> float: ...

class BatchNorm(Layer):
    """
    Batch norm over the channels (the last axis: [batch, channels] features, [batch, h, w, channels] images), as torch.nn.BatchNorm1d / BatchNorm2d: training steps normalize with the batch's mean and biased variance and update running_mean / running_var (unbiased variance) inside the step; predict and evaluate use the running statistics. Gain starts at 1, shift at 0; not with padded batches or data-parallel training.
    """

    def __init__(self, momentum: float = 0.1, eps: float = 1e-05) -> None: ...

    @property
    def momentum(self) -> float: ...

    @property
    def eps(self) -> float: ...

class Embedding(Layer):
    """
    Token ids [batch, positions] -> vectors [batch, positions, dim], plus a learned position embedding when positions > 0.
    """

    def __init__(self, vocab: int, dim: int, positions: int = 0) -> None: ...

class LayerNorm(Layer):
    """Normalizes the last dimension, with a gain and a bias."""

    def __init__(self, eps: float = 1e-05) -> None: ...

class SelfAttention(Layer):
    """
    Multi-head self-attention over [batch, positions, width]: q, k, v projections, scaled dot-product attention (causal=True: each position sees itself and earlier ones; off by default, as the config's "causal": false and torch.nn.MultiheadAttention), an output projection.
    """

    def __init__(self, heads: int, causal: bool = False, bias: bool = True) -> None: ...

class TransformerBlock(Layer):
    """
    A pre-norm transformer block: x + attention(layer_norm(x)), then + mlp(layer_norm(.)) with a gelu hidden layer of width mlp; causal=True (off by default) makes it a decoder block.
    """

    def __init__(self, heads: int, mlp: int, causal: bool = False) -> None: ...

class Loss:
    """Base class of the losses."""

    def describe(self) -> str: ...

    def __repr__(self) -> str: ...

    @property
    def reduction(self) -> str:
        """'mean' or 'sum'."""

    @property
    def task(self) -> str:
        """'classification' or 'regression'."""

class SoftmaxCrossEntropy(Loss):
    """
    Softmax + cross-entropy on logits [B, C] with integer labels [B] (as torch.nn.CrossEntropyLoss); reduction 'mean' over the batch or 'sum'. label_smoothing in [0, 1) and class_weights (one number >= 0 per class) as torch.nn.functional.cross_entropy's label_smoothing and weight: a weighted mean divides by the summed weights of the labelled targets.
    """

    def __init__(self, reduction: Reduction = 'mean', label_smoothing: float = 0.0, class_weights: Sequence[float] | None = None) -> None: ...

    @property
    def label_smoothing(self) -> float:
        """The smoothing eps (0: none)."""

    @property
    def class_weights(self) -> list[float]:
        """The per-class weights (empty: every class 1)."""

class MeanSquaredError(Loss):
    """
    Squared error on predictions [B, T] with float targets [B, T] (or [B] when T = 1); reduction 'mean' over all B*T elements (as torch.nn.MSELoss) or 'sum'.
    """

    def __init__(self, reduction: Reduction = 'mean') -> None: ...

class ElementwiseLoss(Loss):
    """Base class of L1Loss, HuberLoss and BinaryCrossEntropyWithLogits."""

class L1Loss(ElementwiseLoss):
    """|pred - target| on [B, T] with float targets (as torch.nn.L1Loss); 'mean' or 'sum'."""

    def __init__(self, reduction: Reduction = 'mean') -> None: ...

class HuberLoss(ElementwiseLoss):
    """
    0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta), d = pred - target (as torch.nn.HuberLoss); 'mean' or 'sum'.
    """

    def __init__(self, delta: float = 1.0, reduction: Reduction = 'mean') -> None: ...

class BinaryCrossEntropyWithLogits(ElementwiseLoss):
    """
    Binary cross-entropy on logits [B, T] with float targets in [0, 1] of the same shape, in the stable form max(z, 0) - z t + log1p(exp(-|z|)) (as torch.nn.BCEWithLogitsLoss); 'mean' or 'sum'.
    """

    def __init__(self, reduction: Reduction = 'mean') -> None: ...

class Schedule:
    """
    Learning-rate schedule as a function of the step t = 1, 2, ...:
      constant: base
      step:     base * gamma^floor((t - 1) / step_size)
      cosine:   t <= warmup: base * t / warmup; then min + (base - min) * (1 + cos(pi p)) / 2,
                p = (t - warmup) / (total - warmup), min = base * min_lr_ratio once t >= total.
    """

    @staticmethod
    def constant() -> Schedule:
        """The base learning rate at every step."""

    @staticmethod
    def step(step_size: int, gamma: float = 0.1) -> Schedule:
        """Multiply the learning rate by gamma every step_size steps."""

    @staticmethod
    def cosine(warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> Schedule:
        """
        Linear warm-up over warmup_steps, then cosine decay to base * min_lr_ratio at total_steps.
        """

    @property
    def kind(self) -> str:
        """'constant', 'step' or 'cosine'."""

    @property
    def warmup_steps(self) -> int: ...

    @property
    def total_steps(self) -> int: ...

    @property
    def min_lr_ratio(self) -> float: ...

    @property
    def step_size(self) -> int: ...

    @property
    def gamma(self) -> float: ...

    def lr_at(self, base_lr: float, t: int) -> float:
        """The learning rate at step t (1-based) for base learning rate base_lr."""

    def describe(self) -> str: ...

    def __repr__(self) -> str: ...

class Optimizer:
    """Base class of the optimizers."""

    def describe(self) -> str: ...

    def __repr__(self) -> str: ...

    @property
    def lr(self) -> float:
        """The base learning rate given at construction."""

    @property
    def weight_decay(self) -> float: ...

    @property
    def schedule(self) -> Schedule: ...

    @property
    def clip_norm(self) -> float:
        """Gradient clipping by global norm before each update (0: none), as torch.nn.utils.clip_grad_norm_."""

class SGD(Optimizer):
    """
    SGD as PyTorch: g += wd*p; buf = momentum*buf + (1 - dampening)*g (buf = g on step 1); g = nesterov ? g + momentum*buf : buf; p -= lr*g.
    """

    def __init__(self, lr: float, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0, dampening: float = 0.0, schedule: Schedule | None = None, clip_norm: float = 0.0) -> None: ...

class Adam(Optimizer):
    """Adam as PyTorch (weight decay added to the gradient, L2)."""

    def __init__(self, lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-08, weight_decay: float = 0.0, schedule: Schedule | None = None, clip_norm: float = 0.0) -> None: ...

class AdamW(Adam):
    """AdamW as PyTorch (decoupled weight decay: p *= 1 - lr*wd)."""

    def __init__(self, lr: float = 0.001, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-08, weight_decay: float = 0.01, schedule: Schedule | None = None, clip_norm: float = 0.0) -> None: ...

class Lion(Optimizer):
    """
    Lion (Chen et al. 2023) as lion-pytorch: c = beta1 m + (1 - beta1) g; p *= 1 - lr*wd; p -= lr sign(c); m = beta2 m + (1 - beta2) g. Use a learning rate 3-10x smaller than AdamW's and a larger weight decay. Written as a user-defined update rule (docs/extending.md).
    """

    def __init__(self, lr: float = 0.0001, beta1: float = 0.9, beta2: float = 0.99, weight_decay: float = 0.0, schedule: Schedule | None = None, clip_norm: float = 0.0) -> None: ...

class Timer:
    """
    Times a region: CUDA events on `stream` when one is given (an int cudaStream_t, 0 for the legacy default stream, or a torch/cupy stream object), else the host clock. ms() ends the region (waiting for the stream) and returns its length in milliseconds. As a context manager it restarts on entry and sets .elapsed_ms on exit.
    """

    def __init__(self, stream: StreamLike = None) -> None: ...

    def restart(self) -> None:
        """Starts the region now."""

    def ms(self) -> float:
        """Ends the region and returns its length in milliseconds."""

    @property
    def elapsed_ms(self) -> float:
        """The length of the last `with` region, in milliseconds."""

    def __enter__(self) -> Timer: ...

    def __exit__(self, *args: object) -> bool: ...

class StepGraph:
    """
    The seed's graph object: record work once on a CUDA stream, replay it with one launch.
      g = StepGraph(stream)            # None: a private non-blocking stream
      g.capture((64, 128), fn)         # fn(stream: int) enqueues the work
      g.launch()
    capture() skips when already captured for the same shape key; another key re-records. Without CUDA every method raises stepgraph.Error('CUDA feature not enabled').
    """

    def __init__(self, stream: StreamLike = None) -> None: ...

    def capture(self, key: Sequence[int], fn: Callable[[int], object]) -> None:
        """Records fn(stream) once for this shape key."""

    def launch(self) -> None:
        """Replays the recorded work."""

    def invalidate(self) -> None:
        """Drops the recording."""

    @property
    def launch_count(self) -> int: ...

    @property
    def is_captured(self) -> bool: ...

    @property
    def input_shape(self) -> tuple[int, ...]: ...

    @property
    def num_nodes(self) -> int: ...

    @property
    def stream(self) -> int:
        """The cudaStream_t it captures on and launches into, as an int."""

class EvalResult:
    """The result of Trainer.evaluate."""

    @property
    def loss(self) -> float:
        """Loss over all rows, with the loss's reduction."""

    @property
    def accuracy(self) -> float:
        """
        Classification: the fraction of rows whose argmax is the label (0 for regression).
        """

    @property
    def terms(self) -> dict[str, float]:
        """A graph model's loss terms by output (unweighted)."""

    @property
    def count(self) -> int:
        """Rows evaluated."""

    def __repr__(self) -> str: ...

class WeightsReport:
    """What Trainer.load_weights took and left, as PyTorch's load_state_dict reports it."""

    @property
    def loaded(self) -> list[str]:
        """This model's weights taken from the file, in model order."""

    @property
    def missing(self) -> list[str]:
        """This model's weights the file does not hold (missing_keys)."""

    @property
    def unexpected(self) -> list[str]:
        """The file's tensors this model has no weight for (unexpected_keys)."""

    @property
    def converted(self) -> dict[str, str]:
        """Loaded weights stored in another type, converted to float32: name -> the file's dtype ('F64')."""

    @property
    def naming(self) -> str:
        """The file's names: 'stepgraph', or 'torch' (a state_dict of Trainer.torch_module())."""

class Trainer:
    """
    Builds the whole training step (forward, loss, backward, optimizer) as one program, plans its memory and runs it on a backend; on CUDA every step after the first is one CUDA graph replay.

      t = Trainer(model, SoftmaxCrossEntropy(), Adam(1e-3), device='cuda')
      t.compile((64, 128))
      loss = t.one_step(X, y)

    Inputs are numpy arrays or any object with __dlpack__ (PyTorch, CuPy, JAX). Host arrays: X float32 (float64 is converted), labels of any integer dtype (range checked), regression targets float32/float64; any strides. CUDA tensors (CUDA trainers only): float32 X and targets, int32 labels (int64 converted on the device), C-contiguous; they are copied device to device into the input slots, never through the host. Bad inputs raise stepgraph.InputError (a ValueError); engine errors raise stepgraph.Error.
    Calls release the GIL; one trainer runs one call at a time.
    """

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | str | os.PathLike[str] | None = None, *, device: DeviceName | None = None, seed: int | None = None) -> Trainer:
        """
        The Trainer a configuration describes (model, loss or physics problem, optimizer, train.* options) on device (default train.device) with seed (default train.seed); a physics-informed one is compiled, a supervised one is compiled by you for its batch shape.
        """

    def __init__(self, model: Layer, loss: Union[Loss, Mapping[str, Union[Loss, tuple[Loss, float]]], Any], optimizer: Union[Optimizer, Any], device: DeviceName = 'auto', seed: int = 0, *, mode: Literal['graph', 'eager'] = 'graph', shape_policy: Literal['recapture', 'pad', 'error'] = 'recapture', max_shapes: int = 8, autotune: Literal['off', 'heuristic', 'exhaustive'] = 'off', precision: Literal['fp32', 'tf32', 'tf32x3'] = 'fp32', attention: Literal['fp32', 'cudnn_bf16'] = 'fp32', deterministic: bool = True, fusion: bool = True, concurrent: bool = True, plan_cache: str = '', on_nan: Literal['stop', 'skip', 'continue'] = 'stop') -> None:
        """
        model, loss, optimizer: the step's pieces. loss may be a stepgraph.pinn.Problem: a
        physics-informed trainer (compiled; its step draws its own points: train with launch()).
        device: 'cpu', 'cuda', or 'auto' (CUDA when available, else the CPU).
        seed: fixes the initial parameters (per parameter name); kept in checkpoints.
        mode: 'graph' (capture the step as one CUDA graph after a warm-up step) or 'eager'.
        shape_policy: what a batch with another row count does: 'recapture' (compile that shape too, at most max_shapes cached), 'pad' (pad to the compiled size, exact), 'error'.
        autotune: 'off', 'heuristic' or 'exhaustive' (cuBLASLt algorithms and cuDNN plans chosen by timing).
        precision: 'fp32', 'tf32' (dense layers and convolutions on CUDA) or 'tf32x3' (fp32 accuracy on tensor cores: plain dense products may run as CUTLASS 3xTF32).
        attention: 'fp32' (the project's own attention kernels) or 'cudnn_bf16' (cuDNN's fused attention with Q, K, V, O and gradients rounded to bf16: relative errors ~1e-2; needs cuDNN and a head size that is a multiple of 8). CUDA only: the CPU always runs fp32.
        deterministic: True (default): every kernel and cuDNN plan sums in a fixed order, so runs repeat bit for bit; False: cuDNN may pick nondeterministic (atomic) engines for convolution gradients and the SDPA backward, as PyTorch does by default (often faster).
        plan_cache: the folder of the on-disk cache of built cuDNN plans, or 'off'; '' (default): $SG_PLAN_CACHE, else ~/.cache/stepgraph/cudnn.
        """

    def compile(self, input_shape: int | tuple[int, int] | Sequence[int]) -> None:
        """
        Builds, plans and lowers the step for inputs of shape (batch, features). The first compile creates and initialises the parameters and optimizer state; later compiles (another batch size) reuse them.
        """

    def one_step(self, X: ArrayLike | Mapping[str, ArrayLike], y: ArrayLike | Mapping[str, ArrayLike]) -> float:
        """
        Copies the batch into the input slots, runs one whole step and returns its loss (waiting for the step).
        """

    def one_step_async(self, X: ArrayLike | Mapping[str, ArrayLike], y: ArrayLike | Mapping[str, ArrayLike]) -> None:
        """As one_step without waiting: read the loss later with .loss."""

    def set_batch(self, X: ArrayLike | Mapping[str, ArrayLike], y: ArrayLike | Mapping[str, ArrayLike]) -> None:
        """
        Copies a batch into the input slots (CUDA tensors device to device). A batch with another row count follows the shape policy.
        """

    def launch(self) -> None:
        """
        Runs one step on the batch in the input slots (or, after set_dataset, on the next batch gathered on the device). Does not wait: read .loss to wait.
        """

    def synchronize(self) -> None:
        """Waits for every queued step."""

    @property
    def loss(self) -> float:
        """The last step's loss (waits for it)."""

    @property
    def amax(self) -> dict[str, float]:
        """
        max |output| of the last step for every Dense built with amax=True, by name ('0.amax', ...); empty if none.
        """

    @property
    def logits(self) -> npt.NDArray[np.float32]:
        """The last step's predictions [batch, outputs] as a numpy copy."""

    def logits_view(self) -> TensorView:
        """A zero-copy view of the predictions slot (see tensor_view)."""

    def tensor_view(self, name: str) -> TensorView:
        """
        A zero-copy view of a tensor of the current step ('input', 'target', 'loss', output_name, parameters by name): a numpy array on the CPU backend, on CUDA an array with __dlpack__ / __dlpack_device__ (torch.from_dlpack, cupy.from_dlpack, jax.dlpack.from_dlpack). It keeps the trainer alive. Parameter views stay valid for the trainer's life; other views until the next compile, invalidate or batch of a new size. Read it after the step finished (.loss or synchronize()).
        """

    def param_views(self) -> dict[str, TensorView]:
        """
        Zero-copy views of every parameter by name (see tensor_view); writing to them changes the parameters.
        """

    def predict(self, X: ArrayLike | Mapping[str, ArrayLike]) -> npt.NDArray[np.float32] | dict[str, npt.NDArray[np.float32]]:
        """
        Forward only, in batches of the compiled size: predictions [rows, outputs] as numpy. Parameters are not changed.
        """

    def evaluate(self, X: ArrayLike | Mapping[str, ArrayLike], y: ArrayLike | Mapping[str, ArrayLike]) -> EvalResult:
        """
        Loss (and accuracy for classification) over all rows, in batches; no update.
        """

    def set_dataset(self, X: ArrayLike | Mapping[str, ArrayLike], y: ArrayLike | Mapping[str, ArrayLike], batch_size: int, shuffle: bool = True, last_batch: Literal['drop', 'partial'] = 'drop', seed: int = 0) -> None:
        """
        Device-resident training: uploads the whole data set once; every launch() then gathers (and shuffles, per epoch, from the step counter) its own batch inside the step. A graph model takes dicts of arrays by name (every input, every term's target). last_batch: 'drop' or 'partial'. compile() switches back to fed batches.
        """

    def params(self) -> dict[str, npt.NDArray[np.float32]]:
        """
        Parameters by name ('0.weight' [out, in], '0.bias' [out], ...) as numpy copies, in model order.
        """

    def set_params(self, values: Mapping[str, ArrayLike]) -> None:
        """
        Writes the given parameters in place (no recompile). Every name must be a parameter with the right shape; on a mismatch nothing is written. Values: numpy arrays (float64 converted), CPU tensors, or CUDA tensors (copied device to device).
        """

    def state(self) -> dict[str, npt.NDArray[Any]]:
        """
        Every persistent tensor (parameters, gradients, optimizer state, step scalars) by name.
        """

    @property
    def lr(self) -> float:
        """The base learning rate (settable without a recompile)."""

    @lr.setter
    def lr(self, arg: float, /) -> None: ...

    def set_lr(self, lr: float) -> None:
        """Sets the base learning rate (no recompile)."""

    @property
    def step(self) -> int:
        """Optimizer steps taken."""

    @property
    def seed(self) -> int: ...

    @property
    def loss_terms(self) -> dict[str, float]:
        """
        Each named loss term of the last step (a physics-informed step's residual and conditions), read from the device.
        """

    @property
    def coefficients(self) -> dict[str, float]:
        """A physics-informed trainer's learned PDE coefficients by name ({} without any), read from the device."""

    def relative_l2_error(self) -> float:
        """||u - u*|| / ||u*|| over a physics-informed problem's evaluation grid (it needs an exact solution)."""

    def save(self, path: str | os.PathLike) -> None:
        """
        Writes a safetensors checkpoint (parameters, optimizer state, step scalars, seed), atomically.
        """

    def load(self, path: str | os.PathLike, weights_only: bool = False, strict: bool = True) -> WeightsReport | None:
        """
        Reads a checkpoint; the whole file is validated before anything changes. By default it takes everything (parameters, optimizer state, step) and the model, loss and optimizer must be the ones it was saved from. weights_only=True takes only the parameters (load_weights), into any setup of the same shapes, and returns its WeightsReport; strict=False implies weights_only and takes the weights that fit, reporting the rest.
        """

    def load_weights(self, path: str | os.PathLike, strict: bool = True) -> WeightsReport:
        """
        Loads a weights file: parameters-only safetensors (float32, or float64/float16/bfloat16 converted), a checkpoint's parameters, or a state_dict of torch_module() saved with safetensors.torch.save_file (its names are recognised). Shapes must match. strict: every weight present and nothing extra, else an error listing each; strict=False takes what fits. Returns a WeightsReport (loaded, missing, unexpected, converted, naming). The step and optimizer state are kept.
        """

    def torch_module(self) -> str:
        """
        The torch.nn.Sequential (as Python source) whose state_dict export(format='torch') writes.
        """

    def export(self, path: str | os.PathLike, format: Literal['torch', 'safetensors', 'onnx'] = 'torch', opset: int = 17) -> None:
        """
        Writes the model for another tool. format='torch': a safetensors file of the parameters under the names torch_module()'s state_dict uses (torch.nn.Sequential.load_state_dict takes it); 'safetensors': the parameters under stepgraph's names; 'onnx': the inference graph (needs the onnx package; opset: the ONNX opset, 17 or later).
        """

    def _inference_graph(self, rows: int = 1) -> str:
        """The forward program predict runs, as JSON text (for the ONNX exporter)."""

    def explain(self) -> str:
        """The step program, shapes, memory plan and loss scale as text."""

    def invalidate(self) -> None:
        """Drops every compiled step (parameters and optimizer state are kept)."""

    def profile(self, reps: int = 50) -> list[tuple[str, float]]:
        """
        Per-op device time of the current step: a list of (op name, microseconds).
        """

    def device_ptr(self, name: str) -> int:
        """The address of a tensor of the current step, as an int."""

    @property
    def launch_count(self) -> int:
        """Steps launched."""

    @property
    def compile_count(self) -> int:
        """Step programs built."""

    @property
    def capture_count(self) -> int:
        """CUDA graphs recorded (recaptures included)."""

    @property
    def graph_nodes(self) -> int:
        """Nodes of the current step's CUDA graph (0: none)."""

    @property
    def is_compiled(self) -> bool: ...

    @property
    def is_resident(self) -> bool:
        """Whether launches gather batches from a set_dataset data set."""

    @property
    def input_shape(self) -> tuple[int, int]:
        """The compiled (batch, features)."""

    @property
    def output_shape(self) -> tuple[int, int]:
        """The model's prediction shape (batch, outputs)."""

    @property
    def output_name(self) -> str:
        """The name of the predictions tensor."""

    @property
    def device(self) -> Literal['cpu', 'cuda']:
        """'cpu' or 'cuda'."""

    @property
    def device_id(self) -> int:
        """The CUDA device (0 on the CPU)."""

    @property
    def backend(self) -> str:
        """The backend, described."""

    @property
    def allocated_bytes(self) -> int: ...

    @property
    def peak_allocated_bytes(self) -> int: ...

    @property
    def nonfinite_steps(self) -> tuple[int, int]:
        """(first, count): the first step whose loss or gradient norm was NaN or inf (0: none) and how many were, as the step recorded them on the device."""
    @property
    def options(self) -> dict[str, Any]:
        """
        mode, shape_policy, max_shapes, autotune, precision, attention, deterministic, fusion, concurrent, plan_cache and on_nan.
        """

    @property
    def model(self) -> Layer: ...

    @property
    def loss_fn(self) -> Loss: ...

    @property
    def optimizer(self) -> Optimizer: ...

    def __repr__(self) -> str: ...

# Used by the pure-Python layer (stepgraph.train, load_config, default_config, evaluate_checkpoint).
def load_digits() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int32]]:
    """The handwritten digits (1797 8x8 images, pixels scaled to 0..1, 10 classes) embedded in stepgraph: (X float32 [1797, 64], y int32 [1797])."""

def make_antiderivative(functions: int = 1000, sensors: int = 100, points: int = 10, seed: int = 0) -> dict[str, npt.NDArray[np.float32]]:
    """The DeepONet antiderivative set (the config source "antiderivative"): {'u': float32 [N, sensors] (a random smooth function at the sensors), 'y': float32 [N, 1] (query points), 'G': float32 [N, 1] (the integral of u from 0 to y)}, N = functions * points."""

def _default_config() -> str: ...
def _activation_names() -> list[str]: ...
def _parse_config(json_text: str | None, path: str | None) -> str: ...
def _train(json_text: str | None, path: str | None, steps: int | None, device: str | None, seed: int | None, out_dir: str = '', resume: str = '', overwrite: bool = False, weights_only: bool = False, json: bool = False, verbose: bool = False, tensorboard: str = '', callback: Callable[[dict], bool | None] | None = None, on_nan: str | None = None) -> tuple[str, Trainer]: ...
def _trainer_from_config(json_text: str | None, path: str | None, device: str | None, seed: int | None) -> Trainer: ...
def _check_problem(problem_json: str) -> None: ...
def _register_python_loss(loss: Any, name: str, has_target_shape: bool) -> str: ...
def _infer_grad_scale(loss: Loss, pred_shape: tuple[int, ...]) -> tuple[float, str]: ...
def _register_python_rule(optimizer: Any, name: str, state: list[tuple[str, float]]) -> str: ...

class _RegisteredOptimizer(Optimizer):
    """A registered update rule as an optimizer (stepgraph.CustomOptimizer makes one)."""

    def __init__(self, rule: str, lr: float, weight_decay: float = 0.0, schedule: Schedule | None = None, clip_norm: float = 0.0, label: str = '') -> None: ...

class _RegisteredLoss(Loss):
    """A registered user-defined loss (stepgraph.CustomLoss makes one)."""

    def __init__(self, name: str, label: str = '') -> None: ...
def _coefficients(trainer: Trainer) -> dict[str, float]: ...
def _relative_l2_error(trainer: Trainer) -> float: ...
def _exportable_trainer(json_text: str | None, path: str | None, checkpoint: str, weights_only: bool = False) -> tuple[Trainer, str]: ...
def _evaluate(json_text: str | None, path: str | None, checkpoint: str, device: str | None, seed: int | None, weights_only: bool = False, json: bool = False, verbose: bool = False) -> str: ...
