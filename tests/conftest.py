"""Test-wide settings: a private kernel cache, passive OpenMP waiting on small CI machines, the host's CPU
in the header, and the vector widths that tests taking ``cpu_target`` run at.

A test whose expectations depend on the vector width (the autoscheduler's choices, a schedule sized in
vectors) takes the ``cpu_target`` fixture and derives every such number from it. It runs once at the
default target (the host, or what ``RAGSCHED_CPU`` pins) and once pinned to AVX2 (``x86-64-v3``, 8 float32
lanes) where this host can run AVX2 code and its own width differs: so an AVX-512 host also checks
what an AVX2 host would do.
"""

import os
import tempfile

import pytest

os.environ.setdefault("RAGSCHED_CACHE_DIR", tempfile.mkdtemp(prefix="ragsched-test-cache-"))
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from ragsched.codegen import target as targets  # noqa: E402 - after the cache directory is chosen

PINNED = "x86-64-v3"


def _widths() -> list[str]:
    out = ["default"]
    pinned = targets.level(PINNED)
    if targets.can_run(pinned) and pinned.vector_bits != targets.default().vector_bits:
        out.append(PINNED)
    return out


def pytest_sessionstart(session):
    """The host's CPU and vector width first in the output (also with -q, where pytest hides its header)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(session.config, "workerinput"):  # an xdist worker: the controller says it
        return
    host, default = targets.host(), targets.default()
    reporter.write_line(f"ragsched: host CPU {host.describe()}")
    if default != host:
        reporter.write_line(f"ragsched: default target {default.describe()} ({targets.ENV})")
    reporter.write_line(f"ragsched: width-dependent tests (cpu_target) run at: {', '.join(_widths())}")


def pytest_generate_tests(metafunc):
    if "cpu_target" in metafunc.fixturenames:
        metafunc.parametrize("cpu_target", _widths(), indirect=True)


@pytest.fixture
def cpu_target(request, monkeypatch):
    """The CPU target of this run of the test (a ``CpuTarget``): the default, or pinned through
    ``RAGSCHED_CPU`` so that everything in the test (hand schedules, the autoscheduler, its workers,
    compiled kernels) sees that width."""
    if request.param != "default":
        monkeypatch.setenv(targets.ENV, request.param)
    return targets.default()
