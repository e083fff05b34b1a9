"""stepgraph: whole-step training of small neural networks.

Each training step (forward, loss, backward, optimizer) is built as one program, planned into
fixed buffers and, on CUDA, captured as one CUDA graph that every later step replays. The CPU
backend is the reference and runs everywhere.

    import stepgraph as sg

    model = sg.Sequential(sg.Dense(256, activation="relu", init="he"), sg.Dense(10, init="xavier"))
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(1e-3), device="cuda")
    t.compile((64, 784))
    for X, y in batches:              # numpy arrays, or PyTorch / CuPy / JAX tensors
        loss = t.one_step(X, y)
    params = t.params()               # {"0.weight": ndarray [256, 784], ...}
    t.save("model.safetensors")

    summary = sg.train("configs/digits_mlp.json", steps=500)   # the CLI's `train`, as a call

Errors: stepgraph.Error (a RuntimeError) carries the engine's message; bad inputs (dtype, shape,
device, unknown option strings) raise stepgraph.InputError, which is both a stepgraph.Error and a
ValueError.
"""

from __future__ import annotations

import json as _json
import os as _os
from typing import Any, Callable, Mapping, Optional, Union

from ._stepgraph import (
    Adam,
    AdamW,
    Lion,
    BatchNorm,
    Dense,
    Dropout,
    Error,
    EvalResult,
    WeightsReport,
    Init,
    Input,
    InputError,
    Layer,
    Model,
    SymbolicTensor,
    activation,
    concat,
    matmul,
    named,
    split,
    Loss,
    MeanSquaredError,
    L1Loss,
    HuberLoss,
    BinaryCrossEntropyWithLogits,
    ElementwiseLoss,
    Optimizer,
    Residual,
    FourierFeatures,
    Conv2d,
    Embedding,
    Flatten,
    GlobalAvgPool,
    LayerNorm,
    MaxPool2d,
    SelfAttention,
    TransformerBlock,
    Schedule,
    Sequential,
    SGD,
    SoftmaxCrossEntropy,
    StepGraph,
    Timer,
    Trainer,
    __version__,
    cuda_available,
    cuda_enabled,
    cuda_unavailable_reason,
    load_digits,
    make_antiderivative,
)
from . import _stepgraph
from . import pinn
from ._custom import CustomLoss, CustomOp, CustomOptimizer, infer_grad_scale


# Standalone activations of symbolic tensors: sg.relu(x) is sg.activation(x, "relu").
def relu(x: SymbolicTensor, name: str = "") -> SymbolicTensor:
    return activation(x, "relu", name=name)


def gelu(x: SymbolicTensor, name: str = "") -> SymbolicTensor:
    return activation(x, "gelu", name=name)


def tanh(x: SymbolicTensor, name: str = "") -> SymbolicTensor:
    return activation(x, "tanh", name=name)


def sigmoid(x: SymbolicTensor, name: str = "") -> SymbolicTensor:
    return activation(x, "sigmoid", name=name)


def silu(x: SymbolicTensor, name: str = "") -> SymbolicTensor:
    return activation(x, "silu", name=name)

__all__ = [
    "CustomLoss",
    "CustomOp",
    "CustomOptimizer",
    "infer_grad_scale",
    "pinn",
    "L1Loss",
    "HuberLoss",
    "BinaryCrossEntropyWithLogits",
    "ElementwiseLoss",
    "Input",
    "Model",
    "SymbolicTensor",
    "activation",
    "concat",
    "matmul",
    "named",
    "split",
    "relu",
    "gelu",
    "tanh",
    "sigmoid",
    "silu",
    "Adam",
    "AdamW",
    "Lion",
    "BatchNorm",
    "Dense",
    "Dropout",
    "Error",
    "EvalResult",
    "WeightsReport",
    "Init",
    "InputError",
    "Layer",
    "Loss",
    "MeanSquaredError",
    "Optimizer",
    "Residual",
    "FourierFeatures",
    "Conv2d",
    "Embedding",
    "Flatten",
    "GlobalAvgPool",
    "LayerNorm",
    "MaxPool2d",
    "SelfAttention",
    "TransformerBlock",
    "Schedule",
    "Sequential",
    "SGD",
    "SoftmaxCrossEntropy",
    "StepGraph",
    "Timer",
    "Trainer",
    "__version__",
    "cuda_available",
    "cuda_enabled",
    "cuda_unavailable_reason",
    "default_config",
    "load_digits",
    "make_antiderivative",
    "evaluate_checkpoint",
    "load_config",
    "plot",
    "train",
    "TrainResult",
]

