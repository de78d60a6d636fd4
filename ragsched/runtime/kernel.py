"""Kernel: a compiled pipeline called like a NumPy function (``runtime/compiler.py`` makes its code).

Every argument is checked before generated code runs: names, dtypes, ranks, Sizes that must agree,
reads outside an input, the shape and dtype of ``out=``. Then the call's scalars and buffer addresses
are packed into one int64 array and the machine code is called once through ctypes.
"""

from __future__ import annotations

import ctypes
import operator
import struct
import time

import numpy as np

from ..algebra import expr as E
from ..algebra import types as T
from ..codegen import target as targets
from ..codegen.flatten import offsets_buffer
from ..codegen.passes.partition import widen_index
from ..codegen.printer import loop_nest
from ..codegen.ragged_domains import class_lengths, lengths_inputs, max_symbol
from ..program import Program, is_ragged
from ..ragged.array import RaggedArray
from ..schedule import Schedule, SchedulesByLength
from ..schedule.gpu_default import default_gpu_schedule
from . import native_call
from . import ragged_args as R
from .by_length import KernelsByLength
from .compiler import (
    collector_paused,
    compile_program,
    compiled_into_cache,
    load_code,
    load_code_started,
    lowered_before,
)
from .forked import forked
from .interop import host_array, is_torch, to_kind
from .pyexpr import IndexRangeError, compile_function

_F64, _F64_BITS = struct.Struct("d"), struct.Struct("q")


def compile_pipeline(pipeline, target="cpu", threads=None, schedule=None, specialize=None, device=None,
                     fast_math: bool = False, load: bool = True) -> Kernel | KernelsByLength:
    with E.deep_recursion():
        return _compile_pipeline(pipeline, target, threads, schedule, specialize, device, fast_math, load)


def _compile_pipeline(pipeline, target, threads, schedule, specialize, device=None, fast_math=False,
                      load=True) -> Kernel:
    """``schedule`` is compiled with the Funcs' own schedules (the records they hold already counted once:
    ``Schedule.merged``); the Funcs are not changed, so what one call compiles never depends on another.
    Schedules by length class (given, or the pipeline's ``by_length``) make one Kernel per class.
    On a GPU, Funcs that the schedule leaves without GPU loops get the default GPU schedule. ``load=False``:
    Kernels lowered only (``Kernel``)."""
    if not isinstance(fast_math, bool):
        raise TypeError(f"fast_math must be True or False, got {fast_math!r}")
    t = targets.runnable(target, device)
    if fast_math:
        t = targets.with_fast_math(t, True)
    own = pipeline.schedule()
    if schedule is None:
        schedule = getattr(pipeline, "by_length", None)
    if schedule is not None and not isinstance(schedule, (Schedule, SchedulesByLength)):
        raise TypeError(f"schedule must be an rs.Schedule or rs.SchedulesByLength, got {type(schedule).__name__}")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    program = pipeline.program()

    def full(schedule):
        mine = own if schedule is None else own.merged(schedule)
        return mine + default_gpu_schedule(program, mine) if targets.is_gpu(t) else mine

    def kernel(schedule, load=load):
        return Kernel(program, full(schedule), specialize=dict(specialize or {}), threads=threads, target=t, load=load)

    if isinstance(schedule, SchedulesByLength):
        lengths = class_lengths(program, "compile")
        if not load:
            return KernelsByLength(schedule, [kernel(c.schedule) for c in schedule.classes], lengths)
        classes, start = schedule.classes, time.perf_counter()
        # the later half of the classes lowered and compiled by a copy of this process meanwhile, where
        # it may fork (``forked.py``); this process then takes them from the disk cache
        # (not where they were lowered before: then their compile is a lookup here)
        split = (len(classes) + 1) // 2
        later, copy = [c.schedule for c in classes[split:]], None
        if later and not targets.is_gpu(t) and \
                not all(lowered_before(program, full(s), dict(specialize or {}), threads, t) for s in later):
            copy = forked(lambda: _compiled_only([kernel(s, load=False) for s in later]))
        if copy is None:
            split = len(classes)
        kernels, pending = [], []
        with collector_paused():  # across the classes: not only while each is lowered or compiled
            try:  # each class's machine code made while the next class is lowered
                for k, c in enumerate(classes):
                    if k == split:
                        # (while this one's last class compiles on its thread; the copy's classes compiled
                        # here again if it failed, or took 20 times as long as this one's: stuck)
                        copy.wait(timeout=max(COPY_WAIT_MIN_S, 20 * (time.perf_counter() - start)))
                    kernels.append(kernel(c.schedule, load=False))
                    # the last class's compiled on this thread once the others' are: a compile thread
                    # started for it found this one still running (about to wait), and LLVM then kept to
                    # one core (``load._spare_core``)
                    pending.append(kernels[-1].load_started(here=k + 1 == len(classes)))
            finally:
                if copy is not None:
                    copy.stop()  # (after a failure here: its work is not wanted)
                failed = _waited(pending)  # (a lowering's own error goes on past this)
        if failed:
            raise failed[0]
        return KernelsByLength(schedule, kernels, lengths, wall_s=time.perf_counter() - start)
    return kernel(schedule)


#: the least time a forked copy's classes are waited for (``forked.Forked.wait``), however fast this
#: process compiled its own
COPY_WAIT_MIN_S = 60.0


def _compiled_only(kernels: list[Kernel]) -> None:
    """The machine code of ``kernels`` (lowered only) made into the disk cache, not loaded."""
    with collector_paused():
        for k in kernels:
            compiled_into_cache(k._code)


def _waited(pending) -> list[BaseException]:
    """Wait for every started load (``Kernel.load_started``), also after one failed; what they raised."""
    failed = []
    for finish in pending:
        try:
            finish()
        except BaseException as e:  # noqa: BLE001 (the caller raises it)
            failed.append(e)
    return failed


class Kernel:
    """A compiled pipeline. Call it with keyword arguments named after the Inputs and Params."""

    def __init__(self, program: Program, schedule=None, specialize: dict[str, int] | None = None, threads=None,
                 target=None, load: bool = True):
        """``load=False`` lowers only: the machine code is made by ``load()`` or at the first call, so that
        ``check`` may refuse arguments (a schedule's tile wider than the data) before LLVM runs."""
        self.program = program
        self.schedule = schedule
        self.threads = threads
        self.target = targets.runnable(target)
        self.specialized = dict(specialize or {})
        self._code = compile_program(program, schedule, self.specialized, threads, self.target, load=load)
        self.kernel = self._code.kernel
        self.lowered = self._code.lowered
        self.stats = self._code.stats
        self._plan()
        if self._code.loaded is not None:
            self._bind_code()

    def load(self) -> None:
        """Make and load the machine code now, if it is not yet (a Kernel made with ``load=False``)."""
        if not self._bound:
            load_code(self._code)
            self._bind_code()

    def load_started(self, here: bool = False):
        """Start making the machine code (``load``) on a thread of its own where the backend allows it
        (``compiler.load_code_started``; ``here``: on the caller's thread, by the function returned); returns
        the function that waits for it."""
        if self._bound:
            return lambda: None
        finish = load_code_started(self._code, here)

        def done():
            finish()
            self._bind_code()
        return done

    def check(self, out=None, out_shape=None, **kwargs) -> None:
        """Every check that a call with these arguments makes, without running the code (nor making it):
        raises the ValueError or TypeError that the call would."""
        if kwargs.keys() != self._names:
            self._explain_names(kwargs)
        self._call(out, out_shape, dict(kwargs), dry=True)

    @property
    def source(self) -> str:
        """The generated code: LLVM IR (before optimisation) for the CPU, CUDA C for a GPU."""
        return self._code.source

    llvm_ir = source

    @property
    def assembly(self) -> str:
        """The optimised machine code, as assembly text."""
        return self._code.assembly

    def loop_nest(self) -> str:
        return loop_nest(self.kernel.body)

    # -- call plan
    def _plan(self) -> None:
        prog = self.program
        # equal extents made one object (Q's, K's and V's lens[b]): each call's checks look them up in
        # caches, where equal but distinct objects were compared node by node (a fifth of a small call)
        same: dict = {}

        def shared(shape):
            return None if shape is None else tuple(same.setdefault(s, s) for s in shape)
        self._inputs = [(i.name, i.dtype.np, i.rank, shared(i.shape)) for i in prog.inputs]
        self._params = [(p.name, p.dtype) for p in prog.params]
        self._names = {i.name for i in prog.inputs} | {p.name for p in prog.params}
        self._output_pads = dict(self.kernel.output_pads)
        self._outputs = [(o, prog.func(o).dtype.np, prog.func(o).rank, shared(prog.func(o).shape))
                         for o in prog.outputs]
        symbols = list(prog.sizes) + [p.name for p in prog.params if p.dtype.is_int or p.dtype.is_bool]
        symbols += [f"{o}.extent.{k}" for o, _, r, _ in self._outputs for k in range(r)]
        self._lengths = lengths_inputs(prog)
        symbols += [max_symbol(n).name for n in self._lengths]
        self._symbols = symbols
        reqs = self.kernel.requirements
        exprs = [e for r in reqs for e in (r.lo, r.hi, r.extent)]
        self._req = [(r.name, r.dim, r.kind) for r in reqs]
        self._req_fn = compile_function(exprs, symbols, self._needed_lets(exprs)) if exprs else None
        self._reads_ok: set[tuple] = set()  # the symbols' values whose regions were checked and passed
        self._lets_fn = None  # the root lets' exact values (made at the first call that needs them)
        shape_exprs = [s for _, _, _, shape in self._inputs for s in shape
                       if not isinstance(s, E.Var) and not is_ragged(s)]
        self._shape_fn = {id(s): compile_function([s], list(prog.sizes)) for s in shape_exprs}
        self._out_shape_fn = {}
        self._ragged = any(R.is_ragged_shape(shape) for _, _, _, shape in self._inputs + self._outputs)
        for name, _, _, shape in self._outputs:
            if shape is not None and not R.is_ragged_shape(shape):
                need = sorted(set().union(*(E.free_vars(s) for s in shape)))
                self._out_shape_fn[name] = (tuple(need), compile_function(list(shape), need))
        self._extent_names = [tuple(f"{o}.extent.{k}" for k in range(r)) for o, _, r, _ in self._outputs]
        self._int_params = [(p.name, p.dtype) for p in prog.params if not p.dtype.is_float]
        self._slot_plan = []
        buffers = {i.name for i in prog.inputs} | set(prog.outputs)
        for k, arg in enumerate(self.kernel.arguments):
            if arg.is_buffer:
                self._slot_plan.append((k, 0, arg.name, 0))
            elif arg.name in self._names and arg.dtype.is_float:
                self._slot_plan.append((k, 2, arg.name, 0))
            elif arg.name in symbols:
                self._slot_plan.append((k, 1, arg.name, 0))
            else:
                buf, what, dim = arg.name.rsplit(".", 2)
                if buf not in buffers or what not in ("stride", "extent"):
                    raise RuntimeError(f"internal error: kernel argument {arg.name} has no source")
                self._slot_plan.append((k, 3 if what == "stride" else 4, buf, int(dim)))
        self._slot_type = ctypes.c_int64 * max(len(self.kernel.arguments), 1)
        self._fn = self._run_arrays = None  # the loaded code's (``_bind_code``)
        self._bound = False
        self._gpu = targets.is_gpu(self.target)
        self._xp = np
        self._usable = _usable
        if self._gpu:  # the GPU program takes whole C-contiguous arrays (CuPy's, or NumPy's in the emulator)
            self._usable = _c_contiguous
            if self.target.device == "gpu":
                import cupy

                self._xp = cupy
        # the fast path's plan
        self._fast: dict = {}
        self._input_names = [i.name for i in prog.inputs]
        self._exact_params = [p.name for p in prog.params if not p.dtype.is_float]
        out_index = {o: j for j, o in enumerate(prog.outputs)}
        self._arity = len(self._names)
        in_index = {name: i for i, name in enumerate(self._input_names)}
        # (a ragged kernel's slots also take offsets tables: it never takes the fast path)
        self._in_ptr_slots = [(k, in_index.get(name)) for k, kind, name, _ in self._slot_plan
                              if kind == 0 and name not in out_index]
        self._out_ptr_slots = [(k, out_index[name]) for k, kind, name, _ in self._slot_plan
                               if kind == 0 and name in out_index]
        # the dispatcher (machine code) for repeated calls of NumPy arrays only: kernels without Params whose
        # arrays each fill one slot; its plans are the latest checked call that allocated its outputs and
        # the latest with out=
        self._native = self._native_out = None
        self._outputs_n = len(prog.outputs)
        self._dispatch = None
        param_types = {p.name: p.dtype for p in prog.params}
        self._float_param_slots = [(k, name, param_types[name]) for k, kind, name, _ in self._slot_plan if kind == 2]

    def _bind_code(self) -> None:
        """The plan's parts that need the loaded code: its entry points and the dispatcher's."""
        prog, loaded = self.program, self._code.loaded
        self._bound = True
        self._fn = loaded.function
        self._run_arrays = getattr(loaded, "run", None)  # a GPU program: takes the arrays themselves
        arrays = [n for k, n in self._in_ptr_slots] + [j for k, j in self._out_ptr_slots]
        if not self._gpu and not self._ragged and not prog.params and getattr(loaded, "address", None) and \
                len(arrays) <= native_call.MAX_ARRAYS and \
                sorted(n for _, n in self._in_ptr_slots) == list(range(len(self._input_names))) and \
                sorted(j for _, j in self._out_ptr_slots) == list(range(len(prog.outputs))) and \
                native_call.layout_checked():
            self._dispatch = len(arrays)  # made at the first plan (16 ms of LLVM, once per count and process)
            self._fn_address = loaded.address
            names = self._input_names
            get = operator.itemgetter(*names) if names else None
            self._args_of = get if len(names) > 1 else (lambda kw, get=get: (get(kw),)) if names else \
                (lambda kw: ())

    def _needed_lets(self, exprs):
        """The root lets that ``exprs`` use, directly or through other lets, in order."""
        need = set().union(*(E.free_vars(e) for e in exprs)) if exprs else set()
        keep = []
        for name, value in reversed(self.kernel.lets):
            if name in need:
                keep.append((name, value))
                need |= E.free_vars(value)
        return keep[::-1]

    # -- call
    def __call__(self, out=None, out_shape=None, **kwargs):
        native = self._native if out is None else self._native_out
        if native is not None and out_shape is None and len(kwargs) == self._arity:
            # the latest plan, which the dispatcher checks against these arrays (a miss: the paths below)
            plan_at, fn_at, shape, dt, more, _ = native
            try:
                args = self._args_of(kwargs)
            except KeyError:
                args = None
            if args is not None:
                if out is None:
                    first = np.empty(shape, dt)
                    outs = (first,) if more is None else (first, *(np.empty(s, d) for s, d in more))
                else:
                    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
                rc = self._dispatch(plan_at, fn_at, *args, *outs) if len(outs) == self._outputs_n else \
                    native_call.MISS
                if rc == 0:
                    return outs[0] if len(outs) == 1 else outs
                if rc != native_call.MISS:
                    raise self._out_of_memory()
        if self._fast and out_shape is None and len(kwargs) == self._arity:  # like an earlier call: its plan
            try:
                found = self._fast_key(out, None, kwargs)
                hit = self._fast.get(found[0]) if found is not None else None
            except (KeyError, TypeError):  # an argument missing (the checked path names it), unhashable
                hit = None
            if hit is not None:
                return self._call_fast(hit, out, kwargs, found)
        if kwargs.keys() != self._names:
            self._explain_names(kwargs)
        if self._xp is np:  # arrays of other libraries in: NumPy views of them, results in their kind
            kind, given = None, out
            for name in self._input_names:
                if type(kwargs[name]) is not np.ndarray:
                    kwargs[name], k = host_array(name, kwargs[name])
                    kind = kind or k
            if out is not None and not (type(out) is np.ndarray or isinstance(out, (tuple, list)) and
                                        all(type(o) is np.ndarray for o in out)):
                out, k = self._host_outs(out)
                kind = kind or k
            if kind is not None:
                result = self._call(out, out_shape, self._nested_to_ragged(kwargs))
                if given is not None:
                    return given
                return tuple(to_kind(r, kind) for r in result) if isinstance(result, tuple) else to_kind(result, kind)
        return self._call(out, out_shape, kwargs)

    def _host_outs(self, out):
        """``out=`` as NumPy arrays (views of torch tensors, of ``__array_interface__``/DLPack objects), and
        the caller's kind; a RaggedArray is kept."""
        many = isinstance(out, (tuple, list))
        outs, kind = [], None
        for k, o in enumerate(out if many else [out]):
            name = f"for {self._outputs[min(k, len(self._outputs) - 1)][0]}"
            if is_torch(o) and o.is_nested:
                raise TypeError(f"out= {name} is a nested tensor: pass a RaggedArray (RaggedArray.from_nested)")
            a, kk = host_array(name, o, role="out=")
            outs.append(a)
            kind = kind or kk
        return (outs if many else outs[0]), kind

    def _nested_to_ragged(self, kwargs: dict) -> dict:
        """Ragged arguments given as torch.nested jagged tensors, as RaggedArrays (zero-copy)."""
        for name in self._input_names:
            v = kwargs[name]
            if is_torch(v) and v.is_nested:
                kwargs[name] = RaggedArray.from_nested(v, what=f"argument {name}")
        return kwargs

    def _call(self, out, out_shape, kwargs, dry: bool = False):
        if self._ragged:
            return self._call_ragged(out, out_shape, kwargs, dry)
        key = None if self._gpu or dry else self._fast_key(out, out_shape, kwargs)
        if key is not None:
            try:
                hit = self._fast.get(key[0])
            except TypeError:  # unhashable (an out_shape list, an odd Param value): no plan kept for it
                hit = key = None
            if hit is not None:
                return self._call_fast(hit, out, kwargs, key)
        sizes: dict[str, int] = {}
        where: dict[str, str] = {}
        pending: list = []  # shape expressions to check once every Size is bound
        arrays: dict[str, np.ndarray] = {}
        for name, dt, rank, shape in self._inputs:
            a = kwargs[name]
            if type(a) is not self._xp.ndarray or a.dtype != dt or a.ndim != rank:
                a = _as_array(name, a, dt, rank, self._xp)
            arrays[name] = a
            for k, s in enumerate(shape):
                _bind(sizes, where, pending, s, a.shape[k], name, k)
        scalars = {name: _as_scalar(name, kwargs[name], dt) for name, dt in self._params}
        outs = self._output_arrays(out, out_shape, sizes, where, pending)
        for name, spec_value in self.specialized.items():
            if sizes.get(name, spec_value) != spec_value:
                raise ValueError(f"this kernel was compiled with specialize={{{name!r}: {spec_value}}} but "
                                 f"{_where(where[name])} is {sizes[name]}")
        env = sizes
        for name, _ in self._int_params:
            env[name] = int(scalars[name])
        for names, a in zip(self._extent_names, outs, strict=True):
            env.update(zip(names, a.shape))
        if self._req_fn is not None or self.kernel.lets:
            self._check_reads(env)
        call_outs = outs
        if out is not None:
            call_outs = [a if self._usable(a) else self._xp.empty(a.shape, a.dtype) for a in outs]
            for (o, *_), a in zip(self._outputs, outs, strict=True):
                for iname, ia in arrays.items():
                    if self._xp.may_share_memory(a, ia):
                        raise ValueError(f"out= for {o} overlaps the input {iname}; pass a separate array")
        if dry:
            return None
        buffers = {n: a if self._usable(a) else self._xp.ascontiguousarray(a) for n, a in arrays.items()}
        for (o, *_), a in zip(self._outputs, call_outs, strict=True):
            buffers[o] = a
        slots = self._run(buffers, env, scalars)
        for a, c in zip(outs, call_outs, strict=True):
            if a is not c:
                a[...] = c
        no_copies = all(buffers[n] is a for n, a in arrays.items()) and all(
            c is a for c, a in zip(call_outs, outs, strict=True))
        if key is not None and no_copies:
            self._remember(key[0], slots, outs, [arrays[n] for n in self._input_names], allocated=out is None)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run(self, buffers: dict, env: dict, scalars: dict):
        """Pack the call's slots and run the machine code; returns the slots."""
        if not self._bound:
            self.load()
        slots = self._slot_type()
        for k, kind, name, dim in self._slot_plan:
            if kind == 0:  # buffer address (a GPU program takes the arrays themselves)
                slots[k] = 0 if self._gpu else buffers[name].ctypes.data
            elif kind == 1:  # size, extent or integer Param
                slots[k] = _as_int64(env[name])
            elif kind == 2:  # float Param, as the bits of a float64
                slots[k] = _F64_BITS.unpack(_F64.pack(scalars[name]))[0]
            elif kind == 3:  # stride in elements
                a = buffers[name]
                slots[k] = a.strides[dim] // a.itemsize
            else:  # extent of a buffer
                slots[k] = buffers[name].shape[dim]
        rc = self._run_arrays(slots, buffers) if self._run_arrays is not None else self._fn(slots)
        if rc != 0:
            raise self._out_of_memory()
        return slots

    def _call_ragged(self, out, out_shape, kwargs, dry: bool = False):
        """A call with RaggedArray arguments or results: every check, then the machine code (no fast path)."""
        if out_shape is not None:
            raise ValueError("out_shape does not apply to a pipeline with ragged inputs or outputs")
        sizes: dict[str, int] = {}
        where: dict[str, str] = {}
        pending: list = []
        arrays: dict[str, np.ndarray] = {}
        ragged: dict = {}
        for name, dt, rank, shape in self._inputs:
            a = kwargs[name]
            if R.is_ragged_shape(shape):
                ragged[name] = R.check_input(name, dt, shape, a,
                                             lambda s, v, k, name=name: _bind(sizes, where, pending, s, v, name, k))
                continue
            a = _as_array(name, a, dt, rank)
            arrays[name] = a
            for k, s in enumerate(shape):
                _bind(sizes, where, pending, s, a.shape[k], name, k)
        self._check_pending(pending, sizes)
        shapes = {name: shape for name, _, _, shape in self._inputs}
        memo: dict = {}  # each ragged extent evaluated once in this call
        for name, a in ragged.items():
            R.check_lengths(name, shapes[name], a, arrays, sizes, memo)
        scalars = {name: _as_scalar(name, kwargs[name], dt) for name, dt in self._params}
        given = [None] * len(self._outputs) if out is None else (list(out) if isinstance(out, (tuple, list)) else [out])
        if len(given) != len(self._outputs):
            raise ValueError(f"out= needs {len(self._outputs)} array(s), got {len(given)}")
        outs = []
        for (name, dt, _, shape), o in zip(self._outputs, given, strict=True):
            if R.is_ragged_shape(shape):
                outs.append(R.output(name, dt, shape, o, arrays, sizes, self._output_pads.get(name, 1), memo))
            else:
                outs.append(self._dense_output(name, dt, o, sizes))
        env = dict(sizes)
        for name, _ in self._int_params:
            env[name] = int(scalars[name])
        for names, a in zip(self._extent_names, outs, strict=True):
            env.update(zip(names, a.storage_shape() if isinstance(a, RaggedArray) else a.shape))
        for name in self._lengths:
            env[max_symbol(name).name] = max(0, int(arrays[name].max())) if arrays[name].size else 0
        if self._req_fn is not None or self.kernel.lets:
            self._check_reads(env)
        if dry:
            return None
        buffers = {n: np.ascontiguousarray(a) for n, a in arrays.items()}
        for name, a in ragged.items():
            a = a.with_pad(1)  # generated code reads inputs packed (a padded argument is copied once)
            buffers[name], buffers[offsets_buffer(name)] = np.ascontiguousarray(a.values), a.offsets
        for (name, *_), a in zip(self._outputs, outs, strict=True):
            if isinstance(a, RaggedArray):
                buffers[name], buffers[offsets_buffer(name)] = a.values, a.offsets
            else:
                buffers[name] = a
        if self._xp is not np:  # RaggedArrays hold NumPy arrays: their values go to the device and back
            device = {n: self._xp.asarray(a) for n, a in buffers.items()}
            self._run(device, env, scalars)
            for (name, *_), a in zip(self._outputs, outs, strict=True):
                host = a.values if isinstance(a, RaggedArray) else a  # NumPy either way
                host[...] = device[name].get().reshape(host.shape)
            return outs[0] if len(outs) == 1 else tuple(outs)
        self._run(buffers, env, scalars)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _dense_output(self, name: str, dt, o, sizes) -> np.ndarray:
        """A non-ragged output of a ragged pipeline: from its declared shape (checked against out=)."""
        if name not in self._out_shape_fn:
            raise ValueError(f"output {name} has no declared shape; in a pipeline with ragged data, declare it")
        need, shape_fn = self._out_shape_fn[name]
        shp = tuple(int(v) for v in shape_fn(*[sizes[z] for z in need]))
        if o is None:
            return np.empty(shp, dt)
        if not isinstance(o, np.ndarray) or o.dtype != dt or o.shape != shp or not o.flags.writeable \
                or not o.flags.c_contiguous:
            raise ValueError(f"out= for {name} must be a writeable C-contiguous {dt} array of shape {shp}")
        return o

    def _check_pending(self, pending, sizes) -> None:
        for s, value, what in pending:
            unbound = E.free_vars(s) - set(sizes)
            if unbound:
                raise ValueError(f"{what} is {s}, which uses Size(s) {', '.join(sorted(unbound))} that are "
                                 "not known")
            expect = self._shape_fn[id(s)](*[sizes.get(z, 0) for z in self.program.sizes])[0]
            if expect != value:
                raise ValueError(f"{what} must be {s} = {expect}, got {value}")

    # -- fast path: a call like an earlier one skips every check that only depends on what is alike
    def _fast_key(self, out, out_shape, kwargs):
        """What the checks of a call depend on: out_shape, each input's (and out='s) dtype, shape, strides
        and alignment, and each non-float Param (value and type); with the arrays' data addresses:
        (key, input addresses, out= addresses). None unless every array is exactly a NumPy array (a
        subclass or another library's array takes the checked path). KeyError for a missing argument."""
        key = [out_shape]
        ndarray, data = np.ndarray, _data
        outs_at = []
        if out is not None:
            for a in (out if isinstance(out, (tuple, list)) else (out,)):
                if type(a) is not ndarray:
                    return None
                at = data(a)
                key += (a.dtype, a.shape, a.strides, at % a.itemsize == 0, a.flags.writeable)
                outs_at.append(at)
        ins_at = []
        for name in self._input_names:
            a = kwargs[name]
            if type(a) is not ndarray:
                return None
            at = data(a)
            key += (a.dtype, a.shape, a.strides, at % a.itemsize == 0)
            ins_at.append(at)
        for name in self._exact_params:
            v = kwargs[name]
            key += (type(v), v)
        return tuple(key), ins_at, outs_at

    def _remember(self, key, slots, outs, ins, allocated: bool = False) -> None:
        """Keep a checked call's plan: its slots, its outputs' shapes and types, and the byte spans of its
        inputs and outputs around their data addresses (how far below and above them the elements lie:
        fixed by the shapes and strides of the key), for the overlap check of out=."""
        if len(self._fast) >= 32:
            self._fast.clear()
        self._fast[key] = (bytes(slots), [(a.shape, a.dtype) for a in outs], [native_call.span(a) for a in ins],
                           [native_call.span(a) for a in outs])
        if self._dispatch is not None and all(type(a) is np.ndarray for a in (*ins, *outs)):
            if isinstance(self._dispatch, int):
                self._dispatch = native_call.dispatcher(self._dispatch)
            in_slot = {i: k for k, i in self._in_ptr_slots}
            out_slot = {j: k for k, j in self._out_ptr_slots}
            plan = native_call.Plan(bytes(slots), len(ins), [(in_slot[i], a) for i, a in enumerate(ins)] +
                                    [(out_slot[j], a) for j, a in enumerate(outs)])
            more = [(a.shape, a.dtype) for a in outs[1:]] or None
            # the plan rides along: a call in another thread that read the previous tuple keeps its plan alive
            native = (plan.address, self._fn_address, outs[0].shape, outs[0].dtype, more, plan)
            if allocated:
                self._native = native
            else:
                self._native_out = native

    def _call_fast(self, hit, out, kwargs, found):
        """Run the remembered plan: its slots with this call's data addresses (and float Params)."""
        template, out_specs, in_spans, out_spans = hit
        _, ins_at, outs_at = found
        slots = self._slot_type.from_buffer_copy(template)
        if out is None:
            outs = [np.empty(shape, dt) for shape, dt in out_specs]
            outs_at = [_data(a) for a in outs]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            for j, (at, (lo, hi)) in enumerate(zip(outs_at, out_spans)):
                for i, (in_at, (in_lo, in_hi)) in enumerate(zip(ins_at, in_spans)):
                    if at + lo < in_at + in_hi and in_at + in_lo < at + hi:  # np.may_share_memory's test
                        raise ValueError(f"out= for {self._outputs[j][0]} overlaps the input "
                                         f"{self._input_names[i]}; pass a separate array")
        for k, i in self._in_ptr_slots:
            slots[k] = ins_at[i]
        for k, j in self._out_ptr_slots:
            slots[k] = outs_at[j]
        for k, name, dt in self._float_param_slots:
            slots[k] = _F64_BITS.unpack(_F64.pack(_as_scalar(name, kwargs[name], dt)))[0]
        if self._fn(slots) != 0:
            raise self._out_of_memory()
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _out_of_memory(self) -> MemoryError:
        """The error of a kernel that returned 1: an allocation failed (which, and its size, where the
        code recorded it)."""
        failed = getattr(self._code.loaded, "allocation_failure", lambda: None)()
        if failed is None:
            return MemoryError(f"kernel {self.kernel.name} could not allocate its intermediate buffers")
        buffer, nbytes = failed
        size = "more than 2^63 bytes" if nbytes < 0 else f"{nbytes} bytes ({nbytes / 2**30:.3g} GiB)"
        return MemoryError(f"kernel {self.kernel.name} could not allocate {size} for its buffer {buffer} (with "
                           "these arguments' sizes)")

    def _explain_names(self, kwargs) -> None:
        unexpected = set(kwargs) - self._names
        if unexpected:
            raise TypeError(f"unexpected argument(s) {', '.join(sorted(unexpected))}; this kernel takes "
                            f"{', '.join(sorted(self._names)) or 'no arguments'}")
        missing = self._names - set(kwargs)
        raise TypeError(f"missing argument(s): {', '.join(sorted(missing))}")

    def _output_arrays(self, out, out_shape, sizes, where, pending) -> list[np.ndarray]:
        n = len(self._outputs)
        if out is not None:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != n:
                raise ValueError(f"out= needs {n} array(s), got {len(outs)}")
            shapes = [None] * n
        else:
            outs = [None] * n
            if out_shape is None:
                shapes = [None] * n
            elif n == 1:
                shapes = [tuple(out_shape)]
            else:
                shapes = [None if s is None else tuple(s) for s in out_shape]
        result = []
        for (name, dt, rank, declared), o, shp in zip(self._outputs, outs, shapes, strict=True):
            if o is not None:
                if not isinstance(o, self._xp.ndarray):
                    raise TypeError(f"out= for {name} must be a {self._xp.__name__} array, got {type(o).__name__}")
                if o.dtype != dt:
                    raise TypeError(f"out= for {name} has dtype {o.dtype}, expected {dt}")
                if o.ndim != rank:
                    raise ValueError(f"out= for {name} has {o.ndim} dimension(s), expected {rank}")
                if not o.flags.writeable:
                    raise ValueError(f"out= for {name} is read-only")
                shp = o.shape
            if shp is not None:
                if len(shp) != rank:
                    raise ValueError(f"out_shape for {name} has {len(shp)} dimension(s), expected {rank}")
                for k, v in enumerate(shp):
                    if not isinstance(v, (int, np.integer)) or v < 0:
                        raise ValueError(f"out_shape for {name}: extent {k} must be a non-negative int, got {v!r}")
                if declared is not None:
                    for k, s in enumerate(declared):
                        if isinstance(s, E.Var) and s.name not in sizes:
                            sizes[s.name], where[s.name] = int(shp[k]), f"the shape of {name}[{k}]"
            elif declared is not None:
                need, shape_fn = self._out_shape_fn[name]
                if not sizes.keys() >= set(need):
                    unbound = sorted(set(need) - sizes.keys())
                    raise ValueError(f"the shape of output {name} uses Size(s) {', '.join(unbound)} that no "
                                     "input determines; pass out_shape= or out=")
                shp = shape_fn(*[sizes[z] for z in need])
                for k, v in enumerate(shp):
                    if v < 0:
                        raise ValueError(f"output {name}: extent {k} ({declared[k]}) is {v} for these inputs")
            else:
                raise ValueError(f"output {name} has no declared shape: pass out_shape= or out=")
            result.append(o if o is not None else self._xp.empty(shp, dt))
        self._check_pending(pending, sizes)
        return result

    def _check_reads(self, env) -> None:
        try:
            key = tuple(env[s] for s in self._symbols)
        except KeyError as err:  # pragma: no cover - a Size that nothing binds
            raise ValueError(f"Size {err} is not known at this call") from None
        if key in self._reads_ok:  # (the regions are a function of these values alone)
            return
        if self._req_fn is not None:
            vals = self._req_fn(*key)
            for k, (name, dim, kind) in enumerate(self._req):
                lo, hi, n = vals[3 * k], vals[3 * k + 1], vals[3 * k + 2]
                if hi >= lo and (lo < 0 or hi >= n):
                    raise ValueError(_region_error(name, dim, kind, lo, hi, n))
        self._check_index_range(key)
        if len(self._reads_ok) >= 256:
            self._reads_ok.clear()
        self._reads_ok.add(key)

    def _check_index_range(self, key: tuple) -> None:
        """The root lets (regions, extents, strides of the Funcs' storage) computed exactly from the call's
        sizes and scalars must fit in 64 bits: generated code computes them in int64, where a region scaled
        by large Params (``i * k * k``) would wrap, and storage sized by the wrapped region would be written
        outside. Lets that read data (a ragged table) are left to the code."""
        if self._lets_fn is None:
            known, lets = set(self._symbols), []
            for name, value in self.kernel.lets:
                t = value.dtype
                if E.free_vars(value) <= known and not E.reads_data(value) and t.lanes == 1 and t.is_int \
                        and t.is_signed and t.bits >= 32:
                    lets.append((name, widen_index(value)))  # exact: int64 in Python is not wrapped
                    known.add(name)
            names = [n for n, _ in lets]
            exprs = [E.Var(n, v.dtype) for n, v in lets]
            self._lets_fn = (names, compile_function(exprs, self._symbols, lets, exact=True) if lets else
                             (lambda *_: ()))
        names, fn = self._lets_fn
        try:
            fn(*key)
        except IndexRangeError as err:
            name = names[min(err.args[0], len(names) - 1)]  # (a returned value: the let it is)
            raise ValueError(f"with these arguments {name} (of Func {name.split('.')[0]}'s region or storage) needs "
                             f"{err.args[1]}, past the 64-bit range generated code computes it in: a Param or size "
                             "too large for it") from None

    def __repr__(self) -> str:
        args = ", ".join(n for n, *_ in self._inputs) + (", " if self._params and self._inputs else "")
        args += ", ".join(n for n, _ in self._params)
        return f"<Kernel {self.kernel.name}({args}) target={self.target.text}>"


