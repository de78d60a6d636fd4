"""Benchmarks (``make bench``): each variant timed beside the others in one process, in turns.

Variants that take turns must not slow each other down. OpenBLAS's threads (NumPy's matmul) spin for
2^28 cycles (about 75 ms) after each call before they sleep, and took a core from whatever ran next:
the variant after NumPy's SGEMM ran 1.35-1.5x slower, whichever it was (measured on the ragged linear
layer: the same schedule at 66 ms or 97 ms by its place in the turn). Set before NumPy is imported (this
package is imported before any of its modules); OpenBLAS's own time is unchanged (71-74 ms either way).
"""

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # 2^4 cycles of spinning, then sleep


def write_results(path, results: dict) -> None:
    """Write a benchmark's results as JSON (making its folder) and say where."""
    import json
    from pathlib import Path

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"written to {out}")
