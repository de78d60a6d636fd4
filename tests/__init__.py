"""The test suite mirrors the package: tests/<layer>/ for each layer (structure/ checks the layers)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the repository: pipelines/, schedules/, benchmarks/
