"""GPU only: stepgraph against PyTorch (same initial weights, same batches) and DLPack inputs from
PyTorch, CuPy and JAX CUDA arrays. Skips without torch + CUDA or without stepgraph's CUDA backend."""

import numpy as np
import pytest

import stepgraph as sg
from conftest import DLPackOnly

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to PyTorch", allow_module_level=True)
if not sg.cuda_available():
    pytest.skip(f"stepgraph has no usable CUDA backend: {sg.cuda_unavailable_reason()}", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

D, H, C, B, STEPS = 32, 64, 10, 64, 10
RTOL = 1e-5


@pytest.fixture(autouse=True)
def fp32_matmuls():
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def torch_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(D, H), torch.nn.ReLU(), torch.nn.Linear(H, C)).cuda()


def torch_params(model, as_numpy=False):
    """stepgraph names for a torch Sequential of Linear layers, by order ('2.weight' -> '1.weight')."""
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    out = {}
    for i, lin in enumerate(linears):
        for kind in ("weight", "bias"):
            v = getattr(lin, kind).detach()
            out[f"{i}.{kind}"] = v.cpu().numpy() if as_numpy else v
    return out


def sg_trainer(opt, seed=0, **kw):
    model = sg.Sequential(sg.Dense(H, activation="relu"), sg.Dense(C))
    t = sg.Trainer(model, sg.SoftmaxCrossEntropy(), opt, device="cuda", seed=seed, **kw)
    t.compile((B, D))
    return t


def data(steps=STEPS, seed=1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    X = torch.randn(steps, B, D, device="cuda", generator=g)
    y = torch.randint(0, C, (steps, B), device="cuda", generator=g)
    return X, y


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


OPTIMIZERS = {
    "sgd-momentum": (lambda: sg.SGD(0.1, momentum=0.9), lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    "sgd-nesterov-wd": (
        lambda: sg.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    ),
    "adam": (lambda: sg.Adam(1e-3), lambda p: torch.optim.Adam(p, lr=1e-3)),
    "adam-l2": (lambda: sg.Adam(1e-3, weight_decay=1e-2), lambda p: torch.optim.Adam(p, lr=1e-3, weight_decay=1e-2)),
    "adamw": (lambda: sg.AdamW(1e-3, weight_decay=1e-2), lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-2)),
}


@pytest.mark.parametrize("steps", [1, STEPS])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_matches_pytorch(name, steps):
    make_sg, make_torch = OPTIMIZERS[name]
    model = torch_model()
    topt = make_torch(model.parameters())
    t = sg_trainer(make_sg())
    t.set_params(torch_params(model))  # CUDA tensors: copied device to device
    for k, v in t.params().items():
        np.testing.assert_array_equal(v, torch_params(model, as_numpy=True)[k])
    X, y = data(steps)
    for s in range(steps):
        topt.zero_grad()
        loss = F.cross_entropy(model(X[s]), y[s])
        loss.backward()
        topt.step()
        got = t.one_step(X[s], y[s])  # torch CUDA tensors, int64 labels
        assert abs(got - loss.item()) <= RTOL * abs(loss.item()), (name, s, got, loss.item())
    want = torch_params(model, as_numpy=True)
    for k, v in t.params().items():
        assert rel_err(v, want[k]) <= RTOL, (name, k, rel_err(v, want[k]))
    assert t.step == steps
    if steps > 1:  # graph mode: the step was captured once and replayed since
        assert t.capture_count == 1 and t.graph_nodes > 0


def test_set_params_from_numpy_equals_from_cuda_tensors():
    model = torch_model(3)
    a, b = sg_trainer(sg.Adam()), sg_trainer(sg.Adam())
    a.set_params(torch_params(model))
    b.set_params(torch_params(model, as_numpy=True))
    for k, v in a.params().items():
        np.testing.assert_array_equal(v, b.params()[k])


def close(got, want, rtol=1e-6):
    return all(abs(g - w) <= rtol * abs(w) for g, w in zip(got, want)) and len(got) == len(want)


def numpy_losses(X, y, steps, opt=lambda: sg.Adam(1e-2)):
    t = sg_trainer(opt())
    return t, [t.one_step(X[s].cpu().numpy(), y[s].cpu().numpy()) for s in range(steps)]


def test_torch_cuda_inputs_without_a_host_copy():
    X, y = data(5)
    ref, want = numpy_losses(X, y, 5)
    t = sg_trainer(sg.Adam(1e-2))
    got = []
    for s in range(5):
        # DLPackOnly: no __array__, no buffer protocol: the only way in is the device pointer
        got.append(t.one_step(DLPackOnly(X[s]), DLPackOnly(y[s].int())))
        slot = torch.from_dlpack(t.tensor_view("input"))
        assert slot.device.type == "cuda" and slot.data_ptr() == t.device_ptr("input")
        assert slot.data_ptr() != X[s].data_ptr()  # copied into the input slot, not aliased
        assert torch.equal(slot, X[s])
        assert torch.equal(torch.from_dlpack(t.tensor_view("target")).long(), y[s])
    assert close(got, want), (got, want)
    for k, v in t.params().items():
        assert rel_err(v, ref.params()[k]) <= RTOL, k


def test_inputs_written_by_pending_torch_work_are_seen():
    # the batch is produced by queued torch kernels right before the call: the copy must wait
    X, y = data(3)
    _, want = numpy_losses(X, y, 3)
    t = sg_trainer(sg.Adam(1e-2))
    side = torch.cuda.Stream()
    for s in range(3):
        with torch.cuda.stream(side):
            big = torch.randn(4096, 4096, device="cuda")
            for _ in range(5):
                big = torch.tanh(big @ big / 64.0)  # keep the stream busy
            Xs = X[s] * 1.0 + 0.0 * big[:B, :D]
            ys = y[s].to(torch.int32)
        assert close([t.one_step(Xs, ys)], [want[s]])


def test_set_batch_launch_and_output_views():
    X, y = data(2)
    t = sg_trainer(sg.SGD(0.1))
    t.set_batch(X[0], y[0])
    t.launch()
    loss = t.loss
    logits = torch.from_dlpack(t.logits_view())
    assert logits.shape == (B, C) and logits.is_cuda
    np.testing.assert_array_equal(logits.cpu().numpy(), t.logits)
    views = {k: torch.from_dlpack(v) for k, v in t.param_views().items()}
    for k, v in t.params().items():
        np.testing.assert_array_equal(views[k].cpu().numpy(), v)
    views["1.bias"].fill_(0.25)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.params()["1.bias"], np.full(C, 0.25, np.float32))
    assert np.isfinite(loss)


