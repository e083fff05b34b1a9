"""stepgraph.CustomLoss: a loss written in Python (numpy on the CPU, PyTorch on CUDA), its gradient
scale inferred from its CPU forward, and errors that name it."""

import numpy as np
import pytest

import stepgraph as sg


class LogCosh(sg.CustomLoss):
    def forward(self, pred, target, valid_rows, loss, dpred, stream):
        n = int(valid_rows[0])
        e = pred[:n].astype(np.float64) - target[:n]
        loss[0] = np.log(np.cosh(e)).mean()
        dpred[...] = 0
        dpred[:n] = np.tanh(e) / e.size


class SumOfSquares(sg.CustomLoss):
    def forward(self, pred, target, valid_rows, loss, dpred, stream):
        e = pred - target
        loss[0] = (e * e).sum()
        dpred[...] = 2 * e


def model():
    return sg.Sequential(sg.Dense(8, activation="tanh"), sg.Dense(3))


def test_a_python_loss_trains_and_reports_its_scale():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(16, 5)).astype(np.float32), rng.normal(size=(16, 3)).astype(np.float32)
    t = sg.Trainer(model(), LogCosh(), sg.Adam(1e-2), device="cpu", seed=1)
    t.compile((16, 5))
    first = np.log(np.cosh(t.predict(X).astype(np.float64) - y)).mean()
    l0 = t.one_step(X, y)
    assert l0 == pytest.approx(first, rel=1e-5)
    for _ in range(100):
        last = t.one_step(X, y)
    assert last < 0.5 * l0
    assert "user loss 'LogCosh'; gradient scale 0.0625 (mean over 16 rows)" in t.explain()
    assert sg.infer_grad_scale(LogCosh(), (16, 3)) == pytest.approx((1 / 16, "mean"))
    assert sg.infer_grad_scale(SumOfSquares(), (16, 3)) == (pytest.approx(1.0), "sum")
    assert sg.infer_grad_scale(sg.MeanSquaredError(), (16, 3)) == (pytest.approx(1 / 48), "mean")


def test_a_raising_loss_is_named():
    class Broken(sg.CustomLoss):
        def forward(self, pred, target, valid_rows, loss, dpred, stream):
            raise KeyError("planted")

    t = sg.Trainer(model(), Broken(), sg.Adam(1e-3), device="cpu")
    t.compile((4, 5))
    with pytest.raises(sg.Error, match=r"Broken\.forward raised KeyError: 'planted'"):
        t.one_step(np.zeros((4, 5), np.float32), np.zeros((4, 3), np.float32))


@pytest.mark.skipif(not sg.cuda_available(), reason="no usable CUDA device")
def test_a_torch_loss_on_cuda_replays_as_eager():
    torch = pytest.importorskip("torch")

    class TorchLogCosh(sg.CustomLoss):
        def forward(self, pred, target, valid_rows, loss, dpred, stream):
            with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
                p, t, v = torch.from_dlpack(pred), torch.from_dlpack(target), torch.from_dlpack(valid_rows)
                mask = (torch.arange(p.shape[0], device=p.device) < v).unsqueeze(1).to(p.dtype)
                e = (p - t) * mask
                n = v.to(p.dtype) * p.shape[1]
                torch.from_dlpack(loss).copy_((torch.log(torch.cosh(e)) * mask).sum().reshape(1) / n)
                torch.from_dlpack(dpred).copy_(torch.tanh(e) * mask / n)

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(16, 5)).astype(np.float32), rng.normal(size=(16, 3)).astype(np.float32)
    graph = sg.Trainer(model(), TorchLogCosh(), sg.Adam(1e-2), device="cuda", seed=1, mode="graph")
    eager = sg.Trainer(model(), TorchLogCosh(), sg.Adam(1e-2), device="cuda", seed=1, mode="eager")
    cpu = sg.Trainer(model(), LogCosh(), sg.Adam(1e-2), device="cpu", seed=1)
    for t in (graph, eager, cpu):
        t.compile((16, 5))
    for _ in range(10):
        lg, le, lc = graph.one_step(X, y), eager.one_step(X, y), cpu.one_step(X, y)
        assert lg == le
        assert lg == pytest.approx(lc, rel=1e-4)
