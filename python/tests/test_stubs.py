"""The type stubs (stepgraph/_stepgraph.pyi) against the extension as built: every name, every
class member and every function's parameter names, so they cannot drift from python/src/*.cpp."""

import ast
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
