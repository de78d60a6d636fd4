"""sort_by_length(b): the entries of a batch loop visited longest first, in an order that generated code
computes (a counting sort of the ragged extents); values are unchanged, whatever else the schedule does."""

import numpy as np
import pytest

import ragsched as rs
from ragsched.reference import run

from .test_compiled_ragged import _check, _inputs, attention

LENGTHS = [[4, 0, 1, 6, 3], [0, 0], [2], [5, 5, 1, 5]]


@pytest.mark.parametrize("schedule", ["serial", "parallel", "fused with heads", "tiled rows"])
def test_sorted_entries_compute_the_reference(schedule):
    O = attention()
    O.sort_by_length("b")
    if schedule == "parallel":
        O.parallel("b")
    elif schedule == "fused with heads":
        O.reorder("b", "h", "i", "d").fuse("b", "h", "bh").parallel("bh")
    elif schedule == "tiled rows":
        O.split("i", "io", "ii", 2, tail="split").parallel("b")
    for lengths in LENGTHS:
        _check(O, _inputs(lengths, 1), threads=2)


def test_the_order_is_computed_before_the_loop():
    O = attention()
    O.sort_by_length("b").parallel("b")
    text = rs.Pipeline([O]).lowered()
    assert text.index("allocate O.flat0.b~1.order") < text.index("parallel O.s0.b~1")


def test_a_loop_without_ragged_dims_cannot_be_sorted():
    B = rs.Size("B")
    x = rs.Input("x", rs.float32, [B, 4])
    b, j = rs.vars("b j")
    f = rs.Func("f")
    f[b, j] = x[b, j] + 1
    f.sort_by_length("b")
    with pytest.raises(ValueError, match=r"sort_by_length\('b'\): no ragged dim"):
        f.compile()


def test_sorting_a_reduction_loop_is_refused():
    B = rs.Size("B")
    x = rs.Input("x", rs.float32, [B])
    r = rs.RDom(0, B, name="r")
    f = rs.Func("f")
    f[()] = 0.0
    f[()] += x[r]
    with pytest.raises(ValueError, match="sort_by_length"):
        f.update().sort_by_length("r.0")


def test_the_schedule_round_trips():
    O = attention()
    O.sort_by_length("b").parallel("b")
    sched = rs.Pipeline([O]).schedule()
    assert "sort_by_length('b')" in sched.to_python()
    O2 = attention()
    rs.Schedule.from_json(sched.to_json()).apply([O2])
    inputs = _inputs([3, 1, 4], 0)
    np.testing.assert_allclose(O2.compile()(**inputs).values, run(O2, **inputs).values, rtol=1e-5, atol=1e-6)


_SORTED_PER_TOKEN = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_flat_loops import LENGTHS, _inputs, layer
from ragsched.reference import run
Y, mean = layer()
Y.split("i", "i", "ii", 4, tail="guard").split("n", "n", "ni", 4, tail="guard").reorder("b", "i", "n", "ii", "ni")
if {slide!r}:
    mean.store_at(Y, "n")
mean.compute_at(Y, "ii").sort_by_length("b")
k = Y.compile(threads=1)
for _ in range(3):
    for lengths in LENGTHS:
        inputs = _inputs(lengths)
        np.testing.assert_allclose(k(**inputs).values, run(Y, **inputs).values, rtol=1e-5, atol=1e-6)
import gc; gc.collect()
print("done")
"""


@pytest.mark.parametrize("slide", [False, True])
def test_sorting_a_func_computed_per_token_of_a_guarded_tile(slide):
    """Found by the autoscheduler (an encoder candidate died with SIGSEGV): a sorted Func computed inside
    a guarded tile of its consumer has an empty region where the tile lies past an entry's end, and its
    counting sort's table was sized by that region's negative extent (writes before the table). In a
    subprocess: the bad write killed the process."""
    import subprocess
    import sys
    from pathlib import Path

    code = _SORTED_PER_TOKEN.format(tests=str(Path(__file__).parent), slide=slide)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "done" in p.stdout, p.stderr[-2000:]
