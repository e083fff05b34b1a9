"""Physics-informed problems from Python: what a configuration's ``problem`` section builds
(docs/pinns.md), as objects, plus the arrays of an inverse problem's observations.

    import numpy as np
    import stepgraph as sg

    heat = sg.pinn.Problem(
        coordinates=["t", "x"], domain=[(0, 1), (0, 1)],
        residual="u_t - alpha*u_xx",
        coefficients={"alpha": 0.3},            # learned with the network (inverse problem)
        conditions=[sg.pinn.Condition("t=0", "u - sin(pi*x)"),
                    sg.pinn.Condition("x=0", "u"), sg.pinn.Condition("x=1", "u")],
        observations=[sg.pinn.Observation(points, values)],   # numpy [N, 2] and [N] or [N, 1]
    )
    model = sg.Sequential(sg.Dense(32, activation="tanh"), sg.Dense(32, activation="tanh"), sg.Dense(1))
    t = sg.Trainer(model, heat, sg.Adam(1e-3))
    for _ in range(5000):
        t.launch()
    t.coefficients          # {"alpha": 0.1001...}

A Problem is also a configuration's ``problem``: ``sg.train({"model": ..., "problem": heat})``.
Errors (an unknown name in an expression, an observation of the wrong shape) raise
stepgraph.InputError naming the field as the JSON path (``problem.observations[0].values``).
"""

from __future__ import annotations

import json as _json
from typing import Any, Mapping, Optional, Sequence

from . import _stepgraph

__all__ = ["Problem", "Condition", "Observation"]


class Condition:
    """A boundary or initial term: ``residual`` should vanish on the face ``on`` ("x=0", "t=0",
    or "boundary" for every face of the box), at ``points`` points drawn there, times ``weight``."""

    def __init__(self, on: str, residual: str, *, weight: float = 1.0, points: int = 512):
        self.on, self.residual, self.weight, self.points = on, residual, weight, points

    def to_config(self) -> dict:
        return {"on": self.on, "residual": self.residual, "weight": self.weight, "points": self.points}

    def __repr__(self) -> str:
        return f"Condition({self.on!r}, {self.residual!r}, weight={self.weight}, points={self.points})"


class Observation:
    """Measurements of the solution: ``points`` [N, coordinates] and ``values`` [N, k] (or [N]
    for one output), numpy arrays or anything numpy takes. Each observed output adds the term
    ``weight * mean((output - value)^2)``, labelled ``label`` (default "data", "data2", ...;
    "<label> <output>" for several outputs). ``outputs`` names the outputs the columns observe
    (default: the problem's, in order).

    ``Observation.from_exact(count, seed)``: noise-free observations of the problem's exact
    solution at ``count`` points drawn uniformly in its domain.
    """

    def __init__(
        self,
        points: Any,
        values: Any,
        *,
        outputs: Optional[Sequence[str]] = None,
        weight: float = 1.0,
        label: Optional[str] = None,
    ):
        import numpy as np

        self.points = np.asarray(points, dtype=np.float32)
        self.values = np.asarray(values, dtype=np.float32)
        if self.points.ndim == 1:
            self.points = self.points.reshape(-1, 1)
        if self.values.ndim == 1:
            self.values = self.values.reshape(-1, 1)
        self.outputs = list(outputs) if outputs is not None else None
        self.weight, self.label = weight, label
        self._exact: Optional[dict] = None

    @classmethod
    def from_exact(cls, count: int, *, seed: int = 0, weight: float = 1.0, label: Optional[str] = None) -> "Observation":
        o = cls.__new__(cls)
        o.points = o.values = None
        o.outputs, o.weight, o.label = None, weight, label
        o._exact = {"sample_exact": count, "seed": seed}
        return o

    def to_config(self) -> dict:
        c: dict = dict(self._exact) if self._exact else {"points": self.points.tolist(), "values": self.values.tolist()}
        if self.outputs is not None:
            c["outputs"] = self.outputs
        c["weight"] = self.weight
        if self.label is not None:
            c["label"] = self.label
        return c

    def __repr__(self) -> str:
        if self._exact:
            return f"Observation.from_exact({self._exact['sample_exact']}, seed={self._exact['seed']})"
        return f"Observation(points {list(self.points.shape)}, values {list(self.values.shape)}, weight={self.weight})"


def _items(c: Any) -> Any:
    return c.to_config() if hasattr(c, "to_config") else dict(c)


