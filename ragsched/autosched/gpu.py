"""The autoscheduler's CUDA target: a space of GPU schedules, measured on a device when there is one and
ranked by a cost model when not.

The space, per Func: computed inline, at root, or (a Func read by one consumer on the grid) per thread in
registers at the consumer's innermost thread loop, or (a consumer tiled in two dimensions) staged per
block in shared memory at its block loop, its points one per thread. Per stage at root: the thread tile
of its two innermost pure loops (x at least 8 wide, 32 to 1024 threads), or for a ragged stage the
number of flattened (b, i) pairs per block (``gpu_default``'s grids, sized). Without a GPU a candidate
is compiled by NVRTC (ptxas's registers, spills, shared memory) and run in the GPU emulator on the check
inputs, where every access is checked and the global-memory requests counted per warp
(``emulate.Traffic``); the estimate is the bytes of the sectors served at the memory bandwidth, slowed
where occupancy is low, plus a launch cost per kernel, the element accesses at the load/store issue rate
and the shared-memory wavefronts (bank conflicts counted) at one per SM per cycle. It ranks schedules; it
is no prediction of seconds on any GPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..codegen import target as targets
from ..program import Program
from ..runtime.interop import to_device, to_host
from ..schedule import Schedule
from ..schedule.gpu_default import default_gpu_schedule, grid_options, stage_ragged_vars
from ..schedule.records import ComputeAt, ComputeInline, GpuBlocks, GpuThreads, StoreIn
from ..schedule.resolve import loops_of, resolve_func, resolve_schedule
from .space import analyze
from .tuning import tell_failed

TILES_2D = [(ty, tx) for ty in (1, 2, 4, 8, 16, 32) for tx in (8, 16, 32, 64, 128) if 32 <= ty * tx <= 1024]
TILES_1D = [32, 64, 128, 256]


@dataclass(frozen=True)
class GpuModel:
    """The figures the cost model uses: an H200-class GPU (HBM3e, 132 SMs)."""

    bandwidth: float = 4.0e12  # bytes/s reached by streaming kernels
    launch_s: float = 4e-6
    sms: int = 132
    issue_per_s: float = 132 * 4 * 32 * 1.7e9  # element loads/stores per second, all SMs
    shared_wavefronts_per_s: float = 132 * 1.7e9  # one shared-memory wavefront per SM per cycle
    registers_per_sm: int = 65536
    threads_per_sm: int = 2048
    shared_per_sm: int = 228 * 1024


@dataclass
class GpuTrial:
    schedule: Schedule
    seconds: float | None
    status: str  # ok, invalid, wrong, error
    message: str = ""
    figures: dict = field(default_factory=dict)


def suggest(trial, program: Program) -> Schedule:
    """One candidate: the trial's answers as schedule records (consumers first)."""
    records: list = []
    scheds = resolve_schedule(program, Schedule())
    consumers = {f.name: set(f.consumers) for f in analyze(program, lambda dtype: 1)}
    for f in reversed(program.functions):
        where = "root"
        users = consumers[f.name]
        if f.name not in program.outputs:
            grid = _grid_of(records, next(iter(users))) if len(users) == 1 else None
            choices = ["root"]
            if grid is not None and grid[0][-1] == "gpu.xo":
                choices.append("shared")
            if grid is not None:
                choices.append("register")
            if not f.updates:
                choices.append("inline")
            where = trial.suggest_categorical(f"{f.name}.compute", choices)
        if where == "inline":
            records.append(ComputeInline(f.name))
            continue
        if where in ("shared", "register"):  # per block, one point per thread; or per thread, serially
            consumer = next(iter(users))
            blocks, threads = _grid_of(records, consumer)
            if where == "shared":
                records += [ComputeAt(f.name, consumer, blocks[-1]), StoreIn(f.name, "shared"),
                            GpuThreads(f.name, 0, tuple(f.args[-2:]))]
            else:
                records.append(ComputeAt(f.name, consumer, threads[-1]))
            continue
        loops = loops_of(f, f.name in program.outputs)
        for stage, plan in enumerate(scheds[f.name].plans):
            ragged = stage_ragged_vars(program, f, stage)
            key = f"{f.name}.s{stage}"
            if ragged:
                options = grid_options(f.name, stage, plan, ragged, tile_1d=trial.suggest_categorical(
                    f"{key}.rows", TILES_1D))
            else:
                tile = trial.suggest_categorical(f"{key}.tile", [f"{ty}x{tx}" for ty, tx in TILES_2D])
                ty, tx = (int(v) for v in tile.split("x"))
                options = grid_options(f.name, stage, plan, ragged, (ty, tx), ty * tx)
            own = [r for r in records if r.func == f.name]
            for option in options:
                try:
                    resolve_func(loops, own + option)
                except ValueError:
                    continue
                records += option
                break
    return Schedule(tuple(records))


def _grid_of(records: list, func: str) -> tuple[tuple, tuple] | None:
    """The block and thread loops of ``func``'s pure definition in ``records`` (None when it has none)."""
    blocks = [r.vars for r in records if isinstance(r, GpuBlocks) and r.func == func and r.stage == 0]
    threads = [r.vars for r in records if isinstance(r, GpuThreads) and r.func == func and r.stage == 0]
    return (blocks[-1], threads[-1]) if blocks and threads else None


