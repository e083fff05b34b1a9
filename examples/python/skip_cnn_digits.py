"""A small CNN with U-Net-style skip connections by concatenation classifies the 8x8 digits.

Two 3x3 convolutions at full resolution are joined channel-wise with the image itself (skips by
concat, as a U-Net's encoder features reach its decoder), a third convolution reads that, then
pooling halves the resolution and a dense head classifies. Images are NHWC: (8, 8, 1) per sample.

    python examples/python/skip_cnn_digits.py --steps 800
"""
import argparse

import numpy as np

import stepgraph as sg


def named(layer, name):
    layer.name = name
    return layer


def build() -> sg.Model:
    image = sg.Input((8, 8, 1), name="image")
    c1 = named(sg.Conv2d(8, 3, padding=1, activation="relu"), "c1")(image)
    c2 = named(sg.Conv2d(8, 3, padding=1, activation="relu"), "c2")(c1)
    joined = sg.concat([image, c1, c2], axis=-1)  # (8, 8, 17): the skips
    c3 = named(sg.Conv2d(16, 3, padding=1, activation="relu"), "c3")(joined)
    pooled = sg.MaxPool2d(2)(c3)  # (4, 4, 16)
    logits = sg.Dense(10, name="head")(pooled.reshape(-1))
    return sg.Model(inputs=[image], outputs={"digit": logits})


def main(steps: int = 800, device: str = "auto", batch: int = 64, seed: int = 0) -> dict:
    X, labels = sg.load_digits()
    images = X.reshape(-1, 8, 8, 1)
    order = np.random.default_rng(seed).permutation(len(X))
    train, test = order[: len(X) * 4 // 5], order[len(X) * 4 // 5:]
    trainer = sg.Trainer(build(), {"digit": sg.SoftmaxCrossEntropy()}, sg.Adam(2e-3), device=device, seed=seed)
    trainer.compile(batch)
    rng = np.random.default_rng(seed + 1)
    for step in range(steps):
        rows = rng.choice(train, batch, replace=False)
        loss = trainer.one_step({"image": images[rows]}, {"digit": labels[rows]})
        if (step + 1) % max(steps // 4, 1) == 0:
            print(f"step {step + 1}/{steps}  loss {loss:.4f}")
    pred = trainer.predict({"image": images[test]})["digit"]
    accuracy = float(np.mean(pred.argmax(axis=1) == labels[test]))
    print(f"held-out digits: accuracy {100 * accuracy:.1f}% on {trainer.device}")
    return {"accuracy": accuracy}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--device", default="auto")
    a = p.parse_args()
    main(a.steps, a.device)
