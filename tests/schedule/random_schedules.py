"""A hypothesis strategy for random schedules of a pipeline built from language Funcs.

Every Func that is not an output is computed inline, at root, or at a random loop of its only consumer
(then maybe stored at root: a sliding window); sometimes an Input is read through a copy (``in_``);
every stage gets random splits (factors and tail
strategies), reorders, fuses, a vectorized inner loop, an unrolled loop and a parallel outer loop.
Whatever the schedule asks that ragsched refuses with a ValueError is rejected by the test, so the
generator may propose invalid combinations; the tests check that the rest compute the reference.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.lang import reachable_funcs, schedulable, to_program
from ragsched.program import is_ragged
from ragsched.schedule.loops import ForKind

FACTORS = [2, 3, 4, 5, 8, 16]
# guard and split twice as often: shift and pad (auto is shift in a pure definition) read or write past the
# small test inputs whenever a factor exceeds a region, and those schedules are refused
TAILS = ["auto", "guard", "guard", "split", "split", "shift", "pad"]


def consumers_of(outputs) -> dict[str, set[tuple[str, int]]]:
    """For each Func, the (consumer, stage) pairs that read it (stage 0 is the pure definition)."""
    program = to_program(outputs)
    users: dict[str, set[tuple[str, int]]] = {f.name: set() for f in program.functions}
    for f in program.functions:
        stages = [[f.init]] + [[d.value, *d.args] for d in f.updates]
        for k, exprs in enumerate(stages):
            for ref in (r for e in exprs for r in E.func_refs(e)):
                if ref.name in users and ref.name != f.name:
                    users[ref.name].add((f.name, k))
    return users


def ragged_vars(fn, program) -> tuple[str | None, frozenset[str]]:
    """A Func's batch Var and the Vars and RVars whose extents may depend on it: in a pipeline with ragged
    data, every Var after the first (a Func without a shape of its own gets a ragged region from its
    consumers) and the RVars of an RDom with bounds that use a pure Var. ``(None, {})`` elsewhere."""
    if not any(is_ragged(s) for x in (*program.functions, *program.inputs) for s in (x.shape or ())):
        return None, frozenset()
    ragged = set(fn.args[1:])
    for d in fn.updates:
        if d.rdom is not None:
            bounds = set().union(*(E.free_vars(e) for e in d.rdom.mins + d.rdom.extents))
            if bounds & set(fn.args):
                ragged |= set(d.rdom.vars)
    return (fn.args[0] if ragged and fn.args else None), frozenset(ragged)


def _split_tails_inside(plan, order: list[str]) -> list[str]:
    """``order`` with the whole-tile loop of each tail='split' split moved before the loops made from its
    inner loop (those must stay inside it: refused otherwise, tests/schedule/test_update_tails.py)."""
    name = {d.node: d.name for d in plan.dims}
    for t in plan.transforms:
        if getattr(t, "tail", None) != "split" or t.outer not in name:
            continue
        inner = [n for n in order if _made_from(n, [name.get(t.inner, t.inner)])]
        outer = name[t.outer]
        if inner and order.index(inner[0]) < order.index(outer):
            order.remove(outer)
            order.insert(order.index(inner[0]), outer)
    return order


def _made_from(name: str, roots) -> bool:
    """Whether loop ``name`` was split or fused from one of ``roots`` (``x``, ``x.i3``, ``x_y``)."""
    return any(name == r or name.startswith((r + ".", r + "_")) for r in roots)


def _stage_steps(draw, f, stage: int, is_output: bool, ragged=(None, frozenset()), inside: bool = False) -> bool:
    """Random splits, reorder, fuse, vectorize, unroll and parallel of one stage; True if it went parallel.
    For a ragged Func (``ragged``: its batch Var and the Vars whose extents depend on it, ``ragged_vars``)
    the loops of its batch stay outermost and its ragged loops split with 'guard' or 'split' tails: those
    are refused otherwise (a loop's bounds would use a Var of a loop inside it; a ragged extent may be
    shorter than the factor), so the generator does not spend its draws there. A Func computed ``inside``
    a consumer's loop shifts its tiles rarely ("auto" only): its region there is often shorter than the
    factor, and a shifted tile then reads outside the inputs (refused when called, after compiling)."""
    target = f if stage == 0 else f.update(stage - 1)
    batch, ragged_names = ragged
    for _ in range(draw(st.integers(0, 2))):
        plan = f.stage_plan(stage)
        # a tail='split' split's whole-tile loop cannot be split again (refused: tests/schedule/test_plan.py)
        whole = {t.outer for t in plan.transforms if getattr(t, "tail", None) == "split"}
        dims = [d for d in plan.dims if d.node not in whole]
        if not dims:
            break
        d = draw(st.sampled_from(dims))
        # refused (tests/schedule/test_update_tails.py): pad on an RVar (leaves the RDom) or an output (writes
        # past it); shift or pad on an update (it would be applied twice to some points)
        tails = [t for t in TAILS if not (t == "pad" and (stage or d.is_rvar or is_output) or t == "shift" and stage)]
        if inside or _made_from(d.name, ragged_names | {batch} - {None}):  # a shifted batch reads outside
            tails = [t for t in tails if t not in ("shift", "pad")]
        tail = draw(st.sampled_from(tails))
        target.split(d.name, d.name, f"{d.name}.i{len(plan.dims)}", draw(st.sampled_from(FACTORS)), tail=tail)
    dims = list(f.stage_plan(stage).dims)
    if len(dims) > 1 and draw(st.booleans()):
        order = draw(st.permutations([d.name for d in dims]))
        rv = [d.name for d in dims if d.is_rvar]
        ordered_rvars = iter(rv)  # keep the RVars in their order: the update's meaning depends on it
        order = [next(ordered_rvars) if n in rv else n for n in order]
        if batch is not None:  # the batch loops outermost: every ragged extent depends on them
            order = [n for n in order if _made_from(n, [batch])] + [n for n in order if not _made_from(n, [batch])]
        target.reorder(*_split_tails_inside(f.stage_plan(stage), order))
    dims = list(f.stage_plan(stage).dims)
    if len(dims) > 1 and draw(st.integers(0, 4)) == 0:
        k = draw(st.integers(0, len(dims) - 2))
        a, b = dims[k].name, dims[k + 1].name
        # of a ragged Func's batch loops, only the whole batch fuses with the next loop (the flat loop over
        # valid (b, i) pairs): a part of the batch fused with a ragged loop is refused
        mixed = batch is not None and _made_from(a, [batch]) != _made_from(b, [batch]) and a != batch
        plan = f.stage_plan(stage)
        whole = {t.outer for t in plan.transforms if getattr(t, "tail", None) == "split"}  # refused: not fused
        split_tail = {dims[k].node, dims[k + 1].node} & whole
        if not dims[k].is_rvar and not dims[k + 1].is_rvar and not mixed and not split_tail:
            target.fuse(a, b, f"{a}_{b}")
    dims = list(f.stage_plan(stage).dims)
    pure = [d for d in dims if not d.is_rvar]
    # a loop over the valid (b, i) pairs reads its entry from a table: refused as vector lanes
    if pure and batch is not None and _made_from(pure[-1].name, [batch]):
        pure = []
    whole = {t.outer for t in f.stage_plan(stage).transforms if getattr(t, "tail", None) == "split"}
    if pure and draw(st.booleans()):  # a factor splits the loop: not one of whole tiles (refused)
        factor = draw(st.sampled_from([None, 4, 8]))
        target.vectorize(pure[-1].name, None if pure[-1].node in whole else factor)
    dims = list(f.stage_plan(stage).dims)
    serial = [d for d in dims if d.kind == ForKind.SERIAL and d.node not in whole]
    if serial and draw(st.integers(0, 3)) == 0:
        target.unroll(serial[-1].name, draw(st.sampled_from([2, 3])))
    dims = list(f.stage_plan(stage).dims)
    outer = [d for d in dims if d.kind == ForKind.SERIAL and not d.is_rvar]
    if outer and draw(st.integers(0, 2)) == 0:
        target.parallel(outer[0].name)
        return True
    return False


@st.composite
def random_schedule(draw, outputs) -> list[str]:
    """Apply a random schedule to the Funcs of ``outputs`` (mutating them); returns a description."""
    funcs = reachable_funcs(outputs)
    users = consumers_of(outputs)
    out_names = {f.name for f in outputs}
    program = to_program(outputs)
    log, inlined, parallel = [], set(), False
    for fn in reversed(program.functions):  # consumers first: compute_at targets exist when chosen
        f = funcs[fn.name]
        is_out = f.name in out_names
        choice = "root" if is_out else draw(st.sampled_from(["root", "inline", "at", "at"]))
        at = choice == "at" and len(users[f.name]) == 1 and not {c for c, _ in users[f.name]} & inlined
        for stage in range(len(fn.updates) + 1):
            parallel |= _stage_steps(draw, f, stage, is_out, ragged_vars(fn, program), inside=at)
        if is_out:
            continue
        if choice == "inline" and not fn.updates:
            f.compute_inline()
            inlined.add(f.name)
        elif at:
            name, k = next(iter(users[f.name]))
            consumer = funcs[name]
            loops = [d.name for d in consumer.stage_plan(k).dims]
            if loops:
                f.compute_at(consumer.update(k - 1) if k else consumer, draw(st.sampled_from(loops)))
                if not parallel and draw(st.booleans()):  # shared storage inside a parallel loop: refused
                    f.store_root()
        log.append(f"{f.name}: {choice}")
    if draw(st.integers(0, 2)) == 0:
        log.append(_wrap_an_input(draw, outputs, program, inlined))
    return log


def _wrap_an_input(draw, outputs, program, inlined) -> str:
    """``in_()``: a copy of an Input for one consumer (or all), placed at root, inline or at a loop."""
    readers = [(f.name, k, ref.name) for f in program.functions if f.name not in inlined
               for k, exprs in enumerate([[f.init]] + [[d.value, *d.args] for d in f.updates])
               for ref in (r for e in exprs for r in E.func_refs(e)) if program.is_input(ref.name)]
    if not readers:
        return "no input to wrap"
    consumer, k, name = draw(st.sampled_from(sorted(set(readers))))
    funcs = schedulable(outputs)
    wrapper = funcs[name].in_(funcs[consumer] if draw(st.booleans()) else None)
    _stage_steps(draw, wrapper, 0, False)
    choice = draw(st.sampled_from(["root", "inline", "at"]))
    if choice == "inline":
        wrapper.compute_inline()
    elif choice == "at" and wrapper._schedule[0].consumer:
        loops = [d.name for d in funcs[consumer].stage_plan(k).dims]
        if loops:
            wrapper.compute_at(funcs[consumer].update(k - 1) if k else funcs[consumer], draw(st.sampled_from(loops)))
    return f"{wrapper.name}: {choice}"
