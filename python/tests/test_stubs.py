"""The type stubs (stepgraph/_stepgraph.pyi) against the extension as built: every name, every
class member, every function's parameter names and their literal defaults, so they cannot drift
from python/src/*.cpp."""

import ast
import math
import pathlib
import re

import pytest

import stepgraph as sg

STUB = pathlib.Path(sg.__file__).with_name("_stepgraph.pyi")


def stub_tree():
    assert STUB.exists(), "stepgraph/_stepgraph.pyi is missing"
    return ast.parse(STUB.read_text())


def params_of(fn):
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:  # its name is not part of the interface (nanobind calls every one *args)
        names.append("*")
    names += [x.arg for x in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    return names


def runtime_signatures(obj):
    """Each overload's parameter names, from nanobind's __nb_signature__ (None: not a nanobind function)."""
    sigs = getattr(obj, "__nb_signature__", None)
    if sigs is None:
        return None
    out = []
    for sig in sigs:
        text = re.sub(r"\\\d+", "...", sig[0])  # defaults are \0, \1, ... placeholders
        head = text.split("->")[0] if "->" in text else text
        try:
            fn = ast.parse(text.strip() + ": ...").body[0]
            out.append(params_of(fn))
        except SyntaxError:  # types nanobind spells in a way Python does not parse: names alone
            inner = head[head.index("(") + 1 : head.rindex(")")]
            depth, cur, parts = 0, "", []
            for ch in inner:
                depth += 1 if ch in "[(" else -1 if ch in "])" else 0
                if ch == "," and depth == 0:
                    parts.append(cur)
                    cur = ""
                else:
                    cur += ch
            parts.append(cur)
            names = [p.split(":")[0].split("=")[0].strip() for p in parts if p.strip() and p.strip() != "/"]
            out.append(["*" if n.startswith("*") and not n.startswith("**") else n for n in names])
    return out


def test_stubs_cover_the_extension():
    text = STUB.read_text()
    assert (pathlib.Path(sg.__file__).with_name("py.typed")).exists()
    public = [n for n in dir(sg._stepgraph) if not n.startswith("__")]
    missing = [n for n in public if not re.search(rf"\b{re.escape(n)}\b", text)]
    assert not missing, f"not in the stubs: {missing}"
    assert sg.Trainer.one_step.__doc__ and sg.Dense.__init__.__doc__


def test_every_class_member_is_in_its_class_stub():
    tree = stub_tree()
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    problems = []
    for name in dir(sg._stepgraph):
        obj = getattr(sg._stepgraph, name)
        if name.startswith("__") or not isinstance(obj, type) or name not in classes:
            continue
        declared = {n.name for n in classes[name].body if isinstance(n, (ast.FunctionDef, ast.AnnAssign))} | {
            n.target.id for n in classes[name].body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }
        # Members the class itself defines (inherited ones are checked on their own class).
        for member in vars(obj):
            if member.startswith("_") and member not in ("__init__", "__call__", "__getitem__", "__len__"):
                continue
            if member in ("__init__",) and not hasattr(vars(obj)[member], "__nb_signature__"):
                continue
            if member not in declared:
                problems.append(f"{name}.{member}")
    assert not problems, f"members missing from their class in the stubs: {problems}"


def test_function_parameters_match_the_stubs():
    tree = stub_tree()
    stub_fns = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    problems, checked = [], 0

    def check(label, runtime, stub_fn):
        nonlocal checked
        sigs = runtime_signatures(runtime)
        if sigs is None or not stub_fn:
            return
        stub_params = [params_of(f) for f in stub_fn]
        checked += 1
        for params in sigs:
            if params not in stub_params and not any(p[1:] == params[1:] for p in stub_params):
                problems.append(f"{label}: the extension takes {params}, the stub says {stub_params}")

    for name in dir(sg._stepgraph):
        obj = getattr(sg._stepgraph, name)
        if name.startswith("__"):
            continue
        if isinstance(obj, type):
            for member, value in vars(obj).items():
                if member.startswith("_") and member != "__init__":
                    continue
                overloads = [
                    f
                    for c in tree.body
                    if isinstance(c, ast.ClassDef) and c.name == name
                    for f in c.body
                    if isinstance(f, ast.FunctionDef) and f.name == member
                ]
                if overloads:
                    check(f"{name}.{member}", value, overloads)
        elif callable(obj) and name in stub_fns:
            check(name, obj, [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name])
    assert checked > 100, f"only {checked} functions were compared: is __nb_signature__ read right?"
    assert not problems, "\n".join(problems)


def defaults_of(fn):
    """{parameter: its default's AST node} of a parsed def."""
    a = fn.args
    positional = a.posonlyargs + a.args
    out = {x.arg: d for x, d in zip(positional[len(positional) - len(a.defaults) :], a.defaults)}
    out.update({x.arg: d for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    return out


def runtime_defaults(obj):
    """Each overload's {parameter: default value}, the values nanobind keeps beside the signature."""
    out = []
    for sig in getattr(obj, "__nb_signature__", None) or ():
        text = re.sub(r"\\(\d+)", r"__sg_default_\1", sig[0])
        try:
            fn = ast.parse(text.strip() + ": ...").body[0]
        except SyntaxError:  # a type nanobind spells so Python does not parse it: left to the names check
            continue
        values = sig[2] if len(sig) > 2 and sig[2] else ()
        out.append({k: values[int(d.id[len("__sg_default_"):])] for k, d in defaults_of(fn).items()
                    if isinstance(d, ast.Name) and d.id.startswith("__sg_default_")})
    return out


def same_default(stub_value, value):
    if isinstance(stub_value, float) or isinstance(value, float):
        return isinstance(value, (int, float)) and math.isclose(stub_value, value, rel_tol=1e-12, abs_tol=0.0)
    return type(stub_value) is type(value) and stub_value == value


def test_literal_defaults_match_the_stubs():
    """Defaults the stub spells as literals (numbers, strings, booleans, None, tuples) are the
    extension's; others (enum members, objects) are left to the eye."""
    tree = stub_tree()
    stubs = {}  # (class or "", function) -> the stub's overloads' defaults
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            stubs.setdefault(("", node.name), []).append(defaults_of(node))
        elif isinstance(node, ast.ClassDef):
            for f in node.body:
                if isinstance(f, ast.FunctionDef):
                    stubs.setdefault((node.name, f.name), []).append(defaults_of(f))
    problems, compared = [], 0
    for name in dir(sg._stepgraph):
        obj = getattr(sg._stepgraph, name)
        members = vars(obj).items() if isinstance(obj, type) else [("", obj)]
        for member, value in members:
            key = (name, member) if member else ("", name)
            if key not in stubs:
                continue
            for runtime in runtime_defaults(value):
                # The stub overload with the same parameters carrying defaults.
                stub = next((d for d in stubs[key] if set(d) == set(runtime)), None)
                if stub is None:
                    continue
                for param, v in runtime.items():
                    try:
                        want = ast.literal_eval(stub[param])
                    except ValueError:
                        continue
                    if want is Ellipsis:
                        continue
                    compared += 1
                    if not same_default(want, v):
                        problems.append(f"{'.'.join(filter(None, key))}({param}=...): the stub says {want!r}, "
                                        f"the extension {v!r}")
    assert compared > 50, f"only {compared} defaults were compared: is __nb_signature__ read right?"
    assert not problems, "\n".join(problems)
