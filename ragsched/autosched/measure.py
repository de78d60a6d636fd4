"""Measuring candidates in a worker process: a crash or a hang of generated code fails one trial, never
the study.

The worker is started once (a fresh interpreter running this module: no threads or JIT state inherited,
and the caller's main script is not imported again) and receives the program,
the inputs and the reference's outputs once; then, per candidate, a schedule as JSON. It lowers the
candidate (a schedule that cannot be honoured is refused there, before anything is compiled), compiles
it, runs it once and compares with the reference (a wrong answer is a failed trial, whatever its
speed), then times it: the median of repeated runs after a warm-up, with more runs while their spread
is wide (``runtime.timing.settled_median``). The parent waits at most the time
limit; a worker that does not answer is killed and a new one started.
"""

from __future__ import annotations

import os
import pickle
import signal
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

#: statuses of a measurement; only "ok" has a time
STATUSES = ("ok", "invalid", "error", "wrong", "crash", "timeout")


@dataclass(frozen=True)
class Result:
    status: str
    seconds: float | None = None  # median run time, for "ok"
    compile_s: float | None = None
    message: str = ""
    compile_start: float | None = None  # the worker's perf_counter when it began to compile


#: workers can be stopped and continued (POSIX signals) while another worker's candidate is timed
_CAN_STOP = hasattr(signal, "SIGSTOP")

#: a candidate is given RUN_LIMIT_X times the best time known (at least RUN_LIMIT_S seconds, at most the
#: time limit) to be checked and timed: timing one as fast as the best takes 8-30 runs, and one 5x slower
#: is timed by its checking run alone; in two 5-minute tunings of an encoder layer (best 0.25 s), a
#: candidate whose one run passed 60 s took a fifth of the budget each time
RUN_LIMIT_X = 60
RUN_LIMIT_S = 10.0
#: and CHECK_LIMIT_X times the best (at least CHECK_LIMIT_S seconds) for its checking runs, which the worker
#: reports done: a candidate whose first run takes that long cannot win (one 5x slower is timed by that run
#: alone). In a 5-minute tuning of an encoder layer on its long batch (best 0.27 s), five candidates each
#: spent the 16 s that RUN_LIMIT_X gave them, 80 s of the 277.
CHECK_LIMIT_X = 20
CHECK_LIMIT_S = 3.0


