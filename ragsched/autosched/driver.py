"""The tuning loop: Optuna asks for schedules, a worker process measures them, the best is kept.

A study lives in an Optuna storage: in memory, a journal file (stop and resume; several processes may
share it), or a database URL (workers on several machines). Each trial stores its schedule as JSON, so
the best schedule is read back from the storage, whoever measured it. The heuristic's schedule
(``heuristic``, after Mullapudi2016) is the first trial of a new study, and the answer when no trial is asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import time
import warnings
from pathlib import Path

import numpy as np

from ..schedule import Schedule
from .heuristic import Machine, estimate_extents, heuristic
from .hostlock import timing_turn
from .measure import Measurer, Result
from .space import VERSION as SPACE_VERSION
from .space import analyze, suggest
from .tuning import Tuning, open_storage, tell_failed


def study_name(program, target, threads) -> str:
    """Names the study after the outputs and a digest of the algorithm, target and threads: the same
    pipeline resumes the same study."""
    from ..codegen.backends import backend_for

    machine = backend_for(target).target_id(target)
    digest = hashlib.sha256(repr((program, threads, machine, SPACE_VERSION)).encode()).hexdigest()[:12]
    return f"{'+'.join(program.outputs)}-{digest}"


#: trials before TPE models the history: the heuristic's schedule and its neighbours
STARTUP = 10
#: after those, the share of trials that are neighbours of the best so far (the rest are TPE's own draws)
LOCAL_SHARE = 0.75


def neighbours(params: dict, n: int, seed: int | None = None) -> list[dict]:
    """``n`` partial copies of a trial's answers (the heuristic's, then the best so far), each without a
    few of them (one in ten, 1 to 5), which the sampler then draws: the trials explore around a good
    schedule. A point drawn at random from the whole space of a pipeline of 60 Funcs nests most of them
    in each other's loops and is slow to compile and to run."""
    rng = random.Random(seed)
    names = sorted(params)
    drop = max(1, min(5, len(names) // 10))
    out = []
    for _ in range(n if names else 0):
        dropped = set(rng.sample(names, drop))
        out.append({k: params[k] for k in names if k not in dropped})
    return out


def tune(outputs, target: str = "cpu", trials: int = 100, inputs: dict | list | None = None, *, reference=None,
         storage=None, study: str | None = None, timeout: float | None = None, threads: int | None = None,
         repeats: int = 5, time_limit: float = 60.0, seed: int | None = None, progress: bool = True,
         worker: str = "ragsched.autosched.worker", compile_limit: float = 600.0, finalists: int = 3,
         check_inputs: dict | None = None, check_reference=None, tolerance: float | None = None,
         compile_jobs: int | None = None) -> Tuning:
    """Search schedules of ``outputs`` for ``trials`` trials (or until ``timeout`` seconds have passed).
    A trial whose answers give a schedule the study has already timed takes that time (``same_as``) and is
    not counted among the ``trials`` (at most ``trials`` + 10 such in a run, so that a space with fewer
    schedules still ends): 11-27% of the trials of five 100-trial tunings were such repeats.
    ``inputs`` are the arguments the candidates are timed on, or a list of such sets (batches of different
    length distributions, images of different sizes): a candidate's time is then the geometric mean of its
    times on each, so that the schedule found serves them all; each candidate's outputs must match
    ``reference`` (the outputs for those inputs, a list of them for a list; computed by
    ``ragsched.reference`` when None), or, with
    ``check_inputs``, match ``check_reference`` on those (smaller inputs, where the reference is exact
    while on the timed ones a pipeline's float-to-index truncations may differ from it at a few
    points); ``tolerance`` widens what matches (``runtime.compare.matches``). Each candidate runs in a
    worker process (``worker``, a module) with ``compile_limit`` seconds to compile and ``time_limit``
    seconds to be checked and timed; a time is the median of ``repeats`` runs. ``compile_jobs``
    candidates (default: one per core, at most 4) are compiled side by side, each in its own worker, and
    each checked and timed as soon as it is compiled, alone (the other workers are stopped meanwhile). At the end the
    ``finalists`` best schedules and the heuristic's are timed again side by side, in turns (a time
    measured minutes apart on a machine whose speed drifts is not a fair comparison), within the
    ``timeout``, and the fastest of them is the answer. With ``trials=0`` nothing new is tried: a study
    already in ``storage`` answers with its best (its finalists timed again side by side on ``inputs``, or
    as recorded without them); without one, the heuristic's schedule, unmeasured."""
    import optuna

    from ..codegen import target as targets
    from ..lang import Pipeline

    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 0:
        raise ValueError(f"trials must be a non-negative int, got {trials!r}")
    jobs = max(1, min(4, os.cpu_count() or 1)) if compile_jobs is None else compile_jobs
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"compile_jobs must be a positive int, got {compile_jobs!r}")
    sets = _input_sets(inputs, reference)
    if targets.is_gpu(targets.parse(target)):  # timed on a GPU, or ranked by a cost model without one
        from .gpu import tune_gpu

        if sets is not None and len(sets) > 1:
            raise ValueError("inputs: a list of input sets is timed on CPU targets only; pass one dict")
        inputs = sets[0] if sets else inputs
        if inputs is None:
            raise ValueError("inputs: the autoscheduler checks candidates on example inputs; pass inputs={...}")
        return tune_gpu(outputs, trials, inputs, check_inputs, check_reference, seed, storage, study, timeout,
                        progress, reference)
    cpu = targets.runnable(target)  # candidates are timed here: this host must run the target's code
    pipe = outputs if isinstance(outputs, Pipeline) else Pipeline(outputs if isinstance(outputs, (list, tuple))
                                                                   else [outputs])
    program = pipe.program()
    extents = _least_extents([estimate_extents(program, s) for s in sets or [None]])
    funcs = analyze(program, cpu.natural_vector_size, extents)
    seed_schedule, seed_params = heuristic(funcs, extents, Machine.here(threads), _example_lengths(program, sets))
    name = study or study_name(program, cpu, threads)
    if trials == 0:
        stored = _stored_study(storage, name)
        if stored is None or _best(stored) is None:
            return Tuning(seed_schedule, None, len(stored.trials) if stored is not None else 0, study=stored)
        if inputs is None:  # nothing to time on: the study's answer as recorded
            trial, seconds = recorded_answer(stored)
            return Tuning(Schedule.from_json(trial.user_attrs["schedule"]), seconds, len(stored.trials),
                          study=stored)
    if inputs is None:
        raise ValueError("inputs: the autoscheduler times candidates on example inputs; pass inputs={...}")
    if reference is None and check_inputs is None:
        from ..reference import run

        references = [run(pipe.outputs, **s) for s in sets]
    elif isinstance(inputs, (list, tuple)):
        references = list(reference) if reference is not None else [None] * len(sets)
    else:
        references = [reference]
    # the worker takes one set as a dict and its outputs, several as lists (``measure.input_sets``)
    inputs, reference = (sets[0], references[0]) if len(sets) == 1 else (sets, references)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # constant_liar: trials asked together are not drawn at the same point
    sampler = optuna.samplers.TPESampler(multivariate=True, group=True, seed=seed, n_startup_trials=STARTUP,
                                         constant_liar=True)
    st = optuna.create_study(storage=open_storage(storage), study_name=name, sampler=sampler, direction="minimize",
                             load_if_exists=True)
    if not st.trials:
        st.enqueue_trial(seed_params, skip_if_exists=True)
        for near in neighbours(seed_params, min(STARTUP, trials) - 1, seed):  # none left waiting
            st.enqueue_trial(near, skip_if_exists=True)
    failures: dict[str, int] = {}
    rng = random.Random(seed)
    start = time.perf_counter()
    bar = _progress(trials, progress)
    best = _best(st)
    check = None
    if check_inputs is not None:
        if check_reference is None:
            from ..reference import run

            check_reference = run(pipe.outputs, **check_inputs)
        check = (check_inputs, check_reference)
    with contextlib.ExitStack() as stack:
        ms = [stack.enter_context(Measurer(program, inputs, reference, threads, repeats, time_limit, worker,
                                           compile_limit, check, target=cpu, tolerance=tolerance))
              for _ in range(jobs)]
        active: dict[int, tuple] = {}  # worker -> (its trial, the best time known when it was sent)
        asked = repeated = 0

        def out_of_time() -> bool:
            return timeout is not None and time.perf_counter() - start + _final_cost(st, finalists, repeats) > timeout

        while True:
            while asked < trials and len(active) < jobs and not out_of_time():
                k = next(j for j in range(jobs) if j not in active)
                if not st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):  # startup done
                    _enqueue_near_best(st, int(rng.random() < LOCAL_SHARE), rng)
                trial = st.ask()
                sent = best[1] if best else None
                left = None if timeout is None else timeout - (time.perf_counter() - start)
                result = _start(trial, funcs, ms[k], sent, _compile_limit(st, compile_limit, left), _timed(st))
                if result is None:
                    asked += 1
                    active[k] = (trial, sent)
                    continue
                _record(st, trial, result, failures)
                if "same_as" in trial.user_attrs and repeated < trials + 10:  # not a candidate: ask again
                    repeated += 1
                    continue
                asked += 1
                best = _best(st)
                _show(bar, best)
            if not active:
                break
            k, result = _next_compiled(ms, active)
            trial, sent = active.pop(k)
            if result is None:  # compiled: checked and timed alone, the other workers stopped meanwhile
                now = best[1] if best else None
                with _paused([ms[j] for j in active]), timing_turn():
                    result = ms[k].finish(now if now is not None and (sent is None or now < sent) else None)
            if result.compile_s is not None:
                trial.set_user_attr("compile_s", ms[k].compile_seconds(result))
            _record(st, trial, result, failures)
            best = _best(st)
            _show(bar, best)
        for m in ms[1:]:  # their buffers go before the finalists are timed
            m.close()
        if bar is not None:
            bar.set_postfix_str("timing the best side by side")
        best = _final(st, ms[0], finalists)
    if bar is not None:
        bar.close()
    schedule, seconds = best if best else (seed_schedule, None)
    return Tuning(schedule, seconds, len(st.trials), failures, time.perf_counter() - start, st, repeated)




