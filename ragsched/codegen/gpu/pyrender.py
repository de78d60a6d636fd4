"""The loop IR as Python source, for the GPU emulator (``emulate``) and for the host side of every GPU
kernel (which only computes sizes and launches).

Integers are Python ints (wrapped where the IR casts), floats NumPy scalars of the IR's type, so that
float32 arithmetic rounds as on the GPU; division by zero, overflow and NaN follow IEEE. Memory goes
through the runtime object ``M`` (``M.ld``, ``M.st``): it checks bounds and races, which plain NumPy
indexing would not. A barrier is a ``yield``: each thread of a block is a generator that the emulator
runs up to its next barrier in turn.
"""

from __future__ import annotations

import math

import numpy as np

from ...algebra import expr as E
from ...algebra import types as T
from .. import ir
from ..ir import ForKind


def fdiv(a, b):
    return 0 if b == 0 else a // b


def fmod(a, b):
    return 0 if b == 0 else a % b


def wrap(v, bits, signed):
    v = int(v) & ((1 << bits) - 1)
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def shift(a, s, bits, signed, left):
    """a << s or a >> s as generated code has them: the amount read unsigned, and one of the width or more
    giving 0, or the sign for a signed right shift (Python refuses negative amounts)."""
    s = int(s) & ((1 << bits) - 1)
    if s >= bits:
        return -1 if signed and not left and a < 0 else 0
    return wrap(a << s, bits, signed) if left else a >> s


def f2i(v, bits, signed):
    """A float cast to an integer as the GPU does it: towards zero, saturating, NaN to 0."""
    if v != v:
        return 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(v):
        return hi if v > 0 else lo
    return max(lo, min(hi, int(v)))


def fmin(a, b):
    return b if b < a else a


def fmax(a, b):
    return b if b > a else a


_MATH = {"exp": np.exp, "log": np.log, "exp2": np.exp2, "log2": np.log2,
         "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "floor": np.floor,
         "ceil": np.ceil, "round": np.rint, "tanh": np.tanh, "pow": np.power, "abs": abs}


def _erf(x):
    return type(x)(math.erf(float(x))) if math.isfinite(float(x)) else type(x)(np.sign(x))


def _rsqrt(x):
    return type(x)(1) / np.sqrt(x)


SCOPE = {"_fdiv": fdiv, "_fmod": fmod, "_wrap": wrap, "_shift": shift, "_f2i": f2i, "_min": fmin, "_max": fmax,
         "np": np, "_erf": _erf, "_rsqrt": _rsqrt, **{f"_m_{k}": v for k, v in _MATH.items()}}

_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.LT: "<", E.LE: "<=", E.EQ: "==", E.NE: "!=",
        E.BitAnd: "&", E.BitOr: "|", E.BitXor: "^"}


def _wraps(t: T.DType) -> bool:
    """Integer arithmetic that can leave its type's range in Python ints: narrower than 64 bits, or unsigned
    (int64 index arithmetic is left unwrapped: it is not near its limits, and wrapping costs a call)."""
    return t.is_int and (t.bits < 64 or not t.is_signed)