def test_cupy_inputs():
    cp = pytest.importorskip("cupy", reason="CuPy is not installed")
    X, y = data(4)
    _, want = numpy_losses(X, y, 4)
    t = sg_trainer(sg.Adam(1e-2))
    got = []
    for s in range(4):
        Xc = cp.asarray(X[s].cpu().numpy())
        yc = cp.asarray(y[s].cpu().numpy().astype(np.int32 if s % 2 else np.int64))
        got.append(t.one_step(Xc, yc))
        assert cp.array_equal(cp.from_dlpack(t.tensor_view("input")), Xc)
    assert close(got, want), (got, want)


def test_jax_inputs():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend here")
    X, y = data(3)
    _, want = numpy_losses(X, y, 3)
    t = sg_trainer(sg.Adam(1e-2))
    got = [t.one_step(jax.device_put(X[s].cpu().numpy(), gpu), jax.device_put(y[s].cpu().numpy().astype(np.int32), gpu))
           for s in range(3)]
    assert close(got, want), (got, want)


def test_device_input_errors():
    X, y = data(1)
    t = sg_trainer(sg.SGD(0.1))
    with pytest.raises(ValueError, match=r"X: expected float32, got float64 \[64, 32\] on cuda:0"):
        t.one_step(X[0].double(), y[0])
    wide = torch.randn(B, 2 * D, device="cuda")
    with pytest.raises(ValueError, match="C-contiguous"):
        t.one_step(wide[:, ::2], y[0])
    with pytest.raises(ValueError, match="both as CUDA tensors or both as host arrays"):
        t.one_step(X[0], y[0].cpu())
    with pytest.raises(ValueError, match="expected a host array"):
        t.predict(X[0])
    with pytest.raises(ValueError, match="float32"):
        t.one_step(X[0], y[0].float())
    # a tensor that requires grad: read as data where the framework exports it through DLPack,
    # otherwise a ValueError carrying the framework's own advice (detach)
    try:
        assert np.isfinite(t.one_step(X[0].clone().requires_grad_(), y[0]))
    except ValueError as e:
        assert "detach" in str(e)
    with pytest.raises(ValueError, match=r"must be f32 \[64, 32\]"):
        t.set_params({"0.weight": torch.zeros(D, H, device="cuda")})
    cpu_t = sg.Trainer(sg.Dense(C), sg.SoftmaxCrossEntropy(), sg.SGD(0.1), device="cpu")
    cpu_t.compile((B, D))
    with pytest.raises(ValueError, match="the trainer runs on cpu"):
        cpu_t.one_step(X[0], y[0])
    # CPU torch tensors go through the host path on either trainer
    assert np.isfinite(cpu_t.one_step(X[0].cpu(), y[0].cpu()))
    assert np.isfinite(t.one_step(X[0].cpu(), y[0].cpu()))


def test_timer_on_a_torch_stream():
    s = torch.cuda.current_stream()
    with sg.Timer(s) as tm:
        a = torch.randn(2048, 2048, device="cuda")
        (a @ a).sum()
    assert tm.elapsed_ms > 0
    assert sg.Timer(0).ms() >= 0  # the legacy default stream


def _adds_one_to(y):
    # A capture callback: y += 1 on the stream stepgraph captures.
    def enqueue(stream):
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            y.add_(1.0)

    return enqueue


def test_stepgraph_capture_survives_a_python_exception():
    # A callback raising a plain Python exception: it reaches the caller as itself, and the
    # stream has left capture mode (a later capture on it records and replays).
    g = sg.StepGraph()

    def broken(stream):
        raise KeyError("planted")

    with pytest.raises(KeyError, match="planted"):
        g.capture((16,), broken)
    assert not g.is_captured
    y = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    g.capture((16,), _adds_one_to(y))
    g.launch()
    torch.cuda.synchronize()
    assert torch.equal(y, torch.ones(16, device="cuda"))


def test_stepgraph_records_torch_work():
    g = sg.StepGraph()
    y = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    g.capture((16,), _adds_one_to(y))
    assert g.is_captured and g.num_nodes >= 1
    g.launch()
    g.launch()
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full((16,), 2.0, device="cuda")) and g.launch_count == 2