def _input_sets(inputs, reference) -> list[dict] | None:
    """``tune``'s inputs as a list of sets (None: none given), checked: dicts, and a reference for each."""
    if inputs is None:
        return None
    sets = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not sets or not all(isinstance(s, dict) for s in sets):
        raise TypeError(f"inputs must be a dict of arguments or a non-empty list of them, got {type(inputs).__name__}")
    if isinstance(inputs, (list, tuple)) and reference is not None and \
            not (isinstance(reference, (list, tuple)) and len(reference) == len(sets)):
        raise ValueError(f"reference: one for each of the {len(sets)} input sets, as a list")
    return sets


def _least_extents(each: list[dict]) -> dict[str, tuple[int, ...]]:
    """Per Func, the least extent of each dimension over the input sets (tiles bounded by it fit every
    set); a Func known in only some of them keeps the least of those."""
    out: dict[str, tuple[int, ...]] = {}
    for extents in each:
        for name, ext in extents.items():
            out[name] = tuple(map(min, out[name], ext)) if name in out and len(out[name]) == len(ext) else \
                out.get(name, ext)
    return out


def _example_lengths(program, sets):
    """The example inputs' ragged lengths (one per entry: the first lengths Input's; of every input set,
    end to end), or None."""
    from ..codegen.ragged_domains import lengths_inputs

    names = lengths_inputs(program)
    values = [s.get(names[0]) for s in sets or [] if names and s.get(names[0]) is not None]
    return np.concatenate([np.asarray(v).reshape(-1) for v in values]) if values else None

