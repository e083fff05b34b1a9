"""BatchNorm from Python on the CPU backend: the running statistics are the formulas' and predict
uses them; with PyTorch installed, the same losses, parameters, running statistics and eval-mode
predictions as torch.nn.BatchNorm1d / BatchNorm2d in float64 over 10 Adam steps (features, and
NHWC images after a convolution)."""
import numpy as np
import pytest

import stepgraph as sg

STEPS = 10


def test_running_statistics_and_predict_follow_the_formulas():
    r = np.random.default_rng(0)
    X = (2 * r.standard_normal((12, 4)) + 1).astype(np.float32)
    y = r.standard_normal((12, 4)).astype(np.float32)
    t = sg.Trainer(sg.Sequential(sg.BatchNorm(momentum=0.25)), sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu")
    t.compile(X.shape)
    assert sg.BatchNorm(momentum=0.25).describe() == "batch_norm(momentum=0.25, eps=1e-05)"
    p0 = t.params()
    np.testing.assert_array_equal(p0["0.running_mean"], 0)
    np.testing.assert_array_equal(p0["0.running_var"], 1)
    np.testing.assert_array_equal(p0["0.gain"], 1)
    t.one_step(X, y)
    x = X.astype(np.float64)
    p = t.params()
    np.testing.assert_allclose(p["0.running_mean"], 0.25 * x.mean(0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(p["0.running_var"], 0.75 + 0.25 * x.var(0, ddof=1), rtol=1e-6)
    want = (x - p["0.running_mean"]) / np.sqrt(p["0.running_var"] + 1e-5) * p["0.gain"] + p["0.shift"]
    np.testing.assert_allclose(t.predict(X), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(sg.InputError, match="momentum must be in"):
        sg.BatchNorm(momentum=0.0)
    assert sg.BatchNorm(0.2, 1e-3).momentum == 0.2 and sg.BatchNorm(0.2, 1e-3).eps == 1e-3


def mlp_pair(torch):
    ours = sg.Sequential(sg.Dense(16, activation="tanh"), sg.BatchNorm(), sg.Dense(3))
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.BatchNorm1d(16),
                                 torch.nn.Linear(16, 3))
    return ours, theirs, (32, 5), lambda X: X


def cnn_pair(torch):
    # No convolution bias: before a batch norm its gradient is zero but for rounding.
    ours = sg.Sequential(sg.Conv2d(4, kernel=3, padding=1, bias=False), sg.BatchNorm(momentum=0.2), sg.GlobalAvgPool(),
                         sg.Dense(3))
    ours.set_input_shape((5, 5, 3))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4, momentum=0.2),
                                 torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 3))
    # Rows of NHWC pixels -> torch's NCHW.
    return ours, theirs, (16, 75), lambda X: X.reshape(-1, 5, 5, 3).permute(0, 3, 1, 2)


def copy_into_torch(torch, params, theirs):
    """stepgraph's initial parameters into the torch model (layers in order; filters KRSC -> KCRS)."""
    mods = [m for m in theirs if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d, torch.nn.BatchNorm1d,
                                                torch.nn.BatchNorm2d))]
    names = sorted({k.split(".")[0] for k in params}, key=int)
    assert len(names) == len(mods)
    pairs = []
    with torch.no_grad():
        for name, m in zip(names, mods):
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                fields = {"gain": m.weight, "shift": m.bias, "running_mean": m.running_mean, "running_var": m.running_var}
            else:
                fields = {"weight": m.weight}
                if m.bias is not None:
                    fields["bias"] = m.bias
            for local, tensor in fields.items():
                v = params[f"{name}.{local}"]
                if isinstance(m, torch.nn.Conv2d):
                    v = v.transpose(0, 3, 1, 2)
                tensor.copy_(torch.from_numpy(np.ascontiguousarray(v)).double())
                pairs.append((f"{name}.{local}", tensor, isinstance(m, torch.nn.Conv2d)))
    return pairs


@pytest.mark.parametrize("make", [mlp_pair, cnn_pair], ids=["features", "nhwc"])
def test_matches_torch_batch_norm_in_float64(make):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    ours, theirs, shape, to_torch = make(torch)
    theirs = theirs.double()
    t = sg.Trainer(ours, sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu", seed=4)
    t.compile(shape)
    pairs = copy_into_torch(torch, t.params(), theirs)
    opt = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    r = np.random.default_rng(5)
    B = shape[0]
    for s in range(STEPS):
        X = (1.5 * r.standard_normal(shape) + 0.5).astype(np.float32)
        y = r.standard_normal((B, 3)).astype(np.float32)
        theirs.train()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(theirs(to_torch(torch.from_numpy(X).double())),
                                            torch.from_numpy(y).double())
        loss.backward()
        opt.step()
        got = t.one_step(X, y)
        assert abs(got - loss.item()) <= 1e-5 * abs(loss.item()) + 1e-6, (s, got, loss.item())
    got = t.params()
    for name, tensor, conv in pairs:
        want = tensor.detach().numpy()
        if conv:
            want = want.transpose(0, 2, 3, 1)
        err = np.max(np.abs(got[name] - want))
        assert err <= 1e-5 * max(np.max(np.abs(want)), 1e-30), (name, err, np.max(np.abs(want)))
    # Eval mode: the running statistics, on rows the steps never saw.
    theirs.eval()
    Xe = (r.standard_normal(shape) - 0.3).astype(np.float32)
    with torch.no_grad():
        want = theirs(to_torch(torch.from_numpy(Xe).double())).numpy()
    pred = t.predict(Xe)
    assert np.max(np.abs(pred - want)) <= 1e-5 * np.max(np.abs(want)) + 1e-6
