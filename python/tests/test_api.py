"""The Python API on the CPU backend: training, parameters, checkpoints, errors, and the image and
sequence layers (whole runs: test_runs.py)."""

import numpy as np
import pytest

import stepgraph as sg
from conftest import DLPackOnly, FakeCudaTensor

D, C, B = 16, 4, 32


def mlp(hidden=32, classes=C):
    return sg.Sequential(sg.Dense(hidden, activation="relu", init="he"), sg.Dense(classes, init="xavier"))


def trainer(opt=None, seed=0, compile=True, **kw):
    t = sg.Trainer(mlp(), sg.SoftmaxCrossEntropy(), opt or sg.Adam(1e-2), device="cpu", seed=seed, **kw)
    if compile:
        t.compile((B, D))
    return t


def batches(X, y, steps, batch=B):
    n = X.shape[0] // batch
    for s in range(steps):
        i = (s % n) * batch
        yield X[i : i + batch], y[i : i + batch]


def softmax_ce(logits, labels):
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(labels)), labels].mean())


# ---- building and training ----------------------------------------------------------------------


def test_model_objects_describe_themselves():
    m = sg.Sequential(sg.Dense(256, activation="relu", init="he"), sg.Dense(11, init="xavier"))
    assert len(m) == 2
    assert isinstance(m[0], sg.Dense) and m[0].units == 256
    assert "dense(256, relu, init=he" in repr(m)
    assert sg.Sequential([sg.Dense(3)]).describe() == sg.Sequential(sg.Dense(3)).describe()
    assert "normal(0.05)" in sg.Dense(4, init="normal(0.05)").describe()
    assert "normal(0.5)" in sg.Dense(4, init=sg.Init.normal(0.5)).describe()
    assert sg.Init.parse("zeros").kind == "zeros"
    r = sg.Residual(sg.Sequential(sg.Dense(8, activation="gelu"), sg.Dense(8, init="zeros")))
    assert "residual" in r.describe()
    assert sg.Sequential(sg.Dense(4)).add(sg.Dense(2)).describe().count("dense") == 2
    assert sg.SoftmaxCrossEntropy().task == "classification"
    assert sg.MeanSquaredError("sum").reduction == "sum"
    assert "momentum=0.9" in sg.SGD(0.1, momentum=0.9).describe()
    assert sg.AdamW().weight_decay == pytest.approx(1e-2)
    assert sg.Adam(3e-4).lr == pytest.approx(3e-4)


def test_schedules():
    s = sg.Schedule.step(10, 0.5)
    assert s.kind == "step" and s.lr_at(1.0, 1) == 1.0 and s.lr_at(1.0, 11) == pytest.approx(0.5)
    c = sg.Schedule.cosine(10, 100, 0.1)
    assert c.lr_at(1.0, 5) == pytest.approx(0.5)
    assert c.lr_at(1.0, 100) == pytest.approx(0.1)
    assert sg.Schedule.constant().lr_at(0.3, 1000) == pytest.approx(0.3)
    assert "cosine" in sg.SGD(0.1, schedule=c).schedule.describe()


