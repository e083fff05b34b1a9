"""Weights in and out: parameters-only safetensors files of any float type, strict and lenient
loads, the torch export (state_dict names of the matching torch.nn.Sequential) and the ONNX
export, checked against predict with onnxruntime."""

import json
import struct

import numpy as np
import pytest

import stepgraph as sg

D = 5


def write_safetensors(path, tensors, metadata=None):
    """A safetensors file from {name: (dtype, array)}, written as the format's spec says."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, a) in tensors.items():
        if dtype == "BF16":  # the top half of each float32
            raw = (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            np_type = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}[dtype]
            raw = np.ascontiguousarray(a).astype(np_type).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(a)), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    """{name: float32 array} and the metadata of a file of F32 tensors."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32"
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b : 8 + n + end], "<f4").reshape(e["shape"])
    return out, meta


def mlp_trainer(seed=0, act="tanh"):
    model = sg.Sequential(sg.Dense(16, activation=act), sg.Dropout(0.1), sg.LayerNorm(), sg.Dense(3))
    t = sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu", seed=seed)
    t.compile((8, D))
    return t


def rows(n=8, seed=0):
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


# ---- loading --------------------------------------------------------------------------------------


def test_parameters_only_files_of_every_float_type_load(tmp_path):
    src = mlp_trainer(seed=1)
    params = src.params()
    for dtype in ("F64", "F32", "F16", "BF16"):
        path = tmp_path / f"w_{dtype}.safetensors"
        write_safetensors(path, {k: (dtype, v) for k, v in params.items()})
        t = mlp_trainer(seed=2)
        report = t.load_weights(path)
        assert report.loaded == list(params) and report.missing == [] and report.unexpected == []
        assert report.naming == "stepgraph"
        assert report.converted == ({} if dtype == "F32" else {k: dtype for k in params})
        tol = {"F64": 0, "F32": 0, "F16": 1e-3, "BF16": 1e-2}[dtype]
        for k, v in t.params().items():
            np.testing.assert_allclose(v, params[k], rtol=tol, atol=tol)
    # The step and optimizer state are left alone.
    assert t.step == 0


def test_strict_loads_name_every_missing_and_extra_tensor(tmp_path):
    params = mlp_trainer().params()
    path = tmp_path / "partial.safetensors"
    kept = {k: ("F32", v) for k, v in params.items() if not k.startswith("3.")}
    kept["head.weight"] = ("F32", np.zeros((3, 16), np.float32))
    write_safetensors(path, kept)
    t = mlp_trainer(seed=5)
    before = t.params()
    with pytest.raises(sg.Error) as e:
        t.load_weights(path)
    msg = str(e.value)
    assert "missing: '3.weight' (parameter), '3.bias' (parameter)" in msg
    assert "not in this model: 'head.weight'" in msg and "strict=False" in msg
    for k, v in t.params().items():  # nothing written
        np.testing.assert_array_equal(v, before[k])
    report = t.load(path, strict=False)
    assert report.missing == ["3.weight", "3.bias"] and report.unexpected == ["head.weight"]
    np.testing.assert_array_equal(t.params()["0.weight"], params["0.weight"])
    np.testing.assert_array_equal(t.params()["3.weight"], before["3.weight"])


def test_shapes_and_ranges_are_checked_even_when_not_strict(tmp_path):
    params = mlp_trainer().params()
    path = tmp_path / "wide.safetensors"
    write_safetensors(path, {"0.weight": ("F32", np.zeros((17, D), np.float32))})
    with pytest.raises(sg.Error, match=r"'0.weight' is f32 \[17, 5\] there but f32 \[16, 5\] here"):
        mlp_trainer().load_weights(path, strict=False)
    big = {k: ("F64", v.astype(np.float64)) for k, v in params.items()}
    big["0.bias"] = ("F64", np.full(16, 1e300))
    write_safetensors(path, big)
    with pytest.raises(sg.Error, match=r"tensor '0.bias' \(F64\) element 0: 1e\+300 is outside the range of f32"):
        mlp_trainer().load_weights(path)


def test_a_weights_file_is_not_a_checkpoint_and_says_so(tmp_path):
    path = tmp_path / "w.safetensors"
    write_safetensors(path, {k: ("F32", v) for k, v in mlp_trainer().params().items()})
    with pytest.raises(sg.Error, match="not a stepgraph checkpoint .*load_weights"):
        mlp_trainer().load(path)
    assert isinstance(mlp_trainer().load(path, weights_only=True), sg.WeightsReport)


def test_a_checkpoint_gives_its_parameters_to_load_weights(tmp_path):
    src = mlp_trainer(seed=3)
    src.one_step(rows(), np.zeros((8, 3), np.float32))
    src.save(tmp_path / "c.safetensors")
    t = mlp_trainer(seed=4)
    report = t.load_weights(tmp_path / "c.safetensors")
    assert report.unexpected == [] and report.missing == []  # optimizer state and step are not weights
    np.testing.assert_array_equal(t.predict(rows()), src.predict(rows()))
    assert t.step == 0


