"""Whether a result matches the reference: the check every run, demo and tuning trial makes."""

from __future__ import annotations

import numpy as np


def matches(got, want, tolerance: float | None = None) -> tuple[bool, float]:
    """(every output equal to the reference within float32 rounding, the worst relative error). The
    largest error allowed, relative to the largest |value|, is 1e-3 for float32 and narrower, 1e-9
    otherwise, or ``tolerance`` where a pipeline states a wider one (an integer output rounded from floats
    that reassociation moves by a step)."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    worst, ok = 0.0, len(got) == len(want)
    for g, w in zip(got, want, strict=False):
        if _lengths(g) != _lengths(w):
            return False, float("inf")
        g, w = _packed(g), _packed(w)
        w = np.asarray(w)
        if g.shape != w.shape:
            return False, float("inf")
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))
        scale = float(np.max(np.abs(w.astype(np.float64)), initial=0.0)) or 1.0
        worst = max(worst, err / scale)
        tol = 1e-3 if g.dtype.kind == "f" and g.dtype.itemsize <= 4 else 1e-9
        tol = max(tol, tolerance or 0.0)
        ok = ok and err <= tol * scale
    return ok, worst


def _lengths(x):
    from ..ragged.array import RaggedArray

    return (x.template, x.lengths.tolist()) if isinstance(x, RaggedArray) else None


def _packed(x):
    """A RaggedArray's values (its padding, if any, zeroed out), or the array itself."""
    from ..ragged.array import RaggedArray

    if isinstance(x, RaggedArray):
        return np.concatenate([e.reshape(-1) for e in x.to_list()] or [np.zeros(0, x.dtype)])
    return x
