#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

    python3 tests/fuzz/make_corpus.py

Two kinds of files: seed_* are small valid inputs (the repository's configs and CSVs, arrays and
checkpoints written here), regress_* are hostile inputs kept as regression cases (deep nesting,
huge numbers, duplicate keys, sizes whose product overflows, zip amplification). Every byte is
deterministic (no timestamps), so rerunning the script changes nothing unless the script did.
Inputs found by fuzzing are committed as they are, named found_* (docs/fuzzing.md); this script
leaves those alone.
Needs numpy (for the .npy seeds).
"""
import io
import json
import os
import struct
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
DEEP = 10000  # nesting deeper than any sane parser limit


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= 64 * 1024, (name, len(data))
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a, allow_pickle=False)
    return b.getvalue()


def npy_header_only(descr, shape, total):
    """A version 1.0 .npy header for `shape`, followed by zeros up to `total` bytes."""
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode()
    return head + b"\0" * (total - len(head))


def zip_bytes(members, listing=None):
    """A zip archive: members = [(name, data, deflate)] as local entries; `listing` = the central
    directory as [(name, member index)] (default: each member once, under its own name)."""
    body, locals_ = b"", []
    for name, data, deflate in members:
        crc = zlib.crc32(data)
        if deflate:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            payload = c.compress(data) + c.flush()
        else:
            payload = data
        method = 8 if deflate else 0
        fields = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0x21, crc, len(payload), len(data),
                             len(name), 0)
        locals_.append((len(body), fields))
        body += b"PK\x03\x04" + fields + name.encode() + payload
    if listing is None:
        listing = [(name, i) for i, (name, _, _) in enumerate(members)]
    central = b""
    for name, i in listing:
        offset, fields = locals_[i]
        # Central fields: made by, then the local header's fields with this entry's name length.
        f = bytearray(fields)
        struct.pack_into("<H", f, 22, len(name))
        central += (b"PK\x01\x02" + struct.pack("<H", 20) + bytes(f) +
                    struct.pack("<HHHII", 0, 0, 0, 0, offset) + name.encode())
    eocd = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, len(listing), len(listing), len(central),
                                       len(body), 0)
    return body + central + eocd


def safetensors_bytes(tensors, metadata=None, raw_header=None):
    """tensors = [(name, dtype, shape, bytes)]; raw_header replaces the JSON header text."""
    header, data = {}, b""
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + data


def config_corpus():
    for d, prefix in ((os.path.join(ROOT, "configs"), "seed_"), (os.path.join(ROOT, "tests", "data"), "seed_test_")):
        for f in sorted(os.listdir(d)):
            if f.endswith(".json"):
                with open(os.path.join(d, f), "rb") as src:
                    put("fuzz_config", prefix + f, src.read())
    # Deep nesting: the parser must refuse it with an error, not overflow its stack.
    # (Closed ones under a known key reach parse_config, which copies the document recursively.)
    put("fuzz_config", "regress_deep_arrays.json", '{"model":' + "[" * DEEP)
    put("fuzz_config", "regress_deep_objects.json", '{"model":' + '{"a":' * DEEP + "1" + "}" * DEEP + "}")
    put("fuzz_config", "regress_deep_layers.json",
        '{"model":{"layers":' + "[" * (3 * DEEP) + "]" * (3 * DEEP) + "}}")
    # 1e400 is no double: an error, not inf passed on as a learning rate.
    put("fuzz_config", "regress_number_1e400.json",
        '{"model":{"layers":[{"type":"dense","units":10}]},"optimizer":{"type":"adam","learning_rate":1e400}}')
    put("fuzz_config", "regress_integer_1e400.json",
        '{"model":{"layers":[{"type":"dense","units":10}]},"train":{"steps":1e400}}')
    # Duplicate keys: an error, not "the last one wins" silently.
    put("fuzz_config", "regress_duplicate_keys.json",
        '{"model":{"layers":[{"type":"dense","units":10}]},"train":{"steps":10,"steps":20}}')
    # A conv2d weight of 16777216 x 4096 x 4096 x 1 = 2^62 elements: refused, not allocated.
    put("fuzz_config", "regress_conv2d_2pow62.json",
        '{"model":{"input_shape":[1,1,16384],"layers":[{"type":"conv2d","filters":16777216,'
        '"kernel":4096,"padding":2048},{"type":"flatten"},{"type":"dense","units":10}]}}')


def csv_corpus():
    # The first byte picks the options (tests/fuzz/fuzz_csv.cpp): 0x00 classification with the
    # label in the last column; 0x88 regression with the last column as the one target.
    for f in ("tiny.csv", "bad_label.csv", "negative_label.csv"):
        with open(os.path.join(ROOT, "tests", "data", f), "rb") as src:
            text = src.read()
        put("fuzz_csv", "seed_" + f, b"\x00" + text)
        put("fuzz_csv", "seed_regression_" + f, b"\x88" + text)
    put("fuzz_csv", "seed_header_bom_quotes.csv", b"\x00\xef\xbb\xbf\"a\", \"b\" ,label\r\n1,+2.5,0\r\n\r\n3,-4e-3,1\r\n")
    put("fuzz_csv", "seed_two_targets.csv", b"\x90" + b"x,y,t1,t2\n1,2,3,4\n5,6,7,8\n")
    # A first row of nan or inf is not a header: data must be finite, the row is no name row.
    put("fuzz_csv", "regress_first_row_nan.csv", b"\x00nan,1,0\n1,2,1\n3,4,0\n")
    put("fuzz_csv", "regress_first_row_inf.csv", b"\x00inf,-inf,1\n1,2,1\n3,4,0\n")
    put("fuzz_csv", "regress_first_row_nan_regression.csv", b"\x88" + b"1,nan\n1,2\n3,4\n")


def npy_corpus():
    r = np.arange(6)
    for name, a in (("f4", r.astype("<f4").reshape(2, 3)), ("f8", r.astype("<f8") / 7),
                    ("i4", r.astype("<i4") - 3), ("i8", r.astype("<i8").reshape(3, 2)),
                    ("u1", r.astype("u1")), ("i1", (r - 3).astype("i1")), ("b1", r % 2 == 0),
                    ("u8", r.astype("<u8")), ("scalar", np.float32(1.5)), ("empty", np.zeros((0, 3), "<f4"))):
        put("fuzz_npy", "seed_%s.npy" % name, npy_bytes(a))
    v2 = bytearray(npy_bytes(r.astype("<f4")))
    # Version 2.0: the same header with a 4-byte length.
    put("fuzz_npy", "seed_v2.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", struct.unpack("<H", v2[8:10])[0]) + bytes(v2[10:]))
    # A shape whose element count overflows 64 bits: an error, no allocation.
    put("fuzz_npy", "regress_shape_overflow.npy", npy_header_only("<f4", "(4611686018427387904, 8)", 128))


def npz_corpus():
    X = np.arange(12, dtype="<f4").reshape(4, 3)
    y = np.array([0, 1, 1, 0], dtype="<i8")
    put("fuzz_npz", "seed_stored.npz", zip_bytes([("X.npy", npy_bytes(X), False), ("y.npy", npy_bytes(y), False)]))
    put("fuzz_npz", "seed_deflated.npz", zip_bytes([("X.npy", npy_bytes(X), True), ("y.npy", npy_bytes(y), True)]))
    put("fuzz_npz", "seed_dir_entry.npz", zip_bytes([("d/", b"", False), ("d/X.npy", npy_bytes(X), True)]))
    # One 32 MiB member, listed 64 times under different names: 2 GiB of arrays from ~33 KB.
    big = npy_header_only("<f4", "(%d,)" % ((32 << 20) // 4 - 32), 32 << 20)
    put("fuzz_npz", "regress_shared_member_64.npz",
        zip_bytes([("a0.npy", big, True)], listing=[("a%d.npy" % i, 0) for i in range(64)]))
    # A deflated member of 48 MiB whose array is 4 floats: the rest is padding no one needs.
    put("fuzz_npz", "regress_zip_bomb.npz", zip_bytes([("X.npy", npy_header_only("<f4", "(4,)", 48 << 20), True)]))


def safetensors_corpus():
    f32 = np.arange(6, dtype="<f4").tobytes()
    put("fuzz_safetensors", "seed_one.safetensors", safetensors_bytes([("w", "F32", [2, 3], f32)]))
    put("fuzz_safetensors", "seed_three_metadata.safetensors", safetensors_bytes(
        [("0.weight", "F32", [3, 2], f32), ("step", "I32", [], struct.pack("<i", 7)),
         ("seed", "U64", [1], struct.pack("<Q", 42))], metadata={"format": "stepgraph", "steps": "7"}))
    put("fuzz_safetensors", "seed_empty_tensor.safetensors", safetensors_bytes([("e", "F32", [0, 4], b"")]))
    with open(os.path.join(ROOT, "tests", "data", "not_a_checkpoint.safetensors"), "rb") as src:
        put("fuzz_safetensors", "seed_test_not_a_checkpoint.safetensors", src.read())
    put("fuzz_safetensors", "regress_deep_header.safetensors",
        safetensors_bytes([], raw_header='{"a":' * DEEP + "1" + "}" * DEEP))
    put("fuzz_safetensors", "regress_duplicate_names.safetensors", safetensors_bytes([], raw_header=(
        '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')) + f32[:8])
    put("fuzz_safetensors", "regress_shape_overflow.safetensors", safetensors_bytes([], raw_header=(
        '{"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}}')))


def expression_corpus():
    for i, text in enumerate(("u_t + u*u_x - nu*u_xx", "-(u_xx + u_yy) - 2*pi^2*sin(pi*x)*sin(pi*y)",
                              "u_t - nu*u_xx", "u - sin(pi*x)", "exp(-nu*pi^2*t)*sin(pi*x)",
                              "2^3^2 + -x^2 + 2^-1", "sqrt(abs(x)) / (1 + tanh(y)) - log(1e-3 + t*t)",
                              "nu*u_xx + nu*u_t + u_x", "-u_xx/nu - u_t/nu", ".5*x + 1E3*y - 2.5e-3")):
        put("fuzz_expression", "seed_%02d.txt" % i, text)
    put("fuzz_expression", "regress_deep_parentheses.txt", "(" * DEEP + "x" + ")" * DEEP)
    put("fuzz_expression", "regress_deep_unary.txt", "-" * DEEP + "x")
    put("fuzz_expression", "regress_deep_power.txt", "x^" * DEEP + "x")
    put("fuzz_expression", "regress_long_sum.txt", "+".join(["x"] * 2000))


def config_dict():
    """tests/fuzz/fuzz_config.dict: the words the config parser knows (JSON keys, type names,
    enum values: every lower-case string literal of the parsing sources), so that mutations
    reach past "unknown key" errors."""
    import re
    words = set()
    for f in ("src/train/config.cpp", "src/pinn/problem.cpp"):
        with open(os.path.join(ROOT, f)) as src:
            words.update(re.findall(r'"([a-z][a-z_0-9]{1,30})"', src.read()))
    lines = ["# Generated by tests/fuzz/make_corpus.py; the words of src/train/config.cpp and src/pinn/problem.cpp."]
    lines += ['"\\"%s\\""' % w for w in sorted(words)]
    lines += ['"%s"' % t for t in ("{", "}", "[", "]", ":", ",", "true", "false", "null", "-1", "1e400", "0.5")]
    with open(os.path.join(ROOT, "tests", "fuzz", "fuzz_config.dict"), "w") as out:
        out.write("\n".join(lines) + "\n")


def expression_dict():
    """tests/fuzz/fuzz_expression.dict: the functions and the harness's variable names."""
    words = ("sin(", "cos(", "exp(", "log(", "tanh(", "sqrt(", "abs(", "pi", "x", "y", "t", "u", "u_x",
             "u_xx", "u_t", "nu", "^", "1e-3", "1E3", ".5")
    with open(os.path.join(ROOT, "tests", "fuzz", "fuzz_expression.dict"), "w") as out:
        out.write("# Generated by tests/fuzz/make_corpus.py.\n" + "".join('"%s"\n' % w for w in words))


def main():
    if os.path.isdir(CORPUS):
        # Only what this script makes is rewritten; committed fuzzer finds (found_*) stay.
        for target in os.listdir(CORPUS):
            for f in os.listdir(os.path.join(CORPUS, target)):
                if f.startswith(("seed_", "regress_")):
                    os.remove(os.path.join(CORPUS, target, f))
    config_corpus()
    csv_corpus()
    npy_corpus()
    npz_corpus()
    safetensors_corpus()
    expression_corpus()
    config_dict()
    expression_dict()


if __name__ == "__main__":
    main()