def estimate(kern, check_inputs: dict, model: GpuModel = GpuModel()) -> tuple[float, dict, object]:
    """The cost model's seconds for a kernel compiled with ``device="emulate"``, its figures, and its
    outputs on ``check_inputs`` (run in the emulator, requests counted)."""
    from ..codegen.cuda.nvrtc import compile_cuda
    from ..codegen.gpu.emulate import Traffic

    resources = compile_cuda(kern.source).resources
    program = kern._code.loaded.program
    program.traffic = traffic = Traffic()
    try:
        outputs = kern(**check_inputs)
    finally:
        program.traffic = None
    sectors = traffic.sectors
    occupancy = []
    for gk in program.program.kernels:
        r = resources[gk.name]
        threads = int(np.prod(gk.block_dims))
        warps = -(-threads // 32)
        blocks = min(32, model.threads_per_sm // (warps * 32),
                     model.registers_per_sm // max(1, r.registers * warps * 32),
                     model.shared_per_sm // max(1, r.shared_bytes) if r.shared_bytes else 32)
        occupancy.append(max(blocks, 0) * warps * 32 / model.threads_per_sm)
    occ = min(occupancy) if occupancy else 1.0
    efficiency = min(1.0, max(0.1, occ / 0.5))
    spills = sum(r.spill_stores + r.spill_loads for r in resources.values())
    wavefronts = traffic.shared_wavefronts
    # a launch of few blocks keeps few SMs busy: the rates below are the whole GPU's, scaled to the SMs used
    busy = min(1.0, traffic.blocks / max(1, traffic.launches) / model.sms)
    seconds = (traffic.launches * model.launch_s
               + (sectors * 32 / model.bandwidth / efficiency + traffic.accesses / model.issue_per_s
                  + wavefronts / model.shared_wavefronts_per_s) / busy + spills * 1e-6)
    figures = {"sectors": sectors, "requests": len(traffic.requests), "launches": traffic.launches,
               "shared_wavefronts": wavefronts, "shared_requests": len(traffic.shared_requests),
               "sectors_per_request": sectors / max(1, len(traffic.requests)), "occupancy": occ,
               "max_registers": max((r.registers for r in resources.values()), default=0), "spill_bytes": spills}
    return seconds, figures, outputs


def tune_gpu(outputs, trials: int, inputs: dict, check_inputs: dict | None = None, check_reference=None,
             seed: int | None = None, storage=None, study: str | None = None, timeout: float | None = None,
             progress: bool = True, reference=None):
    """Search GPU schedules of ``outputs`` for ``trials`` trials: timed on the device where there is one
    (on ``inputs``, copied there once), ranked by ``estimate`` on ``check_inputs`` (default: ``inputs``)
    where not; every candidate's outputs are checked against the reference. Returns a ``driver.Tuning``."""
    import optuna

    from ..lang import Pipeline
    from ..runtime.compare import matches
    from .tuning import Tuning, open_storage

    pipe = outputs if isinstance(outputs, Pipeline) else Pipeline(outputs if isinstance(outputs, (list, tuple))
                                                                   else [outputs])
    program = pipe.program()
    device = "gpu" if targets.gpu_present() else "emulate"
    check_inputs = check_inputs if check_inputs is not None else inputs
    if check_reference is None:
        from ..reference import run

        check_reference = run(list(pipe.outputs) if len(pipe.outputs) > 1 else pipe.outputs[0], **check_inputs)
    if device == "gpu":  # copied once, not per trial
        inputs, check_inputs = to_device(inputs), to_device(check_inputs)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st = optuna.create_study(storage=open_storage(storage), study_name=study or f"gpu-{'+'.join(program.outputs)}",
                             sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=5), direction="minimize",
                             load_if_exists=True)
    failures: dict[str, int] = {}
    start = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=trials, desc=f"autoschedule (cuda, {device})", unit="trial")
    best: tuple[Schedule, float] | None = None
    for _ in range(trials):
        if timeout is not None and time.perf_counter() - start > timeout:
            break
        trial = st.ask()
        result = _measure(trial, program, pipe, device, inputs, check_inputs, check_reference, matches)
        trial.set_user_attr("status", result.status)
        trial.set_user_attr("schedule", result.schedule.to_json())
        trial.set_user_attr("figures", result.figures)
        if result.status == "ok":
            st.tell(trial, result.seconds)
            if best is None or result.seconds < best[1]:
                best = (result.schedule, result.seconds)
        else:
            failures[result.status] = failures.get(result.status, 0) + 1
            trial.set_user_attr("message", result.message[:2000])
            tell_failed(st, trial)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if best is None:  # nothing worked: the default GPU schedule
        return Tuning(default_gpu_schedule(program, Schedule()), None, len(st.trials), failures,
                      time.perf_counter() - start, st)
    return Tuning(best[0], best[1], len(st.trials), failures, time.perf_counter() - start, st)


def _measure(trial, program, pipe, device, inputs, check_inputs, check_reference, matches) -> GpuTrial:
    try:
        schedule = suggest(trial, program)
        kern = pipe.compile(target="cuda", device=device, schedule=schedule)
    except ValueError as err:
        return GpuTrial(Schedule(), None, "invalid", str(err))
    try:
        if device == "gpu":
            from ..runtime.timing import median_time

            ok, _ = matches(to_host(kern(**check_inputs)), check_reference)
            seconds, figures = median_time(lambda: _synchronized(kern, inputs), repeats=5), {}
        else:
            seconds, figures, got = estimate(kern, check_inputs)
            ok, _ = matches(got, check_reference)
    except Exception as err:  # a failing trial is recorded, never fatal
        return GpuTrial(schedule, None, "error", f"{type(err).__name__}: {err}")
    if not ok:
        return GpuTrial(schedule, None, "wrong", "outputs differ from the reference", figures)
    return GpuTrial(schedule, seconds, "ok", "", figures)


def _synchronized(kern, inputs):
    import cupy

    kern(**inputs)
    cupy.cuda.Device().synchronize()