ConfigLike = Union[Mapping[str, Any], str, "_os.PathLike[str]"]


def _json_default(o: Any) -> Any:
    # numpy scalars and arrays, paths, stepgraph.pinn objects
    if hasattr(o, "to_config"):
        return o.to_config()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, _os.PathLike):
        return _os.fspath(o)
    raise TypeError(f"config: {type(o).__name__} is not JSON serializable")


def _config_args(config: Optional[ConfigLike]) -> tuple[Optional[str], Optional[str]]:
    """(json_text, path) for the extension."""
    if config is None:
        return None, None
    if isinstance(config, (str, _os.PathLike)):
        return None, _os.fspath(config)
    if isinstance(config, Mapping):
        return _json.dumps(dict(config), default=_json_default), None
    raise InputError(
        f"config: expected a dict or a path to a JSON file, got {type(config).__name__}"
    )


def default_config() -> dict:
    """The embedded default configuration (an MLP on the digits data), as a dict."""
    return _json.loads(_stepgraph._default_config())


def load_config(config: Optional[ConfigLike] = None) -> dict:
    """Checks a configuration (a dict or a path) and returns it with the defaults filled in.

    Unknown keys and bad values raise stepgraph.InputError naming the JSON path, e.g.
    ``model.layers[1].units: expected a positive integer, got -3``.
    """
    text, path = _config_args(config)
    return _json.loads(_stepgraph._parse_config(text, path))


class TrainResult(dict):
    """What :func:`train` returns: the run's summary (a dict: steps, final_loss, accuracy, ...)
    with the trained model as ``.trainer`` (a :class:`Trainer`: predict, evaluate, save, or train
    further with one_step; a supervised one is compiled for the run's batch size)."""

    trainer: "Trainer"


def _trainer_from_config(
    cls,
    config: Optional[ConfigLike] = None,
    *,
    device: Optional[str] = None,
    seed: Optional[int] = None,
) -> "Trainer":
    """The Trainer a configuration describes: its model, loss (or physics problem), optimizer and
    train.* options, on ``device`` ('auto' | 'cpu' | 'cuda'; default train.device) with ``seed``
    (default train.seed). A physics-informed one is compiled (its step makes its own points);
    compile a supervised one for your batch shape: ``t.compile((batch, features))``.

    config: a dict, a path to a JSON file, or None for the embedded default.
    """
    text, path = _config_args(config)
    return _stepgraph._trainer_from_config(text, path, device, seed)


Trainer.from_config = classmethod(_trainer_from_config)
Trainer.coefficients = property(
    lambda self: _stepgraph._coefficients(self),
    doc="A physics-informed trainer's learned PDE coefficients by name ({} without any), read from the device.",
)
Trainer.relative_l2_error = lambda self: _stepgraph._relative_l2_error(self)
Trainer.relative_l2_error.__doc__ = (
    "||u - u*|| / ||u*|| over a physics-informed problem's evaluation grid (it needs an exact solution)."
)


