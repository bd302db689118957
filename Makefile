# The two commands a user needs are `make study` and `make test`; both set up first.
# `make test-fast` is the developer's check before a commit: the tests that launch no MPI
# ranks, build no namespaces and need no root (markers: tests/conftest.py).
VENV := .venv
# Test processes at once: most tests wait on MPI launches, links and sleeps, so more
# processes than cores finish sooner (tests marked `alone` still run by themselves): on two
# cores, five finished the suite in 523 s where four took 545 s. With 1700 tests, seven took
# 690 and 714 s where five took 738 s: within this shared host's noise, so five.
JOBS ?= 5
# The fast tests mostly compute (no links or sleeps to wait on), so fewer processes than for
# the whole suite: 1216 of them took 84 s with four (twice), 92 s with three, 98-127 s with seven.
FAST_JOBS ?= 4
# `make test` ends with its 25 longest tests: where the 10 minutes go.
STAMP := $(VENV)/.shoal-setup

.PHONY: setup study test test-fast clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

study: setup
	$(VENV)/bin/shoal study

test: setup
	$(VENV)/bin/python -m pytest -n $(JOBS) --dist loadgroup --durations=25

test-fast: setup
	$(VENV)/bin/python -m pytest -q -n $(FAST_JOBS) --dist loadgroup -m "not mpi and not netns and not root"

clean:
	rm -rf $(VENV) build src/*.egg-info