def test_training_reduces_the_loss(data):
    X, y = data
    t = trainer()
    assert t.is_compiled and t.input_shape == (B, D) and t.output_shape == (B, C)
    losses = [t.one_step(xb, yb) for xb, yb in batches(X, y, 120)]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-10:]) < 0.25 * np.mean(losses[:5])
    r = t.evaluate(X, y)
    assert isinstance(r, sg.EvalResult) and r.count == len(X) and r.accuracy > 0.95
    assert t.step == 120 and t.launch_count == 120


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda: sg.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=1e-4, schedule=sg.Schedule.step(20, 0.5)),
        lambda: sg.SGD(0.1),
        lambda: sg.Adam(1e-2, schedule=sg.Schedule.cosine(5, 50)),
        lambda: sg.AdamW(1e-2, weight_decay=1e-2),
    ],
    ids=["sgd-nesterov-step", "sgd", "adam-cosine", "adamw"],
)
def test_every_optimizer_trains(data, make_opt):
    X, y = data
    t = trainer(make_opt())
    losses = [t.one_step(xb, yb) for xb, yb in batches(X, y, 50)]
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_regression_with_mse():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(256, 8)).astype(np.float32)
    w = rng.normal(size=(8, 2))
    Y = (X @ w).astype(np.float32)
    t = sg.Trainer(sg.Sequential(sg.Dense(32, activation="tanh"), sg.Dense(2)), sg.MeanSquaredError(),
                   sg.Adam(1e-2), device="cpu")
    t.compile((64, 8))
    first = t.one_step(X[:64], Y[:64])
    for i in range(200):
        j = (i % 4) * 64
        last = t.one_step(X[j : j + 64], Y[j : j + 64].astype(np.float64))  # float64 targets converted
    assert last < 0.2 * first
    # [N] targets for a single-output model
    t1 = sg.Trainer(sg.Dense(1), sg.MeanSquaredError(), sg.SGD(0.1), device="cpu")
    t1.compile((64, 8))
    assert np.isfinite(t1.one_step(X[:64], Y[:64, 0]))
    r = t.evaluate(X, Y)
    assert r.accuracy == 0 and r.count == 256


def test_set_batch_launch_logits_and_views(data):
    X, y = data
    t = trainer()
    t.set_batch(X[:B], y[:B])
    t.launch()
    loss = t.loss
    assert t.launch_count == 1
    logits = t.logits
    assert logits.shape == (B, C) and logits.dtype == np.float32
    # the step's loss is the forward of the parameters before the update: compare with numpy
    t2 = trainer()
    np.testing.assert_allclose(softmax_ce(t2.predict(X[:B]), y[:B]), loss, rtol=1e-5)
    np.testing.assert_array_equal(t.logits_view(), logits)
    np.testing.assert_array_equal(t.tensor_view("input"), X[:B])
    np.testing.assert_array_equal(t.tensor_view("target"), y[:B])
    assert t.output_name in t.explain()
    # parameter views are live and writable
    views = t.param_views()
    assert list(views) == list(t.params())
    views["1.bias"][:] = 7.0
    np.testing.assert_array_equal(t.params()["1.bias"], np.full(C, 7.0, np.float32))
    assert t.device_ptr("input") != 0
    with pytest.raises(sg.Error, match="no tensor named"):
        t.tensor_view("nope")


def test_one_step_async_and_loss(data):
    X, y = data
    a, b = trainer(), trainer()
    for xb, yb in batches(X, y, 5):
        la = a.one_step(xb, yb)
        b.one_step_async(xb, yb)
        assert b.loss == la
    b.synchronize()


def test_inputs_any_strides_lists_and_dlpack(data):
    X, y = data
    ref = trainer()
    expected = [ref.one_step(xb, yb) for xb, yb in batches(X, y, 3)]
    # Fortran order, int32 labels, DLPack-only objects, Python lists, uint8 labels
    t = trainer()
    got = []
    for i, (xb, yb) in enumerate(batches(X, y, 3)):
        if i == 0:
            got.append(t.one_step(np.asfortranarray(xb), yb.astype(np.int32)))
        elif i == 1:
            got.append(t.one_step(DLPackOnly(xb), DLPackOnly(yb)))
        else:
            got.append(t.one_step(xb.tolist(), yb.astype(np.uint8).tolist()))
    assert got == expected
    # a strided view (every other column of a wider array) equals its contiguous copy
    wide = np.repeat(X[:B], 2, axis=1)
    p1 = trainer().predict(wide[:, ::2])
    p2 = trainer().predict(np.ascontiguousarray(wide[:, ::2]))
    np.testing.assert_array_equal(p1, p2)
    # float64 X is converted to float32
    np.testing.assert_array_equal(trainer().predict(X[:5].astype(np.float64)), trainer().predict(X[:5]))


def test_predict_and_evaluate(data):
    X, y = data
    t = trainer()
    for xb, yb in batches(X, y, 30):
        t.one_step(xb, yb)
    before = t.params()
    n = 100  # not a multiple of the batch
    p = t.predict(X[:n])
    assert p.shape == (n, C)
    r = t.evaluate(X[:n], y[:n])
    assert r.count == n
    assert r.accuracy == pytest.approx(np.mean(p.argmax(axis=1) == y[:n]))
    assert r.loss == pytest.approx(softmax_ce(p, y[:n]), rel=1e-5)
    for k, v in t.params().items():
        np.testing.assert_array_equal(v, before[k])  # no update


# ---- parameters and checkpoints ---------------------------------------------------------------------


def test_params_round_trip(data):
    X, y = data
    t = trainer(seed=1)
    p = t.params()
    assert list(p) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert p["0.weight"].shape == (32, D) and p["0.bias"].shape == (32,)
    assert p["1.weight"].shape == (C, 32) and all(v.dtype == np.float32 for v in p.values())
    # another seed gives other parameters; set_params makes the two trainers identical
    u = trainer(seed=2)
    assert not np.array_equal(u.params()["0.weight"], p["0.weight"])
    u.set_params(p)
    for k, v in u.params().items():
        np.testing.assert_array_equal(v, p[k])
    for xb, yb in batches(X, y, 5):
        assert t.one_step(xb, yb) == u.one_step(xb, yb)
    # partial updates, float64 values converted
    w = np.full((C,), 0.5)
    u.set_params({"1.bias": w})
    np.testing.assert_array_equal(u.params()["1.bias"], w.astype(np.float32))
    assert set(u.state()) >= set(p) | {"optim.step"}


def test_set_params_errors_name_the_parameters():
    t = trainer()
    before = t.params()
    with pytest.raises(ValueError, match=r"no parameter named '2.weight' \(parameters: 0.weight, 0.bias, 1.weight, 1.bias\)"):
        t.set_params({"0.bias": np.zeros(32), "2.weight": np.zeros((3, 3))})
    with pytest.raises(ValueError, match=r"'0.weight' must be f32 \[32, 16\], got float32 \[16, 32\]"):
        t.set_params({"1.bias": np.zeros(C, np.float32), "0.weight": np.zeros((D, 32), np.float32)})
    with pytest.raises(ValueError, match="float32"):
        t.set_params({"0.bias": np.zeros(32, np.int32)})
    with pytest.raises(ValueError, match="strings"):
        t.set_params({0: np.zeros(32)})
    with pytest.raises(ValueError, match="dict"):
        t.set_params([1, 2])
    for k, v in t.params().items():  # nothing was written
        np.testing.assert_array_equal(v, before[k])
    with pytest.raises(sg.Error, match="call compile first"):
        trainer(compile=False).params()


def test_save_load_round_trip_and_bitwise_resume(tmp_path, data):
    X, y = data
    steps = list(batches(X, y, 20))
    a = trainer(sg.AdamW(1e-2), seed=3)
    for xb, yb in steps[:10]:
        a.one_step(xb, yb)
    ckpt = tmp_path / "ck.safetensors"
    a.save(ckpt)  # a pathlib.Path
    rest_a = [a.one_step(xb, yb) for xb, yb in steps[10:]]

    b = trainer(sg.AdamW(1e-2), seed=99)
    b.load(str(ckpt))
    assert b.step == 10 and b.seed == 3
    rest_b = [b.one_step(xb, yb) for xb, yb in steps[10:]]
    assert rest_a == rest_b  # bitwise
    for k, v in a.state().items():
        np.testing.assert_array_equal(v, b.state()[k], err_msg=k)

    with pytest.raises(sg.Error, match="cannot open"):
        b.load(tmp_path / "missing.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(sg.Error):
        b.load(tmp_path / "bad.safetensors")
    other = sg.Trainer(sg.Sequential(sg.Dense(8), sg.Dense(C)), sg.SoftmaxCrossEntropy(), sg.AdamW(), device="cpu")
    other.compile((B, D))
    with pytest.raises(sg.Error):
        other.load(ckpt)


def test_explain_counts_invalidate_and_lr(data):
    X, y = data
    t = trainer()
    text = t.explain()
    assert "memory plan" in text and "step program" in text
    assert t.launch_count == 0 and t.compile_count == 1 and t.graph_nodes == 0
    t.one_step(X[:B], y[:B])
    t.one_step(X[B : 2 * B], y[B : 2 * B])
    assert t.launch_count == 2 and t.capture_count == 0  # the CPU has no graph capture
    p = t.params()
    t.invalidate()
    assert not t.is_compiled
    with pytest.raises(sg.Error, match="not compiled"):
        t.one_step(X[:B], y[:B])
    t.compile((B, D))
    for k, v in t.params().items():  # parameters survive invalidate
        np.testing.assert_array_equal(v, p[k])
    assert t.step == 2
    t.lr = 0.5
    assert t.lr == pytest.approx(0.5)
    t.set_lr(0.25)
    assert t.lr == pytest.approx(0.25)
    with pytest.raises(ValueError):
        t.set_lr(-1)
    assert t.device == "cpu" and "cpu" in t.backend
    assert t.options == {"mode": "graph", "shape_policy": "recapture", "max_shapes": 8, "autotune": "off",
                         "precision": "fp32", "attention": "fp32", "deterministic": True, "fusion": True,
                         "concurrent": True, "plan_cache": "", "on_nan": "stop"}
    assert "deterministic, fusion on, concurrent branches on" in t.explain()
    t2 = trainer(compile=False, autotune="heuristic", plan_cache="off")
    assert (t2.options["autotune"], t2.options["plan_cache"]) == ("heuristic", "off")
    assert "plan_cache=off" in repr(t2)
    # bf16 attention is a CUDA option; the CPU accepts it and computes attention in fp32.
    t3 = trainer(compile=False, attention="cudnn_bf16")
    assert t3.options["attention"] == "cudnn_bf16" and "attention=cudnn_bf16" in repr(t3)
    with pytest.raises(ValueError, match="cudnn_bf16"):
        trainer(compile=False, attention="bf16")
    t4 = trainer(compile=False, deterministic=False)
    assert t4.options["deterministic"] is False and "deterministic=False" in repr(t4)
    # Fusion and concurrent branches are CUDA lowering choices; the CPU accepts them (it has
    # neither) and explain lists them among the options in force.
    t5 = trainer(fusion=False, concurrent=False)
    assert (t5.options["fusion"], t5.options["concurrent"]) == (False, False)
    assert "fusion=False, concurrent=False" in repr(t5)
    assert "fusion off, concurrent branches off" in t5.explain()
    with pytest.raises(TypeError):
        trainer(compile=False, fusion="off")
    assert "Trainer(device=cpu" in repr(t)
    assert isinstance(t.profile(2), list)


def test_shape_policies(data):
    X, y = data
    t = trainer()
    t.one_step(X[:B], y[:B])
    t.one_step(X[:10], y[:10])  # recapture: another shape is compiled
    assert t.compile_count == 2
    p = trainer(shape_policy="pad")
    assert np.isfinite(p.one_step(X[:10], y[:10]))
    assert p.compile_count == 1
    e = trainer(shape_policy="error")
    with pytest.raises(sg.Error, match="shape policy is 'error'"):
        e.one_step(X[:10], y[:10])


def test_device_resident_dataset(data):
    X, y = data
    t = trainer()
    t.set_dataset(X, y, B, shuffle=True, last_batch="drop", seed=1)
    assert t.is_resident
    for _ in range(40):
        t.launch()
    assert np.isfinite(t.loss) and t.step == 40
    with pytest.raises(sg.Error, match="device-resident"):
        t.set_batch(X[:B], y[:B])
    with pytest.raises(ValueError, match="last_batch"):
        t.set_dataset(X, y, B, last_batch="keep")


def test_seeded_initialisation_is_reproducible():
    a, b = trainer(seed=5), trainer(seed=5)
    for k, v in a.params().items():
        np.testing.assert_array_equal(v, b.params()[k])


# ---- errors -----------------------------------------------------------------------------------


def test_wrong_dtypes_are_value_errors(data):
    X, y = data
    t = trainer()
    with pytest.raises(ValueError, match=r"one_step: X: expected float32 \(float64 is converted\), got int32 \[32, 16\] on cpu"):
        t.one_step(X[:B].astype(np.int32), y[:B])
    with pytest.raises(ValueError, match=r"y: expected integer class labels .* got float64 \[32\]"):
        t.one_step(X[:B], y[:B].astype(np.float64))
    with pytest.raises(ValueError, match="got bool"):
        t.set_batch(X[:B], y[:B].astype(bool))
    with pytest.raises(ValueError, match="complex64"):
        t.predict(X[:B].astype(np.complex64))
    with pytest.raises(sg.InputError):  # also a stepgraph.Error
        t.one_step(X[:B].astype(np.int64), y[:B])
    with pytest.raises(ValueError, match="native byte order"):
        t.one_step(X[:B].astype(">f4"), y[:B])
    with pytest.raises(ValueError, match="got str"):
        t.one_step("X", y[:B])
    with pytest.raises(ValueError, match="got NoneType"):
        t.one_step(None, y[:B])


def test_wrong_shapes_are_value_errors(data):
    X, y = data
    t = trainer()
    with pytest.raises(ValueError, match=r"X: expected shape \[rows, 16\] \(the model takes 16 features\), got float32 \[32, 15\]"):
        t.one_step(X[:B, :15], y[:B])
    with pytest.raises(ValueError, match=r"expected shape \[rows, 16\]"):
        t.one_step(X[:B].reshape(B, 4, 4), y[:B])
    with pytest.raises(ValueError, match=r"y: expected class labels of shape \[32\] \(one per row of X\), got int64 \[31\]"):
        t.one_step(X[:B], y[: B - 1])
    with pytest.raises(ValueError, match=r"got int64 \[32, 1\]"):
        t.set_batch(X[:B], y[:B, None])
    with pytest.raises(ValueError, match="at least one row"):
        t.one_step(X[:0], y[:0])
    r = sg.Trainer(sg.Dense(2), sg.MeanSquaredError(), sg.SGD(0.1), device="cpu")
    r.compile((4, D))
    with pytest.raises(ValueError, match=r"y: expected float targets of shape \[4, 2\], got float32 \[4\]"):
        r.one_step(X[:4], np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"compile: expected the input shape \(batch, features\)"):
        t.compile((B,))
    with pytest.raises(ValueError, match="compile"):
        t.compile((0, D))
    with pytest.raises(sg.Error, match="input features"):
        t.compile((B, D + 1))


def test_labels_out_of_range(data):
    X, y = data
    t = trainer()
    bad = y[:B].copy()
    bad[3] = C
    with pytest.raises(ValueError, match=r"label 4 at row 3 is outside \[0, 4\) for a model with 4 outputs"):
        t.one_step(X[:B], bad)
    bad[3] = -1
    with pytest.raises(ValueError, match=r"label -1 at row 3"):
        t.evaluate(X[:B], bad)
    bad = y[:B].astype(np.int64)
    bad[0] = 2**40
    with pytest.raises(ValueError, match="outside"):
        t.one_step(X[:B], bad)
    assert t.launch_count == 0


def test_device_tensors_on_a_cpu_trainer_are_value_errors():
    t = trainer()
    Xd, yd = FakeCudaTensor((B, D)), FakeCudaTensor((B,), np.int32)
    with pytest.raises(ValueError, match=r"one_step: X: the trainer runs on cpu, so it takes host arrays .* got float32 \[32, 16\] on cuda:0"):
        t.one_step(Xd, yd)
    with pytest.raises(ValueError, match=r"y: the trainer runs on cpu"):
        t.set_batch(np.zeros((B, D), np.float32), yd)
    with pytest.raises(ValueError, match=r"predict: X: expected a host array"):
        t.predict(Xd)
    with pytest.raises(ValueError, match=r"set_params: '0.bias': the trainer runs on cpu"):
        t.set_params({"0.bias": FakeCudaTensor((32,))})


def test_not_compiled_errors(data):
    X, y = data
    t = trainer(compile=False)
    for call in (lambda: t.one_step(X[:B], y[:B]), lambda: t.set_batch(X[:B], y[:B]), lambda: t.predict(X),
                 lambda: t.evaluate(X, y), t.launch, lambda: t.logits, lambda: t.input_shape,
                 lambda: t.save("x.safetensors"), t.param_views, lambda: t.set_dataset(X, y, B)):
        with pytest.raises(sg.Error) as e:
            call()
        assert not isinstance(e.value, ValueError)
        assert "compile" in str(e.value)
    assert "not compiled" in t.explain()


def test_bad_option_strings_are_value_errors():
    with pytest.raises(ValueError, match="unknown activation 'swish': expected one of none, relu, gelu, tanh, sigmoid, sin"):
        sg.Dense(8, activation="swish")
    with pytest.raises(ValueError, match="unknown init 'kaiming'"):
        sg.Dense(8, init="kaiming")
    with pytest.raises(ValueError, match="units must be positive"):
        sg.Dense(0)
    with pytest.raises(ValueError, match="unknown reduction"):
        sg.SoftmaxCrossEntropy("avg")
    with pytest.raises(ValueError, match="lr must be a positive number"):
        sg.SGD(-1.0)
    with pytest.raises(ValueError, match="momentum"):
        sg.SGD(0.1, momentum=1.5)
    with pytest.raises(ValueError, match="total_steps"):
        sg.Schedule.cosine(10, 5)
    with pytest.raises(ValueError, match="unknown device 'tpu': expected cpu or cuda"):
        sg.Trainer(mlp(), sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="tpu")
    with pytest.raises(ValueError, match="unknown mode"):
        sg.Trainer(mlp(), sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="cpu", mode="lazy")
    with pytest.raises(ValueError, match="unknown shape policy"):
        sg.Trainer(mlp(), sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="cpu", shape_policy="grow")
    with pytest.raises(ValueError, match="Sequential: expected layers"):
        sg.Sequential(sg.Dense(3), "relu")
    with pytest.raises(TypeError):
        sg.Trainer(mlp(), sg.SGD(0.1), sg.SoftmaxCrossEntropy())


@pytest.mark.skipif(sg.cuda_available(), reason="a GPU is present")
def test_cuda_unavailable_is_an_error():
    assert sg.cuda_unavailable_reason()
    with pytest.raises(sg.Error):
        sg.Trainer(mlp(), sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="cuda")
    assert sg.Trainer(mlp(), sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="auto").device == "cpu"


def test_timer_and_stepgraph():
    with sg.Timer() as tm:
        sum(range(10000))
    assert tm.elapsed_ms > 0
    t = sg.Timer()
    assert t.ms() >= 0
    t.restart()
    if not sg.cuda_enabled():
        with pytest.raises(sg.Error, match="CUDA feature not enabled"):
            sg.StepGraph()
        with pytest.raises(sg.Error, match="CUDA feature not enabled"):
            sg.Timer(stream=5)


# ---- image and sequence layers --------------------------------------------------------------------


def test_cnn_layers_train_on_images():
    # Bright top half vs bright bottom half of 6 x 6 one-channel images, fed as 36-feature rows.
    rng = np.random.default_rng(0)
    n = 128
    X = rng.normal(0.0, 0.3, (n, 6, 6, 1)).astype(np.float32)
    y = (np.arange(n) % 2).astype(np.int32)
    X[y == 0, :3] += 1.0
    X[y == 1, 3:] += 1.0
    model = sg.Sequential(
        sg.Conv2d(8, kernel=3, padding=1, activation="relu"),
        sg.MaxPool2d(2),
        sg.Conv2d(8, kernel=3, stride=1, dilation=1, activation="relu", init="he"),
        sg.Flatten(),
        sg.Dense(2),
    ).set_input_shape((6, 6, 1))
    assert "conv2d" in repr(model[0]) and model[0].filters == 8
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(1e-2), device="cpu", seed=0)
    t.compile((32, 36))
    flat = X.reshape(n, 36)
    losses = [t.one_step(flat[i : i + 32], y[i : i + 32]) for _ in range(15) for i in range(0, n, 32)]
    assert np.mean(losses[-4:]) < 0.3 * np.mean(losses[:4])
    assert t.evaluate(flat, y).accuracy > 0.95
    pooled = sg.Sequential(sg.Conv2d(4, kernel=3), sg.GlobalAvgPool(), sg.Dense(2)).set_input_shape((6, 6, 1))
    p = sg.Trainer(pooled, sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="cpu")
    p.compile((8, 36))
    assert np.isfinite(p.one_step(flat[:8], y[:8]))


def test_layer_arguments_are_checked():
    with pytest.raises(ValueError):
        sg.Conv2d(0)
    with pytest.raises(ValueError):
        sg.Conv2d(4, activation="softmax")
    with pytest.raises(ValueError):
        sg.MaxPool2d(0)
    with pytest.raises(ValueError):
        sg.SelfAttention(0)
    with pytest.raises(ValueError):
        sg.Sequential(sg.Dense(2)).set_input_shape((0, 3))


def test_attention_defaults_match_the_config_and_stubs_list_every_activation():
    # Non-causal by default, as the config's "causal": false (and torch.nn.MultiheadAttention).
    assert "causal" not in sg.SelfAttention(2).describe()
    assert "causal" in sg.SelfAttention(2, causal=True).describe()
    assert "causal" not in sg.TransformerBlock(2, mlp=8).describe()
    assert "causal" in sg.TransformerBlock(2, mlp=8, causal=True).describe()
    # The stubs' ActivationName lists exactly the library's activations, each accepted by Dense.
    import os
    import re
    import typing
    stub = open(os.path.join(os.path.dirname(sg.__file__), "_stepgraph.pyi")).read()
    names = re.search(r"^ActivationName = (Literal\[.*\])$", stub, re.M).group(1)
    listed = typing.get_args(eval(names, {"Literal": typing.Literal}))
    # gelu_tanh is the explicit name of gelu (the tanh form), which describe() says.
    assert list(listed) == sg._stepgraph._activation_names() + ["gelu_tanh"]
    for name in listed:
        shown = "gelu" if name == "gelu_tanh" else name
        assert shown in sg.Dense(2, activation=name).describe() or name == "none"
    with pytest.raises(ValueError):
        sg.Dense(2, activation="swish_not_yet")


