"""stepgraph.CustomOptimizer: an update rule written in Python with declared state (numpy on the
CPU, PyTorch on CUDA), checkpointed and restored, the learning rate read from the step scalars."""

import numpy as np
import pytest

import stepgraph as sg


class Signum(sg.CustomOptimizer):
    state = {"momentum": 0.5}  # not zero: the declared start must be there before the first step

    def __init__(self, lr, beta=0.8, **kw):
        super().__init__(lr, **kw)
        self.beta = beta

    def update(self, params, grads, states, hyper, sched, stream):
        lr = sched[0]
        for p, g, (m,) in zip(params, grads, states):
            m[...] = self.beta * m + (1 - self.beta) * g
            p -= lr * np.sign(m)


def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(32, 4)).astype(np.float32), rng.normal(size=(32, 2)).astype(np.float32)


def test_a_python_rule_matches_its_numpy_reference(tmp_path):
    X, y = data()
    t = sg.Trainer(sg.Sequential(sg.Dense(2)), sg.MeanSquaredError(), Signum(1e-2), device="cpu")
    t.compile((32, 4))
    p = {k: v.astype(np.float64) for k, v in t.params().items()}
    W, b = p["0.weight"], p["0.bias"]
    mw, mb = np.full_like(W, 0.5), np.full_like(b, 0.5)
    for _ in range(5):
        t.one_step(X, y)
        d = 2 * (X @ W.T + b - y) / y.size
        for prm, g, m in ((W, d.T @ X, mw), (b, d.sum(0), mb)):
            m[...] = 0.8 * m + 0.2 * g
            prm -= 1e-2 * np.sign(m)
    np.testing.assert_allclose(t.params()["0.weight"], W, atol=1e-5)
    np.testing.assert_allclose(t.params()["0.bias"], b, atol=1e-5)
    assert "Signum(lr=0.01" in repr(t)
    # The state is checkpointed by name and restored.
    path = tmp_path / "signum.safetensors"
    t.save(path)
    saved = t.params()
    t.one_step(X, y)
    t.load(path)
    assert t.step == 5
    np.testing.assert_array_equal(t.params()["0.weight"], saved["0.weight"])


def test_a_raising_rule_is_named():
    class Broken(sg.CustomOptimizer):
        def update(self, params, grads, states, hyper, sched, stream):
            raise ValueError("planted")

    X, y = data()
    t = sg.Trainer(sg.Sequential(sg.Dense(2)), sg.MeanSquaredError(), Broken(1e-3), device="cpu")
    t.compile((32, 4))
    with pytest.raises(sg.Error, match=r"Broken\.update raised ValueError: planted"):
        t.one_step(X, y)


@pytest.mark.skipif(not sg.cuda_available(), reason="no usable CUDA device")
def test_a_torch_rule_on_cuda_replays_as_eager_and_follows_the_schedule():
    torch = pytest.importorskip("torch")

    class TorchSignum(sg.CustomOptimizer):
        state = {"momentum": 0.5}

        def update(self, params, grads, states, hyper, sched, stream):
            with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
                lr = torch.from_dlpack(sched)[0]  # on the device: the schedule reaches replays
                for p, g, (m,) in zip(params, grads, states):
                    p, g, m = torch.from_dlpack(p), torch.from_dlpack(g), torch.from_dlpack(m)
                    m.mul_(0.8).add_(g, alpha=0.2)
                    p.sub_(lr * torch.sign(m))

    X, y = data()
    sched = sg.Schedule.cosine(2, 12)
    graph = sg.Trainer(sg.Sequential(sg.Dense(2)), sg.MeanSquaredError(), TorchSignum(1e-2, schedule=sched),
                       device="cuda", mode="graph")
    eager = sg.Trainer(sg.Sequential(sg.Dense(2)), sg.MeanSquaredError(), TorchSignum(1e-2, schedule=sched),
                       device="cuda", mode="eager")
    cpu = sg.Trainer(sg.Sequential(sg.Dense(2)), sg.MeanSquaredError(), Signum(1e-2, schedule=sched), device="cpu")
    for t in (graph, eager, cpu):
        t.compile((32, 4))
    for _ in range(10):
        for t in (graph, eager, cpu):
            t.one_step(X, y)
    for name, v in cpu.params().items():
        np.testing.assert_array_equal(graph.params()[name], eager.params()[name])
        np.testing.assert_allclose(graph.params()[name], v, atol=1e-5)
