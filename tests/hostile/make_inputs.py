#!/usr/bin/env python3
"""Writes the hostile inputs of the CLI's regression tests (tests/cli_tests.cmake, "Hostile
input") into a folder: each once crashed stepgraph, exhausted memory, hung, or was silently
taken. Standard library only; the large ones are generated, not committed.

    python3 tests/hostile/make_inputs.py OUT_DIR
"""
import json
import os
import struct
import sys
import zlib

DIGITS_MLP = {
    "model": {"layers": [{"type": "dense", "units": 256, "activation": "relu"}, {"type": "dense", "units": 10}]},
    "data": {"source": "digits"},
    "train": {"steps": 5, "batch_size": 64, "device": "cpu", "log_every": 1},
}


def npy_header(shape, descr="<f4"):
    dims = "(%s,)" % shape[0] if len(shape) == 1 else "(%s)" % ", ".join(str(d) for d in shape)
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, dims)
    h += " " * ((16 - (10 + len(h) + 1) % 16) % 16) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()


def deflate_zeros(prefix, zeros):
    """A raw deflate stream of prefix + `zeros` zero bytes, and its CRC-32: one compressed block of
    64 MiB of zeros (after a full flush it references nothing before it) repeated."""
    chunk = 1 << 26
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    tail_zeros = zeros % chunk
    tail = c.compress(bytes(tail_zeros)) + c.flush(zlib.Z_FINISH)
    crc = zlib.crc32(prefix)
    zero_chunk = bytes(chunk)
    for _ in range(zeros // chunk):
        crc = zlib.crc32(zero_chunk, crc)
    crc = zlib.crc32(bytes(tail_zeros), crc)
    return head + block * (zeros // chunk) + tail, crc & 0xFFFFFFFF, len(prefix) + zeros


def zip_archive(members, aliases=0):
    """members: (name, deflated bytes, crc, uncompressed size). aliases: extra central-directory
    entries that point at the first member's bytes."""
    out = bytearray()
    central = []
    for name, data, crc, usize in members:
        nb = name.encode()
        central.append((nb, crc, len(data), usize, len(out)))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0, crc, len(data),
                           min(usize, 0xFFFFFFFF), len(nb), 0) + nb + data
    first = central[0]
    central += [(b"alias%d.npy" % i,) + first[1:] for i in range(aliases)]
    cd = bytearray()
    for nb, crc, csize, usize, off in central:
        z64 = usize >= 0xFFFFFFFF
        extra = struct.pack("<HHQ", 1, 8, usize) if z64 else b""
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 8, 0, 0, crc, csize,
                          0xFFFFFFFF if z64 else usize, len(nb), len(extra), 0, 0, 0, 0, off) + nb + extra
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), len(cd), len(out), 0)
    return bytes(out + cd + end)


def npz_config(path):
    return {"model": {"layers": [{"type": "dense", "units": 10}]},
            "data": {"source": "npz", "path": path, "validation_split": 0}, "train": {"steps": 2, "device": "cpu"}}


