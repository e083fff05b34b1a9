"""Model graphs from Python: the functional API (Input, layers called on symbolic tensors,
operators, concat, slicing), Model, and a Trainer of several named, weighted losses."""
import numpy as np
import pytest

import stepgraph as sg


def issue_model():
    x1, x2 = sg.Input(3, name="x1"), sg.Input(3, name="x2")
    t = sg.Input(2, name="t")
    enc = sg.Dense(8, activation="tanh", name="enc")  # one layer object called twice: shared weights
    a, b = enc(x1), enc(x2)
    c = sg.concat([a * b, a - b, t], axis=-1)
    u = sg.Dense(1, name="u_head")(c) + a.sum(axis=-1, keepdims=True)
    v = sg.Dense(2, name="v_head")(sg.relu(c))
    return sg.Model(inputs=[x1, x2, t], outputs={"u": u, "v": v})


def batch(rows, seed):
    r = np.random.default_rng(seed)
    X = {k: r.standard_normal((rows, n)).astype(np.float32) for k, n in (("x1", 3), ("x2", 3), ("t", 2))}
    Y = {"u": r.standard_normal((rows, 1)).astype(np.float32), "v": r.standard_normal((rows, 2)).astype(np.float32)}
    return X, Y


def test_the_issue_example_trains_with_named_terms():
    model = issue_model()
    assert model.input_names == ["x1", "x2", "t"] and model.output_names == ["u", "v"]
    assert model.output_shape("v") == (2,)
    trainer = sg.Trainer(model, {"u": sg.MeanSquaredError(), "v": (sg.MeanSquaredError(), 0.5)}, sg.Adam(1e-2),
                         device="cpu")
    trainer.compile(32)
    assert sorted(trainer.params()) == ["enc.bias", "enc.weight", "u_head.bias", "u_head.weight", "v_head.bias",
                                        "v_head.weight"]
    X, Y = batch(32, 0)
    first = trainer.one_step(X, Y)
    terms = trainer.loss_terms
    assert set(terms) == {"u", "v"}
    assert first == pytest.approx(terms["u"] + 0.5 * terms["v"], rel=1e-5)
    for _ in range(200):
        last = trainer.one_step(X, Y)
    assert last < 0.5 * first
    out = trainer.predict(X)
    assert out["u"].shape == (32, 1) and out["v"].shape == (32, 2)
    mse_u = float(np.mean((out["u"] - Y["u"]) ** 2))
    e = trainer.evaluate(X, Y)
    assert e.terms["u"] == pytest.approx(mse_u, rel=1e-4)
    assert e.loss == pytest.approx(e.terms["u"] + 0.5 * e.terms["v"], rel=1e-6)


def test_operators_slices_and_shapes():
    x = sg.Input(6, name="x")
    assert x[:, 1:4].shape == (3,)
    assert x[:, -2:].shape == (2,)
    assert (2.0 * x - 1.0).shape == (6,)
    assert (1.0 - x / 2).shape == (6,)
    assert (x - x.mean(axis=-1, keepdims=True)).shape == (6,)
    lo, hi = sg.split(x, [2, 4])
    assert hi.shape == (4,)
    img = sg.Input((4, 4, 1), name="img")
    assert sg.Flatten()(img).shape == (16,)


def test_a_one_input_model_takes_arrays_like_a_sequential():
    x = sg.Input(4, name="x")
    h = sg.Dense(16, activation="tanh")(x)
    model = sg.Model([x], sg.Dense(1)(h) + x[:, 0:1])
    t = sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu")
    t.compile((8, 4))
    r = np.random.default_rng(1)
    X = r.standard_normal((8, 4)).astype(np.float32)
    y = X[:, :1] + np.sin(X[:, 1:2])
    first = t.one_step(X, y)
    for _ in range(100):
        last = t.one_step(X, y)
    assert last < first
    assert t.predict(X).shape == (8, 1)


def test_bad_graphs_and_batches_say_what_and_where():
    x, y = sg.Input(4, name="x"), sg.Input(3, name="y")
    with pytest.raises(sg.InputError, match=r"'x' \[4\], 'y' \[3\] do not broadcast"):
        x + y
    with pytest.raises(sg.InputError, match="batch axis cannot be sliced"):
        x[1:2]
    conv = sg.Conv2d(2)
    conv.name = "head"
    with pytest.raises(sg.InputError, match=r"layer 'head' applied to 'x' \[4\]"):
        conv(x)
    with pytest.raises(sg.InputError, match="depends on input 'y', which is not among the model's inputs"):
        sg.Model([x], sg.Dense(1)(y))
    model = issue_model()
    with pytest.raises(sg.InputError, match="dict by output name"):
        sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-3), device="cpu")
    with pytest.raises(sg.InputError, match="no output of that name"):
        sg.Trainer(model, {"w": sg.MeanSquaredError()}, sg.Adam(1e-3), device="cpu")
    t = sg.Trainer(model, {"u": sg.MeanSquaredError(), "v": sg.MeanSquaredError()}, sg.Adam(1e-3), device="cpu")
    with pytest.raises(sg.InputError, match="takes the batch size"):
        t.compile((32, 8))
    t.compile(8)
    X, Y = batch(8, 2)
    del X["t"]
    with pytest.raises(sg.Error, match="input 't' is missing"):
        t.one_step(X, Y)
    X, Y = batch(8, 2)
    Y["v"] = Y["v"][:, :1]
    with pytest.raises(sg.Error, match=r"target 'v' has shape \[8, 1\] but output 'v' needs \[8, 2\]"):
        t.one_step(X, Y)
    with pytest.raises(sg.InputError, match="expected a dict of arrays by name"):
        t.one_step(np.zeros((8, 8), np.float32), Y)