class PyWriter:
    """Renders statements and expressions; ``names`` maps IR names to Python identifiers, ``consts`` the
    float constants (bound in the function's scope as NumPy scalars)."""

    def __init__(self, buffer_slot: dict[str, str] | None = None):
        self.names: dict[str, str] = {f"{g}Idx.{a}": f"{g[0]}{k}" for g in ("thread", "block")
                                      for k, a in enumerate("xyz")}
        self.consts: dict[str, object] = {}
        self.buffer_slot = dict(buffer_slot or {})  # buffer name -> Python expression of its slot
        self.lines: list[str] = []

    def name(self, n: str) -> str:
        if n not in self.names:
            self.names[n] = f"v{len(self.names)}"
        return self.names[n]

    def const(self, c: E.Const) -> str:
        if c.dtype.is_float:
            key = f"c{len(self.consts)}"
            self.consts[key] = c.dtype.np.type(c.value)
            return key
        return repr(bool(c.value)) if c.dtype.is_bool else repr(int(c.value))

    # -- expressions
    def expr(self, e: E.Expr) -> str:
        go = self.expr
        if isinstance(e, E.Const):
            return self.const(e)
        if isinstance(e, E.Var):
            return self.name(e.name)
        if e.dtype.lanes != 1:
            raise TypeError(f"vector expression {e} in GPU code: GPU kernels have no vectorized loops")
        if isinstance(e, E.Load):
            return self.load(e.buffer, go(e.index))
        if isinstance(e, (E.Div,)) and not e.dtype.is_float:
            return f"_fdiv({go(e.a)}, {go(e.b)})"
        if isinstance(e, (E.Shl, E.Shr)):
            return (f"_shift({go(e.a)}, {go(e.b)}, {e.dtype.bits}, {e.dtype.is_signed}, "
                    f"{isinstance(e, E.Shl)})")
        if type(e) in _OPS:
            op = _OPS[type(e)]
            if isinstance(e, (E.Add, E.Sub, E.Mul)) and _wraps(e.dtype):
                return f"_wrap({go(e.a)} {op} {go(e.b)}, {e.dtype.bits}, {e.dtype.is_signed})"
            return f"({go(e.a)} {op} {go(e.b)})"
        if isinstance(e, E.And):
            return f"({go(e.a)} and {go(e.b)})" if e.dtype.is_bool else f"({go(e.a)} & {go(e.b)})"
        if isinstance(e, E.Or):
            return f"({go(e.a)} or {go(e.b)})" if e.dtype.is_bool else f"({go(e.a)} | {go(e.b)})"
        if isinstance(e, E.Not):
            if e.dtype.is_bool:
                return f"(not {go(e.a)})"
            return f"_wrap(~{go(e.a)}, {e.dtype.bits}, {e.dtype.is_signed})" if _wraps(e.dtype) else f"(~{go(e.a)})"
        if isinstance(e, E.Neg):
            if _wraps(e.dtype):
                return f"_wrap(-{go(e.a)}, {e.dtype.bits}, {e.dtype.is_signed})"
            return f"(-{go(e.a)})"
        if isinstance(e, E.FloorDiv):
            return f"np.floor_divide({go(e.a)}, {go(e.b)})" if e.dtype.is_float else f"_fdiv({go(e.a)}, {go(e.b)})"
        if isinstance(e, E.Mod):
            return f"np.remainder({go(e.a)}, {go(e.b)})" if e.dtype.is_float else f"_fmod({go(e.a)}, {go(e.b)})"
        if isinstance(e, E.Min):
            return f"_min({go(e.a)}, {go(e.b)})"
        if isinstance(e, E.Max):
            return f"_max({go(e.a)}, {go(e.b)})"
        if isinstance(e, E.Select):
            return f"({go(e.t)} if {go(e.cond)} else {go(e.f)})"
        if isinstance(e, E.Let):
            return f"(({self.name(e.name)} := {go(e.value)}), {go(e.body)})[1]"
        if isinstance(e, E.Call):
            args = ", ".join(go(a) for a in e.args)
            if e.name.startswith("warp_"):  # every lane at once: the emulator combines them (a yield)
                return f"(yield ({e.name!r}, {args}))"
            if e.name == "erf":
                return f"_erf({args})"
            if e.name == "rsqrt":
                return f"_rsqrt({args})"
            if e.name in _MATH:
                return f"_m_{e.name}({args})"
            raise TypeError(f"the GPU emulator has no math function {e.name}")
        if isinstance(e, E.Cast):
            return self.cast(go(e.value), e.value.dtype, e.dtype)
        raise TypeError(f"cannot render {type(e).__name__} for the GPU emulator")

    def cast(self, v: str, src: T.DType, dst: T.DType) -> str:
        if dst.is_bool:
            return f"bool({v})"
        if dst.is_float:
            return f"np.{dst.np.name}({v})"
        if src.is_float:
            return f"_f2i({v}, {dst.bits}, {dst.is_signed})"
        return f"_wrap({v}, {dst.bits}, {dst.is_signed})"

    # -- statements
    def emit(self, line: str, depth: int) -> None:
        self.lines.append("    " * depth + line)

    def stmt(self, s: ir.Stmt, depth: int) -> None:
        if isinstance(s, ir.Block):
            for t in s.stmts:
                self.stmt(t, depth)
        elif isinstance(s, ir.Produce):
            self.stmt(s.body, depth)
        elif isinstance(s, ir.LetStmt):
            self.emit(f"{self.name(s.name)} = {self.expr(s.value)}", depth)
            self.stmt(s.body, depth)
        elif isinstance(s, ir.Store):
            self.emit(self.store(s.buffer, self.expr(s.index), self.expr(s.value), s.point), depth)
        elif isinstance(s, ir.IfThenElse):
            self.emit(f"if {self.expr(s.cond)}:", depth)
            self.stmt(s.then, depth + 1)
            self.emit("pass", depth + 1)
            if s.otherwise is not None:
                self.emit("else:", depth)
                self.stmt(s.otherwise, depth + 1)
                self.emit("pass", depth + 1)
        elif isinstance(s, ir.For):
            self.loop(s, depth)
        elif isinstance(s, ir.Allocate):
            self.allocate(s, depth)
        elif isinstance(s, ir.Barrier):
            self.emit("yield", depth)
        elif isinstance(s, ir.Launch):
            self.launch(s, depth)
        else:
            raise TypeError(f"cannot render {type(s).__name__} for the GPU emulator")

    def loop(self, s: ir.For, depth: int) -> None:
        if s.kind == ForKind.GPU_THREAD:
            axis = self.thread_axes[s.var]
            self.emit(f"if t{axis} < {self.expr(s.extent)}:", depth)
            self.emit(f"{self.name(s.var)} = {self.expr(s.min)} + t{axis}", depth + 1)
            self.stmt(s.body, depth + 1)
            return
        lo = self.name(s.var) + "_lo"
        self.emit(f"{lo} = {self.expr(s.min)}", depth)
        self.emit(f"for {self.name(s.var)} in range({lo}, {lo} + {self.expr(s.extent)}):", depth)
        self.stmt(s.body, depth + 1)
        self.emit("pass", depth + 1)

    thread_axes: dict[str, int] = {}

    def site(self) -> int:
        """A number for each load and store in the source: the emulator counts memory requests per site."""
        self.sites = getattr(self, "sites", 0) + 1
        return self.sites

    def load(self, buffer: str, index: str) -> str:
        return f"M.ld({self.buffer_slot[buffer]}, {index}, {self.site()})"

    def store(self, buffer: str, index: str, value: str, point: bool) -> str:
        return f"M.st({self.buffer_slot[buffer]}, {index}, {value}, {point}, {self.site()})"

    def source(self, header: str) -> str:
        return header + "\n" + "\n".join(self.lines + ["    pass"]) + "\n"

    def allocate(self, s: ir.Allocate, depth: int) -> None:
        raise NotImplementedError

    def launch(self, s: ir.Launch, depth: int) -> None:
        raise NotImplementedError
