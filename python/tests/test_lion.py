"""sg.Lion, the built-in optimizer written as a user-defined update rule, against a numpy Lion
on a linear least-squares model whose gradient is known in closed form."""

import numpy as np
import pytest

import stepgraph as sg


def numpy_lion(W, b, m_w, m_b, X, y, lr, beta1, beta2, wd):
    pred = X @ W.T + b
    d = 2 * (pred - y) / pred.size  # d mean((pred - y)^2) / d pred
    for p, g, m in ((W, d.T @ X, m_w), (b, d.sum(0), m_b)):
        c = beta1 * m + (1 - beta1) * g
        p *= 1 - lr * wd
        p -= lr * np.sign(c)
        m *= beta2
        m += (1 - beta2) * g


def test_lion_matches_a_numpy_lion():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(32, 4)).astype(np.float32)
    y = rng.normal(size=(32, 2)).astype(np.float32)
    t = sg.Trainer(sg.Sequential(sg.Dense(2)), sg.MeanSquaredError(), sg.Lion(1e-2, weight_decay=0.1), device="cpu")
    t.compile((32, 4))
    p = {k: v.astype(np.float64) for k, v in t.params().items()}
    W, b = p["0.weight"], p["0.bias"]
    m_w, m_b = np.zeros_like(W), np.zeros_like(b)
    for _ in range(6):
        t.one_step(X, y)
        numpy_lion(W, b, m_w, m_b, X.astype(np.float64), y.astype(np.float64), 1e-2, 0.9, 0.99, 0.1)
    got = t.params()
    np.testing.assert_allclose(got["0.weight"], W, atol=1e-5)
    np.testing.assert_allclose(got["0.bias"], b, atol=1e-5)
    assert "lion(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1" in repr(t)


def test_lion_refuses_bad_betas():
    with pytest.raises(sg.InputError, match="beta1 must be in"):
        sg.Lion(1e-3, beta1=1.5)