# ---- torch ----------------------------------------------------------------------------------------


def test_torch_export_writes_the_state_dict_of_the_matching_sequential(tmp_path):
    t = mlp_trainer(seed=6, act="gelu")
    assert t.torch_module() == (
        "torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.GELU(approximate='tanh'), torch.nn.Dropout(0.1), "
        "torch.nn.LayerNorm(16, eps=1e-05), torch.nn.Linear(16, 3))"
    )
    path = tmp_path / "torch.safetensors"
    t.export(path, format="torch")
    tensors, meta = read_safetensors(path)
    assert meta["format"] == "pt" and meta["torch_module"] == t.torch_module()
    p = t.params()
    assert sorted(tensors) == ["0.bias", "0.weight", "3.bias", "3.weight", "4.bias", "4.weight"]
    np.testing.assert_array_equal(tensors["3.weight"], p["2.gain"])
    np.testing.assert_array_equal(tensors["4.weight"], p["3.weight"])
    # What torch's modules compute from those tensors (numpy here; with torch in the next test).
    x = rows(9, seed=3).astype(np.float64)
    h = x @ tensors["0.weight"].T + tensors["0.bias"]
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * tensors["3.weight"] + tensors["3.bias"]
    h = h @ tensors["4.weight"].T + tensors["4.bias"]
    np.testing.assert_allclose(t.predict(x.astype(np.float32)), h, rtol=1e-5, atol=1e-5)
    # The same file loads back, its names read as torch's.
    back = mlp_trainer(seed=7, act="gelu")
    report = back.load_weights(path)
    assert report.naming == "torch" and report.missing == [] and report.unexpected == []
    np.testing.assert_array_equal(back.predict(rows()), t.predict(rows()))


def test_a_state_dict_saved_by_torch_loads_by_its_names(tmp_path):
    """safetensors.torch.save_file(net.state_dict()) writes no metadata: the names alone say it is torch's."""
    t = mlp_trainer(seed=9, act="relu")
    r = np.random.default_rng(2)
    sd = {"0.weight": r.standard_normal((16, D)), "0.bias": r.standard_normal(16), "3.weight": np.ones(16),
          "3.bias": np.zeros(16), "4.weight": r.standard_normal((3, 16)), "4.bias": r.standard_normal(3)}
    write_safetensors(tmp_path / "sd.safetensors", {k: ("F32", v) for k, v in sd.items()})
    report = t.load_weights(tmp_path / "sd.safetensors")
    assert report.naming == "torch" and report.missing == [] and report.unexpected == []
    np.testing.assert_array_equal(t.params()["3.weight"], sd["4.weight"].astype(np.float32))
    np.testing.assert_array_equal(t.params()["2.gain"], np.ones(16, np.float32))


