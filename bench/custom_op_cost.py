"""What a user-defined op costs in the replayed step: the same graph model with the built-in
square activation and with a Python CustomOp computing x*x through PyTorch kernels (two launches:
mul into the output; backward mul, mul), on CUDA, timed over replays.
    python3 bench/custom_op_cost.py [--steps 2000]"""
import argparse
import time

import numpy as np
import torch

import stepgraph as sg


class TorchSquare(sg.CustomOp):
    def output_shapes(self, s):
        return [s]

    def forward(self, inputs, outputs, stream):
        x, y = torch.from_dlpack(inputs[0]), torch.from_dlpack(outputs[0])
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.mul(x, x, out=y)

    def backward(self, grad_outputs, inputs, outputs, grad_inputs, stream):
        dy, x, dx = (torch.from_dlpack(a) for a in (grad_outputs[0], inputs[0], grad_inputs[0]))
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.mul(x, dy, out=dx)
            dx.mul_(2.0)


def model(user):
    x = sg.Input(16, name="x")
    h = sg.Dense(64, name="a")(x)
    h = TorchSquare()(h) if user else sg.activation(h, "square")
    return sg.Model(inputs=[x], outputs={"y": sg.Dense(1, name="b")(h)})


def step_us(user, steps, rows=256):
    t = sg.Trainer(model(user), {"y": sg.MeanSquaredError()}, sg.Adam(1e-3), device="cuda")
    t.compile(rows)
    r = np.random.default_rng(0)
    X = {"x": r.standard_normal((rows, 16)).astype(np.float32)}
    Y = {"y": r.standard_normal((rows, 1)).astype(np.float32)}
    t.set_batch(X, Y)
    for _ in range(50):
        t.launch()
    t.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        t.launch()
    t.synchronize()
    return 1e6 * (time.perf_counter() - t0) / steps, t.graph_nodes


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    a = ap.parse_args()
    for _ in range(2):
        b, nb = step_us(False, a.steps)
        u, nu = step_us(True, a.steps)
    print(f"{torch.cuda.get_device_name()}: built-in square {b:.2f} us/step ({nb} graph nodes), "
          f"Python CustomOp square {u:.2f} us/step ({nu} graph nodes), ratio {u / b:.3f}")