def _region_error(name: str, dim: int, kind: str, lo: int, hi: int, n: int) -> str:
    if kind == "input":
        shifted = ("; or, if the schedule splits a loop with tail 'auto' or 'shift' by more than this extent, its "
                   "one tile is shifted before the start: a smaller factor or tail='guard' for inputs this small"
                   if lo < 0 <= hi < n else "")
        return (f"the pipeline reads {name} along dimension {dim} from index {lo} to {hi}, outside its extent {n} "
                f"(0..{n - 1}); pass a larger {name} or wrap it in a boundary condition (rs.clamp_edge, "
                f"rs.constant_exterior, ...){shifted}")
    if kind == "shape":
        return (f"the pipeline reads Func {name} along dimension {dim} from index {lo} to {hi}, outside its "
                f"declared shape (extent {n} for these arguments); points outside a declared shape are not "
                "computed")
    if kind == "output bound":
        return (f"output {name} is asked for indices {lo} to {hi} along dimension {dim}, relative to its bound()'s "
                f"min, but the bound's extent is {n}: pass an output array within the bound")
    if kind == "bound":
        return (f"the pipeline reads Func {name} along dimension {dim} beyond its bound(): from {lo} to {hi} "
                f"relative to the bound's min, but the bound's extent is {n}")
    return (f"the schedule of output {name} computes dimension {dim} from index {lo} to {hi}, outside the "
            f"output's extent {n}: a split with tail 'shift' or 'pad' needs an output at least as large as its "
            "factor (a multiple of it for 'pad', and of the multiple of a pad() loop); use tail='guard' or 'split' "
            "for small outputs")


