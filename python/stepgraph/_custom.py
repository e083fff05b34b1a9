"""User-defined ops written in Python: subclass CustomOp.

    class Cube(sg.CustomOp):
        def output_shapes(self, x_shape):            # per-sample shapes in, a list out
            return [x_shape]
        def forward(self, inputs, outputs, stream):  # write the outputs in place
            x, = inputs; y, = outputs
            y[...] = x ** 3
        def backward(self, grad_outputs, inputs, outputs, grad_inputs, stream):
            dy, = grad_outputs; x, = inputs; dx, = grad_inputs
            dx[...] = 3 * x * x * dy

    y = Cube()(x)                        # a model graph; Sequential(Dense(8), Cube(), Dense(1)) too

On the CPU backend the arrays are writable numpy views of the plan's buffers and `stream` is
None. On CUDA they are DLPack-capable device views (cupy.from_dlpack, torch.from_dlpack) and
`stream` is the cudaStream_t as an int: launch on it (torch.cuda.ExternalStream, CuPy's
ExternalStream, ...), without synchronizing or allocating. The CUDA functions run at warm-up and
at capture; the step's CUDA graph replays what they launched without calling Python again.
Arrays of the backward a gradient is not needed for are None; grad_inputs are overwritten (the
engine adds them up where other ops contribute too). Without a backward method the op is not
differentiable: training a model that needs gradients through it is refused by name.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from . import _stepgraph


class CustomOp:
    """Base class of user-defined ops; see the module's docstring."""

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name if name is not None else type(self).__name__
        self._registered: Optional[str] = None

    # ---- what a subclass writes ----
    def output_shapes(self, *input_shapes: tuple) -> Sequence[tuple]:
        raise NotImplementedError(f"{type(self).__name__}.output_shapes: per-sample shapes of the outputs")

    def forward(self, inputs: list, outputs: list, stream: Optional[int]) -> None:
        raise NotImplementedError(f"{type(self).__name__}.forward: write every output in place")

    # backward(self, grad_outputs, inputs, outputs, grad_inputs, stream): optional.

    # ---- how it joins a model ----
    @property
    def op(self) -> str:
        """The name it is registered under (the name, or name-2, ... when taken)."""
        if self._registered is None:
            has_backward = callable(getattr(self, "backward", None))
            self._registered = _stepgraph._register_python_op(self, self.name, has_backward)
        return self._registered

    def __call__(self, *inputs: _stepgraph.SymbolicTensor) -> Any:
        """The op on symbolic tensors: one tensor, or a tuple of them when it has several outputs."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        out = _stepgraph.custom(self.op, list(inputs), self.name)
        return out[0] if len(out) == 1 else tuple(out)

    def _as_layer(self) -> _stepgraph.Layer:
        """The op as a Sequential layer (one input, one output)."""
        return _stepgraph.custom_layer(self.op, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class CustomLoss:
    """Base class of user-defined losses, as the framework stepgraph grew from has them: given the
    predictions and the targets, write the loss and its gradient.

        class LogCosh(sg.CustomLoss):
            def forward(self, pred, target, valid_rows, loss, dpred, stream):
                n = int(valid_rows[0])                     # rows at or beyond it are padding
                e = pred[:n] - target[:n]
                loss[0] = np.log(np.cosh(e)).mean()
                dpred[...] = 0
                dpred[:n] = np.tanh(e) / e.size

        t = sg.Trainer(model, LogCosh(), sg.Adam(1e-3))
        sg.infer_grad_scale(LogCosh(), (16, 3))            # (0.0625, 'mean')

    The arrays are views of the step's buffers, as CustomOp's: numpy on the CPU backend; DLPack
    device views and the cudaStream_t as an int on CUDA (valid_rows is then a device int32 [1]:
    use it in device code, e.g. a mask ``torch.arange(B, device='cuda') < valid``, never read it
    on the host). Write every element of dpred. Optional: ``target_shape(self, pred_shape)``
    returning the target's shape (default: pred's). The engine infers how the loss reduces over
    the batch from its CPU forward (infer_grad_scale) and explain reports it.
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name if name is not None else type(self).__name__
        self._loss: Optional[Any] = None

    def forward(self, pred: Any, target: Any, valid_rows: Any, loss: Any, dpred: Any, stream: Optional[int]) -> None:
        raise NotImplementedError(f"{type(self).__name__}.forward: write loss[0] and every element of dpred")

    @property
    def _stepgraph_loss(self) -> Any:
        """The engine's loss object (registered on first use)."""
        if self._loss is None:
            has_target_shape = callable(getattr(self, "target_shape", None))
            key = _stepgraph._register_python_loss(self, self.name, has_target_shape)
            self._loss = _stepgraph._RegisteredLoss(key, self.name)
        return self._loss

    def describe(self) -> str:
        return self._stepgraph_loss.describe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def infer_grad_scale(loss: Any, pred_shape: Sequence[int]) -> tuple:
    """The factor a loss puts on each element's gradient for predictions of ``pred_shape`` (with
    the batch axis), and "mean" or "sum": a built-in loss knows it (1/(B*T) for a mean squared
    error); a CustomLoss's is found by running its CPU forward on B copies of one row and on that
    row alone (1/B for a mean over the batch, 1 for a sum)."""
    engine = loss._stepgraph_loss if hasattr(loss, "_stepgraph_loss") else loss
    return _stepgraph._infer_grad_scale(engine, tuple(pred_shape))


