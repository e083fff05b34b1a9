"""Whole runs from Python: sg.train and its summary and trainer, Trainer.from_config, run folders,
checkpoints of runs, data parallelism from the launch environment, plots and the installed CLI,
and physics-informed configs."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import stepgraph as sg

# ---- whole runs ---------------------------------------------------------------------------------

SMALL = {
    "model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"}, {"type": "dense", "units": 3}]},
    "loss": {"type": "softmax_cross_entropy"},
    "optimizer": {"type": "adam", "lr": 0.01},
    "data": {"source": "synthetic_classification", "samples": 600, "features": 8, "classes": 3, "seed": 1},
    "train": {"steps": 60, "batch_size": 32, "log_every": 10, "eval_every": 20, "device": "cpu"},
}


def test_train_returns_the_trained_trainer_and_a_config_makes_one(tmp_path):
    r = sg.train(SMALL)
    assert isinstance(r, dict) and isinstance(r, sg.TrainResult) and r["steps"] == 60
    t = r.trainer
    assert isinstance(t, sg.Trainer) and t.step == 60
    X = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    assert t.predict(X).shape == (5, 3)
    t.save(tmp_path / "w.safetensors")

    u = sg.Trainer.from_config(SMALL, seed=3)
    assert u.step == 0 and u.seed == 3
    u.compile((32, 8))
    u.load(tmp_path / "w.safetensors")  # the same setup as the run's
    assert u.step == 60
    np.testing.assert_array_equal(u.predict(X), t.predict(X))
    with pytest.raises(sg.InputError, match="unknown device 'gpu'"):
        sg.Trainer.from_config(SMALL, device="gpu")
    with pytest.raises(sg.InputError, match="units"):
        sg.Trainer.from_config({**SMALL, "model": {"layers": [{"type": "dense", "units": -1}]}})


HEAT = {
    "model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]},
    "problem": {"type": "heat1d", "interior_points": 64, "boundary_points": 16, "eval_points": 64},
    "train": {"steps": 3, "device": "cpu"},
}


def test_a_physics_informed_trainer_predicts_and_refuses_batches(tmp_path):
    r = sg.train(HEAT)
    t = r.trainer
    pts = np.random.default_rng(0).random((7, 2)).astype(np.float32)  # (x, t)
    u = t.predict(pts)
    assert u.shape == (7, 1) and np.isfinite(u).all()
    assert "custom step" in repr(t) and t.loss_fn is None
    t.launch()  # one more step: the step draws its own points
    assert t.step == 4 and set(t.loss_terms) == set(r["loss_terms"])
    for call in (lambda: t.one_step(pts, pts[:, :1]), lambda: t.evaluate(pts, pts[:, :1]), lambda: t.logits):
        with pytest.raises(sg.Error):
            call()
    with pytest.raises(sg.InputError, match=r"\[rows, 2\]"):
        t.predict(np.zeros((3, 5), np.float32))
    t.save(tmp_path / "heat.safetensors")
    s = sg.Trainer.from_config(HEAT)
    s.load(tmp_path / "heat.safetensors")
    np.testing.assert_array_equal(s.predict(pts), t.predict(pts))


def test_train_from_a_dict(tmp_path):
    s = sg.train(SMALL, out_dir=tmp_path / "run")
    for key in ("steps", "final_loss", "us_per_step", "accuracy", "val_loss", "train_accuracy"):
        assert key in s
    assert s["steps"] == 60 and s["device"] == "cpu" and s["accuracy"] > 0.8
    assert np.isfinite(s["final_loss"]) and s["us_per_step"] > 0
    run = tmp_path / "run"
    assert (run / "metrics.jsonl").exists() and (run / "checkpoint.safetensors").exists()
    # resume continues the step count
    s2 = sg.train(SMALL, steps=80, resume=run / "checkpoint.safetensors")
    assert s2["steps"] == 80 and "checkpoint" not in s2
    e = sg.evaluate_checkpoint(SMALL, run / "checkpoint.safetensors")
    assert e["steps"] == 60 and e["accuracy"] == pytest.approx(s["accuracy"])


def test_a_run_folder_is_kept_unless_continued_or_replaced(tmp_path):
    run = tmp_path / "run"
    sg.train(SMALL, out_dir=run)
    ckpt = run / "checkpoint.safetensors"
    saved = ckpt.read_bytes()
    with pytest.raises(sg.Error, match=r"holds an earlier run .*overwrite=True"):
        sg.train(SMALL, out_dir=run)
    assert ckpt.read_bytes() == saved
    s = sg.train(SMALL, steps=70, out_dir=run, resume=ckpt)  # continues the same run
    assert s["steps"] == 70
    records = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    progress = [r["step"] for r in records if r["event"] == "progress"]
    assert progress == list(range(10, 71, 10))  # no step logged twice
    s = sg.train(SMALL, steps=10, out_dir=run, overwrite=True)
    assert s["steps"] == 10


def test_a_checkpoint_loads_into_its_own_setup_or_weights_only(tmp_path):
    run = tmp_path / "run"
    sg.train(SMALL, out_dir=run)
    ckpt = run / "checkpoint.safetensors"
    tanh = json.loads(json.dumps(SMALL))
    tanh["model"]["layers"][0]["activation"] = "tanh"
    with pytest.raises(sg.Error, match=r"saved from another setup:\n  model: .*relu.* in the checkpoint, .*tanh.* here"):
        sg.train(tanh, steps=70, resume=ckpt)
    s = sg.train(tanh, steps=5, resume=ckpt, weights_only=True)
    assert s["steps"] == 5
    assert 0 <= sg.evaluate_checkpoint(tanh, ckpt, weights_only=True)["accuracy"] <= 1
    t = sg.Trainer(sg.Sequential(sg.Dense(32, "tanh"), sg.Dense(3)), sg.SoftmaxCrossEntropy(), sg.Adam(0.01), device="cpu")
    t.compile((32, 8))
    with pytest.raises(sg.Error, match="another setup"):
        t.load(ckpt)
    t.load(ckpt, weights_only=True)
    assert t.step == 0


def test_train_from_a_path_with_overrides(tmp_path, capsys):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(SMALL))
    s = sg.train(str(path), steps=20, seed=4, verbose=True)
    assert s["steps"] == 20
    out = capsys.readouterr().out
    assert "step 20/20" in out and "done: 20 steps" in out
    cfg = sg.load_config(path)
    assert cfg["train"]["steps"] == 60
    d = sg.default_config()
    assert d["model"]["layers"][0]["units"] == 256
    s = sg.train(pathlib.Path(path), steps=10, json_lines=True)
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines() if l.startswith("{")]
    assert lines[-1]["event"] == "summary" and lines[-1]["steps"] == 10


def test_train_config_errors():
    bad = json.loads(json.dumps(SMALL))
    bad["model"]["layers"][1]["units"] = -3
    with pytest.raises(ValueError, match=r"model.layers\[1\].units"):
        sg.train(bad)
    with pytest.raises(ValueError, match="unknown device"):
        sg.train(SMALL, device="gpu")
    with pytest.raises(sg.Error):
        sg.train("/nonexistent/config.json")
    with pytest.raises(ValueError, match="expected a dict or a path"):
        sg.train(42)


def test_train_runs_data_parallel_from_the_launch_environment(monkeypatch):
    # stepgraph.train starts data-parallel training as the CLI's train does: from train.distributed
    # and from the torchrun-style environment it was launched with; both need CUDA devices.
    cfg = json.loads(json.dumps(SMALL))
    cfg["train"].update(device="cpu", distributed="nccl")
    with pytest.raises(sg.Error, match=r"data-parallel training \(rank 0 of 1, single launch\) runs on CUDA"):
        sg.train(cfg)
    cfg["train"]["distributed"] = "auto"
    for k, v in dict(WORLD_SIZE="2", RANK="1", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(sg.Error, match=r"rank 1 of 2, torchrun launch"):
        sg.train(cfg)


# ---- plot and CLI -------------------------------------------------------------------------------


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'stepgraph[plot]')")
    run = tmp_path / "run"
    sg.train(SMALL, out_dir=run)
    png = sg.plot(run)
    assert png == str(run / "loss.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    out = tmp_path / "curve.png"
    r = subprocess.run([sys.executable, "-m", "stepgraph", "plot", str(run), "--out", str(out), "--log"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.exists() and "wrote" in r.stdout


def test_plot_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metrics file"):
        sg.plot(tmp_path)
    r = subprocess.run([sys.executable, "-m", "stepgraph", "plot", str(tmp_path / "nothing")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "no metrics file" in r.stderr


def test_cli_is_installed_and_forwarded():
    from stepgraph.__main__ import _find_cli

    r = subprocess.run([sys.executable, "-m", "stepgraph", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and sg.__version__ in r.stdout
    cli = _find_cli()
    if cli is None:
        pytest.skip("the stepgraph executable is not installed (not a pip install)")
    r = subprocess.run([sys.executable, "-m", "stepgraph", "train", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--steps" in r.stdout


# ---- physics-informed runs ------------------------------------------------------------------------


def test_physics_informed_config_trains_through_python(tmp_path):
    """A custom problem (heat equation) from a dict: the summary carries the relative L2 error."""
    config = {
        "model": {"layers": [{"type": "fourier_features", "features": 8, "sigma": 1.0},
                             {"type": "dense", "units": 16, "activation": "tanh"},
                             {"type": "dense", "units": 1}]},
        "problem": {"coordinates": ["t", "x"], "domain": [[0, 1], [0, 1]],
                    "constants": {"alpha": 0.1}, "residual": "u_t - alpha*u_xx",
                    "conditions": [{"on": "t=0", "residual": "u - sin(pi*x)", "points": 64, "weight": 10},
                                   {"on": "x=0", "residual": "u", "points": 32},
                                   {"on": "x=1", "residual": "u", "points": 32}],
                    "exact": "exp(-alpha*pi^2*t)*sin(pi*x)", "interior_points": 128},
        "optimizer": {"type": "adam", "lr": 0.005},
        "train": {"steps": 200, "log_every": 0, "device": "cpu"},
    }
    summary = sg.train(config, out_dir=str(tmp_path / "heat"))
    assert summary["task"] == "physics-informed"
    assert summary["steps"] == 200
    assert 0 <= summary["rel_l2_error"] < 0.5
    assert set(summary["loss_terms"]) == {"residual", "t=0", "x=0", "x=1"}


def test_fourier_features_layer():
    layer = sg.FourierFeatures(4, sigma=2.0)
    assert "fourier_features(4" in layer.describe()
    with pytest.raises(ValueError):
        sg.FourierFeatures(0)


def test_plot_draws_the_solution_of_a_physics_informed_run(tmp_path):
    pytest.importorskip("matplotlib")
    config = {
        "model": {"layers": [{"type": "dense", "units": 8, "activation": "tanh"}, {"type": "dense", "units": 1}]},
        "problem": {"type": "poisson2d", "interior_points": 64, "boundary_points": 32, "eval_points": 400},
        "optimizer": {"type": "adam", "lr": 0.01},
        "train": {"steps": 20, "log_every": 10, "device": "cpu"},
    }
    run = tmp_path / "poisson"
    sg.train(config, out_dir=str(run))
    for name in ("eval_points.npy", "prediction.npy", "exact.npy"):
        assert (run / name).exists(), name
    assert np.load(run / "prediction.npy").shape == (400, 1)
    sg.plot(str(run))
    assert (run / "loss.png").stat().st_size > 1000
    assert (run / "solution.png").stat().st_size > 1000