def _stored_study(storage, name: str):
    """The study ``name`` in ``storage`` if it is there (None: not stored, or no storage)."""
    import optuna

    if storage is None or isinstance(storage, (str, Path)) and "://" not in str(storage) and \
            not Path(storage).is_file():  # (opening a journal that is not there would create it)
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.load_study(study_name=name, storage=open_storage(storage))
    except KeyError:
        return None


#: how much slower than the best trial the heuristic's may have been timed and still be a finalist (this VM's
#: speed moved 1.7x within minutes)
HEURISTIC_WITHIN = 4.0


def _finalists(st, n: int) -> list:
    """The ``n`` fastest completed trials with distinct schedules, none more than 1.5x slower than the
    fastest, and the first trial (the heuristic's, in a new study) if it completed within ``HEURISTIC_WITHIN``
    of the fastest: a trial's time is taken in its own minute, and on a shared machine the same kernel
    measured 1.7 ms in one minute and 2.9 in another (a held-out app, AMD EPYC), so a best trial timed in a
    fast minute left out the heuristic's schedule, which was 1.1-1.2x faster than it side by side. (Much
    slower than that, it is not timed again: each finalist runs about 18 times.)"""
    import optuna

    done = sorted((t for t in st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                   if "schedule" in t.user_attrs), key=lambda t: t.value)
    out, seen = [], set()
    for t in done:  # one 1.5x slower than the best would need a drift of the machine's speed to win
        ratio = t.value / done[0].value if done[0].value > 0 else 1.0
        if (len(out) < n and ratio <= 1.5) or (t.number == 0 and ratio <= HEURISTIC_WITHIN):
            if t.user_attrs["schedule"] not in seen:
                out.append(t)
                seen.add(t.user_attrs["schedule"])
    return out