def test_dropout_in_a_graph_model_trains_and_predicts_without_it():
    x = sg.Input(5, name="x")
    h = sg.Dropout(0.5)(sg.Dense(32, activation="tanh", name="h")(x))
    model = sg.Model([x], {"y": sg.Dense(2, name="out")(h)})
    t = sg.Trainer(model, {"y": sg.MeanSquaredError()}, sg.Adam(1e-2), device="auto", seed=1)
    t.compile(16)
    rng = np.random.default_rng(0)
    X, Y = {"x": rng.normal(size=(16, 5)).astype(np.float32)}, {"y": rng.normal(size=(16, 2)).astype(np.float32)}
    before = t.evaluate(X, Y).loss
    assert t.evaluate(X, Y).loss == before
    np.testing.assert_array_equal(t.predict(X)["y"], t.predict(X)["y"])
    assert abs(t.one_step(X, Y) - before) > 1e-4  # the step's forward drops units
    assert sg.Dropout(0.25).p == 0.25
    with pytest.raises(sg.InputError, match=r"p must be in \[0, 1\)"):
        sg.Dropout(1.0)


def test_a_device_resident_data_set_by_name_trains_as_fed_batches():
    # Without shuffling, step s of a resident data set of 64 rows in batches of 16 is rows
    # [16 (s % 4), 16 (s % 4) + 16): the same batches fed from the host train identically.
    X, Y = batch(64, 3)
    terms = {"u": sg.MeanSquaredError(), "v": (sg.MeanSquaredError(), 0.5)}
    resident = sg.Trainer(issue_model(), terms, sg.Adam(1e-2), device="cpu", seed=4)
    fed = sg.Trainer(issue_model(), terms, sg.Adam(1e-2), device="cpu", seed=4)
    fed.compile(16)
    resident.set_dataset(X, Y, 16, shuffle=False)
    assert resident.is_resident
    for s in range(6):
        rows = slice(16 * (s % 4), 16 * (s % 4) + 16)
        resident.launch()
        lf = fed.one_step({k: v[rows] for k, v in X.items()}, {k: v[rows] for k, v in Y.items()})
        assert resident.loss == pytest.approx(lf, rel=1e-6), s
        assert resident.loss_terms == pytest.approx(fed.loss_terms, rel=1e-6)
    with pytest.raises(sg.Error, match="data set: the target of output 'v' is missing"):
        resident.set_dataset(X, {"u": Y["u"]}, 16)
    with pytest.raises(sg.InputError, match="expected a dict of arrays by name"):
        resident.set_dataset(X["x1"], Y["u"], 16)


def test_cuda_tensors_by_name_are_checked_before_any_copy():
    from conftest import FakeCudaTensor

    t = sg.Trainer(issue_model(), {"u": sg.MeanSquaredError(), "v": sg.MeanSquaredError()}, sg.Adam(1e-3), device="cpu")
    t.compile(8)
    X, Y = batch(8, 1)
    Xd = {k: FakeCudaTensor(v.shape) for k, v in X.items()}
    with pytest.raises(sg.InputError, match=r"one_step: inputs\['x1'\]: the trainer runs on cpu, so it takes host arrays"):
        t.one_step(Xd, {k: FakeCudaTensor(v.shape) for k, v in Y.items()})
    with pytest.raises(sg.InputError, match=r"set_batch: inputs\['x1'\] is float32 \[8, 3\] on cuda:0 but "
                                            r"targets\['u'\] is float32 \[8, 1\] on cpu: pass every array"):
        t.set_batch(Xd, Y)
    with pytest.raises(sg.InputError, match=r"predict: inputs\['x1'\]: expected a host array"):
        t.predict(Xd)
    assert t.launch_count == 0


def test_cuda_tensors_by_name_train_as_host_arrays():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not (sg.cuda_available() and torch.cuda.is_available()):
        pytest.skip("needs a GPU")
    terms = {"u": sg.MeanSquaredError(), "v": (sg.MeanSquaredError(), 0.5)}
    host = sg.Trainer(issue_model(), terms, sg.Adam(1e-2), device="cuda", seed=2)
    dev = sg.Trainer(issue_model(), terms, sg.Adam(1e-2), device="cuda", seed=2)
    for t in (host, dev):
        t.compile(16)
    for s in range(4):
        X, Y = batch(16 if s < 3 else 12, 10 + s)  # the last a smaller batch: its own compiled shape
        Xd = {k: torch.from_numpy(v).cuda() for k, v in X.items()}
        Yd = {k: torch.from_numpy(v).cuda() for k, v in Y.items()}
        assert dev.one_step(Xd, Yd) == host.one_step(X, Y), s
    assert dev.loss_terms == host.loss_terms
    for name, v in host.params().items():
        np.testing.assert_array_equal(dev.params()[name], v)
    with pytest.raises(sg.InputError, match=r"targets\['v'\]: a CUDA tensor must be C-contiguous"):
        dev.one_step(Xd, {"u": Yd["u"], "v": torch.zeros(2, 12, device="cuda").t()})
    with pytest.raises(sg.Error, match=r"batch target 'v' has shape \[12, 1\] but output 'v' needs \[12, 2\]"):
        dev.one_step(Xd, {"u": Yd["u"], "v": Yd["u"].clone()})
