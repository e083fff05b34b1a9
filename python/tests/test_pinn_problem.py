"""stepgraph.pinn.Problem: physics-informed problems from Python, with observation terms and
trainable coefficients (inverse problems), in a Trainer and in sg.train."""

import json

import numpy as np
import pytest

import stepgraph as sg


def small_net():
    return sg.Sequential(sg.Dense(12, activation="tanh"), sg.Dense(12, activation="tanh"), sg.Dense(1))


def heat_observations(n, seed=0, alpha=0.1):
    rng = np.random.default_rng(seed)
    pts = rng.uniform(0, 1, (n, 2))
    return pts, np.exp(-alpha * np.pi**2 * pts[:, 0]) * np.sin(np.pi * pts[:, 1])


def heat(points, values, **kw):
    return sg.pinn.Problem(
        coordinates=["t", "x"],
        domain=[(0, 1), (0, 1)],
        residual="u_t - alpha*u_xx",
        coefficients={"alpha": 0.3},
        conditions=[
            sg.pinn.Condition("t=0", "u - sin(pi*x)", points=64, weight=10),
            sg.pinn.Condition("x=0", "u", points=32),
            sg.pinn.Condition("x=1", "u", points=32),
        ],
        observations=[sg.pinn.Observation(points, values, weight=5)],
        exact="exp(-0.1*pi^2*t)*sin(pi*x)",
        interior_points=256,
        eval_points=400,
        **kw,
    )


def test_a_problem_trains_its_coefficient_with_the_network():
    pts, vals = heat_observations(128)
    t = sg.Trainer(small_net(), heat(pts, vals), sg.Adam(1e-2), device="cpu")
    assert t.coefficients == pytest.approx({"alpha": 0.3})
    before = t.relative_l2_error()
    for _ in range(400):
        t.launch()
    terms = t.loss_terms
    assert set(terms) == {"residual", "t=0", "x=0", "x=1", "data"}
    assert abs(t.coefficients["alpha"] - 0.1) < abs(0.3 - 0.1)  # moving to the truth
    assert t.relative_l2_error() < before
    assert "coefficient.alpha" in t.params()


def test_the_data_term_is_the_weighted_misfit_of_the_observations():
    pts, vals = heat_observations(10, seed=3)
    t = sg.Trainer(small_net(), heat(pts, vals), sg.SGD(1e-9), device="cpu", seed=2)
    u = t.predict(pts.astype(np.float32))[:, 0]
    t.launch()
    assert t.loss_terms["data"] == pytest.approx(5 * np.mean((u - vals) ** 2), rel=1e-4)


def test_problem_errors_name_the_field():
    pts, vals = heat_observations(5)
    with pytest.raises(sg.InputError, match=r"problem\.observations\[0\]\.values: expected f32 \[5, 1\]"):
        heat(pts, np.zeros((5, 2)))
    with pytest.raises(sg.InputError, match=r"problem\.observations\[0\]\.points: expected f32 \[N, 2\]"):
        heat(pts[:, :1], vals)
    with pytest.raises(sg.InputError, match=r"problem\.residual: unknown name 'alpah'"):
        sg.pinn.Problem(coordinates=["x"], domain=[(0, 1)], residual="u_xx - alpah", coefficients={"alpha": 1})
    with pytest.raises(sg.InputError, match=r"'t' names both a coordinate and a coefficient"):
        sg.pinn.Problem(coordinates=["t"], domain=[(0, 1)], residual="u_t - t", coefficients={"t": 1})
    with pytest.raises(sg.InputError, match="no exact solution"):
        sg.pinn.Problem(coordinates=["x"], domain=[(0, 1)], residual="u_xx",
                        observations=[sg.pinn.Observation.from_exact(10)])


def test_a_builtin_problem_learns_a_constant_from_exact_observations_in_sg_train(tmp_path):
    burgers = sg.pinn.Problem.builtin(
        "burgers1d", coefficients={"nu": 0.05}, interior_points=128, boundary_points=64, eval_points=256,
        observations=[sg.pinn.Observation.from_exact(100, seed=1)])
    assert burgers.to_config()["observations"] == [{"sample_exact": 100, "seed": 1, "weight": 1.0}]
    config = {"model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]},
              "problem": burgers, "optimizer": {"type": "adam", "lr": 0.01},
              "train": {"steps": 20, "log_every": 10, "device": "cpu"}}
    result = sg.train(config, out_dir=tmp_path / "run")
    assert set(result["coefficients"]) == {"nu"} and result["coefficients"]["nu"] != pytest.approx(0.05)
    assert result.trainer.coefficients == pytest.approx(result["coefficients"])
    assert result.trainer.relative_l2_error() == pytest.approx(result["rel_l2_error"], rel=1e-5)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    progress = [r for r in records if r.get("event") == "progress"]
    assert progress and all("nu" in r["coefficients"] and "data" in r["loss_terms"] for r in progress)


def test_a_trainer_without_a_problem_has_no_error_to_report():
    t = sg.Trainer(small_net(), sg.MeanSquaredError(), sg.Adam(1e-3), device="cpu")
    with pytest.raises(sg.InputError, match="no physics-informed problem"):
        t.relative_l2_error()


@pytest.mark.skipif(not sg.cuda_available(), reason="no usable CUDA device")
def test_an_inverse_problem_on_cuda_replays_as_eager():
    pts, vals = heat_observations(64)
    graph = sg.Trainer(small_net(), heat(pts, vals), sg.Adam(1e-2), device="cuda", mode="graph")
    eager = sg.Trainer(small_net(), heat(pts, vals), sg.Adam(1e-2), device="cuda", mode="eager")
    for _ in range(20):
        graph.launch()
        eager.launch()
    assert graph.coefficients == eager.coefficients
    assert graph.loss_terms == eager.loss_terms
