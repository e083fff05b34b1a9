"""``python -m stepgraph``: the ``plot`` subcommand and ``export --format onnx`` here; every other
subcommand (train, eval, predict, export, explain, bench) is forwarded to the ``stepgraph``
executable installed with the package.

    python -m stepgraph plot RUN_DIR [--out PNG] [--log | --linear]
    python -m stepgraph export [CONFIG] --checkpoint C --output model.onnx --format onnx
    python -m stepgraph train configs/digits_mlp.json --out runs/digits
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import sysconfig
from typing import List, Optional


def _find_cli() -> Optional[str]:
    exe = "stepgraph.exe" if os.name == "nt" else "stepgraph"
    here = os.path.join(sysconfig.get_path("scripts"), exe)
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("stepgraph")


def _plot_main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(
        prog="stepgraph plot", description="Draw the loss curve of a run from its metrics.jsonl."
    )
    p.add_argument("run_dir", help="the run's output folder (train --out DIR) or its metrics.jsonl")
    p.add_argument("--out", "-o", help="image to write (default RUN_DIR/loss.png)")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--log", dest="log_scale", action="store_true", default=None, help="logarithmic loss axis")
    scale.add_argument("--linear", dest="log_scale", action="store_false", help="linear loss axis")
    args = p.parse_args(argv)
    from ._plot import plot

    try:
        path = plot(args.run_dir, args.out, log_scale=args.log_scale)
    except ImportError as e:
        print(f"stepgraph plot: {e}", file=sys.stderr)
        return 3
    except (FileNotFoundError, ValueError) as e:
        print(f"stepgraph plot: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _wants_onnx(argv: List[str]) -> bool:
    return "--format=onnx" in argv or any(a == "--format" and b == "onnx" for a, b in zip(argv, argv[1:]))


def _export_onnx_main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="stepgraph export", description="Write a checkpoint's model as ONNX.")
    p.add_argument("config", nargs="?", help="configuration JSON file (default: the embedded one)")
    p.add_argument("--checkpoint", required=True, help="checkpoint to export")
    p.add_argument("--output", required=True, help="the .onnx file to write")
    p.add_argument("--format", choices=["onnx"], required=True)
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (17 or later; default 17)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--weights-only", action="store_true", help="take only the checkpoint's parameters")
    p.add_argument("--json", action="store_true", help="print the result as a JSON object")
    args = p.parse_args(argv)
    if os.path.exists(args.output) and not args.overwrite:
        print(f"stepgraph export: error: the output '{args.output}' exists; choose another path or pass --overwrite",
              file=sys.stderr)
        return 1
    import json

    from . import _onnx, _stepgraph

    try:
        trainer, scaling_json = _stepgraph._exportable_trainer(None, args.config, args.checkpoint, args.weights_only)
        scaling = json.loads(scaling_json)
        _onnx.export_onnx(trainer, args.output, args.opset, scaling)
    except ImportError as e:
        print(f"stepgraph export: error: {e}", file=sys.stderr)
        return 3
    except (_stepgraph.Error, ValueError) as e:
        print(f"stepgraph export: error: {e}", file=sys.stderr)
        return 1
    if args.json:  # the fields of the other formats' --json (stepgraph export), torch_module aside
        record = {"event": "export", "format": "onnx", "output": args.output, "checkpoint": args.checkpoint,
                  "steps": trainer.step}
        if scaling:
            record["input_scaling"] = scaling
        print(json.dumps(record))
        return 0
    print(f"exported '{args.checkpoint}' (step {trainer.step}) as ONNX: {args.output}")
    if scaling:
        print("  its inputs are standardized inside the graph as in training (data.standardize): feed it raw rows")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "plot":
        return _plot_main(argv[1:])
    if argv and argv[0] == "export" and _wants_onnx(argv[1:]):
        return _export_onnx_main(argv[1:])
    if argv and argv[0] in ("--version", "-V"):
        from . import __version__

        print(f"stepgraph {__version__}")
        return 0
    cli = _find_cli()
    if cli is None:
        print(
            "stepgraph: the `stepgraph` executable was not found (it is installed with the package "
            "into the environment's bin/); `python -m stepgraph plot RUN_DIR` works without it",
            file=sys.stderr,
        )
        return 2
    if not argv:
        argv = ["--help"]
    os.execv(cli, [cli] + argv)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