class Problem:
    """A physics-informed problem: a custom one (``coordinates``, ``domain``, ``residual``, ...)
    or a built-in one (``Problem.builtin("burgers1d", ...)``), as the configuration's
    ``problem`` section (docs/pinns.md has every field):

    coordinates, domain: names and one (low, high) per coordinate (at most 4).
    residual: the PDE residual over coordinates, constants, coefficients and the outputs' jet
        components (u, u_x, u_xx, u_xy, ...). conditions: Condition objects (or dicts).
    outputs: the network's outputs' names (default ["u"]). constants: {name: value}.
    exact: the solution as an expression of coordinates and constants (for rel_l2_error).
    coefficients: {name: initial value}: trainable PDE coefficients, learned with the network
        (Trainer.coefficients, checkpoints as "coefficient.<name>"). A coefficient may share a
        constant's name: the expressions then read the coefficient, the exact solution the
        constant (the truth observations are drawn from).
    observations: Observation objects: data terms.
    interior_points, residual_weight, resample_every, seed, eval_points: as in the config.
    """

    def __init__(
        self,
        coordinates: Optional[Sequence[str]] = None,
        domain: Optional[Sequence[Sequence[float]]] = None,
        residual: Optional[str] = None,
        *,
        conditions: Sequence[Any] = (),
        outputs: Optional[Sequence[str]] = None,
        constants: Optional[Mapping[str, float]] = None,
        exact: Optional[str] = None,
        coefficients: Optional[Mapping[str, float]] = None,
        observations: Sequence[Observation] = (),
        interior_points: Optional[int] = None,
        residual_weight: Optional[float] = None,
        resample_every: Optional[int] = None,
        seed: Optional[int] = None,
        eval_points: Optional[int] = None,
        _builtin: Optional[dict] = None,
    ):
        c: dict = dict(_builtin) if _builtin is not None else {}
        if _builtin is None:
            c.update(coordinates=list(coordinates or []), domain=[list(d) for d in (domain or [])], residual=residual)
            if conditions:
                c["conditions"] = [_items(x) for x in conditions]
            if outputs is not None:
                c["outputs"] = list(outputs)
            if constants:
                c["constants"] = dict(constants)
            if exact is not None:
                c["exact"] = exact
            if interior_points is not None:
                c["interior_points"] = interior_points
            if residual_weight is not None:
                c["residual_weight"] = residual_weight
        for key, value in (("resample_every", resample_every), ("seed", seed), ("eval_points", eval_points)):
            if value is not None:
                c[key] = value
        if coefficients:
            c["coefficients"] = dict(coefficients)
        self.observations = list(observations)
        self._config = c
        _stepgraph._check_problem(self._json())  # errors now, naming the field

    @classmethod
    def builtin(
        cls,
        name: str,
        *,
        coefficients: Optional[Mapping[str, float]] = None,
        observations: Sequence[Observation] = (),
        interior_points: Optional[int] = None,
        boundary_points: Optional[int] = None,
        residual_weight: Optional[float] = None,
        boundary_weight: Optional[float] = None,
        resample_every: Optional[int] = None,
        seed: Optional[int] = None,
        eval_points: Optional[int] = None,
    ) -> "Problem":
        """poisson2d, heat1d or burgers1d (docs/pinns.md), with the config's overrides. Its
        constants (heat1d's alpha, burgers1d's nu) may be named in ``coefficients``."""
        b: dict = {"type": name}
        for key, value in (
            ("interior_points", interior_points),
            ("boundary_points", boundary_points),
            ("residual_weight", residual_weight),
            ("boundary_weight", boundary_weight),
        ):
            if value is not None:
                b[key] = value
        return cls(
            coefficients=coefficients,
            observations=observations,
            resample_every=resample_every,
            seed=seed,
            eval_points=eval_points,
            _builtin=b,
        )

    def to_config(self) -> dict:
        """The configuration's ``problem`` section (observation arrays as lists)."""
        c = dict(self._config)
        if self.observations:
            c["observations"] = [o.to_config() for o in self.observations]
        return c

    def _json(self) -> str:
        return _json.dumps(self.to_config())

    # The Trainer takes a Problem where a loss would go (see stepgraph.Trainer).
    def _stepgraph_problem_json(self) -> str:
        return self._json()

    def __repr__(self) -> str:
        kind = self._config.get("type", "custom")
        extra = f", coefficients={self._config['coefficients']}" if "coefficients" in self._config else ""
        if self.observations:
            extra += f", {len(self.observations)} observation set(s)"
        return f"Problem({kind}{extra})"