def test_transformer_layers_build_and_step():
    vocab, T, width = 7, 6, 16
    model = sg.Sequential(sg.Embedding(vocab, width, positions=T), sg.TransformerBlock(2, mlp=32),
                          sg.SelfAttention(2, causal=True), sg.LayerNorm(), sg.Dense(vocab))
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(3e-3), device="cpu", seed=1)
    t.compile((4, T))
    assert t.output_shape == (4, T, vocab)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, vocab, (4, T)).astype(np.float32)
    labels = rng.integers(0, vocab, (4, T)).astype(np.int32)
    losses = [t.one_step(ids, labels) for _ in range(30)]
    assert losses[-1] < losses[0]


def test_token_labels_are_checked():
    model = sg.Sequential(sg.Embedding(5, 8, positions=3), sg.Dense(5))
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(1e-2), device="cpu")
    t.compile((2, 3))
    ids = np.zeros((2, 3), np.float32)
    assert np.isfinite(t.one_step(ids, np.array([[1, 2, -1], [0, -1, 4]], np.int32)))
    with pytest.raises(ValueError, match=r"token labels of shape \[2, 3\]"):
        t.one_step(ids, np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="outside \\[-1, 5\\)"):
        t.one_step(ids, np.full((2, 3), 5, np.int32))


def test_dense_amax_is_reported():
    model = sg.Sequential(sg.Dense(8, activation="relu", amax=True), sg.Dense(C))
    assert "amax" in repr(model[0])
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(1e-2), device="cpu", seed=2)
    t.compile((B, D))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(B, D)).astype(np.float32)
    y = rng.integers(0, C, B).astype(np.int32)
    p = t.params()
    h = np.maximum(X @ p["0.weight"].T + p["0.bias"], 0.0)
    t.one_step(X, y)
    assert set(t.amax) == {"0.amax"}
    assert t.amax["0.amax"] == pytest.approx(float(np.abs(h).max()), rel=1e-5)
    assert trainer().amax == {}
