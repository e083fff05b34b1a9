"""User-defined ops written in Python (stepgraph.CustomOp) on the CPU backend: numpy views of the
plan's buffers, in a model graph and a Sequential, gradients against finite differences of a
float64 reference, explain, and the errors of bad definitions. CUDA: test_custom_op_cuda.py."""
import numpy as np
import pytest

import stepgraph as sg


class Cube(sg.CustomOp):
    def __init__(self, name=None):
        super().__init__(name)
        self.calls = 0

    def output_shapes(self, x_shape):
        return [x_shape]

    def forward(self, inputs, outputs, stream):
        self.calls += 1
        x, = inputs
        y, = outputs
        y[...] = x ** 3

    def backward(self, grad_outputs, inputs, outputs, grad_inputs, stream):
        dy, = grad_outputs
        x, = inputs
        dx, = grad_inputs
        dx[...] = 3 * x * x * dy


class MulAdd(sg.CustomOp):
    """Two inputs, two outputs: (a * b, a + 2 b)."""

    def output_shapes(self, a, b):
        if a != b:
            raise ValueError(f"MulAdd takes two inputs of one shape, got {a} and {b}")
        return [a, a]

    def forward(self, inputs, outputs, stream):
        a, b = inputs
        p, s = outputs
        p[...] = a * b
        s[...] = a + 2 * b

    def backward(self, grad_outputs, inputs, outputs, grad_inputs, stream):
        dp, ds = grad_outputs
        a, b = inputs
        da, db = grad_inputs
        if da is not None:
            da[...] = dp * b + ds
        if db is not None:
            db[...] = dp * a + 2 * ds


def mixed_model(cube, muladd):
    # `a` feeds the user op and a built-in product, so its gradient adds two contributions.
    x = sg.Input(3, name="x")
    a = sg.Dense(4, activation="tanh", name="a")(x)
    b = sg.Dense(4, name="b")(x)
    p, s = muladd(a, b)
    y = sg.Dense(2, name="head")(sg.concat([p, s * a, cube(b)]))
    return sg.Model(inputs=[x], outputs={"y": y})


def test_user_ops_train_and_their_gradients_match_finite_differences():
    cube, muladd = Cube(name="cube1"), MulAdd()
    r = np.random.default_rng(0)
    X = {"x": r.standard_normal((6, 3)).astype(np.float32)}
    Y = {"y": r.standard_normal((6, 2)).astype(np.float32)}
    t = sg.Trainer(mixed_model(cube, muladd), {"y": sg.MeanSquaredError()}, sg.SGD(1.0), device="cpu", seed=3)
    t.compile(6)
    before = t.params()
    t.one_step(X, Y)
    after = t.params()
    assert cube.calls >= 1
    probe = sg.Trainer(mixed_model(cube, muladd), {"y": sg.MeanSquaredError()}, sg.SGD(1e-12), device="cpu", seed=3)
    probe.compile(6)
    checked = 0
    for name, w in before.items():
        for k in range(0, w.size, 3):
            def loss(delta):
                p = {n: v.copy() for n, v in before.items()}
                p[name].reshape(-1)[k] += delta
                probe.set_params(p)
                return probe.evaluate(X, Y).loss
            fd = (loss(1e-2) - loss(-1e-2)) / 2e-2
            grad = before[name].reshape(-1)[k] - after[name].reshape(-1)[k]
            assert grad == pytest.approx(fd, abs=2e-3, rel=2e-2), f"{name}[{k}]"
            checked += 1
    assert checked > 10
    text = t.explain()
    assert "user-defined 'cube1'" in text and "user-defined 'MulAdd'" in text and "backward)" in text


def test_a_custom_op_is_a_sequential_layer_and_learns():
    cube = Cube()
    model = sg.Sequential(sg.Dense(8, activation="tanh"), cube, sg.Dense(1))
    t = sg.Trainer(model, sg.MeanSquaredError(), sg.Adam(1e-2), device="cpu", seed=1)
    r = np.random.default_rng(1)
    X = r.uniform(-1, 1, (32, 2)).astype(np.float32)
    Y = (X[:, :1] * X[:, 1:]).astype(np.float32)
    t.compile((32, 2))
    first = t.one_step(X, Y)
    for _ in range(200):
        last = t.one_step(X, Y)
    assert last < 0.5 * first
    # On the CPU backend the Python forward runs every step (there is no graph to replay).
    assert cube.calls >= 201


def test_names_default_to_the_class_and_repeat_safely():
    a, b = Cube(), Cube()
    assert a.name == "Cube" and repr(a) == "Cube(name='Cube')"
    x = sg.Input(2, name="x")
    a(x), b(x)
    assert a.op != b.op and a.op.startswith("Cube") and b.op.startswith("Cube")


class NoBackward(Cube):
    backward = None


class Raises(Cube):
    def forward(self, inputs, outputs, stream):
        raise KeyError("planted")


class BadShapes(Cube):
    def output_shapes(self, x_shape):
        return "nonsense"


def test_bad_definitions_are_clear_errors():
    x = sg.Input(3, name="x")
    with pytest.raises(sg.Error, match=r"MulAdd\.output_shapes raised ValueError: MulAdd takes two inputs of one shape"):
        MulAdd()(x, sg.Input(4, name="w"))
    with pytest.raises(sg.Error, match=r"BadShapes: output_shapes must return a list of shapes"):
        BadShapes()(x)
    t = sg.Trainer(sg.Sequential(sg.Dense(3), NoBackward(name="nb"), sg.Dense(1)), sg.MeanSquaredError(),
                   sg.SGD(0.1), device="cpu")
    with pytest.raises(sg.Error, match=r"user-defined 'nb'.*needs a gradient, but the op has no backward"):
        t.compile((4, 2))
    t = sg.Trainer(sg.Sequential(Raises(name="boom"), sg.Dense(1)), sg.MeanSquaredError(), sg.SGD(0.1), device="cpu")
    t.compile((4, 2))
    X, Y = np.ones((4, 2), np.float32), np.ones((4, 1), np.float32)
    with pytest.raises(sg.Error, match=r"boom\.forward raised KeyError: 'planted'"):
        t.one_step(X, Y)
    # The trainer is still usable: the error left nothing half-done that a predict trips over.
    with pytest.raises(sg.Error, match="planted"):
        t.predict(X)
