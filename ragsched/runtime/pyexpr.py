"""Index expressions as Python functions, for the checks a Kernel makes before it calls generated code.

Sizes, extents and required regions are expressions of the call's scalars; they are turned into one
Python function per kernel (compiled once), with the IR's conventions (floor division and modulo,
``x // 0 == 0``, integers wrapped where their type wraps). The rendering is the GPU emulator's
(``codegen/gpu/pyrender``): one Python reading of the IR.
"""

from __future__ import annotations

import marshal
import sys

from ..algebra import expr as E
from ..codegen.gpu.pyrender import SCOPE, PyWriter
from . import cache


class _Checks(PyWriter):
    """Expressions of the call's symbols only: a symbol it was not given is an error, not a new local."""

    def name(self, n: str) -> str:
        if n not in self.names:
            raise KeyError(n)
        return self.names[n]

    def load(self, buffer: str, index: str) -> str:
        raise TypeError(f"cannot evaluate a read of {buffer} before the call")


def compile_function(exprs: list[E.Expr], symbols: list[str], lets=()):
    """``f(*values_of_symbols) -> tuple of the values of exprs``; ``lets`` ((name, expr) pairs, in
    order) are computed first and may be used by the later lets and by ``exprs``."""
    w = _Checks()
    w.names = {s: f"a{k}" for k, s in enumerate(symbols)}
    params = ", ".join(w.names.values())
    lines = []
    for k, (name, e) in enumerate(lets):
        lines.append(f"    l{k} = {w.expr(e)}")
        w.names[name] = f"l{k}"
    body = ", ".join(w.expr(e) for e in exprs)
    lines.append(f"    return ({body}{',' if len(exprs) == 1 else ''})")
    src = "".join(f"{c} = _C[{c!r}]\n" for c in w.consts) + f"def _f({params}):\n" + "\n".join(lines) + "\n"
    scope = {**SCOPE, "_C": w.consts}
    exec(_code_of(src), scope)  # noqa: S102 - generated from our own IR
    return scope["_f"]


def _code_of(src: str):
    """``src`` compiled, from the disk cache when this Python compiled it before (a large kernel's checks
    take Python a quarter of a second to compile)."""
    key = cache.key_of("python-checks", sys.version, src)
    payload = cache.load(key, "pyc")
    if payload is not None:
        try:
            return marshal.loads(payload)
        except (EOFError, ValueError, TypeError):
            pass
    code = compile(src, "<ragsched checks>", "exec")
    cache.store(key, marshal.dumps(code), "pyc")
    return code