class Measurer:
    """A worker process that compiles, checks and times schedules of one program on fixed inputs."""

    def __init__(self, program, inputs: dict, expected, threads: int | None = None, repeats: int = 5,
                 time_limit: float = 60.0, worker: str = "ragsched.autosched.worker", compile_limit: float = 600.0,
                 check: tuple | None = None, target=None, tolerance: float | None = None):
        # check: (inputs, expected) that candidates are checked on instead (smaller inputs whose
        # reference is exact where the timed ones' is not), the timed inputs then only run
        from ..codegen.target import parse

        self._setup = pickle.dumps((program, inputs, expected, threads, repeats, check, parse(target),
                                    tolerance))
        self.time_limit = time_limit  # seconds to check and time a compiled candidate
        self._best: float | None = None  # the best time known when the candidate was sent
        self.compile_limit = compile_limit  # seconds to lower and compile it (LLVM takes 30 s on large pipelines)
        self.worker = worker  # the module the worker process runs (tests give one that fails on purpose)
        self._proc = None
        self._conn = None
        self._paused_at: float | None = None  # when ``pause`` stopped the worker
        self._stops: list[tuple[float, float]] = []  # when the worker was stopped since ``begin``
        self._limit, self._since = compile_limit, time.perf_counter()

    def _start(self) -> None:
        to_child, from_parent = os.pipe()
        to_parent, from_child = os.pipe()
        self._proc = subprocess.Popen([sys.executable, "-m", self.worker, str(to_child), str(from_child)],
                                      pass_fds=(to_child, from_child))
        os.close(to_child)
        os.close(from_child)
        self._conn = Duplex(to_parent, from_parent)
        self._conn.send(self._setup)
        if not self._conn.poll(300.0) or self._conn.recv() != "ready":  # imports and the inputs, once
            self._kill()
            raise RuntimeError("the measuring worker process did not start")

    def measure(self, schedule, cutoff: float | None = None, compile_limit: float | None = None) -> Result:
        """Check and time ``schedule``; a candidate whose checking run takes longer than ``cutoff``
        seconds is timed by that run alone (it cannot be the best: no need to repeat it). ``compile_limit``
        replaces the Measurer's for this candidate."""
        return self.begin(schedule, cutoff, compile_limit) or self.compiled() or self.finish()

    def begin(self, schedule, cutoff: float | None = None, compile_limit: float | None = None,
              hold: bool = False, best: float | None = None) -> Result | None:
        """Send ``schedule`` to be compiled (``measure``'s first step); with ``hold``, the worker waits
        after compiling until ``finish`` lets it check and time the candidate, so that several workers
        compile side by side and time one at a time. A candidate timed faster than ``best`` (seconds: the
        study's best so far) is timed again and that second time recorded (``measure_one``). A Result
        when the worker is already gone."""
        self._limit = self.compile_limit if compile_limit is None else compile_limit
        self._hold = hold
        self._best = best
        self._since = time.perf_counter()
        self._stops = []
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        try:
            self._conn.send(("measure", schedule.to_json(), cutoff, hold, best))
        except (EOFError, OSError):
            return self._crashed()
        return None

    def compiled(self) -> Result | None:
        """Wait (within the compile limit, counted from ``begin``) until the candidate is compiled: None,
        or the Result that ends it (refused, failed or too slow to compile)."""
        left = max(0.0, self._limit - (time.perf_counter() - self._since))
        try:
            if not self._conn.poll(left):
                self._kill()
                return Result("timeout", message=f"not compiled within {self._limit:.0f} s")
            got = self._conn.recv()
        except (EOFError, OSError):
            return self._crashed()
        if got != "compiled":
            return got if isinstance(got, Result) else Result("error", message=f"unexpected answer {got!r:.200}")
        return None

    def finish(self, best: float | None = None) -> Result:
        """Let a compiled candidate be checked and timed (within the time limit, or ``RUN_LIMIT_X`` times the
        best time known), and its Result. ``best``: the best time known now, when it is better than the one
        sent with ``begin`` (a candidate of the same batch timed before this one): the candidate's cutoff
        is 5x that."""
        known = best if best is not None else self._best
        limit = self.time_limit if known is None else min(self.time_limit, max(RUN_LIMIT_S, RUN_LIMIT_X * known))
        checking = limit if known is None else min(limit, max(CHECK_LIMIT_S, CHECK_LIMIT_X * known))
        whole = f"not checked and timed within {limit:.0f} s"
        start = time.perf_counter()
        try:
            if self._hold:
                self._conn.send("go" if best is None else ("go", best))
            got = self._answer(checking, f"not checked within {checking:.1f} s" if checking < limit else whole)
            if got == "checked":  # its checking runs are done: the rest of the limit to time it
                got = self._answer(max(0.0, limit - (time.perf_counter() - start)), whole)
        except (EOFError, OSError):
            return self._crashed()
        if not isinstance(got, Result):  # a worker of another version: never let it end the study
            self._kill()
            return Result("error", message=f"unexpected answer from the worker: {got!r:.200}")
        return got

    def _answer(self, seconds: float, late: str):
        """The worker's next message, or (the worker stopped) a timeout Result saying ``late``, after ``seconds``."""
        if not self._conn.poll(seconds):
            self._kill()
            return Result("timeout", message=late)
        return self._conn.recv()

    def compile_time_left(self) -> float:
        """Seconds the candidate sent with ``begin`` has left to compile (time paused not counted)."""
        return max(0.0, self._limit - (time.perf_counter() - self._since))

    def readable(self):
        """What ``multiprocessing.connection.wait`` waits on for the worker's next answer."""
        return self._conn.reader if self._conn is not None else None

    def pause(self) -> None:
        """Stop the worker (SIGSTOP) while another worker's candidate is timed: a compile then takes no
        time from the one timed, and the time stopped is not counted against its compile limit nor in its
        compile time (``compile_seconds``)."""
        if _CAN_STOP and self._proc is not None and self._proc.poll() is None and self._paused_at is None:
            os.kill(self._proc.pid, signal.SIGSTOP)
            self._paused_at = time.perf_counter()

    def resume(self) -> None:
        if self._paused_at is not None:
            if self._proc is not None and self._proc.poll() is None:
                os.kill(self._proc.pid, signal.SIGCONT)
            now = time.perf_counter()
            self._since += now - self._paused_at
            self._stops.append((self._paused_at, now))
            self._paused_at = None

    def compile_seconds(self, result: Result) -> float | None:
        """The compile time of ``result`` (the candidate sent with ``begin``) less the time the worker was
        stopped during it: the worker's clock (``perf_counter``, one monotonic clock for every process of
        the machine) runs on while it is stopped."""
        if result.compile_s is None or result.compile_start is None:
            return result.compile_s
        start, end = result.compile_start, result.compile_start + result.compile_s
        stopped = sum(max(0.0, min(b, end) - max(a, start)) for a, b in self._stops)
        return max(0.0, result.compile_s - stopped)

    def _crashed(self) -> Result:
        code = self._proc.wait() if self._proc is not None else None
        self._kill()
        return Result("crash", message=f"the worker process died (exit code {code})")

    def compare(self, schedules: list, rounds: int = 3) -> list[float | None]:
        """The times of ``schedules`` measured side by side: each compiled once, then timed in turns
        ``rounds`` times (a drift of the machine's speed then hits them alike); the median of each one's
        medians, or None for one that failed (it passed before: a hang or a crash now fails them all)."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        limit = self.compile_limit * len(schedules) + self.time_limit * rounds
        try:
            self._conn.send(("compare", [s.to_json() for s in schedules], rounds))
            if self._conn.poll(limit):
                got = self._conn.recv()
                if isinstance(got, list) and len(got) == len(schedules):
                    return got
        except (EOFError, OSError):
            pass
        self._kill()
        return [None] * len(schedules)

    def _kill(self) -> None:
        self.resume()  # (a stopped process dies of SIGKILL all the same; its clock is settled)
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Duplex:
    """Two one-way pipes as one connection (the parent reads one, writes the other)."""

    def __init__(self, read_fd: int, write_fd: int):
        self._r, self._w = Connection(read_fd, writable=False), Connection(write_fd, readable=False)

    def send(self, obj) -> None:
        self._w.send(obj)

    def recv(self):
        return self._r.recv()

    def poll(self, timeout: float) -> bool:
        return self._r.poll(timeout)

    @property
    def reader(self) -> Connection:
        return self._r

    def close(self) -> None:
        self._r.close()
        self._w.close()


def die_with_parent() -> None:
    """Ask Linux to kill this worker when its parent dies: the parent stops workers while it times a
    candidate (``Measurer.pause``), and a stopped worker would never read the end of its pipe. Elsewhere
    a no-op."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def serve(conn) -> None:
    die_with_parent()
    os.environ["RAGSCHED_CACHE_DIR"] = ""  # candidates are not worth keeping on disk
    from ..runtime import compiler, kernel  # noqa: F401 - imported before the first candidate's clock starts

    program, inputs, expected, threads, repeats, check, target, tolerance = pickle.loads(conn.recv())
    conn.send("ready")
    while True:
        try:
            text = conn.recv()
        except EOFError:
            return
        if isinstance(text, tuple) and text[0] == "compare":
            conn.send(compare_side_by_side(program, inputs, expected, threads, repeats, *text[1:], check=check,
                                           target=target, tolerance=tolerance))
        else:
            text, cutoff, hold, best = request(text)
            conn.send(measure_one(program, inputs, expected, threads, repeats, text, on_compiled(conn, hold),
                                  cutoff, check, target, tolerance, best, checked=lambda: conn.send("checked")))
        compiler.forget_loaded()  # the candidate is not run again: its code and buffers can go


