"""The example graph models (examples/python/) against PyTorch float64: the same initial weights
and batches (Adam, and Adam after clip_grad_norm_); each step's loss within 1e-5 relative (plus 1e-6 absolute: a fitted model's loss is
a small mean of squared residuals, which fp32 rounding of the larger terms moves more), and after
10 Adam steps every parameter within 1e-5 of its layer's largest value. Runs on stepgraph's CUDA
backend when there is one, else on the CPU; skips without PyTorch."""
import importlib.util
import pathlib

import numpy as np
import pytest

import stepgraph as sg

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"
STEPS, B, RTOL, ATOL = 10, 32, 1e-5, 1e-6


def example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def linear(torch, params, name):
    """A float64 torch Linear holding stepgraph's initial parameters of layer `name`."""
    w = params[f"{name}.weight"]
    lin = torch.nn.Linear(w.shape[1], w.shape[0]).double()
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w.astype(np.float64)))
        lin.bias.copy_(torch.from_numpy(params[f"{name}.bias"].astype(np.float64)))
    return lin


def compare(torch, trainer, layers, forward_loss, batches, clip_norm=0.0):
    """Steps both with Adam(1e-3); `forward_loss(layers, batch)` is the torch loss of a batch."""
    params = [p for lin in layers.values() for p in lin.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    clipped = 0
    for s, (inputs, targets) in enumerate(batches):
        opt.zero_grad()
        loss = forward_loss(layers, inputs, targets)
        loss.backward()
        if clip_norm:
            clipped += float(torch.nn.utils.clip_grad_norm_(params, clip_norm)) > clip_norm
        opt.step()
        got = trainer.one_step(inputs, targets)
        assert abs(got - loss.item()) <= RTOL * abs(loss.item()) + ATOL, (s, got, loss.item())
    got = trainer.params()
    for name, lin in layers.items():
        scale = max(float(np.max(np.abs(p.detach().numpy()))) for p in lin.parameters())
        for kind in ("weight", "bias"):
            want = getattr(lin, kind).detach().numpy()
            err = float(np.max(np.abs(got[f"{name}.{kind}"] - want))) / scale
            assert err <= RTOL, (name, kind, err)
    return clipped


@pytest.mark.parametrize("clip_norm", [0.0, 0.05])
def test_deeponet_matches_pytorch(clip_norm):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    data = sg.make_antiderivative(functions=40, sensors=50, points=8, seed=3)
    t = sg.Trainer(example("deeponet").build(), {"G": sg.MeanSquaredError()}, sg.Adam(1e-3, clip_norm=clip_norm),
                   device="auto", seed=5)
    t.compile(B)
    layers = {n: linear(torch, t.params(), n) for n in ("b1", "branch", "t1", "trunk")}

    def forward_loss(L, inputs, targets):
        u, y = (torch.from_numpy(inputs[k].astype(np.float64)) for k in ("u", "y"))
        branch = L["branch"](torch.tanh(L["b1"](u)))
        trunk = torch.tanh(L["trunk"](torch.tanh(L["t1"](y))))
        G = (branch * trunk).sum(dim=-1, keepdim=True)
        return torch.nn.functional.mse_loss(G, torch.from_numpy(targets["G"].astype(np.float64)))

    rows = np.random.default_rng(0).permutation(len(data["G"]))[: STEPS * B].reshape(STEPS, B)
    batches = [({"u": data["u"][r], "y": data["y"][r]}, {"G": data["G"][r]}) for r in rows]
    clipped = compare(torch, t, layers, forward_loss, batches, clip_norm)
    assert clipped == (STEPS if clip_norm else 0)  # clip_norm 0.05 clips every step: the test can tell


def test_two_head_digits_matches_pytorch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    X, labels = sg.load_digits()
    brightness = X.mean(axis=1, keepdims=True)
    t = sg.Trainer(example("two_head_digits").build(),
                   {"digit": sg.SoftmaxCrossEntropy(), "brightness": (sg.MeanSquaredError(), 10.0)},
                   sg.Adam(1e-3), device="auto", seed=6)
    t.compile(B)
    layers = {n: linear(torch, t.params(), n) for n in ("body1", "body2", "digit", "brightness")}
    F = torch.nn.functional

    def forward_loss(L, inputs, targets):
        h = F.relu(L["body2"](F.relu(L["body1"](torch.from_numpy(inputs["image"].astype(np.float64))))))
        ce = F.cross_entropy(L["digit"](h), torch.from_numpy(targets["digit"].astype(np.int64)))
        mse = F.mse_loss(L["brightness"](h), torch.from_numpy(targets["brightness"].astype(np.float64)))
        return ce + 10.0 * mse

    rows = np.random.default_rng(1).permutation(len(X))[: STEPS * B].reshape(STEPS, B)
    batches = [({"image": X[r]}, {"digit": labels[r], "brightness": brightness[r]}) for r in rows]
    compare(torch, t, layers, forward_loss, batches)


def test_attention_like_model_with_matmul_transpose_reshape_matches_pytorch():
    """Tokens [S, D] per sample: scores = q k^T / sqrt(H), mixed = tanh(scores) v, a head on the
    flattened mix; both matmul forms (transpose_b and a transposed copy) and reshape."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    S, D, H = 4, 6, 8
    x = sg.Input((S, D), name="x")
    q, k, v = (sg.Dense(H, name=n)(x) for n in ("q", "k", "v"))
    scores = sg.matmul(q, k, transpose_b=True) * (1 / np.sqrt(H))
    scores2 = q @ k.transpose(-2, -1) * (1 / np.sqrt(H))  # the same product, spelled out
    mixed = sg.tanh(scores + scores2) @ v
    assert mixed.shape == (S, H)
    out = sg.Dense(2, name="head")(mixed.reshape(-1))
    t = sg.Trainer(sg.Model([x], {"y": out}), {"y": sg.MeanSquaredError()}, sg.Adam(1e-3), device="auto", seed=7)
    t.compile(B)
    layers = {n: linear(torch, t.params(), n) for n in ("q", "k", "v", "head")}

    def forward_loss(L, inputs, targets):
        X = torch.from_numpy(inputs["x"].astype(np.float64))
        Q, K, V = L["q"](X), L["k"](X), L["v"](X)
        s = Q @ K.transpose(-2, -1) / np.sqrt(H)
        m = torch.tanh(s + s) @ V
        return torch.nn.functional.mse_loss(L["head"](m.reshape(m.shape[0], -1)),
                                            torch.from_numpy(targets["y"].astype(np.float64)))

    rng = np.random.default_rng(2)
    batches = [({"x": rng.normal(size=(B, S, D)).astype(np.float32)}, {"y": rng.normal(size=(B, 2)).astype(np.float32)})
               for _ in range(STEPS)]
    compare(torch, t, layers, forward_loss, batches)


def test_skip_cnn_digits_matches_pytorch():
    """NHWC convolutions (torch: NCHW, filters KCRS) joined by a channel concat, pooling, reshape."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    F = torch.nn.functional
    X, labels = sg.load_digits()
    images = X.reshape(-1, 8, 8, 1)
    t = sg.Trainer(example("skip_cnn_digits").build(), {"digit": sg.SoftmaxCrossEntropy()}, sg.Adam(1e-3),
                   device="auto", seed=8)
    t.compile(B)
    p0 = t.params()
    conv = {}
    for n in ("c1", "c2", "c3"):
        w = p0[f"{n}.weight"].astype(np.float64)  # KRSC -> KCRS
        conv[n] = [torch.tensor(w.transpose(0, 3, 1, 2), requires_grad=True),
                   torch.tensor(p0[f"{n}.bias"].astype(np.float64), requires_grad=True)]
    head = linear(torch, p0, "head")
    opt = torch.optim.Adam([q for pair in conv.values() for q in pair] + list(head.parameters()), lr=1e-3)
    rows = np.random.default_rng(3).permutation(len(X))[: STEPS * B].reshape(STEPS, B)
    for s, r in enumerate(rows):
        x = torch.from_numpy(images[r].astype(np.float64)).permute(0, 3, 1, 2)  # NCHW
        c1 = F.relu(F.conv2d(x, *conv["c1"], padding=1))
        c2 = F.relu(F.conv2d(c1, *conv["c2"], padding=1))
        c3 = F.relu(F.conv2d(torch.cat([x, c1, c2], dim=1), *conv["c3"], padding=1))
        pooled = F.max_pool2d(c3, 2).permute(0, 2, 3, 1)  # back to NHWC before flattening
        loss = F.cross_entropy(head(pooled.reshape(B, -1)), torch.from_numpy(labels[r].astype(np.int64)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        got = t.one_step({"image": images[r]}, {"digit": labels[r]})
        assert abs(got - loss.item()) <= RTOL * abs(loss.item()) + ATOL, (s, got, loss.item())
    got = t.params()
    for n, (w, b) in conv.items():
        scale = max(float(w.abs().max()), float(b.abs().max()))
        assert np.max(np.abs(got[f"{n}.weight"] - w.detach().numpy().transpose(0, 2, 3, 1))) / scale <= RTOL, n
        assert np.max(np.abs(got[f"{n}.bias"] - b.detach().numpy())) / scale <= RTOL, n


M64 = (1 << 64) - 1


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def dropout_keep(seed, tensor, step, shape, p):
    """stepgraph's dropout rule, written out here independently (src/backend/dropout_math.h): the
    key mixes the trainer's seed and the output tensor's name; element i is kept at step s when
    the top 24 bits of a splitmix hash of (key, s, i) are at least p * 2^24."""
    h = 1469598103934665603  # FNV-1a of the name, then mix_seed
    for c in ("dropout:" + tensor).encode():
        h = ((h ^ c) * 1099511628211) & M64
    state, _ = splitmix(seed ^ ((h * 0xD1B54A32D192ED03) & M64))
    _, key = splitmix(state)
    i = np.arange(int(np.prod(shape)), dtype=np.uint64)
    z = np.uint64(key) ^ np.uint64((step * 0x9E3779B97F4A7C15) & M64) ^ (i * np.uint64(0xD1B54A32D192ED03))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return ((z >> np.uint64(40)) >= np.uint64(int(p * 16777216.0 + 0.5))).reshape(shape)


def test_two_input_regression_with_batch_norm_and_dropout_matches_pytorch():
    """torch.nn.BatchNorm1d (batch statistics, running ones updated) and dropout with stepgraph's
    masks; after 10 steps the running statistics and eval-mode predictions agree too."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    F = torch.nn.functional
    mod, p, seed = example("two_input_regression"), 0.25, 9
    t = sg.Trainer(mod.build(p=p), {"y": sg.MeanSquaredError()}, sg.Adam(1e-3), device="auto", seed=seed)
    t.compile(B)
    p0 = t.params()
    layers = {n: linear(torch, p0, n) for n in ("hx", "ht", "h", "head")}
    bn = torch.nn.BatchNorm1d(64, momentum=0.1, eps=1e-5).double()
    with torch.no_grad():
        bn.weight.copy_(torch.from_numpy(p0["norm.gain"].astype(np.float64)))
        bn.bias.copy_(torch.from_numpy(p0["norm.shift"].astype(np.float64)))
    opt = torch.optim.Adam([q for lin in layers.values() for q in lin.parameters()] + list(bn.parameters()), lr=1e-3)
    X, Y = mod.make_data(STEPS * B, seed=3)

    def forward(inputs, mask=None):
        x, tt = (torch.from_numpy(inputs[k].astype(np.float64)) for k in ("x", "t"))
        h = F.relu(layers["h"](torch.cat([bn(F.relu(layers["hx"](x))), torch.tanh(layers["ht"](tt))], dim=-1)))
        return layers["head"](h if mask is None else h * torch.from_numpy(mask) / (1 - p))

    dropped = 0
    for s in range(STEPS):
        r = slice(s * B, (s + 1) * B)
        inputs, targets = {k: v[r] for k, v in X.items()}, {"y": Y["y"][r]}
        mask = dropout_keep(seed, "drop.out", s, (B, 64), p).astype(np.float64)
        dropped += int((mask == 0).sum())
        loss = F.mse_loss(forward(inputs, mask), torch.from_numpy(targets["y"].astype(np.float64)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        got = t.one_step(inputs, targets)
        assert abs(got - loss.item()) <= RTOL * abs(loss.item()) + ATOL, (s, got, loss.item())
    assert abs(dropped / (STEPS * B * 64) - p) < 0.02  # the masks drop what p says
    got = t.params()
    for name, lin in layers.items():
        scale = max(float(np.max(np.abs(q.detach().numpy()))) for q in lin.parameters())
        for kind in ("weight", "bias"):
            err = float(np.max(np.abs(got[f"{name}.{kind}"] - getattr(lin, kind).detach().numpy()))) / scale
            assert err <= RTOL, (name, kind, err)
    for ours, theirs in (("gain", bn.weight), ("shift", bn.bias), ("running_mean", bn.running_mean),
                         ("running_var", bn.running_var)):
        want = theirs.detach().numpy()
        assert np.max(np.abs(got[f"norm.{ours}"] - want)) <= RTOL * np.max(np.abs(want)), ours
    bn.eval()
    test_x, _ = mod.make_data(50, seed=4)
    with torch.no_grad():
        want = forward(test_x).numpy()
    np.testing.assert_allclose(t.predict(test_x)["y"], want, rtol=1e-4, atol=1e-5)