def train(
    config: Optional[ConfigLike] = None,
    *,
    steps: Optional[int] = None,
    device: Optional[str] = None,
    seed: Optional[int] = None,
    out_dir: Union[str, "_os.PathLike[str]", None] = None,
    resume: Union[str, "_os.PathLike[str]", None] = None,
    overwrite: bool = False,
    weights_only: bool = False,
    verbose: bool = False,
    json_lines: bool = False,
    tensorboard: Union[str, "_os.PathLike[str]", None] = None,
    callback: Optional[Callable[[dict], Optional[bool]]] = None,
    on_nan: Optional[str] = None,
) -> TrainResult:
    """Trains from a configuration, as the CLI's ``stepgraph train``, and returns the summary with
    the trained Trainer (``result.trainer``).

    config: a dict (the JSON configuration's structure: model, loss, optimizer, data, train), a
        path to a JSON file, or None for the embedded default (an MLP on the digits data).
    steps, device ('auto' | 'cpu' | 'cuda'), seed: override train.steps / train.device /
        train.seed.
    out_dir: where metrics.jsonl, checkpoint.safetensors and config.json are written (None:
        nothing is written). ``stepgraph.plot(out_dir)`` draws the loss curve from it.
    resume: a checkpoint to continue from (steps continue its count). The model, loss and optimizer
        must be the ones it was saved from; weights_only=True takes only its parameters instead
        (training then starts at step 0).
    overwrite: replace the run in out_dir. A folder that holds another run is otherwise refused
        (unless resume is that folder's checkpoint), and a folder another run is writing is always
        refused.
    verbose: print progress lines to sys.stdout; json_lines: print them as JSON objects.
    tensorboard: a folder for TensorBoard scalars of every progress and eval record (out_dir gets
        metrics.jsonl and metrics.csv in any case).
    callback: called with every progress and eval record (a dict, as metrics.jsonl holds it);
        returning False stops training after that step, which ends as a finished run does
        (evaluation, checkpoint, summary with ``stopped_by: 'callback'``). An exception in it ends
        the run with a stepgraph.Error naming it.
    on_nan: 'stop' | 'skip' | 'continue', overriding train.on_nan: what a step whose loss (or
        gradient norm) is NaN or inf does. 'stop' (default) ends the run with an Error naming the
        first such step and the last checkpoint (which is from before it).

    Returns a TrainResult: the summary (a dict: steps, final_loss, us_per_step, task, val_loss,
    val_size, device, and for classification accuracy (validation) and train_accuracy; checkpoint
    when one was written) whose ``.trainer`` is the trained Trainer.
    """
    text, path = _config_args(config)
    out, trainer = _stepgraph._train(
        text,
        path,
        steps,
        device,
        seed,
        _os.fspath(out_dir) if out_dir is not None else "",
        _os.fspath(resume) if resume is not None else "",
        overwrite,
        weights_only,
        json_lines,
        verbose or json_lines,
        _os.fspath(tensorboard) if tensorboard is not None else "",
        callback,
        on_nan,
    )
    result = TrainResult(_json.loads(out))
    result.trainer = trainer
    return result


def evaluate_checkpoint(
    config: Optional[ConfigLike],
    checkpoint: Union[str, "_os.PathLike[str]"],
    *,
    device: Optional[str] = None,
    seed: Optional[int] = None,
    weights_only: bool = False,
    verbose: bool = False,
) -> dict:
    """Evaluates a checkpoint on the configuration's validation split (the CLI's ``eval``).

    The config's model and loss must be the ones the checkpoint was saved from; weights_only=True
    takes only its parameters (the model may then differ, e.g. in an activation).
    Returns the summary dict (val_loss, accuracy for classification, steps of the checkpoint, ...).
    """
    text, path = _config_args(config)
    out = _stepgraph._evaluate(text, path, _os.fspath(checkpoint), device, seed, weights_only, False, verbose)
    return _json.loads(out)


def plot(
    run_dir: Union[str, "_os.PathLike[str]"],
    out: Union[str, "_os.PathLike[str]", None] = None,
    *,
    log_scale: Optional[bool] = None,
) -> str:
    """Draws the loss curve of a run (its metrics.jsonl) into a PNG and returns its path.

    run_dir: a run's output folder (``stepgraph train --out DIR`` or ``train(out_dir=DIR)``), or
        the metrics.jsonl file itself.
    out: the image to write (default: RUN_DIR/loss.png).
    log_scale: a logarithmic loss axis (default: when the loss spans more than a factor of 20).
    Needs matplotlib (``pip install 'stepgraph[plot]'``).
    """
    from ._plot import plot as _plot

    return _plot(run_dir, out, log_scale=log_scale)
