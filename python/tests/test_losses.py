"""The elementwise losses (L1, Huber, BCE with logits) and gelu_erf from Python; with PyTorch
installed, the same loss values and gradients (one SGD step) as torch's, on the CPU backend."""
import numpy as np
import pytest

import stepgraph as sg


def one_layer(loss, X, y, lr=0.1):
    """Loss of one step and the weights after it: a single Dense(3) layer, SGD."""
    t = sg.Trainer(sg.Sequential(sg.Dense(y.shape[1], init="xavier")), loss, sg.SGD(lr), device="cpu", seed=3)
    t.compile(X.shape)
    w0 = {k: v.copy() for k, v in t.params().items()}
    return w0, t.one_step(X, y), t.params()


@pytest.mark.parametrize("loss", [sg.L1Loss(), sg.HuberLoss(0.5), sg.BinaryCrossEntropyWithLogits(),
                                  sg.HuberLoss(2.0, reduction="sum")])
def test_each_loss_trains(loss):
    r = np.random.default_rng(0)
    X = r.standard_normal((64, 5)).astype(np.float32)
    y = (X[:, :2] @ r.standard_normal((2, 2))).astype(np.float32)
    if isinstance(loss, sg.BinaryCrossEntropyWithLogits):
        y = (y > 0).astype(np.float32)
    t = sg.Trainer(sg.Sequential(sg.Dense(16, activation="gelu_erf"), sg.Dense(2)), loss, sg.Adam(1e-2), device="cpu")
    t.compile((64, 5))
    first = t.one_step(X, y)
    for _ in range(200):
        last = t.one_step(X, y)
    assert last < 0.5 * first


def test_describe_and_errors():
    assert sg.HuberLoss(0.25).describe() == "huber(delta=0.25, mean)"
    assert sg.L1Loss("sum").describe() == "l1(sum)"
    with pytest.raises(sg.InputError, match="delta must be a positive number"):
        sg.HuberLoss(-1.0)
    assert "gelu" in sg.Dense(2, activation="gelu_tanh").describe()


@pytest.mark.parametrize("name", ["l1", "huber", "bce"])
def test_loss_and_gradient_match_torch(name):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    r = np.random.default_rng(1)
    X = r.standard_normal((16, 4)).astype(np.float32)
    y = r.standard_normal((16, 3)).astype(np.float32)
    if name == "bce":
        y = r.uniform(0, 1, (16, 3)).astype(np.float32)
    ours = {"l1": sg.L1Loss(), "huber": sg.HuberLoss(0.7), "bce": sg.BinaryCrossEntropyWithLogits()}[name]
    theirs = {"l1": torch.nn.L1Loss(), "huber": torch.nn.HuberLoss(delta=0.7),
              "bce": torch.nn.BCEWithLogitsLoss()}[name]
    w0, loss, w1 = one_layer(ours, X, y)
    W = torch.tensor(w0["0.weight"], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(w0["0.bias"], dtype=torch.float64, requires_grad=True)
    out = torch.tensor(X, dtype=torch.float64) @ W.T + b
    ref = theirs(out, torch.tensor(y, dtype=torch.float64))
    ref.backward()
    assert loss == pytest.approx(ref.item(), rel=1e-5)
    np.testing.assert_allclose((w0["0.weight"] - w1["0.weight"]) / 0.1, W.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose((w0["0.bias"] - w1["0.bias"]) / 0.1, b.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_gelu_erf_is_torch_default_gelu():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    z = np.linspace(-4, 4, 17).astype(np.float32)
    x = sg.Input(17, name="z")
    # A zero-initialised layer beside it: a Trainer needs a parameter, and it adds exactly 0.
    m = sg.Model([x], sg.activation(x, "gelu_erf") + sg.Dense(17, init="zeros")(x))
    t = sg.Trainer(m, sg.MeanSquaredError(), sg.SGD(0.1), device="cpu")
    t.compile((1, 17))
    got = t.predict(z[None, :])[0]
    want = torch.nn.functional.gelu(torch.tensor(z, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
