"""A DeepONet learns the antiderivative operator: u at 50 sensors -> G(u)(y) = integral of u from 0 to y.

Operator learning (Lu et al., Nature Machine Intelligence 2021): a branch net reads the function u
at fixed sensors, a trunk net reads the query point y, and G(u)(y) is the sum of their product.
The same model trains from the CLI with configs/deeponet.json. Here it is built from Python and
judged on functions it never saw (another seed of the generator).

    python examples/python/deeponet.py --steps 3000
"""
import argparse

import numpy as np

import stepgraph as sg


def build(sensors: int = 50, width: int = 64) -> sg.Model:
    u = sg.Input(sensors, name="u")
    y = sg.Input(1, name="y")
    branch = sg.Dense(width, name="branch")(sg.Dense(width, activation="tanh", name="b1")(u))
    trunk = sg.Dense(width, activation="tanh", name="trunk")(sg.Dense(width, activation="tanh", name="t1")(y))
    return sg.Model(inputs=[u, y], outputs={"G": (branch * trunk).sum(axis=-1, keepdims=True)})


def main(steps: int = 3000, device: str = "auto", batch: int = 128, seed: int = 0) -> dict:
    train = sg.make_antiderivative(functions=400, sensors=50, points=20, seed=1)
    test = sg.make_antiderivative(functions=100, sensors=50, points=20, seed=2)  # unseen functions
    trainer = sg.Trainer(build(), {"G": sg.MeanSquaredError()},
                         sg.Adam(1e-3, schedule=sg.Schedule.cosine(0, steps, 0.05)), device=device, seed=seed)
    trainer.compile(batch)
    inputs = {k: train[k] for k in ("u", "y")}
    before = trainer.evaluate({k: test[k] for k in ("u", "y")}, {"G": test["G"]}).loss
    rng = np.random.default_rng(seed)
    n = len(train["G"])
    for step in range(steps):
        rows = rng.choice(n, batch, replace=False)
        loss = trainer.one_step({k: a[rows] for k, a in inputs.items()}, {"G": train["G"][rows]})
        if (step + 1) % max(steps // 5, 1) == 0:
            print(f"step {step + 1}/{steps}  loss {loss:.5f}")
    pred = trainer.predict({k: test[k] for k in ("u", "y")})["G"]
    rel = float(np.linalg.norm(pred - test["G"]) / np.linalg.norm(test["G"]))
    after = float(np.mean((pred - test["G"]) ** 2))
    print(f"unseen functions: MSE {before:.5f} -> {after:.5f}, relative L2 error {rel:.4f} on {trainer.device}")
    return {"mse_before": before, "mse_after": after, "rel_l2": rel}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--device", default="auto")
    a = p.parse_args()
    main(a.steps, a.device)
