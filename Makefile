# Every target makes .venv on first use; later runs reuse it (the stamp tracks pyproject.toml).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench lint clean autoschedule autoschedule-held-out random-schedules

# the host's vector instruction set (avx512, avx2, sse): tuned schedules are kept per width, in schedules/<isa>/;
# with PER_CPU=1, per core as well, in schedules/<isa>/<cpu>/ (LLVM's name of the host's core, e.g. znver4):
# the benchmarks take a schedule tuned on their host's core before its width's (pipeline_file.tuned_schedule)
ISA := $(BIN)/python -c "from ragsched.codegen import target as t; h = t.default(); \
	print(h.isa + ('/' + h.cpu if '$(PER_CPU)' not in ('', '0') else ''))"

# the pipelines make autoschedule tunes (each: at most 100 trials, about 5 minutes) into schedules/<isa>/,
# timed on each of the file's example inputs but the small ones (their geometric mean); a ragged pipeline
# with several (MNLI's and RACE's lengths) is tuned on each alone, a schedule per length class, and its
# calls run the class nearest their mean length; local_laplacian's candidates are checked on its small inputs: on the full
# ones a few of its outputs (a float truncated to a level index) differ from the NumPy reference by more
# than float32 rounding, whatever the schedule
AUTOSCHEDULE := blur unsharp harris local_laplacian bilateral_grid attention encoder

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the cuda extra: NVRTC compiles the generated CUDA C in the tests (no GPU needed); CuPy launches it where
# there is one; the postgres extra: the tests tune on a PostgreSQL server they start (where one is installed)
$(VENV)/.installed-dev: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e '.[dev,cuda,postgres]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install -q -e '.[dev,bench,cuda,postgres]'
	touch $@

demo: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks.demo

test: $(VENV)/.installed-dev
	OMP_WAIT_POLICY=passive $(BIN)/python -m pytest -n 2 tests

autoschedule: $(VENV)/.installed-dev
	isa=$$($(ISA)); mkdir -p schedules/$$isa; \
	for p in $(AUTOSCHEDULE); do \
	  case $$p in local_laplacian) check=--check-scale=small;; *) check=;; esac; \
	  scales=$$($(BIN)/python -c "from ragsched.pipeline_file import load; \
	    print(*[s for s in load('pipelines/$$p.py').scales if s != 'small'])"); \
	  bylength=$$($(BIN)/python -c "from ragsched.pipeline_file import load; \
	    from ragsched.codegen.ragged_domains import lengths_inputs; pf = load('pipelines/$$p.py'); \
	    print('--by-length' if lengths_inputs(pf.pipeline().program()) and len(pf.scales) > 2 else '')"); \
	  $(BIN)/sched autoschedule pipelines/$$p.py --trials 100 --timeout 270 --threads 2 -o schedules/$$isa/$$p.json \
	    --plot schedules/$$isa/$$p.png --scale $$scales $$check $$bylength --quiet || exit 1; \
	done

# the held-out suite (pipelines/held_out/: nothing in the autoscheduler names them), tuned as the bundled
# pipelines are, into schedules/held_out/<isa>/; make bench times them beside Halide apart from the bundled ones
autoschedule-held-out: $(VENV)/.installed-dev
	isa=$$($(ISA)); mkdir -p schedules/held_out/$$isa; \
	for p in $$($(BIN)/python -c "from pipelines.held_out import NAMES; print(*NAMES)"); do \
	  $(BIN)/sched autoschedule pipelines/held_out/$$p.py --trials 100 --timeout 300 --threads 2 \
	    -o schedules/held_out/$$isa/$$p.json --scale full --quiet || exit 1; \
	done

bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.held_out
	$(BIN)/python -m benchmarks.ragged
	$(BIN)/python -m benchmarks.ragged_images
	$(BIN)/python -m benchmarks.vector_math

# a long hunt for wrong answers outside CI: EXAMPLES random schedules of every bundled pipeline (the ragged
# ones on random lengths), at this host's vector width and pinned to AVX2 where this host runs it and its width
# differs; the counts (tried, accepted, refused, wrong) go to bench-results/random-schedules.jsonl
EXAMPLES ?= 200
random-schedules: $(VENV)/.installed-dev
	mkdir -p bench-results
	rm -f bench-results/random-schedules.jsonl
	status=0; for cpu in host x86-64-v3; do \
	  $(BIN)/python -c "import sys; from ragsched.codegen import target as t; c = t.parse('cpu:$$cpu'); \
	    sys.exit(not t.can_run(c) or ('$$cpu' != 'host' and c.vector_bits == t.host().vector_bits))" || continue; \
	  RAGSCHED_CPU=$$cpu RAGSCHED_EXAMPLES=$(EXAMPLES) RAGSCHED_SCHEDULE_STATS=bench-results/random-schedules.jsonl \
	    $(BIN)/python -m pytest -n 2 -p no:cacheprovider tests/schedule/test_random_schedules.py \
	    tests/ragged/test_compiled_ragged.py -k random_schedules || status=1; \
	done; exit $$status

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check ragsched pipelines benchmarks tests tools

clean:
	rm -rf $(VENV) build *.egg-info
