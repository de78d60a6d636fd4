"""Memory access for the emitter: loads and stores, scalar or vector (dense, strided, gathered and
scattered, clamped boundary loads), and the predication of an ``IfThenElse`` whose condition differs
between lanes: the active-lane mask that masked loads and stores obey."""

from __future__ import annotations

import math

import llvmlite.ir as ir

from ...algebra import expr as E
from ...algebra.lanes import lanes_test
from ...algebra.types import DType
from .. import ir as lir
from .machine import _I1, _I32, _I64, _PTR, _VOID, _lanes, ll_type, mem_type, type_suffix


def _terms(idx: E.Expr) -> list[tuple[E.Expr, int]]:
    """The terms of ``idx`` as a sum, each with its sign (+1 or -1)."""
    terms, stack = [], [(idx, 1)]
    while stack:
        e, sign = stack.pop()
        if isinstance(e, E.Add):
            stack += [(e.a, sign), (e.b, sign)]
        elif isinstance(e, E.Sub):
            stack += [(e.a, sign), (e.b, -sign)]
        else:
            terms.append((e, sign))
    return terms


def _unclamped(e: E.Expr) -> E.Expr:
    """``e`` without the min and max of broadcast bounds around it (a boundary condition's clamp)."""
    while isinstance(e, (E.Min, E.Max)) and (isinstance(e.a, E.Broadcast) or isinstance(e.b, E.Broadcast)):
        e = e.b if isinstance(e.a, E.Broadcast) else e.a
    return e


def _clamped_ramp(idx: E.Expr):
    """(ramp, lo, hi, offset or None) when ``idx`` is ``clamp(ramp(b, 1, n), lo, hi)`` plus broadcasts."""
    signed = _terms(idx)
    if any(sign < 0 for _, sign in signed):
        return None
    terms = [e for e, _ in signed]
    clamps = [e for e in terms if not isinstance(e, E.Broadcast)]
    if len(clamps) != 1:
        return None
    c = clamps[0]
    if isinstance(c, E.Min) and isinstance(c.a, E.Max):
        inner, hi, lo = c.a.a, c.b, c.a.b
    elif isinstance(c, E.Max) and isinstance(c.a, E.Min):
        inner, lo, hi = c.a.a, c.b, c.a.b
    else:
        return None
    if not (isinstance(inner, E.Ramp) and isinstance(inner.stride, E.Const) and inner.stride.value == 1
            and isinstance(lo, E.Broadcast) and isinstance(hi, E.Broadcast)):
        return None
    offset = None
    for e in terms:
        if e is not c:
            offset = e.value if offset is None else E.Add(offset, e.value)
    return inner, lo.value, hi.value, offset


def _periodic_lanes(idx: E.Expr, lanes: int):
    """(lane 0's index, the ramp's base b, period L, {b mod L: each lane's offset from lane 0}) when
    ``idx`` is a sum of broadcasts and of ``ramp(b, 1, n)``, ``ramp // c`` and ``ramp % c`` (constant c > 0,
    one base b): an upsampling's ``x // 2``, ``x // 2 + x % 2``. Each lane's offset from lane 0 then
    depends only on b mod L (L the least common multiple of the c), so the lanes read a short run of
    elements that one dense load and a constant shuffle per residue fetch. None otherwise, and where
    some residue's run is 4n elements or longer."""
    base, period, parts, scalar = None, 1, [], []
    for e, sign in _terms(idx):
        if isinstance(e, E.Broadcast):
            scalar.append((e.value, sign))
            continue
        ramp, c, kind = e, None, "ramp"
        if isinstance(e, (E.FloorDiv, E.Mod)) and isinstance(e.b, E.Broadcast) and isinstance(e.b.value, E.Const):
            ramp, c, kind = e.a, int(e.b.value.value), "div" if isinstance(e, E.FloorDiv) else "mod"
            if c <= 0:
                return None
        if not (isinstance(ramp, E.Ramp) and isinstance(ramp.stride, E.Const) and ramp.stride.value == 1):
            return None
        if base is None:
            base = ramp.base
        elif ramp.base != base:
            return None
        if c is not None:
            period = math.lcm(period, c)
        parts.append((kind, c, sign))
    if base is None or period == 1 or period > 16:
        return None
    t = base.dtype

    def at(v: int, kind: str, c) -> int:
        return v if kind == "ramp" else v // c if kind == "div" else v % c

    offsets = {r: [sum(sign * (at(r + i, k, c) - at(r, k, c)) for k, c, sign in parts) for i in range(lanes)]
               for r in range(period)}
    if any(max(o) - min(o) >= 4 * lanes for o in offsets.values()):
        return None
    lane0 = None
    for k, c, sign in parts:
        v = base if k == "ramp" else E.FloorDiv(base, E.Const(c, t)) if k == "div" else E.Mod(base, E.Const(c, t))
        lane0 = (v if sign > 0 else E.Neg(v)) if lane0 is None else (E.Add(lane0, v) if sign > 0 else E.Sub(lane0, v))
    for v, sign in scalar:
        v = v if v.dtype == t else E.Cast(v, t)
        lane0 = E.Add(lane0, v) if sign > 0 else E.Sub(lane0, v)
    return lane0, base, period, offsets