def _final_cost(st, n: int, repeats: int) -> float:
    """About how long timing the finalists takes: compiling each again and three rounds of timing."""
    if n <= 0:
        return 0.0
    picked = _finalists(st, n)
    if len(picked) < 2:
        return 0.0
    compile_s = [t.user_attrs.get("compile_s", 0.0) for t in picked]
    return sum(compile_s) + 3 * (repeats + 1) * sum(t.value for t in picked)


def _final(st, m: Measurer, n: int) -> tuple[Schedule, float] | None:
    """The fastest of the finalists timed side by side (the fastest trial when there are fewer than two,
    or none of them could be timed again); the times are kept in the study (``final_times``)."""
    picked = _finalists(st, n) if n > 0 else []
    if len(picked) < 2:
        return _best(st)
    with timing_turn():
        times = m.compare([Schedule.from_json(t.user_attrs["schedule"]) for t in picked])
    st.set_user_attr("final_times", {str(t.number): s for t, s in zip(picked, times, strict=True)})
    timed = [(s, t) for t, s in zip(picked, times, strict=True) if s is not None]
    if not timed:
        return _best(st)
    seconds, t = min(timed, key=lambda p: p[0])
    return Schedule.from_json(t.user_attrs["schedule"]), seconds


def _compile_limit(st, limit: float, left: float | None) -> float:
    """Seconds a candidate may take to compile: ``limit``, and no more than 4x the first trial's (the
    heuristic's; at least 20 s) nor the time left (at least 30 s). Code that takes that much longer to
    compile is that much more code (unrolled nests, guarded tails at inner loops): a candidate that
    unrolled a loop nest thousands of times took 240 s of LLVM on bilateral_grid, where the heuristic's
    took 2 s, and in five tuning journals no candidate compiling over 4x the first ran within 4x of the
    best, while such candidates took up to 69% of the compile time (docs/design/autoschedule.md)."""
    first = st.trials[0] if st.trials else None
    seconds = first.user_attrs.get("compile_s") if first is not None else None
    if seconds is not None:
        limit = min(limit, max(20.0, 4 * seconds))
    if left is not None:
        limit = min(limit, max(30.0, left))
    return limit


def _start(trial, funcs, m: Measurer, best: float | None, compile_limit: float, known: dict) -> Result | None:
    """``trial``'s schedule sent to worker ``m`` to compile (it waits, compiled, for ``finish``); a Result
    where the trial ends here: no valid schedule, a schedule the study has timed (``known``: its JSON ->
    (seconds, trial number); that trial's time, not a measurement of the noise), or the worker gone.
    ``best`` is the study's best time: a candidate 5x slower is timed by its checking run alone."""
    try:
        schedule = suggest(trial, funcs)
    except ValueError as err:
        return Result("invalid", message=str(err))
    text = schedule.to_json()
    trial.set_user_attr("schedule", text)
    if text in known:
        value, number = known[text]
        trial.set_user_attr("same_as", number)
        return Result("ok", value, message=f"the schedule of trial {number}: not timed again")
    return m.begin(schedule, None if best is None else 5 * best, compile_limit, hold=True, best=best)


def _next_compiled(ms: list[Measurer], active: dict) -> tuple[int, Result | None]:
    """The first of the ``active`` workers to be done compiling, and None (compiled: it waits to be timed)
    or the Result that ends its candidate (refused, failed, past its compile limit). The workers compile
    side by side; as soon as one is done it is timed, while the others wait stopped (``_paused``), so a
    candidate slow to compile holds up no other (in batches, one of 15 s kept the other core idle)."""
    from multiprocessing.connection import wait

    readers = {ms[k].readable(): k for k in active}  # (an active worker has a connection: begin made one)
    ready = wait(list(readers), timeout=min(ms[k].compile_time_left() for k in active))
    k = readers[ready[0]] if ready else min(active, key=lambda j: ms[j].compile_time_left())
    return k, ms[k].compiled()


@contextlib.contextmanager
def _paused(ms: list[Measurer]):
    """The workers ``ms`` stopped (a candidate is being timed: nothing else may run)."""
    try:
        for m in ms:
            m.pause()
        yield
    finally:
        for m in ms:
            m.resume()


def _record(st, trial, result: Result, failures: dict) -> None:
    """``result`` told to the study as ``trial``'s (a failure is counted, kept with its message)."""
    trial.set_user_attr("status", result.status)
    if result.status == "ok":
        st.tell(trial, result.seconds)
    else:
        failures[result.status] = failures.get(result.status, 0) + 1
        trial.set_user_attr("message", result.message[:2000])
        tell_failed(st, trial)