def request(message: tuple) -> tuple[str, float | None, bool, float | None]:
    """A measuring request's (schedule JSON, cutoff, hold, best), sent as ``("measure", text, cutoff, hold,
    best)``."""
    _, text, cutoff, hold, best = message
    return text, cutoff, bool(hold), best


def on_compiled(conn, hold: bool):
    """What a worker does once a candidate is compiled: say so, and with ``hold`` wait for the parent's
    "go" (other workers may still be compiling: nothing else runs while a candidate is timed)."""
    def compiled(message: str) -> float | None:
        conn.send(message)
        if not hold:
            return None
        got = conn.recv()
        if got == "go":
            return None
        if isinstance(got, tuple) and len(got) == 2 and got[0] == "go":
            return got[1]  # the best time known now
        raise EOFError("the parent did not let the candidate run")
    return compiled


def compare_side_by_side(program, inputs, expected, threads, repeats, texts: list[str], rounds: int,
                         check: tuple | None = None, target=None, tolerance: float | None = None) -> list:
    """Compile and check each candidate once, then time them in turns, ``rounds`` times."""
    from ..runtime.compare import matches
    from ..runtime.kernel import Kernel
    from ..schedule import Schedule

    sets = input_sets(inputs, expected)
    kernels = []
    for text in texts:
        try:
            kern = Kernel(program, Schedule.from_json(text), threads=threads, target=target)
            pairs = [(kern(**check[0]), check[1])] if check else [(kern(**i), want) for i, want in sets]
            ok = all(matches(got, want, tolerance)[0] for got, want in pairs)
            kernels.append(kern if ok else None)
        except Exception:  # it passed as a trial: whatever fails now leaves it out of the comparison
            kernels.append(None)
    samples: list[list[float]] = [[] for _ in kernels]
    for _ in range(rounds):
        for k, kern in enumerate(kernels):
            if kern is not None:
                samples[k].append(_timed(kern, sets, repeats))
    return [statistics.median(x) if x else None for x in samples]


