"""What a run records and how it stops: metrics.csv, TensorBoard scalars (read back with
TensorBoard's own reader), the callback that stops a run, early stopping, and train.on_nan."""

import csv
import json

import numpy as np
import pytest

import stepgraph as sg

from test_runs import SMALL  # the small classification run of the whole-run tests


def records(run, event):
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("event") == event]


def test_metrics_csv_matches_metrics_jsonl(tmp_path):
    run = tmp_path / "run"
    sg.train(SMALL, out_dir=run)
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    progress = [r for r in rows if r["event"] == "progress"]
    assert [int(r["step"]) for r in progress] == [10, 20, 30, 40, 50, 60]
    for row, rec in zip(progress, records(run, "progress")):
        assert float(row["loss"]) == pytest.approx(rec["loss"], rel=1e-6)
    evals = [r for r in rows if r["event"] == "eval"]
    assert [int(r["step"]) for r in evals] == [20, 40, 60]
    assert all(r["loss"] == "" for r in evals)  # an eval record has no training loss


def test_tensorboard_reads_the_scalars_back(tmp_path):
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator", reason="tensorboard is not installed"
    )
    run, tb = tmp_path / "run", tmp_path / "tb" / "nested"  # parents are created
    sg.train(SMALL, out_dir=run, tensorboard=tb)
    ea = accumulator.EventAccumulator(str(tb))
    ea.Reload()
    tags = ea.Tags()["scalars"]
    assert {"loss", "lr", "val_loss", "val_accuracy"} <= set(tags), tags
    want = [(r["step"], float(np.float32(r["loss"]))) for r in records(run, "progress")]
    assert [(e.step, e.value) for e in ea.Scalars("loss")] == want
    assert [e.step for e in ea.Scalars("val_loss")] == [20, 40, 60]


def test_tensorboard_folder_that_cannot_be_made_is_an_error(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("a file, not a folder")
    with pytest.raises(sg.Error, match="cannot create TensorBoard folder"):
        sg.train(SMALL, steps=5, tensorboard=plain / "tb")


def test_callback_sees_every_record_and_false_stops_the_run(tmp_path):
    seen = []

    def watch(record):
        seen.append((record["event"], record["step"]))
        return record["step"] < 30

    r = sg.train(SMALL, out_dir=tmp_path / "run", callback=watch)
    assert r["steps"] == 30 and r["stopped_by"] == "callback"
    # The run then ends as a finished one: its final evaluation is a record too.
    assert seen == [("progress", 10), ("progress", 20), ("eval", 20), ("progress", 30), ("eval", 30)]
    assert (tmp_path / "run" / "checkpoint.safetensors").exists()
    assert r.trainer.step == 30


def test_a_raising_callback_ends_the_run_with_an_error_naming_it():
    def broken(record):
        raise KeyError("no such metric")

    with pytest.raises(sg.Error, match="callback raised KeyError"):
        sg.train(SMALL, callback=broken)


def test_early_stopping_restores_the_best_evaluation():
    cfg = json.loads(json.dumps(SMALL))
    cfg["train"].update(steps=400, eval_every=10, early_stopping={"metric": "val_accuracy", "patience": 2, "min_delta": 2})
    r = sg.train(cfg)  # an accuracy cannot improve by 2: it stops after the first evaluation and two more
    assert r["stopped_by"] == "early_stopping" and r["steps"] == 30 and r["best_step"] == 10
    ten = sg.train(dict(SMALL, train=dict(SMALL["train"], steps=10)))
    assert r["accuracy"] == ten["accuracy"]  # the step-10 parameters, restored


def test_on_nan_stop_names_the_step_and_skip_trains_on():
    cfg = json.loads(json.dumps(SMALL))  # diverges within a few steps
    cfg["model"]["layers"] = [{"type": "dense", "units": 64}, {"type": "dense", "units": 64}, {"type": "dense", "units": 3}]
    cfg["optimizer"] = {"type": "sgd", "lr": 1e6, "momentum": 0.9}
    with pytest.raises(sg.Error, match=r"became NaN or inf at step \d+"):
        sg.train(cfg)
    r = sg.train(cfg, on_nan="skip")
    assert r["steps"] == 60 and r["nonfinite_steps"] > 0
    assert r.trainer.nonfinite_steps[1] == r["nonfinite_steps"]
    with pytest.raises(ValueError, match="on_nan: expected 'stop', 'skip' or 'continue'"):
        sg.train(cfg, on_nan="ignore")


def test_trainer_on_nan_skip_leaves_the_update_out():
    t = sg.Trainer(sg.Sequential(sg.Dense(4, activation="relu"), sg.Dense(1)), sg.MeanSquaredError(), sg.Adam(1e-2),
                   device="cpu", on_nan="skip")
    assert t.options["on_nan"] == "skip"
    t.compile((8, 3))
    x = np.ones((8, 3), np.float32)
    t.one_step(x, np.zeros((8, 1), np.float32))
    before = t.params()
    t.one_step(x, np.full((8, 1), np.nan, np.float32))
    assert t.nonfinite_steps == (2, 1)
    for name, value in t.params().items():
        np.testing.assert_array_equal(value, before[name])
