"""F2 linear layouts: maps between the bits of power-of-two index spaces that are linear over GF(2).

As in Triton's ``LinearLayout``, a layout has named input dims (``register``, ``lane``, ``warp``, or a
memory ``offset``) and named output dims (a tile's ``row`` and ``col``), each of a power-of-two size; it is
given by the image of each input bit (a *basis*: one value per output dim), and an input maps to the XOR
of the bases of its set bits. Row-major, blocked, Morton and XOR-swizzled tiles are all such maps, so one
representation composes, inverts and answers "how many elements are contiguous" and "how many
shared-memory bank conflicts does a warp's access have" for all of them, and its index arithmetic is a
few xors, ands and shifts (``emit``). Layouts describe power-of-two tiles only: ragged extents stay in the
loops around them.

Internally a layout is also a matrix over GF(2): one column per input bit (input dims in order, low
bits first), each column the output bits packed the same way; linear algebra (rank, inverses) works on
those columns as Python ints.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from itertools import product as _cartesian

from . import expr as E
from . import types as T

Dims = tuple[tuple[str, int], ...]  # (name, log2 of the size), in order


def _log2(size: int, what: str) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1 or size & (size - 1):
        raise ValueError(f"{what} must be a power of two, got {size!r}")
    return size.bit_length() - 1


def _dims(sizes, what: str) -> Dims:
    items = sizes.items() if isinstance(sizes, dict) else sizes
    out = tuple((str(n), _log2(s, f"{what} {n!r}")) for n, s in items)
    if len({n for n, _ in out}) != len(out):
        raise ValueError(f"{what}s must have distinct names, got {[n for n, _ in out]}")
    return out


@dataclass(frozen=True)
class F2Layout:
    """``bases[k][i]``: the output (one int per output dim) of bit ``i`` of input dim ``k`` alone."""

    ins: Dims
    outs: Dims
    bases: tuple[tuple[tuple[int, ...], ...], ...]

    def __post_init__(self):
        if len(self.bases) != len(self.ins):
            raise ValueError(f"F2Layout: {len(self.ins)} input dims but bases for {len(self.bases)}")
        for (name, bits), per_bit in zip(self.ins, self.bases, strict=True):
            if len(per_bit) != bits:
                raise ValueError(f"F2Layout: input dim {name!r} has {bits} bits but {len(per_bit)} bases")
            for b in per_bit:
                if len(b) != len(self.outs) or any(not 0 <= v < 1 << ob for v, (_, ob) in zip(b, self.outs)):
                    raise ValueError(f"F2Layout: basis {b} of input dim {name!r} is not a point of the output "
                                     f"dims {self.out_sizes}")

    # -- construction
    @staticmethod
    def from_bases(ins, outs, bases: dict) -> F2Layout:
        """``ins``/``outs``: {name: size} (power-of-two sizes, in order); ``bases``: {input dim: [basis per
        bit]}, a basis being a tuple with one value per output dim (or an int when there is one)."""
        ind, outd = _dims(ins, "input dim"), _dims(outs, "output dim")
        rows = []
        for name, _ in ind:
            given = bases.get(name, ())
            rows.append(tuple(tuple(b) if isinstance(b, (tuple, list)) else (int(b),) for b in given))
        return F2Layout(ind, outd, tuple(rows))

    @property
    def in_sizes(self) -> dict[str, int]:
        return {n: 1 << b for n, b in self.ins}

    @property
    def out_sizes(self) -> dict[str, int]:
        return {n: 1 << b for n, b in self.outs}

    # -- as a matrix over GF(2)
    def _in_bits(self) -> int:
        return sum(b for _, b in self.ins)

    def _out_bits(self) -> int:
        return sum(b for _, b in self.outs)

    def _pack_out(self, values) -> int:
        word, shift = 0, 0
        for v, (_, bits) in zip(values, self.outs, strict=True):
            word |= v << shift
            shift += bits
        return word

    def _unpack_out(self, word: int) -> tuple[int, ...]:
        out = []
        for _, bits in self.outs:
            out.append(word & ((1 << bits) - 1))
            word >>= bits
        return tuple(out)

    def columns(self) -> list[int]:
        """One packed output word per input bit, input dims in order, low bits first."""
        return [self._pack_out(b) for per_bit in self.bases for b in per_bit]

    @staticmethod
    def _from_columns(ins: Dims, outs: Dims, cols: list[int]) -> F2Layout:
        shell = F2Layout(outs=outs, ins=(), bases=())
        rows, k = [], 0
        for _, bits in ins:
            rows.append(tuple(shell._unpack_out(c) for c in cols[k:k + bits]))
            k += bits
        return F2Layout(ins, outs, tuple(rows))

    # -- applying
    def __call__(self, **point: int) -> dict[str, int]:
        """The output of one input point: ``layout(lane=3, register=1)`` -> ``{"row": .., "col": ..}``."""
        unknown = set(point) - {n for n, _ in self.ins}
        if unknown:
            raise ValueError(f"F2Layout has no input dim {', '.join(map(repr, sorted(unknown)))} (its input dims: "
                             f"{', '.join(n for n, _ in self.ins)})")
        acc = [0] * len(self.outs)
        for (name, bits), per_bit in zip(self.ins, self.bases, strict=True):
            v = point.get(name, 0)
            if not isinstance(v, int) or not 0 <= v < 1 << bits:
                raise ValueError(f"input dim {name!r} runs over [0, {1 << bits}), got {v!r}")
            for i, b in enumerate(per_bit):
                if v >> i & 1:
                    acc = [a ^ x for a, x in zip(acc, b)]
        return dict(zip((n for n, _ in self.outs), acc, strict=True))

    # -- algebra
    def compose(self, outer: F2Layout) -> F2Layout:
        """``outer`` after this layout (Triton's ``compose``): this layout's outputs are ``outer``'s inputs."""
        if self.outs != outer.ins:
            raise ValueError(f"compose: the output dims {self.out_sizes} are not the input dims {outer.in_sizes} "
                             "of the outer layout")
        rows = tuple(tuple(_apply_packed(outer, self._pack_out(b)) for b in per_bit) for per_bit in self.bases)
        return F2Layout(self.ins, outer.outs, rows)

    def __mul__(self, other: F2Layout) -> F2Layout:
        """The product (Triton's ``*``): dims of both, a dim in both gets ``other``'s bits above this one's,
        on the input side and the output side."""
        ins = _merge_dims(self.ins, other.ins)
        outs = _merge_dims(self.outs, other.outs)
        mine, theirs = dict(self.outs), dict(other.outs)

        def embed(layout: F2Layout, basis, shifted: bool) -> tuple[int, ...]:
            values = dict(zip((n for n, _ in layout.outs), basis))
            return tuple(values.get(n, 0) << (mine.get(n, 0) if shifted and n in theirs else 0) for n, _ in outs)

        rows = []
        for name, _ in ins:
            a = dict(zip((n for n, _ in self.ins), self.bases)).get(name, ())
            b = dict(zip((n for n, _ in other.ins), other.bases)).get(name, ())
            rows.append(tuple(embed(self, x, False) for x in a) + tuple(embed(other, x, True) for x in b))
        return F2Layout(ins, outs, tuple(rows))

    product = __mul__

    def divide_left(self, divisor: F2Layout) -> F2Layout:
        """The layout C with ``divisor * C == self`` (Triton's ``divideLeft``): what is left of this layout
        once ``divisor`` takes the low bits of its dims, in and out. Refused when ``self`` does not start
        with ``divisor`` that way."""
        ins, outs = dict(self.ins), dict(self.outs)
        d_ins, d_outs = dict(divisor.ins), dict(divisor.outs)
        if any(n not in ins or b > ins[n] for n, b in d_ins.items()) or \
                any(n not in outs or b > outs[n] for n, b in d_outs.items()):
            raise ValueError(f"divide_left: the divisor's dims {divisor.in_sizes} -> {divisor.out_sizes} do not fit "
                             f"in {self.in_sizes} -> {self.out_sizes}")
        q_ins = tuple((n, b - d_ins.get(n, 0)) for n, b in self.ins)
        q_outs = tuple((n, b - d_outs.get(n, 0)) for n, b in self.outs)
        mine = dict(zip((n for n, _ in self.ins), self.bases))
        theirs = dict(zip((n for n, _ in divisor.ins), divisor.bases))
        out_names = [n for n, _ in self.outs]
        rows = []
        for name, _ in self.ins:
            low, high = mine[name][:d_ins.get(name, 0)], mine[name][d_ins.get(name, 0):]
            want = tuple(tuple(dict(zip((n for n, _ in divisor.outs), b)).get(o, 0) for o in out_names)
                         for b in theirs.get(name, ()))
            if low != want:
                raise ValueError(f"divide_left: input dim {name!r} does not start with the divisor's bases")
            row = []
            for b in high:
                if any(v & ((1 << d_outs.get(o, 0)) - 1) for v, o in zip(b, out_names)):
                    raise ValueError(f"divide_left: a basis of {name!r} above the divisor reaches into its output "
                                     "bits, so the layout is not a product with the divisor on the left")
                row.append(tuple(v >> d_outs.get(o, 0) for v, o in zip(b, out_names)))
            rows.append(tuple(row))
        return F2Layout(q_ins, q_outs, tuple(rows))

    def rank(self) -> int:
        return len(_echelon(self.columns())[1])

    def is_injective(self) -> bool:
        return self.rank() == self._in_bits()

    def is_surjective(self) -> bool:
        return self.rank() == self._out_bits()

    def is_bijective(self) -> bool:
        return self.is_injective() and self.is_surjective()

    def pseudo_invert(self) -> F2Layout:
        """A right inverse of a surjective layout: ``self.compose``-ed after it gives the identity on the
        outputs. Where several inputs give one output, the one whose free bits (``free_variable_masks``)
        are zero."""
        if not self.is_surjective():
            raise ValueError(f"pseudo_invert: the layout is not surjective (rank {self.rank()} of "
                             f"{self._out_bits()} output bits), so some outputs have no input")
        cols = self.columns()
        # for each output bit, a combination of input bits (pivot columns only) that produces it
        reduced, pivots = _echelon(cols, track=True)
        image = []
        for j in range(self._out_bits()):
            image.append(_solve(reduced, pivots, 1 << j))
        return F2Layout._from_columns(self.outs, self.ins, image)

    def invert(self) -> F2Layout:
        if not self.is_bijective():
            raise ValueError("invert: the layout is not a bijection (use pseudo_invert for a surjective one)")
        return self.pseudo_invert()

    def invert_and_compose(self, other: F2Layout) -> F2Layout:
        """The layout C from this layout's inputs to ``other``'s inputs with ``other(C(x)) == self(x)``
        (Triton's ``invertAndCompose``): how to find, in ``other``'s index space, the element this layout
        puts at ``x``. ``other`` must reach every output."""
        if self.outs != other.outs:
            raise ValueError(f"invert_and_compose: output dims differ ({self.out_sizes} and {other.out_sizes})")
        return self.compose(other.pseudo_invert())

    def free_variable_masks(self) -> dict[str, int]:
        """Per input dim, the input bits that are not pivots of the column echelon form (input order): the
        bits whose value the output does not need (a broadcast, or a repeat of an earlier bit's effect)."""
        _, pivots = _echelon(self.columns())
        used = {k for k, _ in pivots}
        out, k = {}, 0
        for name, bits in self.ins:
            out[name] = sum(1 << i for i in range(bits) if k + i not in used)
            k += bits
        return out

    def contiguous_elements(self, in_dim: str, out_dim: str) -> int:
        """How many consecutive values of ``in_dim`` (from 0) land on consecutive values of ``out_dim``, the
        other output dims fixed: the vector width of a load or store along ``out_dim``."""
        ins, outs = dict(self.ins), [n for n, _ in self.outs]
        if in_dim not in ins or out_dim not in outs:
            raise ValueError(f"contiguous_elements: no input dim {in_dim!r} or output dim {out_dim!r}")
        per_bit = dict(zip((n for n, _ in self.ins), self.bases))[in_dim]
        j = outs.index(out_dim)
        n = 0
        for i, b in enumerate(per_bit):
            if b != tuple(1 << i if k == j else 0 for k in range(len(outs))):
                break
            n += 1
        return 1 << n

    def rename(self, ins: dict | None = None, outs: dict | None = None) -> F2Layout:
        """The same map with dims renamed (``{"row": "y", "col": "x"}``)."""
        ins, outs = ins or {}, outs or {}
        return F2Layout(tuple((ins.get(n, n), b) for n, b in self.ins),
                        tuple((outs.get(n, n), b) for n, b in self.outs), self.bases)

    def __str__(self) -> str:
        parts = []
        for (name, _), per_bit in zip(self.ins, self.bases, strict=True):
            parts.append(f"{name}: [{', '.join(str(b if len(b) > 1 else b[0]) for b in per_bit)}]")
        return (f"F2Layout({', '.join(f'{n}={1 << b}' for n, b in self.ins)} -> "
                f"{', '.join(f'{n}={1 << b}' for n, b in self.outs)}; {'; '.join(parts)})")


# ------------------------------------------------------------------------------------ constructors
def identity(name: str, size: int, out: str | None = None) -> F2Layout:
    bits = _log2(size, f"size of {name!r}")
    return F2Layout(((name, bits),), ((out or name, bits),), (tuple((1 << i,) for i in range(bits)),))


def strided(shape, in_dim: str = "offset", order=None) -> F2Layout:
    """Memory ``offset`` -> coordinates of a tile of ``shape`` ({dim: size}, outermost first) laid out with
    the dims of ``order`` fastest first (default: the last dim fastest, row-major)."""
    outs = _dims(shape, "tile dim")
    order = list(order) if order is not None else [n for n, _ in reversed(outs)]
    if sorted(order) != sorted(n for n, _ in outs):
        raise ValueError(f"strided: order {order} must name each tile dim once ({[n for n, _ in outs]})")
    names = [n for n, _ in outs]
    bases = []
    for d in order:
        for i in range(dict(outs)[d]):
            bases.append(tuple(1 << i if n == d else 0 for n in names))
    return F2Layout(((in_dim, len(bases)),), outs, (tuple(bases),))


def row_major(shape, in_dim: str = "offset") -> F2Layout:
    return strided(shape, in_dim)


def blocked(shape, size_per_thread, threads_per_warp, warps_per_block, order=None) -> F2Layout:
    """Triton's blocked layout: (``register``, ``lane``, ``warp``) -> tile coordinates. Each thread holds
    ``size_per_thread`` consecutive elements per dim, threads of a warp and warps of a block tile the
    dims fastest first (``order``; default the last dim fastest); a tile larger than one block repeats
    in more registers, a smaller one is broadcast (zero bases)."""
    outs = _dims(shape, "tile dim")
    names = [n for n, _ in outs]
    order = list(order) if order is not None else names[::-1]
    size = dict(outs)
    spt, tpw, wpb = (dict(zip(names, (_log2(v, f"{what} of {n!r}") for n, v in zip(names, vals, strict=True))))
                     for what, vals in (("size_per_thread", size_per_thread), ("threads_per_warp", threads_per_warp),
                                        ("warps_per_block", warps_per_block)))
    next_bit = dict.fromkeys(names, 0)

    def take(d: str, count: int) -> list[tuple[int, ...]]:
        out = []
        for _ in range(count):
            b = next_bit[d]
            out.append(tuple((1 << b) if n == d and b < size[d] else 0 for n in names))
            next_bit[d] += 1
        return out

    reg = [x for d in order for x in take(d, spt[d])]
    lane = [x for d in order for x in take(d, tpw[d])]
    warp = [x for d in order for x in take(d, wpb[d])]
    for d in order:  # what one block does not cover: more registers
        reg += take(d, max(0, size[d] - next_bit[d]))
    return F2Layout((("register", len(reg)), ("lane", len(lane)), ("warp", len(warp))), outs,
                    (tuple(reg), tuple(lane), tuple(warp)))


def morton(shape, in_dim: str = "offset") -> F2Layout:
    """Memory ``offset`` -> (row, col) of a Z-order tile: offset bits alternate col, row, col, ... (the
    larger dim takes the bits left over)."""
    outs = _dims(shape, "tile dim")
    if len(outs) != 2:
        raise ValueError("morton: a tile of two dims")
    (r, rb), (c, cb) = outs
    bases, i, j = [], 0, 0
    while i < cb or j < rb:
        if i < cb:
            bases.append((0, 1 << i))
            i += 1
        if j < rb:
            bases.append((1 << j, 0))
            j += 1
    return F2Layout(((in_dim, len(bases)),), outs, (tuple(bases),))


def xor_swizzle(rows: int, cols: int, vec: int, per_phase: int, max_phase: int) -> F2Layout:
    """Triton's swizzled shared layout of a ``rows`` x ``cols`` tile: logical (row, col) -> stored (row,
    col ^ phase * vec) with phase = (row // per_phase) % max_phase, so that the rows a warp reads land in
    different banks."""
    rb, cb = _log2(rows, "rows"), _log2(cols, "cols")
    vb, pb, mb = _log2(vec, "vec"), _log2(per_phase, "per_phase"), _log2(max_phase, "max_phase")
    row_bases = []
    for j in range(rb):
        k = j - pb  # bit of the phase this row bit is
        extra = (1 << (k + vb)) if 0 <= k < mb and k + vb < cb else 0
        row_bases.append((1 << j, extra))
    col_bases = tuple((0, 1 << i) for i in range(cb))
    dims = (("row", rb), ("col", cb))
    return F2Layout(dims, dims, (tuple(row_bases), col_bases))


def cute_swizzle(b: int, m: int, s: int, bits: int | None = None, name: str = "offset") -> F2Layout:
    """CuTe's ``Swizzle<B, M, S>`` on an offset of ``bits`` bits (default the fewest it needs): the ``B``
    bits at ``M + S`` are xored into the ``B`` bits at ``M``."""
    if b < 0 or m < 0 or s < b:
        raise ValueError(f"Swizzle<{b}, {m}, {s}> needs B >= 0, M >= 0 and S >= B (non-overlapping bit ranges)")
    n = m + s + b if bits is None else bits
    if n < m + s + b:
        raise ValueError(f"Swizzle<{b}, {m}, {s}> reads bits up to {m + s + b - 1}; {n} bits is too few")
    bases = []
    for i in range(n):
        v = 1 << i
        if m + s <= i < m + s + b:
            v |= 1 << (i - s)
        bases.append((v,))
    return F2Layout(((name, n),), ((name, n),), (tuple(bases),))


# --------------------------------------------------------------------------------- GPU queries
def bank_conflicts(layout: F2Layout, bitwidth: int, banks: int = 32, bank_bytes: int = 4) -> int:
    """Extra shared-memory wavefronts of one warp's access through ``layout``: input dims ``lane`` (the
    warp's threads) and optionally ``register`` (the elements each thread moves in one access), one
    output dim (the element offset in shared memory). 0 means conflict-free: each bank serves at most
    as many distinct words as the access needs at the least."""
    if len(layout.outs) != 1:
        raise ValueError("bank_conflicts: the layout must map to one output dim, the element offset")
    if bitwidth not in (8, 16, 32, 64, 128):
        raise ValueError(f"bank_conflicts: bitwidth must be 8, 16, 32, 64 or 128, got {bitwidth!r}")
    names = [n for n, _ in layout.ins]
    if "lane" not in names or set(names) - {"lane", "register"}:
        raise ValueError(f"bank_conflicts: input dims must be lane (and register), got {names}")
    sizes = layout.in_sizes
    offsets = []
    for lane, reg in _cartesian(range(sizes["lane"]), range(sizes.get("register", 1))):
        point = {"lane": lane} | ({"register": reg} if "register" in sizes else {})
        offsets.append(next(iter(layout(**point).values())))
    return offset_conflicts(offsets, bitwidth, banks, bank_bytes)


# ---------------------------------------------------------------------------------------- emission
def emit(layout: F2Layout, dtype: T.DType = T.INDEX, arithmetic: bool = False,
         **inputs: E.Expr) -> dict[str, E.Expr]:
    """The index arithmetic of ``layout`` as expressions of the given input values (each in its dim's
    range): per output dim, ``(x & mask) << shift`` (or ``>>``) for each distinct distance ``shift``
    between an input bit and an output bit it reaches, all xored: a row-major tile is one and, a CuTe
    swizzle two terms. ``arithmetic``: where the terms of an output reach disjoint bits (a permutation of
    bits: row-major, blocked, Morton tiles) they are added, and a term whose mask is one run of bits is
    ``x // 2^lo % 2^len * 2^(lo + shift)``: arithmetic the simplifier and the vectorizer see through
    (a vector of a tile's row is then one ramp, a dense load), where xor and masks are opaque to them."""
    missing = {n for n, _ in layout.ins} - set(inputs)
    if missing:
        raise ValueError(f"emit: give a value for each input dim; missing {', '.join(sorted(missing))}")
    out = {}
    for j, (oname, obits) in enumerate(layout.outs):
        terms: list[tuple[E.Expr, str, int, int]] = []  # (value, input, mask, shift)
        for (iname, _), per_bit in zip(layout.ins, layout.bases, strict=True):
            masks: dict[int, int] = {}  # output bit - input bit -> the input bits that move that far
            for i, v in enumerate(per_bit):
                for o in range(obits):
                    if v[j] >> o & 1:
                        masks[o - i] = masks.get(o - i, 0) | 1 << i
            for shift, mask in sorted(masks.items(), key=lambda p: -p[0]):
                term = E.bit_and(inputs[iname], E.const(mask, dtype))
                if shift:
                    term = E.shift(E.Shl if shift > 0 else E.Shr, term, E.const(abs(shift), dtype))
                terms.append((term, iname, mask, shift))
        reached = [mask << shift if shift >= 0 else mask >> -shift for _, _, mask, shift in terms]
        if arithmetic and sum(map(int.bit_count, reached)) == int.bit_count(functools.reduce(
                operator.or_, reached, 0)):
            values = [_run_term(inputs[iname], mask, shift, dtype) or term for term, iname, mask, shift in terms]
            value = values[0] if values else E.const(0, dtype)
            for t in values[1:]:
                value = E.add(value, t)
        else:
            value = terms[0][0] if terms else E.const(0, dtype)
            for t, *_ in terms[1:]:
                value = E.bit_xor(value, t)
        out[oname] = value
    return out


def _run_term(x: E.Expr, mask: int, shift: int, dtype: T.DType) -> E.Expr | None:
    """``(x & mask) << shift`` as ``x // 2^lo % 2^len * 2^(lo + shift)`` where ``mask`` is one run of
    bits (lo its lowest, len its length) and x is not negative; None for another mask."""
    lo = (mask & -mask).bit_length() - 1
    run = mask >> lo
    if run & (run + 1):
        return None
    value = x if lo == 0 else E.FloorDiv(x, E.const(1 << lo, dtype))
    value = E.Mod(value, E.const(run + 1, dtype))
    to = lo + shift
    return value if to == 0 else E.Mul(value, E.const(1 << to, dtype))


# ------------------------------------------------------------------------------------- GF(2) algebra
def _apply_packed(layout: F2Layout, word: int) -> tuple[int, ...]:
    acc = 0
    for k, c in enumerate(layout.columns()):
        if word >> k & 1:
            acc ^= c
    return layout._unpack_out(acc)


def _merge_dims(a: Dims, b: Dims) -> Dims:
    bits = dict(a)
    for n, v in b:
        bits[n] = bits.get(n, 0) + v
    return tuple((n, bits[n]) for n in dict.fromkeys([n for n, _ in a] + [n for n, _ in b]))


def _echelon(cols: list[int], track: bool = False):
    """Column reduction: (reduced rows as (value, combination of original columns)), pivots as (column
    index, leading bit)). A column whose reduced value is zero is not a pivot."""
    basis: list[tuple[int, int]] = []  # (value, which original columns xor to it)
    pivots: list[tuple[int, int]] = []
    for k, c in enumerate(cols):
        combo = 1 << k
        for v, cv in basis:
            if c ^ v < c:  # v's leading bit is set in c
                c, combo = c ^ v, combo ^ cv
        if c:
            basis.append((c, combo))
            basis.sort(key=lambda p: -p[0])
            pivots.append((k, c.bit_length() - 1))
    return basis, pivots


def _solve(basis: list[tuple[int, int]], pivots, target: int) -> int:
    """A combination of input bits (packed) whose columns xor to ``target`` (in the span)."""
    combo = 0
    for v, cv in basis:
        if target ^ v < target:
            target, combo = target ^ v, combo ^ cv
    if target:
        raise ValueError("internal error: target not in the span of the layout")
    return combo


# ---------------------------------------------------------------------------- shared-memory layouts
def _span(vectors: list[int]) -> list[tuple[int, int]]:
    return _echelon(vectors)[0]


def _in_span(basis: list[tuple[int, int]], x: int) -> bool:
    for v, _ in basis:
        if x ^ v < x:
            x ^= v
    return x == 0


def _dim_bases(layout: F2Layout, name: str) -> list[int]:
    """The packed output words of input dim ``name``'s bits (none when the layout lacks the dim)."""
    per = dict(zip((n for n, _ in layout.ins), layout.bases))
    return [layout._pack_out(b) for b in per.get(name, ())]


def vector_bits(src: F2Layout, dst: F2Layout) -> list[int]:
    """The register bases both layouts start with, as packed coordinates: the elements each thread can
    move as one vector on both sides."""
    out = []
    for a, b in zip(_dim_bases(src, "register"), _dim_bases(dst, "register")):
        if a != b or a == 0:
            break
        out.append(a)
    return out


def access_conflicts(registers: F2Layout, memory: F2Layout, bitwidth: int, vector: int = 1) -> int:
    """Extra wavefronts of one warp moving its registers to or from shared memory stored as ``memory``
    (``offset`` -> tile coordinates, a bijection), ``vector`` elements per access: summed over the
    accesses (the register bits above the vector), for warp 0."""
    if registers.outs != memory.outs:
        raise ValueError("access_conflicts: the register layout and the memory layout must cover the same tile dims")
    to_offset = memory.invert()
    vb = _log2(vector, "vector")
    regs = _dim_bases(registers, "register")
    lanes = _dim_bases(registers, "lane")
    total = 0
    for access in range(1 << max(0, len(regs) - vb)):
        base = 0
        for i in range(len(regs) - vb):
            if access >> i & 1:
                base ^= regs[vb + i]
        offsets = []
        for lane, reg in _cartesian(range(1 << len(lanes)), range(1 << vb)):
            w = base
            for i, c in enumerate(lanes):
                w ^= c if lane >> i & 1 else 0
            for i, c in enumerate(regs[:vb]):
                w ^= c if reg >> i & 1 else 0
            coords = dict(zip((name for name, _ in memory.outs), registers._unpack_out(w)))
            offsets.append(to_offset(**coords)["offset"])
        total += offset_conflicts(offsets, bitwidth)
    return total


def offset_conflicts(offsets: list[int], bitwidth: int, banks: int = 32, bank_bytes: int = 4) -> int:
    """Extra shared-memory wavefronts of one warp's access to the elements at ``offsets`` (of ``bitwidth``
    bits): the most distinct words one bank must serve, less the fewest wavefronts the words need."""
    words: set[int] = set()
    per_bank: dict[int, set[int]] = {}
    for offset in offsets:
        first = offset * bitwidth // 8 // bank_bytes
        for w in range(first, first + max(1, bitwidth // 8 // bank_bytes)):
            words.add(w)
            per_bank.setdefault(w % banks, set()).add(w)
    return max(len(v) for v in per_bank.values()) - -(-len(words) // banks)


def optimal_swizzle(src: F2Layout, dst: F2Layout, bitwidth: int, banks: int = 32, bank_bytes: int = 4) -> F2Layout:
    """A shared-memory layout (``offset`` -> tile coordinates) for a copy from the register layout ``src``
    to ``dst`` through shared memory, as the linear-layouts paper derives it: the offset's low bits are the
    vector both sides can move at once; above them, the bits that select a bank; the remaining bits
    (which select, within a bank, the word) are coordinate vectors outside both warps' lane spaces (plus
    the vector), so no two lanes of either access meet in one bank at different words. Where the tile is
    too small for that, vectors that meet one side's lanes only are taken first."""
    if src.outs != dst.outs:
        raise ValueError(f"optimal_swizzle: the two layouts cover different tiles ({src.out_sizes}, {dst.out_sizes})")
    n = src._out_bits()
    vec = vector_bits(src, dst)
    bytes_per = max(1, bitwidth // 8)
    # elements per row of banks: the offsets that cover every bank once; the lowest of their bits pick an
    # element within one bank's word (a float16 pair shares a word: no conflict between the two)
    row_bits = max(0, (banks * bank_bytes // bytes_per).bit_length() - 1)
    word_bits = max(0, (bank_bytes // bytes_per).bit_length() - 1) if bytes_per < bank_bytes else 0
    lanes_a, lanes_b = _dim_bases(src, "lane"), _dim_bases(dst, "lane")
    span_a, span_b = _span(lanes_a), _span(lanes_b)
    candidates = sorted(range(1, 1 << n), key=lambda x: (bin(x).count("1"), x))
    # within a word, vectors both warps' lanes move along (those lanes then share a word, not a bank)
    within: list[int] = []
    for _ in range(max(0, min(word_bits, n) - len(vec))):
        taken = _span(vec + within)
        pick = min((x for x in candidates if not _in_span(taken, x)),
                   key=lambda x: -(_in_span(span_a, x) + _in_span(span_b, x)))
        within.append(pick)
    low = vec + within
    bank_bits = max(0, min(row_bits - len(low), n - len(low)))
    seg_bits = n - len(low) - bank_bits
    a_span = _span(lanes_a + low)
    b_span = _span(lanes_b + low)
    chosen: list[int] = []
    for _ in range(seg_bits):
        taken = _span(low + chosen)
        a_k, b_k = _span([v for v, _ in a_span] + chosen), _span([v for v, _ in b_span] + chosen)
        best = None
        for x in candidates:
            if _in_span(taken, x):
                continue
            score = _in_span(a_k, x) + _in_span(b_k, x)
            if best is None or score < best[0]:
                best = (score, x)
                if score == 0:
                    break
        chosen.append(best[1])
    # bank bits: unit vectors completing vec + chosen to a basis, low coordinates first
    bank: list[int] = []
    for x in (1 << i for i in range(n)):
        if len(bank) == bank_bits:
            break
        if not _in_span(_span(low + chosen + bank), x):
            bank.append(x)
    cols = low + bank + chosen
    layout = F2Layout._from_columns((("offset", n),), src.outs, cols)
    if not layout.is_bijective():
        raise ValueError("internal error: optimal_swizzle did not find a basis of the tile")
    return layout