def _show(bar, best) -> None:
    if bar is not None:
        bar.update(1)
        bar.set_postfix_str(f"best {best[1] * 1e3:.3f} ms" if best else "no valid schedule yet")


def _timed(st) -> dict:
    """The study's measured schedules: JSON -> (seconds, trial number), the first trial of each."""
    import optuna

    out: dict = {}
    for t in st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        text = t.user_attrs.get("schedule")
        if text is not None and "same_as" not in t.user_attrs:
            out.setdefault(text, (t.value, t.number))
    return out


def _enqueue_near_best(st, n: int, rng) -> None:
    """Queue ``n`` neighbours of the best trial so far (its answers, a few left for the sampler to draw).
    On a space of hundreds of parameters TPE's own draws after the first trials were as bad as random
    ones: in a 5-minute tuning of a 32-stage stencil chain, every trial after the tenth ran 10-300x
    slower than the best and 14 of 24 were not compiled within the limit."""
    import optuna

    done = st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if n and done:
        best = min(done, key=lambda t: t.value)
        for near in neighbours(best.params, n, rng.randrange(2**32)):
            st.enqueue_trial(near)


def recorded_answer(st):
    """(trial, seconds): the study's answer as its last tuning run left it, the fastest of the finalists
    timed side by side at its end (``final_times``: times taken together, in turns), else the fastest
    trial as first timed (one time each, minutes apart; the least of many noisy times is biased low);
    None when no trial was timed."""
    import optuna

    done = {t.number: t for t in st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))}
    final = [(s, done[int(n)]) for n, s in (st.user_attrs.get("final_times") or {}).items()
             if s is not None and int(n) in done]
    if final:
        seconds, trial = min(final, key=lambda p: p[0])
        return trial, seconds
    if not done:
        return None
    trial = min(done.values(), key=lambda t: t.value)
    return trial, trial.value


def _best(st) -> tuple[Schedule, float] | None:
    import optuna

    done = [t for t in st.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if "schedule" in t.user_attrs]
    if not done:
        return None
    t = min(done, key=lambda t: t.value)
    return Schedule.from_json(t.user_attrs["schedule"]), t.value


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="autoschedule", unit="trial")


def autoschedule(outputs, target: str = "cpu", trials: int = 100, inputs: dict | list | None = None, *,
                 by_length: bool = False, **options):
    """The best schedule found for ``outputs`` (``tune``'s options); with ``trials=0``, the best of a study
    already in ``storage``, else the heuristic's schedule (sized for ``inputs`` when given), unmeasured.
    ``by_length=True`` with a list of input sets of a ragged pipeline: each set tuned alone (``trials``
    each), as the length classes of an ``rs.SchedulesByLength``."""
    if not by_length:
        return tune(outputs, target, trials, inputs, **options).schedule
    return tune_by_length(outputs, target, trials, inputs, **options)[0]


def tune_by_length(outputs, target, trials, input_sets, *, reference=None, study=None, threads=None,
                   **options):
    """Each of ``input_sets`` tuned alone (its study ``<study>@<k>``) as a length class: the classes
    (``rs.SchedulesByLength``, each with its set's mean length) and each set's ``Tuning``."""
    from ..codegen import target as targets
    from ..codegen.ragged_domains import class_lengths
    from ..lang import Pipeline
    from ..schedule import LengthClass, SchedulesByLength
    from ..schedule.by_length import mean_length

    if not isinstance(input_sets, (list, tuple)) or len(input_sets) < 2:
        raise ValueError("inputs: by_length tunes one length class per input set: pass a list of two or more")
    if reference is not None and (not isinstance(reference, (list, tuple)) or len(reference) != len(input_sets)):
        raise ValueError("reference: with by_length, a list with one reference per input set")
    pipe = outputs if isinstance(outputs, Pipeline) else Pipeline(outputs if isinstance(outputs, (list, tuple))
                                                                   else [outputs])
    program = pipe.program()
    lengths = class_lengths(program, "by_length")
    base = study or study_name(program, targets.runnable(target), threads)
    classes, tunings = [], []
    for k, inputs in enumerate(input_sets):
        tuning = tune(pipe, target, trials, inputs, reference=None if reference is None else reference[k],
                      study=f"{base}@{k}", threads=threads, **options)
        classes.append(LengthClass(mean_length(lengths, inputs), tuning.schedule))
        tunings.append(tuning)
    return SchedulesByLength(tuple(classes)), tunings
