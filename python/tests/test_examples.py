"""The Python examples (examples/python/) run and learn, on the CPU, in fewer steps."""
import importlib.util
import pathlib

import pytest

import stepgraph as sg

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_deeponet_learns_the_antiderivative_of_unseen_functions():
    r = load("deeponet").main(steps=600, device="cpu")
    assert r["mse_after"] < 0.2 * r["mse_before"], r
    assert r["rel_l2"] < 0.5, r


def test_two_head_digits_learns_both_heads():
    r = load("two_head_digits").main(steps=600, device="cpu")
    assert r["accuracy"] > 0.85, r
    assert r["brightness_mse"] < 0.2 * r["brightness_var"], r


def test_skip_cnn_digits_learns():
    r = load("skip_cnn_digits").main(steps=300, device="cpu")
    assert r["accuracy"] > 0.8, r


def test_antiderivative_matches_the_config_source():
    a = sg.make_antiderivative(functions=2, sensors=5, points=3, seed=4)
    assert a["u"].shape == (6, 5) and a["y"].shape == (6, 1) and a["G"].shape == (6, 1)
    assert (a["u"][0] == a["u"][2]).all() and not (a["u"][0] == a["u"][3]).all()
    with pytest.raises(sg.InputError, match="sensors must be at least 2"):
        sg.make_antiderivative(sensors=1)


def test_load_digits():
    X, y = sg.load_digits()
    assert X.shape == (1797, 64) and X.dtype.name == "float32" and 0 <= X.min() and X.max() <= 1
    assert y.shape == (1797,) and set(y.tolist()) == set(range(10))


def test_two_input_regression_learns_from_a_resident_data_set():
    r = load("two_input_regression").main(steps=600, device="cpu")
    assert r["mse_after"] < 0.2 * r["mse_before"], r
    assert r["r2"] > 0.8, r
