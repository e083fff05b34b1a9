"""A regression of two inputs with batch norm and dropout: features x and a time t -> y.

y = exp(-t softplus(x . a)) sin(x . b) + noise: a decay whose rate and amplitude depend on the
features. x goes through a dense layer and batch norm, t through a dense layer of its own; the
two are joined, and dropout regularises the layer before the head. The data set is
device-resident: uploaded once, and every step gathers its batch inside the step. The CLI twin,
configs/two_input_regression.json, splits one generated X into the same kind of two inputs.

    python examples/python/two_input_regression.py --steps 2000
"""
import argparse

import numpy as np

import stepgraph as sg

FEATURES = 6


def make_data(rows: int, seed: int) -> tuple[dict, dict]:
    """Inputs {"x": [rows, 6], "t": [rows, 1]} and the target {"y": [rows, 1]}."""
    weights = np.random.default_rng(0)  # one law for every split
    a, b = weights.standard_normal(FEATURES) / np.sqrt(FEATURES), weights.standard_normal(FEATURES)
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (rows, FEATURES))
    t = r.uniform(0, 2, (rows, 1))
    y = np.exp(-t * np.logaddexp(0, x @ a)[:, None]) * np.sin(x @ b)[:, None] + 0.02 * r.standard_normal((rows, 1))
    return {"x": x.astype(np.float32), "t": t.astype(np.float32)}, {"y": y.astype(np.float32)}


def build(p: float = 0.1, width: int = 64) -> sg.Model:
    x = sg.Input(FEATURES, name="x")
    t = sg.Input(1, name="t")
    norm = sg.BatchNorm()
    norm.name = "norm"
    hx = norm(sg.Dense(width, activation="relu", name="hx")(x))
    ht = sg.Dense(16, activation="tanh", name="ht")(t)
    h = sg.Dense(width, activation="relu", name="h")(sg.concat([hx, ht], axis=-1))
    drop = sg.Dropout(p)
    drop.name = "drop"
    return sg.Model(inputs=[x, t], outputs={"y": sg.Dense(1, name="head")(drop(h))})


def main(steps: int = 2000, device: str = "auto", batch: int = 64, seed: int = 0) -> dict:
    train_x, train_y = make_data(4096, seed=1)
    test_x, test_y = make_data(1024, seed=2)  # rows the steps never see
    trainer = sg.Trainer(build(), {"y": sg.MeanSquaredError()},
                         sg.Adam(3e-3, schedule=sg.Schedule.cosine(0, steps, 0.05)), device=device, seed=seed)
    trainer.compile(batch)
    before = trainer.evaluate(test_x, test_y).loss
    trainer.set_dataset(train_x, train_y, batch)  # uploaded once; each launch gathers its batch
    for step in range(steps):
        trainer.launch()
        if (step + 1) % max(steps // 5, 1) == 0:
            print(f"step {step + 1}/{steps}  loss {trainer.loss:.5f}")
    pred = trainer.predict(test_x)["y"]  # batch norm's running statistics, no dropout
    after = float(np.mean((pred - test_y["y"]) ** 2))
    r2 = 1 - after / float(np.var(test_y["y"]))
    print(f"held-out rows: MSE {before:.5f} -> {after:.5f}, R^2 {r2:.3f} on {trainer.device}")
    return {"mse_before": before, "mse_after": after, "r2": r2}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--device", default="auto")
    a = p.parse_args()
    main(a.steps, a.device)