def main(out):
    os.makedirs(out, exist_ok=True)

    def put(name, text):
        with open(os.path.join(out, name), "w") as f:
            f.write(text)

    def put_json(name, obj):
        put(name, json.dumps(obj))

    # 1. Crashes: nesting deep enough to overflow the stack, and a weight of 2^62 elements.
    put("deep_objects.json", '{"model": ' + '{"a": ' * 100000 + "1" + "}" * 100000 + "}")
    put("deep_arrays.json", '{"model": ' + "[" * 1000000 + "]" * 1000000 + "}")
    put_json("conv_2p62.json", {
        "model": {"input_shape": [1, 1, 16384], "layers": [
            {"type": "conv2d", "filters": 16777216, "kernel": 4096, "padding": 2048},
            {"type": "flatten"}, {"type": "dense", "units": 10}]},
        "data": {"source": "synthetic_classification", "features": 16384, "samples": 64, "classes": 10},
        "train": {"steps": 2, "batch_size": 2, "device": "cpu"}})

    # 2. Memory: a dense layer of 2^24 units on digits (16 GiB of state); npz files that inflate to
    # 6 GiB from 6 MB, and 64 entries sharing one 512 MiB member.
    dense = json.loads(json.dumps(DIGITS_MLP))
    dense["model"]["layers"][0]["units"] = 1 << 24
    put_json("dense_2p24.json", dense)
    rows = (6 << 30) // 256
    x, xcrc, xsize = deflate_zeros(npy_header((rows, 64)), rows * 256)
    y, ycrc, ysize = deflate_zeros(npy_header((rows,), "<i4"), rows * 4)
    with open(os.path.join(out, "inflates_6g.npz"), "wb") as f:
        f.write(zip_archive([("X.npy", x, xcrc, xsize), ("y.npy", y, ycrc, ysize)]))
    put_json("inflates_6g.json", npz_config("inflates_6g.npz"))
    m, mcrc, msize = deflate_zeros(npy_header((1 << 21, 64)), 512 << 20)
    with open(os.path.join(out, "shared_member.npz"), "wb") as f:
        f.write(zip_archive([("X.npy", m, mcrc, msize)], aliases=63))
    put_json("shared_member.json", npz_config("shared_member.npz"))

    # 3. Hangs: 6.7M layers (200 MB), and 20k / 80k layers (quadratic model building).
    with open(os.path.join(out, "layers_6m.json"), "w") as f:
        f.write('{"model": {"layers": [' + '{"type":"dense","units":4},' * 6700000 + '{"type":"dense","units":10}]}}')
    for n, name in ((20000, "layers_20k.json"), (80000, "layers_80k.json")):
        cfg = json.loads(json.dumps(DIGITS_MLP))
        cfg["model"]["layers"] = [{"type": "dense", "units": 4, "activation": "relu"}] * n + [{"type": "dense", "units": 10}]
        put_json(name, cfg)

    # 5. Silently wrong: a first CSV row of nan (taken as a header), duplicate keys.
    put("nan_first_row.csv", "nan,1,2,0\n1,2,3,1\n2,3,4,0\n3,4,5,1\n4,5,6,0\n")
    put_json("nan_first_row.json", {"model": {"layers": [{"type": "dense", "units": 2}]},
                                   "data": {"source": "csv", "path": "nan_first_row.csv", "validation_split": 0},
                                   "train": {"steps": 2, "batch_size": 2, "device": "cpu"}})
    put("duplicate_steps.json", json.dumps(DIGITS_MLP).replace('"steps": 5', '"steps": 5, "steps": 7'))
    text = json.dumps(DIGITS_MLP)
    put("duplicate_model.json", text[:-1] + ', "model": {"layers": [{"type": "dense", "units": 10}]}}')

    # 7. Unclear messages: a number beyond a double, a data path that is a directory.
    put("number_1e400.json", json.dumps(DIGITS_MLP).replace('"batch_size": 64', '"batch_size": 64, "seed": 1e400'))
    put_json("data_is_directory.json", {"model": {"layers": [{"type": "dense", "units": 2}]},
                                        "data": {"source": "csv", "path": "."}, "train": {"device": "cpu"}})

    # 5, 4. Checkpoints from another setup, and a divergence with a checkpoint every step.
    tanh = json.loads(json.dumps(DIGITS_MLP))
    tanh["model"]["layers"][0]["activation"] = "tanh"
    put_json("digits_tanh.json", tanh)
    put_json("digits_adamw.json", dict(DIGITS_MLP, optimizer={"type": "adamw", "lr": 0.001}))
    put_json("digits_adam.json", dict(DIGITS_MLP, optimizer={"type": "adam", "lr": 0.01}))
    diverge = dict(DIGITS_MLP, optimizer={"type": "sgd", "lr": 1e6, "momentum": 0.9})
    diverge["model"] = {"layers": [{"type": "dense", "units": 64}, {"type": "dense", "units": 64}, {"type": "dense", "units": 10}]}
    diverge["train"] = dict(DIGITS_MLP["train"], steps=20, checkpoint_every=1)
    put_json("diverges.json", diverge)


if __name__ == "__main__":
    main(sys.argv[1])
