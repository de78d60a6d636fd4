"""Write the LLVM IR of every bundled pipeline under its default, hand and committed tuned schedules, one
file each, so that a refactoring can show that generated code did not change: run it before and after,
then ``diff -r BEFORE AFTER``.

    python tools/dump_ir.py OUT_DIR [--cpu x86-64-v3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory to write NAME.SCHEDULE.ll files into")
    ap.add_argument("--cpu", default="x86-64-v3", help="CPU level to pin (default: %(default)s)")
    args = ap.parse_args(argv)
    os.environ["RAGSCHED_CPU"] = args.cpu  # hand schedules read the vector width from the default target
    from ragsched.pipeline_file import load, tuned_schedule

    args.out.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "pipelines").glob("*.py")):
        if path.name.startswith("_"):
            continue
        pf = load(path)
        tuned = tuned_schedule(ROOT / "schedules", pf.name, f"cpu:{args.cpu}")
        kinds = {"default": None}
        if pf.has_hand_schedule:
            kinds["hand"] = "hand"
        if tuned is not None:
            kinds["tuned"] = tuned
        for kind, schedule in kinds.items():
            kernel = pf.pipeline(schedule).compile(target=f"cpu:{args.cpu}")
            (args.out / f"{pf.name}.{kind}.ll").write_text(kernel.source)
            print(f"{pf.name:16} {kind:8} {len(kernel.source.splitlines()):6} lines", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
