"""Two heads on one body: each digit's class and its mean brightness, from one network.

A multi-task model: a shared trunk feeds a classifier (softmax cross-entropy on 10 classes) and a
regression head (the image's mean pixel, standardized, mean squared error with weight 0.5); one
step trains both, and the trainer reports each term by name.

    python examples/python/two_head_digits.py --steps 1500
"""
import argparse

import numpy as np

import stepgraph as sg


def build() -> sg.Model:
    image = sg.Input(64, name="image")
    h = sg.Dense(128, activation="relu", name="body1")(image)
    h = sg.Dense(64, activation="relu", name="body2")(h)
    return sg.Model(inputs=[image], outputs={"digit": sg.Dense(10, name="digit")(h),
                                             "brightness": sg.Dense(1, name="brightness")(h)})


def main(steps: int = 1500, device: str = "auto", batch: int = 64, seed: int = 0) -> dict:
    X, labels = sg.load_digits()
    brightness = X.mean(axis=1, keepdims=True)
    brightness = (brightness - brightness.mean()) / brightness.std()  # a target of unit variance
    order = np.random.default_rng(seed).permutation(len(X))
    train, test = order[: len(X) * 4 // 5], order[len(X) * 4 // 5:]
    trainer = sg.Trainer(build(), {"digit": sg.SoftmaxCrossEntropy(), "brightness": (sg.MeanSquaredError(), 0.5)},
                         sg.Adam(1e-3), device=device, seed=seed)
    trainer.compile(batch)
    rng = np.random.default_rng(seed + 1)
    for step in range(steps):
        rows = rng.choice(train, batch, replace=False)
        trainer.one_step({"image": X[rows]}, {"digit": labels[rows], "brightness": brightness[rows]})
        if (step + 1) % max(steps // 5, 1) == 0:
            terms = "  ".join(f"{k} {v:.4f}" for k, v in trainer.loss_terms.items())
            print(f"step {step + 1}/{steps}  loss {trainer.loss:.4f}  {terms}")
    out = trainer.predict({"image": X[test]})
    accuracy = float(np.mean(out["digit"].argmax(axis=1) == labels[test]))
    mse = float(np.mean((out["brightness"] - brightness[test]) ** 2))
    print(f"held-out digits: accuracy {100 * accuracy:.1f}%, brightness MSE {mse:.3f} "
          f"(its variance {np.var(brightness[test]):.3f}) on {trainer.device}")
    return {"accuracy": accuracy, "brightness_mse": mse, "brightness_var": float(np.var(brightness[test]))}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--device", default="auto")
    a = p.parse_args()
    main(a.steps, a.device)