def _dense_runs(idx: E.Expr) -> list[E.Ramp] | None:
    """The ramps (stride 1, of one length) that ``idx`` lays end to end (the vectorizer's index of a
    vector across several tiles of a layout: ``passes/vectorize._Vectorizer._runs``), or None."""
    if isinstance(idx, E.Ramp):
        return [idx] if isinstance(idx.stride, E.Const) and idx.stride.value == 1 else None
    if not (isinstance(idx, E.Shuffle) and len(idx.args) == 2 and idx.indices == tuple(range(len(idx.indices)))
            and idx.args[0].dtype.lanes == idx.args[1].dtype.lanes):
        return None
    a, c = _dense_runs(idx.args[0]), _dense_runs(idx.args[1])
    return None if a is None or c is None or a[0].lanes != c[0].lanes else a + c


class _VectorMemory:
    """``_Emitter``'s loads, stores and lane masks (a mixin: it uses the emitter's builder and tables)."""

    # -- memory
    def _align(self, t: DType) -> int:
        return max(t.scalar().itemsize, 1)

    def _e_Load(self, e: E.Load):
        ptr, t = self.buffers[e.buffer]
        lanes = e.dtype.lanes
        if lanes == 1 or e.index.dtype.lanes == 1 or isinstance(e.index, E.Broadcast):
            idx = e.index.value if isinstance(e.index, E.Broadcast) else e.index
            p = self.b.gep(ptr, [self.index(idx)], source_etype=mem_type(t))
            v = self.b.load(p, typ=mem_type(t))
            v = self.b.trunc(v, _I1) if t.is_bool else v
            return self.splat(v, lanes)
        v = self._vector_load(ptr, t.with_lanes(lanes), e.index, self._every_lane_inside(e.buffer, e.index))
        return self.b.trunc(v, ll_type(t.with_lanes(lanes))) if t.is_bool else v

    def _every_lane_inside(self, buffer: str, idx: E.Expr) -> bool:
        """Whether every lane of the dense vector index ``idx`` lies inside ``buffer``, an allocation of a
        constant size, at constant elements: such an access needs no mask (its masked-off lanes are
        read harmlessly, and a store writes them back unchanged), and LLVM keeps plain accesses to a
        small buffer in registers, never masked ones (``passes/register_accumulators``)."""
        size = self.sizes.get(buffer)
        return size is not None and isinstance(idx, E.Ramp) and isinstance(idx.base, E.Const) and \
            isinstance(idx.stride, E.Const) and idx.stride.value == 1 and 0 <= idx.base.value and \
            idx.base.value + idx.lanes <= size

    def _vector_load(self, ptr: ir.Value, t: DType, idx: E.Expr, inside: bool = False) -> ir.Value:
        """A vector from memory: dense (one load), strided (scalar loads, or one wider load and a
        shuffle for small constant strides), or gathered (``llvm.masked.gather``, which LLVM expands
        to scalar loads on CPUs whose gather instructions are slow, such as AMD Zen). ``inside``: every
        lane lies inside the buffer (no mask needed)."""
        b, lanes = self.b, t.lanes
        vt, et = mem_type(t), mem_type(t.scalar())
        align = self._align(t)
        runs = _dense_runs(idx) if isinstance(idx, E.Shuffle) else None
        if runs is not None:  # one dense load per run, each under its lanes of the mask
            parts = self._per_run(runs, lambda r, _: self._vector_load(ptr, t.with_lanes(r.lanes), r))
            while len(parts) > 1:  # laid end to end, two at a time
                both = [ir.Constant(ir.VectorType(_I32, 2 * _lanes(x)), list(range(2 * _lanes(x)))) for x in parts[::2]]
                parts = [b.shuffle_vector(x, y, k) for x, y, k in zip(parts[::2], parts[1::2], both, strict=True)]
            return parts[0]
        stride = idx.stride.value if isinstance(idx, E.Ramp) and isinstance(idx.stride, E.Const) else None
        mask = None if inside else self.mask
        if stride == 1:
            p = b.gep(ptr, [self.index(idx.base)], source_etype=et)
            if mask is None:
                return b.load(p, typ=vt, align=align)
            fn = self.intrinsic(f"llvm.masked.load.{type_suffix(t, True)}.p0", vt, [_PTR, _I32, mask.type, vt])
            return b.call(fn, [p, ir.Constant(_I32, align), mask, ir.Constant(vt, ir.Undefined)])
        if mask is None and isinstance(idx, E.Ramp):
            base = self.index(idx.base)
            if stride is not None and stride != 0 and (lanes - 1) * abs(stride) + 1 <= 64:
                # the span of the lanes, loaded at once: never reads outside the elements the lanes read
                span = (lanes - 1) * abs(stride) + 1
                lowest = base if stride > 0 else b.add(base, ir.Constant(_I64, (lanes - 1) * stride))
                wt = ir.VectorType(et, span)
                w = b.load(b.gep(ptr, [lowest], source_etype=et), typ=wt, align=align)
                picks = [k * stride if stride > 0 else (lanes - 1 - k) * -stride for k in range(lanes)]
                return b.shuffle_vector(w, ir.Constant(wt, ir.Undefined),
                                        ir.Constant(ir.VectorType(_I32, lanes), picks))
            step = self.index(idx.stride)
            out = ir.Constant(vt, ir.Undefined)
            addr = base
            for k in range(lanes):
                out = b.insert_element(out, b.load(b.gep(ptr, [addr], source_etype=et), typ=et, align=align),
                                       ir.Constant(_I32, k))
                if k + 1 < lanes:
                    addr = b.add(addr, step)
            return out
        clamped = _clamped_ramp(idx)
        if clamped is not None:
            return self._clamped_load(ptr, t, idx, *clamped)
        periodic = _periodic_lanes(idx, lanes) if mask is None else None
        if periodic is not None:
            return self._periodic_load(ptr, t, *periodic)
        return self._gather(ptr, t, idx)

    def _periodic_load(self, ptr: ir.Value, t: DType, lane0: E.Expr, base: E.Expr, period: int,
                       offsets: dict) -> ir.Value:
        """The lanes of ``_periodic_lanes``: per residue of the ramp's base, one dense load of the run
        of elements they read (from the least offset to the greatest, both read by some lane, so it
        stays inside the buffer) and a constant shuffle; a switch on the residue picks one."""
        b = self.b
        et = mem_type(t.scalar())
        align = self._align(t)
        start = self.index(lane0)
        residue = self.index(E.Mod(base, E.Const(period, base.dtype)))
        done = self.fn.append_basic_block("periodic.done")
        blocks = [self.fn.append_basic_block(f"periodic.r{r}") for r in range(period)]
        switch = b.switch(residue, blocks[0])
        values = []
        for r, block in enumerate(blocks):
            if r:
                switch.add_case(ir.Constant(_I64, r), block)
            b.position_at_end(block)
            lo, hi = min(offsets[r]), max(offsets[r])
            wt = ir.VectorType(et, hi - lo + 1)
            w = b.load(b.gep(ptr, [b.add(start, ir.Constant(_I64, lo))], source_etype=et), typ=wt, align=align)
            picks = ir.Constant(ir.VectorType(_I32, t.lanes), [o - lo for o in offsets[r]])
            values.append((b.shuffle_vector(w, ir.Constant(wt, ir.Undefined), picks), b.block))
            b.branch(done)
        b.position_at_end(done)
        phi = b.phi(values[0][0].type)
        for v, block in values:
            phi.add_incoming(v, block)
        return phi

    def _clamped_load(self, ptr: ir.Value, t: DType, idx: E.Expr, ramp: E.Ramp, lo: E.Expr, hi: E.Expr,
                      offset: E.Expr | None) -> ir.Value:
        """A load at ``clamp(ramp(base, 1, n), lo, hi) + offset`` (a boundary condition, vectorized): where
        the ramp lies inside [lo, hi] the clamp does nothing and one dense load does, else a gather.
        Halide gets the same by partitioning the loop around the image border; this branch is taken the
        same way on every interior iteration, so it costs about one compare."""
        b = self.b
        base, first, last = self.index(ramp.base), self.index(lo), self.index(hi)
        end = b.add(base, ir.Constant(base.type, t.lanes - 1))
        inside = b.and_(b.icmp_signed(">=", base, first), b.icmp_signed("<=", end, last))
        dense_at = ramp.base if offset is None else E.Add(ramp.base, offset)
        # at the edges only: the plain gather (no test of nearby lanes, less code in the loop)
        return self._else_gathered(inside, lambda: self._vector_load(
            ptr, t, E.Ramp(dense_at, E.const(1, dense_at.dtype), t.lanes)), ptr, t, idx)

    def _else_gathered(self, cond: ir.Value, make, ptr: ir.Value, t: DType, idx: E.Expr,
                       likely: bool | None = None) -> ir.Value:
        """``make()`` where ``cond`` holds, else the gather of ``idx``: a branch and a phi."""
        b = self.b
        with b.if_else(cond, likely=likely) as (then, otherwise):
            with then:
                dense = make()
                dense_block = b.block
            with otherwise:
                gathered = self._gathered(ptr, t, idx)
                gather_block = b.block
        phi = b.phi(dense.type)
        phi.add_incoming(dense, dense_block)
        phi.add_incoming(gathered, gather_block)
        return phi

    def _gather(self, ptr: ir.Value, t: DType, idx: E.Expr) -> ir.Value:
        near = self._nearby_lanes(ptr, t, idx)
        return near if near is not None else self._gathered(ptr, t, idx)

    def _nearby_lanes(self, ptr: ir.Value, t: DType, idx: E.Expr) -> ir.Value | None:
        """A gather of 4-byte elements whose lanes, a permute instruction's width at a time (AVX-512's vpermps 16,
        AVX2's 8), all read within that many elements of the lowest (a resampling's taps: 16 output columns
        read 8 or 9 inputs), its first lane reading the lowest element and its last the highest (as an
        ascending index does): per such chunk, one masked load from the first lane's index (lanes past the
        last's masked off, so that it reads nothing the gather would not) and a permute; where some chunk's
        lanes spread wider or are not so ordered, the gather, in a branch. The indices' spread is taken from
        the part of the index that is not the same in every lane (the broadcasts, an image's row and
        channel, are added to the address), so that LLVM hoists it out of the loops over them. Only for
        indices computed from the loops' Vars: one read from data (a lookup table's, a grid's) changes at
        every iteration and often spreads wide, and the test cost more than it saved (a bilateral grid's
        slicing ran 1.16x slower with it). Nor for a clamped ramp (a boundary condition), which gathers only
        at the image's edges: there the test's code, hoisted into the loop's preheader, kept registers from
        the hot loop (a blur's rows ran 1.16x slower). None where this does not apply (no such instruction,
        a mask, other element sizes, an index read from data)."""
        b, lanes = self.b, t.lanes
        w = {32: 16, 8: 8}.get(self.shared.pow_table)  # vpermps' lanes (pow_table: vpermi2ps' two registers, or 8)
        et = mem_type(t.scalar())
        if w is None or self.mask is not None or lanes % w or (lanes // w) & (lanes // w - 1) or \
                et not in (ir.FloatType(), ir.IntType(32)):
            return None
        signed = _terms(idx)
        same = [(e.value, sign) for e, sign in signed if isinstance(e, E.Broadcast)]
        varying = [(e, sign) for e, sign in signed if not isinstance(e, E.Broadcast)]
        if not varying or any(E.reads_data(e) for e, _ in varying) or \
                len(varying) == 1 and isinstance(_unclamped(varying[0][0]), E.Ramp):
            return None
        vi = None
        for e, sign in varying:
            v = self.index(e)
            vi = (v if sign > 0 else b.neg(v)) if vi is None else (b.add(vi, v) if sign > 0 else b.sub(vi, v))
        base = ir.Constant(_I64, 0)
        for e, sign in same:
            v = self.index(e)
            base = b.add(base, v) if sign > 0 else b.sub(base, v)
        i64w, i32w = ir.VectorType(_I64, w), ir.VectorType(_I32, w)
        chunks, near = [], None
        for start in range(0, lanes, w):
            part = vi if lanes == w else b.shuffle_vector(vi, ir.Constant(vi.type, None),
                                                          ir.Constant(i32w, list(range(start, start + w))))
            lo = b.extract_element(part, ir.Constant(_I32, 0))
            rel = b.sub(part, self.splat(lo, w))
            hi = b.extract_element(rel, ir.Constant(_I32, w - 1))
            # every lane from the first's element to the last's, and that within w: the first lane reads
            # the lowest element and the last the highest
            inside = b.and_(b.icmp_unsigned("<", hi, ir.Constant(_I64, w)),
                            self._reduce("and", b.icmp_unsigned("<=", rel, self.splat(hi, w))))
            chunks.append((lo, rel, hi))
            near = inside if not chunks[:-1] else b.and_(near, inside)
        vf = ir.VectorType(ir.FloatType(), w)
        load = self.intrinsic(f"llvm.masked.load.v{w}f32.p0", vf, [_PTR, _I32, ir.VectorType(_I1, w), vf])
        permute = self.intrinsic("llvm.x86.avx512.permvar.sf.512" if w == 16 else "llvm.x86.avx2.permps",
                                 vf, [vf, i32w])

        def loaded_and_permuted():
            iota = ir.Constant(i64w, list(range(w)))
            parts = []
            for lo, rel, hi in chunks:
                p = b.gep(ptr, [b.add(base, lo)], source_etype=et)
                row = b.call(load, [p, ir.Constant(_I32, self._align(t.with_lanes(1))),
                                    b.icmp_unsigned("<=", iota, self.splat(hi, w)), ir.Constant(vf, None)])
                parts.append(b.call(permute, [row, b.trunc(rel, i32w)]))
            while len(parts) > 1:  # concatenated in pairs
                width = 2 * parts[0].type.count
                parts = [b.shuffle_vector(parts[k], parts[k + 1], ir.Constant(ir.VectorType(_I32, width),
                                                                              list(range(width))))
                         for k in range(0, len(parts), 2)]
            return parts[0] if et == ir.FloatType() else b.bitcast(parts[0], mem_type(t))

        return self._else_gathered(near, loaded_and_permuted, ptr, t, idx, likely=True)

    def _gathered(self, ptr: ir.Value, t: DType, idx: E.Expr) -> ir.Value:
        b, lanes, mask = self.b, t.lanes, self.mask
        vt, et = mem_type(t), mem_type(t.scalar())
        align = self._align(t)
        ptrs = self._pointers(ptr, et, idx, lanes)
        m = mask if mask is not None else ir.Constant(ir.VectorType(_I1, lanes), 1)
        fn = self.intrinsic(f"llvm.masked.gather.{type_suffix(t, True)}.v{lanes}p0", vt,
                            [ptrs.type, _I32, m.type, vt])
        return b.call(fn, [ptrs, ir.Constant(_I32, align), m, ir.Constant(vt, ir.Undefined)])

    def _pointers(self, ptr: ir.Value, et: ir.Type, idx: E.Expr, lanes: int) -> ir.Value:
        """<lanes x ptr>: the address of each lane's element."""
        p = self.b.gep(ptr, [self.index(idx)], source_etype=et)
        p.type = ir.VectorType(_PTR, lanes)  # llvmlite types a GEP with a vector index as a scalar ptr
        return p

    def _s_Store(self, s: lir.Store):
        ptr, t = self.buffers[s.buffer]
        v = self.expr(s.value)
        lanes = max(s.value.dtype.lanes, s.index.dtype.lanes)
        if t.is_bool:
            v = self.b.zext(v, mem_type(s.value.dtype))
        if lanes == 1:
            # under a mask too: the uniform store runs when some lane is active, as in the serial loop
            p = self.b.gep(ptr, [self.index(s.index)], source_etype=mem_type(t))
            self.b.store(v, p)
            return
        self._vector_store(ptr, t.with_lanes(lanes), s.index, self.splat(v, lanes),
                           self._every_lane_inside(s.buffer, s.index))

    def _vector_store(self, ptr: ir.Value, t: DType, idx: E.Expr, v: ir.Value, inside: bool = False) -> None:
        """Dense (one store), strided (scalar stores in lane order), or scattered
        (``llvm.masked.scatter``: overlapping lanes are stored in lane order, as the serial loop does).
        ``inside``: every lane lies inside the buffer; under a mask, the masked-off lanes are then
        written back as they were."""
        b, lanes = self.b, t.lanes
        vt, et = mem_type(t), mem_type(t.scalar())
        align = self._align(t)
        mask = self.mask
        runs = _dense_runs(idx) if isinstance(idx, E.Shuffle) else None
        if runs is not None:  # one dense store per run, of its lanes of the value and the mask
            self._per_run(runs, lambda r, lanes_of: self._vector_store(ptr, t.with_lanes(r.lanes), r, lanes_of(v)))
            return
        if isinstance(idx, E.Ramp) and isinstance(idx.stride, E.Const) and idx.stride.value == 1:
            p = b.gep(ptr, [self.index(idx.base)], source_etype=et)
            if mask is not None and inside:
                v, mask = b.select(mask, v, b.load(p, typ=vt, align=align)), None
            if mask is None:
                b.store(v, p, align=align)
                return
            fn = self.intrinsic(f"llvm.masked.store.{type_suffix(t, True)}.p0", _VOID, [vt, _PTR, _I32, mask.type])
            b.call(fn, [v, p, ir.Constant(_I32, align), mask])
            return
        if mask is None and isinstance(idx, E.Ramp):
            addr, step = self.index(idx.base), self.index(idx.stride)
            for k in range(lanes):
                p = b.gep(ptr, [addr], source_etype=et)
                b.store(b.extract_element(v, ir.Constant(_I32, k)), p, align=align)
                if k + 1 < lanes:
                    addr = b.add(addr, step)
            return
        ptrs = self._pointers(ptr, et, idx if idx.dtype.lanes > 1 else E.Broadcast(idx, lanes), lanes)
        m = mask if mask is not None else ir.Constant(ir.VectorType(_I1, lanes), 1)
        fn = self.intrinsic(f"llvm.masked.scatter.{type_suffix(t, True)}.v{lanes}p0", _VOID,
                            [vt, ptrs.type, _I32, m.type])
        b.call(fn, [v, ptrs, ir.Constant(_I32, align), m])

    def _per_run(self, runs: list, access) -> list:
        """``access(run, lanes_of)`` for each run, under the run's lanes of the mask (``lanes_of(v)``: a
        vector's lanes of that run); their results in order."""
        b, n, mask, out = self.b, runs[0].lanes, self.mask, []
        try:
            for k, run in enumerate(runs):
                picks = ir.Constant(ir.VectorType(_I32, n), list(range(k * n, (k + 1) * n)))

                def lanes_of(v, picks=picks):
                    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), picks)

                self.mask = None if mask is None else lanes_of(mask)
                out.append(access(run, lanes_of))
        finally:
            self.mask = mask
        return out

    # -- predication
    def _reduce(self, op: str, m: ir.Value) -> ir.Value:
        return self.b.call(self.intrinsic(f"llvm.vector.reduce.{op}.v{_lanes(m)}i1", _I1, [m.type]), [m])

    def _predicated(self, s: lir.IfThenElse):
        """A condition that differs between lanes. At the top level: all lanes active runs the plain
        body, some run it under the mask, none skip it; nested: under the combined mask only."""
        b = self.b
        outer = self.mask
        if outer is not None:
            cond = self.expr(s.cond)
            ones = ir.Constant(cond.type, 1)
            for m, body in ((b.and_(outer, cond), s.then), (b.and_(outer, b.xor(cond, ones)), s.otherwise)):
                if body is not None:
                    with b.if_then(self._reduce("or", m)):
                        self._under_mask(m, body)
            return
        every = self._lanes_test(s.cond, "every")
        with b.if_else(every) as (full, partial):
            with full:
                self.stmt(s.then)
            with partial:
                with b.if_then(self._lanes_test(s.cond, "some")):
                    self._under_mask(self.expr(s.cond), s.then)
        if s.otherwise is not None:
            with b.if_else(self._lanes_test(s.cond, "some")) as (partial, empty):
                with partial:
                    with b.if_then(b.not_(every)):
                        cond = self.expr(s.cond)
                        self._under_mask(b.xor(cond, ir.Constant(cond.type, 1)), s.otherwise)
                with empty:
                    self.stmt(s.otherwise)

    def _lanes_test(self, e: E.Expr, which: str) -> ir.Value:
        """Whether ``every`` lane or ``some`` lane of the bool vector ``e`` is true: one scalar comparison
        where ``lanes_test`` finds one (a tail guard), else a reduction of the lanes."""
        b = self.b
        if isinstance(e, (E.And, E.Or)) and (which == "every") == isinstance(e, E.And):
            return (b.and_ if isinstance(e, E.And) else b.or_)(self._lanes_test(e.a, which),
                                                              self._lanes_test(e.b, which))
        scalar = lanes_test(e, which)
        return self.expr(scalar) if scalar is not None else self._reduce("and" if which == "every" else "or",
                                                                          self.expr(e))

    def _under_mask(self, mask: ir.Value, s: lir.Stmt) -> None:
        saved, self.mask = self.mask, mask
        self.stmt(s)
        self.mask = saved