def test_torch_runs_the_export_as_predict_does(tmp_path):
    torch = pytest.importorskip("torch")
    t = mlp_trainer(seed=8, act="gelu")
    path = tmp_path / "torch.safetensors"
    t.export(path, format="torch")
    net = eval(t.torch_module(), {"torch": torch})
    tensors, _ = read_safetensors(path)
    net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in tensors.items()}, strict=True)
    net.eval()
    X = rows(32, seed=1)
    with torch.no_grad():
        want = net(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(t.predict(X), want, rtol=1e-5, atol=1e-5)


def test_models_without_a_torch_sequential_say_why():
    x = sg.Input(3, name="x")
    graph = sg.Trainer(sg.Model([x], sg.Dense(2)(x) * x[:, :2]), sg.MeanSquaredError(), sg.Adam(), device="cpu")
    graph.compile((4, 3))
    with pytest.raises(sg.Error, match="only a sequential model .* ONNX"):
        graph.torch_module()
    sin = sg.Trainer(sg.Sequential(sg.Dense(4, activation="sin"), sg.Dense(1)), sg.MeanSquaredError(), sg.Adam(),
                     device="cpu")
    sin.compile((4, 2))
    with pytest.raises(sg.Error, match="layer '0' uses activation sin, which torch.nn has no module for"):
        sin.export("never.safetensors", format="torch")
    with pytest.raises(ValueError, match="export format 'keras' is not one of: safetensors, torch"):
        sin.export("never.safetensors", format="keras")


def test_the_cli_exports_a_checkpoint_for_torch(tmp_path):
    import subprocess

    from stepgraph.__main__ import _find_cli

    cli = _find_cli()
    if cli is None:
        pytest.skip("the stepgraph executable is not installed beside this Python")
    cfg = {"model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}, {"type": "dense", "units": 10}]},
           "train": {"steps": 3, "log_every": 0, "device": "cpu", "batch_size": 16}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    run = subprocess.run([cli, "train", str(tmp_path / "c.json"), "--out", str(tmp_path / "run")], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    out = tmp_path / "w.safetensors"
    exp = subprocess.run([cli, "export", str(tmp_path / "c.json"), "--checkpoint", str(tmp_path / "run" / "checkpoint.safetensors"),
                          "--output", str(out), "--json"], capture_output=True, text=True)
    assert exp.returncode == 0, exp.stderr
    record = json.loads(exp.stdout.strip().splitlines()[-1])
    assert record["torch_module"].startswith("torch.nn.Sequential(torch.nn.Linear(64, 8), torch.nn.ReLU()")
    assert sorted(read_safetensors(out)[0]) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    again = subprocess.run([cli, "export", str(tmp_path / "c.json"), "--checkpoint",
                            str(tmp_path / "run" / "checkpoint.safetensors"), "--output", str(out)],
                           capture_output=True, text=True)
    assert again.returncode == 1 and "exists; choose another path or pass --overwrite" in again.stderr
    # ONNX: the executable hands it to the Python package beside it.
    pytest.importorskip("onnx")
    onnx = subprocess.run([cli, "export", str(tmp_path / "c.json"), "--checkpoint",
                           str(tmp_path / "run" / "checkpoint.safetensors"), "--output", str(tmp_path / "m.onnx"),
                           "--format", "onnx"], capture_output=True, text=True)
    assert onnx.returncode == 0, onnx.stderr
    assert (tmp_path / "m.onnx").stat().st_size > 0


# ---- ONNX -----------------------------------------------------------------------------------------


def onnx_matches_predict(t, path, inputs, tol=1e-5):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    t.export(path, format="onnx")
    # The IR version of opset 17 (onnx 1.12), so runtimes older than the onnx package load it.
    assert onnx.load(str(path)).ir_version == 8
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = inputs if isinstance(inputs, dict) else {"input": inputs}
    got = session.run(None, feeds)
    want = t.predict(inputs)
    names = [o.name for o in session.get_outputs()]
    if not isinstance(want, dict):
        want = {"output": want}
    assert names == list(want)
    for name, g in zip(names, got):
        np.testing.assert_allclose(g, want[name], rtol=tol, atol=tol, err_msg=name)


def test_onnx_of_a_sequential_mlp(tmp_path):
    for act in ("tanh", "gelu", "gelu_erf", "silu", "softplus", "sin", "elu", "leaky_relu", "sigmoid"):
        model = sg.Sequential(sg.Dense(16, activation=act), sg.LayerNorm(), sg.BatchNorm(), sg.Dense(3))
        t = sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu", seed=1)
        t.compile((8, D))
        t.one_step(rows(), np.ones((8, 3), np.float32))  # running statistics away from their start
        onnx_matches_predict(t, tmp_path / f"mlp_{act}.onnx", rows(13, seed=2))


def test_onnx_of_fourier_features_and_a_residual(tmp_path):
    model = sg.Sequential(sg.FourierFeatures(8, sigma=1.0), sg.Dense(16, activation="tanh"),
                          sg.Residual(sg.Dense(16, activation="square")), sg.Dense(1, activation="exp"))
    t = sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-3), device="cpu", seed=5)
    t.compile((8, 2))
    X = np.random.default_rng(6).uniform(-1, 1, (9, 2)).astype(np.float32)
    onnx_matches_predict(t, tmp_path / "ff.onnx", X)


def test_onnx_of_a_graph_model_with_tensor_ops(tmp_path):
    x1, x2 = sg.Input(3, name="x1"), sg.Input(4, name="x2")
    enc = sg.Dense(6, activation="relu", name="enc")
    a = enc(sg.concat([x1, x2[:, 1:4]], axis=-1))
    lo, hi = sg.split(a, [2, 4])
    u = sg.Dense(1, name="u_head")(sg.concat([lo * 2.0 - 1.0, hi / 3.0], axis=-1)) + a.sum(axis=-1, keepdims=True)
    v = sg.activation(a - a.mean(axis=-1, keepdims=True), "tanh")
    model = sg.Model([x1, x2], {"u": u, "v": v})
    t = sg.Trainer(model, {"u": sg.MeanSquaredError()}, sg.Adam(1e-2), device="cpu", seed=2)
    t.compile(8)
    r = np.random.default_rng(3)
    X = {"x1": r.standard_normal((11, 3)).astype(np.float32), "x2": r.standard_normal((11, 4)).astype(np.float32)}
    onnx_matches_predict(t, tmp_path / "graph.onnx", X)


def test_onnx_of_a_small_cnn(tmp_path):
    model = sg.Sequential(sg.Conv2d(4, kernel=3, padding=1, activation="relu"), sg.MaxPool2d(2),
                          sg.Conv2d(6, kernel=3, stride=2, padding=1), sg.BatchNorm(), sg.Flatten(),
                          sg.Dense(3)).set_input_shape((8, 8, 1))
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(1e-2), device="cpu", seed=3)
    t.compile((4, 64))
    X = np.random.default_rng(4).standard_normal((4, 64)).astype(np.float32)
    t.one_step(X, np.array([0, 1, 2, 0], np.int32))
    onnx_matches_predict(t, tmp_path / "cnn.onnx", X)