def _bind(sizes, where, pending, s: E.Expr, value: int, name: str, dim: int) -> None:
    """Bind a bare Size from an actual extent, or check an extent that is fixed or computed."""
    if type(s) is E.Var:
        prev = sizes.get(s.name)
        if prev is None:
            sizes[s.name], where[s.name] = value, (name, dim)
        elif prev != value:
            raise ValueError(f"Size {s.name} disagrees: {_where(where[s.name])} is {prev} but "
                             f"{name}.shape[{dim}] is {value}")
    elif isinstance(s, E.Const):
        if s.value != value:
            raise ValueError(f"{name}.shape[{dim}] must be {s.value}, got {value}")
    else:
        pending.append((s, value, f"{name}.shape[{dim}]"))


def _where(w) -> str:
    return w if isinstance(w, str) else f"{w[0]}.shape[{w[1]}]"


def _as_array(name: str, value, dt: np.dtype, rank: int, xp=np) -> np.ndarray:
    if xp is not np and not isinstance(value, xp.ndarray):
        raise TypeError(f"argument {name} must be a CuPy array of {dt} (target 'cuda' runs on the GPU), got "
                        f"{type(value).__name__}; compile(target='cuda', device='emulate') takes NumPy arrays")
    if not isinstance(value, xp.ndarray):
        if isinstance(value, (list, tuple)):
            value = np.asarray(value, dtype=dt)  # nested lists carry no dtype: take the Input's
        elif hasattr(value, "__array__"):
            value = np.asarray(value)
        else:
            raise TypeError(f"argument {name} must be a NumPy array of {dt}, got {type(value).__name__}")
    if value.dtype != dt:
        raise TypeError(f"argument {name} has dtype {value.dtype}, expected {dt}")
    if value.ndim != rank:
        raise ValueError(f"argument {name} has {value.ndim} dimension(s), expected {rank}")
    return value


def _as_scalar(name: str, value, dt: T.DType):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.generic):
        value = value.item()
    if dt.is_bool:
        if not isinstance(value, bool):
            raise TypeError(f"Param {name} is bool, got {type(value).__name__}")
        return value
    if dt.is_int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"Param {name} is {dt}, got {type(value).__name__} {value!r}")
        if not T.fits(value, dt):
            raise ValueError(f"Param {name} = {value} is out of range for {dt}")
        return value
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"Param {name} is {dt}, got {type(value).__name__} {value!r}")
    return float(value)


def _as_int64(v) -> int:
    v = int(v)
    return v - (1 << 64) if v >= (1 << 63) else v


_data = native_call.data_reader()


def _c_contiguous(a) -> bool:
    return a.flags.c_contiguous


def _usable(a: np.ndarray) -> bool:
    flags = a.flags
    if flags.c_contiguous and flags.aligned:
        return True
    if not flags.aligned:
        return False
    if a.ndim and a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
        return False
    return all(s % a.itemsize == 0 for s in a.strides)
