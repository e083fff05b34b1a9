"""The elementwise losses (L1, Huber, BCE with logits), cross-entropy's label smoothing and class
weights, and gelu_erf from Python; with PyTorch installed, the same loss values and gradients (one
SGD step) as torch's, on the CPU backend."""
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


# ---- softmax cross-entropy: label smoothing and class weights -------------------------------

CE_CASES = [  # (label_smoothing, class weights?, reduction, per-token labels with -1 ignored?)
    (0.1, False, "mean", False), (0.25, False, "sum", True), (0.0, True, "mean", False), (0.0, True, "sum", True),
    (0.2, True, "mean", False), (0.2, True, "mean", True), (0.3, True, "sum", False), (0.15, True, "sum", True),
]
CE_WEIGHTS = [0.5, 2.0, 0.0, 1.5, 1.0]


def ce_case(eps, weighted, reduction, tokens):
    """One SGD step of a Dense(5) last layer under the loss: (loss, dW, db, X, y, W0, b0), X the
    layer's input. Token labels [6, 4] (every third without a target) read an Embedding first."""
    r = np.random.default_rng(7)
    loss = sg.SoftmaxCrossEntropy(reduction, label_smoothing=eps, class_weights=CE_WEIGHTS if weighted else None)
    if tokens:
        ids = r.integers(0, 7, (6, 4)).astype(np.float32)
        y = r.integers(0, 5, (6, 4)).astype(np.int32)
        y.reshape(-1)[1::3] = -1  # positions without a target
        model, last = sg.Sequential(sg.Embedding(7, 3), sg.Dense(5, init="xavier")), "1."
    else:
        ids = r.standard_normal((12, 3)).astype(np.float32)
        y = r.integers(0, 5, 12).astype(np.int32)
        model, last = sg.Sequential(sg.Dense(5, init="xavier")), "0."
    t = sg.Trainer(model, loss, sg.SGD(0.1), device="cpu", seed=3)
    t.compile(ids.shape)
    w0 = {k: v.copy() for k, v in t.params().items()}
    X = w0["0.table"][ids.astype(np.int64)] if tokens else ids
    value = t.one_step(ids, y)
    w1 = t.params()
    dW = (w0[last + "weight"] - w1[last + "weight"]) / 0.1
    db = (w0[last + "bias"] - w1[last + "bias"]) / 0.1
    return value, dW, db, X, y, w0[last + "weight"], w0[last + "bias"]


def documented_ce(z, y, eps, w, reduction):
    """torch's documented formula in float64: per labelled row sum_c w_c q_c (-log p_c), q = (1 - eps)
    onehot(y) + eps / C; the mean divides by the summed w_y of the labelled rows."""
    z, y = z.reshape(-1, z.shape[-1]).astype(np.float64), y.reshape(-1)
    keep = y >= 0
    z, y = z[keep], y[keep]
    C = z.shape[1]
    logp = z - z.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    q = np.full(z.shape, eps / C)
    q[np.arange(len(y)), y] += 1 - eps
    total = -(w[None, :] * q * logp).sum()
    return total / w[y].sum() if reduction == "mean" else total


@pytest.mark.parametrize("eps,weighted,reduction,tokens", CE_CASES)
def test_cross_entropy_smoothing_and_weights_match_the_documented_formula(eps, weighted, reduction, tokens):
    value, _, _, X, y, W, b = ce_case(eps, weighted, reduction, tokens)
    w = np.array(CE_WEIGHTS if weighted else [1.0] * 5)
    assert value == pytest.approx(documented_ce(X.astype(np.float64) @ W.T + b, y, eps, w, reduction), rel=1e-5)


@pytest.mark.parametrize("eps,weighted,reduction,tokens", CE_CASES)
def test_cross_entropy_smoothing_and_weights_match_torch(eps, weighted, reduction, tokens):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    value, dW, db, X, y, W0, b0 = ce_case(eps, weighted, reduction, tokens)
    W = torch.tensor(W0, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(b0, dtype=torch.float64, requires_grad=True)
    out = (torch.tensor(X, dtype=torch.float64) @ W.T + b).reshape(-1, 5)
    weight = torch.tensor(CE_WEIGHTS, dtype=torch.float64) if weighted else None
    ref = torch.nn.functional.cross_entropy(out, torch.tensor(y.reshape(-1), dtype=torch.int64), weight=weight,
                                            ignore_index=-1, reduction=reduction, label_smoothing=eps)
    ref.backward()
    assert value == pytest.approx(ref.item(), rel=1e-5)
    np.testing.assert_allclose(dW, W.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(db, b.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_cross_entropy_options_describe_and_errors():
    loss = sg.SoftmaxCrossEntropy("sum", label_smoothing=0.1, class_weights=[1.0, 2.0])
    assert loss.describe() == "softmax_cross_entropy(label_smoothing=0.1, class_weights[2], sum)"
    assert loss.label_smoothing == pytest.approx(0.1) and loss.class_weights == [1.0, 2.0]
    assert sg.SoftmaxCrossEntropy().describe() == "softmax_cross_entropy(mean)"
    with pytest.raises(sg.InputError, match=r"label_smoothing must be in \[0, 1\), got 1"):
        sg.SoftmaxCrossEntropy(label_smoothing=1.0)
    with pytest.raises(sg.InputError, match="class weight 1 must be a finite number >= 0, got -1"):
        sg.SoftmaxCrossEntropy(class_weights=[1.0, -1.0])
    t = sg.Trainer(sg.Dense(4), sg.SoftmaxCrossEntropy(class_weights=[1.0, 2.0]), sg.SGD(0.1), device="cpu")
    with pytest.raises(sg.Error, match="2 class weights, but the logits .* have 4 classes"):
        t.compile((8, 3))