def test_onnx_of_global_pooling(tmp_path):
    model = sg.Sequential(sg.Conv2d(3, kernel=3), sg.GlobalAvgPool(), sg.Dense(2)).set_input_shape((6, 6, 2))
    t = sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu", seed=4)
    t.compile((4, 72))
    onnx_matches_predict(t, tmp_path / "pool.onnx", np.random.default_rng(5).standard_normal((3, 72)).astype(np.float32))


def test_onnx_of_a_transformer(tmp_path):
    vocab, T, width = 7, 6, 16
    model = sg.Sequential(sg.Embedding(vocab, width, positions=T), sg.TransformerBlock(2, mlp=32, causal=True),
                          sg.SelfAttention(2), sg.LayerNorm(), sg.Dense(vocab))
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), sg.Adam(3e-3), device="cpu", seed=1)
    t.compile((4, T))
    ids = np.random.default_rng(1).integers(0, vocab, (5, T)).astype(np.float32)
    onnx_matches_predict(t, tmp_path / "gpt.onnx", ids)


def test_python_m_stepgraph_exports_a_checkpoint_as_onnx(tmp_path):
    import subprocess
    import sys

    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    cfg = {"model": {"layers": [{"type": "dense", "units": 8, "activation": "gelu"}, {"type": "dense", "units": 10}]},
           "train": {"steps": 3, "log_every": 0, "device": "cpu", "batch_size": 16}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    summary = sg.train(str(tmp_path / "c.json"), out_dir=str(tmp_path / "run"))
    ckpt = str(tmp_path / "run" / "checkpoint.safetensors")
    out = tmp_path / "m.onnx"
    cmd = [sys.executable, "-m", "stepgraph", "export", str(tmp_path / "c.json"), "--checkpoint", ckpt, "--output",
           str(out), "--format", "onnx"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "as ONNX" in run.stdout
    X = np.random.default_rng(0).standard_normal((7, 64)).astype(np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"input": X})[0]
    np.testing.assert_allclose(got, summary.trainer.predict(X), rtol=1e-5, atol=1e-5)
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 1 and "exists" in again.stderr
    as_json = subprocess.run(cmd + ["--overwrite", "--json"], capture_output=True, text=True)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"event": "export", "format": "onnx", "output": str(out), "checkpoint": ckpt,
                                          "steps": 3}


def test_a_standardizing_config_exports_a_graph_that_takes_raw_rows(tmp_path):
    """data.standardize: the ONNX graph standardizes its inputs as training did, so onnxruntime on
    raw rows gives what `stepgraph predict` gives for them."""
    import subprocess
    import sys

    from stepgraph.__main__ import _find_cli

    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    cli = _find_cli()
    if cli is None:
        pytest.skip("the stepgraph executable is not installed beside this Python")
    cfg = {"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 10}]},
           "data": {"source": "digits", "standardize": True},
           "train": {"steps": 5, "log_every": 0, "device": "cpu", "batch_size": 16}}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    sg.train(str(tmp_path / "c.json"), out_dir=str(tmp_path / "run"))
    ckpt = str(tmp_path / "run" / "checkpoint.safetensors")
    X = (np.random.default_rng(1).random((6, 64)) * 16).astype(np.float32)  # digits' raw pixel range
    np.save(tmp_path / "x.npy", X)
    pred = subprocess.run([cli, "predict", str(tmp_path / "c.json"), "--checkpoint", ckpt, "--input",
                           str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert pred.returncode == 0, pred.stderr
    exp = subprocess.run([sys.executable, "-m", "stepgraph", "export", str(tmp_path / "c.json"), "--checkpoint", ckpt,
                          "--output", str(tmp_path / "m.onnx"), "--format", "onnx"], capture_output=True, text=True)
    assert exp.returncode == 0, exp.stderr
    assert "standardized inside the graph" in exp.stdout
    got = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"input": X})[0]
    np.testing.assert_allclose(got, np.load(tmp_path / "y.npy"), rtol=1e-5, atol=1e-5)


def test_onnx_refuses_what_it_cannot_write(tmp_path):
    pytest.importorskip("onnx")
    t = mlp_trainer()
    with pytest.raises(ValueError, match="opset must be an integer 17 or later"):
        t.export(tmp_path / "m.onnx", format="onnx", opset=13)
