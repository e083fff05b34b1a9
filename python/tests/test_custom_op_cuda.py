"""User-defined Python ops on the CUDA backend: DLPack device views and the step's stream, the
kernels (PyTorch ops under torch.cuda.ExternalStream) recorded into the step's CUDA graph, graph
replay equal to eager bitwise, agreement with the CPU, and the Python functions not called on
replay; a callback that raises or synchronizes ends the capture cleanly, naming the op."""
import numpy as np
import pytest

import stepgraph as sg

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to PyTorch", allow_module_level=True)
if not sg.cuda_available():
    pytest.skip(f"stepgraph has no usable CUDA backend: {sg.cuda_unavailable_reason()}", allow_module_level=True)


class TorchCube(sg.CustomOp):
    def __init__(self, name=None):
        super().__init__(name)
        self.calls = 0

    def output_shapes(self, x_shape):
        return [x_shape]

    def forward(self, inputs, outputs, stream):
        self.calls += 1
        if stream is None:  # the CPU backend: numpy
            outputs[0][...] = inputs[0] ** 3
            return
        x, y = torch.from_dlpack(inputs[0]), torch.from_dlpack(outputs[0])
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.mul(x, x, out=y)
            y.mul_(x)

    def backward(self, grad_outputs, inputs, outputs, grad_inputs, stream):
        self.calls += 1
        if stream is None:
            grad_inputs[0][...] = 3 * inputs[0] ** 2 * grad_outputs[0]
            return
        dy, x, dx = (torch.from_dlpack(a) for a in (grad_outputs[0], inputs[0], grad_inputs[0]))
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.mul(x, x, out=dx)
            dx.mul_(dy).mul_(3.0)


def model(op):
    return sg.Sequential(sg.Dense(8, activation="tanh"), op, sg.Dense(2))


def test_torch_kernels_are_captured_and_replayed_without_python():
    r = np.random.default_rng(0)
    batches = [(r.standard_normal((32, 3)).astype(np.float32), r.standard_normal((32, 2)).astype(np.float32))
               for _ in range(8)]
    ops = {k: TorchCube(name=f"cube_{k}") for k in ("cpu", "graph", "eager")}
    cpu = sg.Trainer(model(ops["cpu"]), sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu", seed=5)
    graph = sg.Trainer(model(ops["graph"]), sg.MeanSquaredError(), sg.Adam(1e-2), device="cuda", seed=5)
    eager = sg.Trainer(model(ops["eager"]), sg.MeanSquaredError(), sg.Adam(1e-2), device="cuda", seed=5,
                       mode="eager")
    for t in (cpu, graph, eager):
        t.compile((32, 3))
    calls = None
    for s, (X, Y) in enumerate(batches):
        lc, lg, le = cpu.one_step(X, Y), graph.one_step(X, Y), eager.one_step(X, Y)
        assert lg == le, f"step {s}"
        assert lg == pytest.approx(lc, rel=1e-5, abs=1e-6), f"step {s}"
        if s == 1:
            calls = ops["graph"].calls
    assert "user-defined 'cube_graph'" in graph.explain()
    pg, pe = graph.params(), eager.params()
    for name in pg:
        assert np.array_equal(pg[name], pe[name]), name
    assert ops["graph"].calls == calls, "the graph trainer called Python on replay"
    assert ops["eager"].calls == 2 * len(batches)


class Syncs(TorchCube):
    def forward(self, inputs, outputs, stream):
        super().forward(inputs, outputs, stream)
        torch.cuda.synchronize()


class RaisesInCapture(TorchCube):
    def forward(self, inputs, outputs, stream):
        super().forward(inputs, outputs, stream)
        if self.calls > 1:  # the warm-up passes; the capture raises
            raise RuntimeError("planted in capture")


def test_what_capture_refuses_ends_it_cleanly_naming_the_op():
    X, Y = np.ones((8, 3), np.float32), np.ones((8, 2), np.float32)
    t = sg.Trainer(model(Syncs(name="syncs")), sg.MeanSquaredError(), sg.SGD(0.1), device="cuda")
    t.compile((8, 3))
    with pytest.raises(sg.Error, match=r"syncs.*(graph capture forbids|not permitted|capture)"):
        t.one_step(X, Y)
    t = sg.Trainer(model(RaisesInCapture(name="raiser")), sg.MeanSquaredError(), sg.SGD(0.1), device="cuda")
    t.compile((8, 3))
    with pytest.raises(sg.Error, match=r"raiser\.forward raised RuntimeError: planted in capture"):
        t.one_step(X, Y)
    # The device is usable afterwards: a fresh trainer trains.
    ok = sg.Trainer(model(TorchCube()), sg.MeanSquaredError(), sg.SGD(0.1), device="cuda")
    ok.compile((8, 3))
    assert np.isfinite(ok.one_step(X, Y))
    torch.cuda.synchronize()
