# Two commands on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.test-installed
LINT_STAMP := $(VENV)/.lint-installed
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test check docs unit compat slow spark-example install install-test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Byte-compiled as pip compiles an installed wheel: an editable install writes no .pyc, and
# with PYTHONDONTWRITEBYTECODE set none would ever be written (recompiling costs ~90 ms a start).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/python -m compileall -q kcompat
	touch $@

$(TEST_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The code checks need only ruff and mypy, not the test extra's clients, Spark and plots.
$(LINT_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install -q -e '.[lint]'
	touch $@

install: $(STAMP)

install-test: $(TEST_STAMP)
	bash tools/setup-test-deps.sh

run: $(STAMP)
	$(BIN)/kcompat serve

# Every folder of the repository that holds Python (CI runs `make test`, which runs this).
PY_DIRS := kcompat tests compat_tests tools benchmarks spark_examples

check: $(LINT_STAMP)
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/mypy
	$(BIN)/python tools/check_imports.py --strict
	$(BIN)/python tools/gen_schemas.py --check
	$(BIN)/python tools/gen_messages.py --check
	$(BIN)/python tools/gen_handler_index.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The reference in docs/ as a site in build/site (mkdocs.yml); `make check` builds it strictly.
docs: $(LINT_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The layers run on pytest-xdist workers (`make unit WORKERS=0` runs one process). Every broker a
# test starts has free ports and a directory of its own, so workers (and a `make run` beside them)
# do not meet. In compat_tests a module's tests stay on one worker (--dist loadfile): they share
# its broker, Kafka controller or cluster.
WORKERS ?= auto

unit: $(TEST_STAMP)
	$(BIN)/python -m pytest tests -q -n $(WORKERS)

compat: install-test
	$(BIN)/python -m pytest compat_tests -q -m "not slow and not unstable" --durations=15 -n $(WORKERS) --dist loadfile

slow: install-test
	$(BIN)/python -m pytest compat_tests -q -m "slow and not unstable" --durations=15 -n $(WORKERS) --dist loadfile

# pytest exits 5 when it collected nothing, and make stops on it: every layer must run tests.
test: install-test check unit compat slow

# Needs a broker from `make run` on 127.0.0.1:9092 (or KCOMPAT_BOOTSTRAP).
spark-example: install-test
	$(BIN)/python spark_examples/clickstream/generate.py
	$(BIN)/python spark_examples/clickstream/stream_job.py --available-now
	$(BIN)/python spark_examples/clickstream/report.py

bench: install-test
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
