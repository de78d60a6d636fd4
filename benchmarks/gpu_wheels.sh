#!/usr/bin/env bash
# Fills .whl/ with what benchmarks/gpu_device.sh needs on a GPU machine that reaches no package index and
# whose python3 (3.12) lacks islpy, optuna and the pinned llvmlite: their wheels for CPython 3.12 on
# x86-64 Linux, at the versions .venv has, and llvmlite's wheel unpacked into llvmlite.tar.xz (40 MB
# where the wheel is 60: the whole working tree that travels must stay under 64 MiB). Run here, once:
#   bash benchmarks/gpu_wheels.sh && echo /.whl/ >> .git/info/exclude
# then the device tool's run with carry [".whl"] and the command `bash benchmarks/gpu_device.sh`.
set -eu
version() { .venv/bin/python -c "import importlib.metadata as m; print(m.version('$1'))"; }
mkdir -p .whl
args=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp -d .whl
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64)
.venv/bin/python -m pip download -q "${args[@]}" "islpy==$(version islpy)" "optuna==$(version optuna)" \
  "alembic==$(version alembic)" "SQLAlchemy==$(version SQLAlchemy)" "Mako==$(version Mako)" \
  "colorlog==$(version colorlog)"
tmp=$(mktemp -d)
.venv/bin/python -m pip download -q "${args[@]/.whl/$tmp}" "llvmlite==$(version llvmlite)"
(cd "$tmp" && mkdir unpacked && cd unpacked && unzip -q ../llvmlite-*.whl && tar -cJf ../llvmlite.tar.xz .)
mv "$tmp/llvmlite.tar.xz" .whl/ && rm -rf "$tmp"
du -sh .whl