def input_sets(inputs, expected) -> list[tuple[dict, object]]:
    """The timed inputs as (arguments, their reference outputs) pairs: one dict of arguments, or a list of
    them (several length distributions, say) with a list of their outputs."""
    if isinstance(inputs, (list, tuple)):
        return list(zip(inputs, expected, strict=True))
    return [(inputs, expected)]


#: a candidate whose first round of samples is this much slower than the best known is not sampled further
#: where their spread is wide (``settled_median``'s extra rounds): they refine a time that cannot win
SETTLE_WITHIN = 1.5


def _timed(kern, sets: list, repeats: int, warmup: int = 1, best: float | None = None,
           call_s: list | None = None, warm: int | None = None) -> float:
    """The candidate's time on the input sets: the median of repeated runs on each, their geometric mean
    over several (each set counts alike, whatever its size). A round of samples of each set first; more
    rounds where a set's samples spread wide (as ``settled_median``), unless that first estimate is over
    ``SETTLE_WITHIN`` times ``best``. ``call_s``: each set's time of one run already measured; ``warm``:
    the set whose data the last run left in the caches, sampled first without a warm-up call."""
    from ..runtime.timing import Settling

    order = sorted(range(len(sets)), key=lambda k: k != warm)
    runs = [Settling(lambda kern=kern, i=sets[k][0]: kern(**i), repeats, 0 if k == warm else warmup,
                     call_s=(call_s or [None] * len(sets))[k]) for k in order]

    def seconds() -> float:
        return runs[0].median if len(runs) == 1 else statistics.geometric_mean([r.median for r in runs])

    if best is None or seconds() <= SETTLE_WITHIN * best:
        for _ in range(2):  # (three rounds in all, at most)
            wide = [r for r in runs if not r.settled()]
            for r in wide:
                r.more(rewarm=len(runs) > 1)  # (another set's data in the caches meanwhile)
            if not wide:
                break
    return seconds()