class CustomOptimizer:
    """Base class of user-defined optimizers: an in-place update rule over every (parameter,
    gradient, state...), its state declared so that it is planned with the step, saved in
    checkpoints and restored.

        class Signum(sg.CustomOptimizer):
            state = {"momentum": 0.0}                  # per parameter, shaped as it: initial values
            def __init__(self, lr, beta=0.9, **kw):
                super().__init__(lr, **kw)
                self.beta = beta
            def update(self, params, grads, states, hyper, sched, stream):
                lr = sched[0]                          # this step's learning rate (after the schedule)
                for p, g, (m,) in zip(params, grads, states):
                    m[...] = self.beta * m + (1 - self.beta) * g
                    p -= lr * np.sign(m)

        t = sg.Trainer(model, sg.MeanSquaredError(), Signum(1e-3, schedule=sg.Schedule.cosine(100, 5000)))

    params, grads and each parameter's states are flat views of the step's buffers (numpy on the
    CPU; DLPack device views on CUDA, with ``stream`` the cudaStream_t as an int). ``hyper`` is
    [base lr, weight decay] and ``sched`` [lr, 1, 1, step] as float32 views: on CUDA they are device
    memory, so read them in device code (``torch.from_dlpack(sched)[0]`` in a torch expression),
    never on the host; that is how a schedule or set_lr reaches a replayed step without a
    recapture. As for CustomOp, on CUDA ``update`` runs at warm-up and capture only.
    Checkpoint names: ``optim.<name>.<state>.<parameter>``.
    """

    state: dict = {}

    def __init__(self, lr: float, *, weight_decay: float = 0.0, schedule: Any = None, clip_norm: float = 0.0,
                 name: Optional[str] = None) -> None:
        self.name = name if name is not None else type(self).__name__
        self.lr, self.weight_decay, self.schedule, self.clip_norm = lr, weight_decay, schedule, clip_norm
        self._optimizer: Optional[Any] = None

    def update(self, params: list, grads: list, states: list, hyper: Any, sched: Any, stream: Optional[int]) -> None:
        raise NotImplementedError(f"{type(self).__name__}.update: update every parameter (and its states) in place")

    @property
    def _stepgraph_optimizer(self) -> Any:
        """The engine's optimizer (the rule registered on first use)."""
        if self._optimizer is None:
            state = [(str(k), float(v)) for k, v in dict(self.state).items()]
            rule = _stepgraph._register_python_rule(self, self.name, state)
            self._optimizer = _stepgraph._RegisteredOptimizer(rule, self.lr, self.weight_decay, self.schedule,
                                                              self.clip_norm, self.name)
        return self._optimizer

    def describe(self) -> str:
        return self._stepgraph_optimizer.describe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, lr={self.lr})"
