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
from ..algebra import types as T
from ..codegen.gpu.pyrender import SCOPE, PyWriter
from . import cache

#: IR levels of nesting after which a sub-expression becomes a local of its own: Python's parser refuses
#: more than 200 nested parentheses (a chain of 31 sliding stencils' region bounds nests deeper)
HOIST_DEPTH = 24


class _Checks(PyWriter):
    """Expressions of the call's symbols only: a symbol it was not given is an error, not a new local.
    A sub-expression met again is its first rendering (the IR is a DAG); one nested ``HOIST_DEPTH``
    levels deep is computed into a local first (``temps``)."""

    def __init__(self, exact: bool = False):
        super().__init__()
        self.temps: list[str] = []
        self._memo: dict[int, tuple[E.Expr, str]] = {}
        self._depth = 0
        self.exact = exact  # int64 sums and products checked to stay in range (``_in64``)
        self.statement_index = 0

    def expr(self, e: E.Expr) -> str:
        if isinstance(e, (E.Const, E.Var)):
            return super().expr(e)
        hit = self._memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        self._depth += 1
        try:
            text = super().expr(e)
        finally:
            self._depth -= 1
        if self.exact and isinstance(e, (E.Add, E.Sub, E.Mul)) and e.dtype == T.int64:
            text = f"_in64({text}, {self.statement_index})"
        if self._depth % HOIST_DEPTH == HOIST_DEPTH - 1 or len(text) > 2000:
            self.temps.append(f"    t{len(self.temps)} = {text}")
            text = f"t{len(self.temps) - 1}"
        self._memo[id(e)] = (e, text)
        return text

    def statement(self, lines: list[str], prefix: str, e: E.Expr) -> None:
        """``prefix`` + ``e``'s rendering as a line of ``lines``, after the locals it needs."""
        text = self.expr(e)
        lines.extend(self.temps)
        self.temps.clear()
        lines.append(prefix + text)

    def name(self, n: str) -> str:
        if n not in self.names:
            raise KeyError(n)
        return self.names[n]

    def load(self, buffer: str, index: str) -> str:
        raise TypeError(f"cannot evaluate a read of {buffer} before the call")


def compile_function(exprs: list[E.Expr], symbols: list[str], lets=(), exact: bool = False):
    """``f(*values_of_symbols) -> tuple of the values of exprs``; ``lets`` ((name, expr) pairs, in
    order) are computed first and may be used by the later lets and by ``exprs``. ``exact``: every int64
    sum, difference and product is checked to fit in int64 (Python's are exact; generated code's wrap):
    one that does not raises ``IndexRangeError`` with the index of the let it was first rendered for."""
    w = _Checks(exact)
    w.names = {s: f"a{k}" for k, s in enumerate(symbols)}
    params = ", ".join(w.names.values())
    lines: list[str] = []
    with E.deep_recursion():
        for k, (name, e) in enumerate(lets):
            w.statement_index = k
            w.statement(lines, f"    l{k} = ", e)
            w.names[name] = f"l{k}"
        for k, e in enumerate(exprs):
            w.statement_index = len(lets) + k
            w.statement(lines, f"    r{k} = ", e)
    lines.append(f"    return ({', '.join(f'r{k}' for k in range(len(exprs)))}{',' if len(exprs) == 1 else ''})")
    src = "".join(f"{c} = _C[{c!r}]\n" for c in w.consts) + f"def _f({params}):\n" + "\n".join(lines) + "\n"
    scope = {**SCOPE, "_C": w.consts, "_in64": _in64}
    exec(_code_of(src), scope)  # noqa: S102 - generated from our own IR
    return scope["_f"]


class IndexRangeError(ArithmeticError):
    """An int64 value of index arithmetic past int64's range; ``args[0]``: the statement it was in, ``args[1]``:
    the value."""


def _in64(v: int, statement: int) -> int:
    if not -(1 << 63) <= v < (1 << 63):
        raise IndexRangeError(statement, v)
    return v


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