def measure_one(program, inputs, expected, threads, repeats, text: str, compiled=lambda _: None,
                cutoff: float | None = None, check: tuple | None = None, target=None,
                tolerance: float | None = None, best: float | None = None, checked=lambda: None) -> Result:
    """Lower, compile (then ``compiled("compiled")``, which may answer a better best time known now),
    check and time one candidate (by its checking run alone when that took longer than ``cutoff``
    seconds). With ``check`` (inputs, expected outputs), the candidate is checked on those and only run on
    ``inputs`` before it is timed (then ``checked()``). A candidate faster than ``best`` is timed twice and
    the second time counts."""
    from ..runtime.compare import matches
    from ..runtime.kernel import Kernel
    from ..schedule import Schedule

    schedule = Schedule.from_json(text)
    sets = input_sets(inputs, expected)
    t0 = time.perf_counter()
    try:
        kern = Kernel(program, schedule, threads=threads, target=target, load=False)
        try:  # arguments the calls below would refuse (a tile shifted past the data), refused before LLVM runs
            for args in ([check[0]] if check is not None else []) + [args for args, _ in sets]:
                kern.check(**args)
        except (ValueError, TypeError) as err:
            return Result("invalid", compile_s=time.perf_counter() - t0, message=str(err), compile_start=t0)
        kern.load()
    except ValueError as err:
        return Result("invalid", message=str(err))
    except Exception as err:  # a bug of ours, not of the candidate: recorded with its trace
        return Result("error", message=f"compiling: {type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}")
    compile_s = time.perf_counter() - t0
    now = compiled("compiled")
    if now is not None and (best is None or now < best):  # a sibling of its batch timed faster meanwhile
        best, cutoff = now, 5 * now if cutoff is None else min(cutoff, 5 * now)
    try:
        if check is not None:
            ok, worst = matches(kern(**check[0]), check[1], tolerance)
        firsts = []
        for args, want in sets:
            run0 = time.perf_counter()
            got = kern(**args)
            firsts.append(time.perf_counter() - run0)
            if check is None:
                ok, worst = matches(got, want, tolerance)
                if not ok:
                    break
        first_s = firsts[0] if len(firsts) == 1 else statistics.geometric_mean(firsts)
        checked()  # (the parent gives the checking runs less time than the timing)
    except (ValueError, TypeError) as err:  # refused before running (e.g. a shifted tile wider than the data)
        return Result("invalid", compile_s=compile_s, message=str(err), compile_start=t0)
    except Exception as err:
        return Result("error", compile_s=compile_s, message=f"running: {type(err).__name__}: {err}",
                      compile_start=t0)
    if not ok:
        return Result("wrong", compile_s=compile_s, message=f"max relative error {worst:.3g} against the reference",
                      compile_start=t0)
    if cutoff is not None and first_s > cutoff:
        return Result("ok", first_s, compile_s, message=f"timed by one run: {first_s:.3g} s > cutoff {cutoff:.3g} s",
                      compile_start=t0)
    # the run just made (checked, or timed as first_s) warmed the kernel on these inputs: no warm-up call
    # (one run of about eight per candidate: a quarter of a second on an encoder layer); on several input
    # sets the last one checked is timed first, and each other is warmed again before it is timed (the
    # checking runs left only the last one's data in cache)
    warmup = 0 if len(sets) == 1 else 1
    seconds = _timed(kern, sets, repeats, warmup, best, firsts, warm=len(sets) - 1)
    if best is not None and seconds < best:
        # a new best is the least of many noisy times, so biased low (a study's best re-timed in a fresh
        # process ran up to 1.32x its recorded time): a second measurement, not picked by being least, counts
        seconds = _timed(kern, sets, repeats, 1 if len(sets) > 1 else 0, None, firsts)
    return Result("ok", seconds, compile_s, compile_start=t0)
