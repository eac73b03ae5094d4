# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-sweep fuzz export docs evidence onboard install graphviz chromium clean accuracy

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,speed,ray]'
	touch $(STAMP)

graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "installing the Graphviz 'dot' binary (apt)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq graphviz fonts-wqy-microhei >/dev/null; }

# headless Chromium from Debian's packages for the browser tests (tests/test_site_browser.py drives it with
# Playwright's executable_path: no browser download); the tests fail, not skip, without it
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "installing Chromium (apt) for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

install: $(STAMP) graphviz

demo: install
	$(BIN)/optkg check examples/qwen3-235b-tp8.yaml || test $$? -eq 1

# the suite in parallel (pytest-xdist): one worker per core; TEST_JOBS=0 runs it in one process
TEST_JOBS ?= auto
# --dist loadgroup: tests marked xdist_group (the browser tests) share one worker, so one Chromium session.
# PYTHONDONTWRITEBYTECODE emptied (Python reads an empty value as unset): a shell that sets it would make every
# `optkg` / `python -c` process the suite starts compile kg's modules again (~0.2 CPU-s per check process;
# 14.5 -> 12.5 CPU-s on the determinism + API tests), and pytest rewrite every test module again on each run
test: install chromium
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadgroup

bench: install
	$(BIN)/python tests/bench/run_bench.py
	$(BIN)/python tests/bench/training_anchors.py

# a 10^5-combination rules-only sweep through worker processes and a local Ray: identical results, both rates
bench-sweep: install
	$(BIN)/python tests/bench/sweep_scale.py

# fuzzing at full size (`make test` runs a small sample of each): property-based file/command/metrics/trace
# targets (tests/test_fuzz.py, test_fuzz_targets.py: >= 10,000 inputs), 10,000 hostile command lines over every
# sub-command (tests/test_fuzz_commands.py: planted manifests and caches, symlinks, newline names, git options,
# huge and deep files, bad numbers) and the in-process leak check. Bounded: each input is stopped at 60 s of
# CPU (over 10 s fails), the whole run at FUZZ_TIMEOUT seconds
FUZZ_TIMEOUT ?= 5400
fuzz: install
	timeout $(FUZZ_TIMEOUT) $(BIN)/python -m pytest -q -n $(TEST_JOBS) -m slow tests/test_fuzz.py tests/test_fuzz_targets.py \
		tests/test_fuzz_commands.py tests/test_hostile_leak.py

# optkg's serving speed against aiconfigurator-core's measured rows (silicon_sample.csv), beside the bare
# estimator, on the train and the held-out split (tools/accuracy/split.csv): writes docs/speed-accuracy.md;
# the same path on public serving tables, reported only (tools/accuracy/public_serving_rows.yaml):
# docs/speed-accuracy-public.md;
# training speed against published throughput rows (tools/accuracy/training_rows.yaml): docs/training-speed-accuracy.md
accuracy: install
	$(BIN)/python tools/accuracy/run.py
	$(BIN)/python tools/accuracy/public_serving.py
	$(BIN)/python tools/accuracy/training_speed.py

export: install
	$(BIN)/optkg export --all

docs: install
	$(BIN)/optkg docs

# every evidence item of the engine rules/tables against the pinned releases' wheels (pip download --no-deps
# into ~/.cache/optkg/wheels; EVIDENCE_FLAGS="--wheel-dir DIR" reuses wheels already on disk)
evidence: install
	$(BIN)/optkg evidence --engine vllm --release 0.33.0 $(EVIDENCE_FLAGS)
	$(BIN)/optkg evidence --engine sglang --release 0.5.23 $(EVIDENCE_FLAGS)

# one engine release: fetch its wheel, regenerate every generated table (options, --quantization names, startup
# check sites, capability tables), run optkg evidence for it and print what changed (tools/onboard.py);
# ONBOARD_FLAGS="--wheel-dir DIR" reuses wheels already on disk
onboard: install
	@test -n "$(ENGINE)" -a -n "$(RELEASE)" || { echo "usage: make onboard ENGINE=vllm RELEASE=0.34.0"; exit 2; }
	$(BIN)/python tools/onboard.py $(ENGINE) $(RELEASE) $(ONBOARD_FLAGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache
